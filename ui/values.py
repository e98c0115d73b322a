"""What the sidebar hands the pages: plain data, no Streamlit. `Inputs` is everything a page needs (ui.inputs
builds it), `TrainerBox` the Trainer box's values as drawn (ui.trainer_inputs draws and prices it). Kept apart
so that the trainer box and the sidebar both import it and neither imports the other's drawing code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from estimator import Device, ModelSpec, TrainingSetup


@dataclass(frozen=True)
class TrainerBox:
    """The Trainer box's values as drawn, by their keys (ui/params.py TRAINER_PARAMS; the settings table,
    estimator/job/settings.py, names the TrainerSetup field behind each): ui.trainer_inputs.resolve_box checks them
    against the setup."""

    values: dict[str, Any]
    notes: tuple[str, ...]  # invalid link values

    @property
    def trainer(self) -> str:
        return str(self.values["trainer"])


@dataclass(frozen=True)
class Inputs:
    """Everything a page needs: the model, the setup, the device and the mode, plus notes to show."""

    model: ModelSpec
    setup: TrainingSetup
    device: Device
    rule: str | None  # "seed" when the rule of thumb is on
    presentation: bool
    notes: tuple[str, ...]  # plain-text notes (invalid URL values, upload errors): render with st.text/caption
    model_choice: str  # preset id, BY_SIZE or UPLOAD
    trainer_box: TrainerBox  # the Trainer box's values (ui.trainer_inputs.resolve_box prices them for the setup)
    host_ram_bytes: float | None = None  # the machine's RAM for the host verdict (None: not given; unified: unused)
    page: Any = None  # what the page's own sidebar box returned (ui.inputs.live_page's `sidebar`; None without one)
