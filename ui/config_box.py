"""The sidebar's "Import a training config" box and the calculator's config-file export.

Import: upload a file (with its DeepSpeed JSON, if it names one) or paste the text; estimator.job.configs reads it
and the box sets the sidebar's widgets through Session State (they are bound to the address, so the link then
carries the usual parameters and shares the view). The box then lists what was read, what was ignored because it
changes no memory, and what could not be honoured, as plain text (st.text): nothing from the file is rendered as
Markdown or HTML. A file that cannot be read gets its one-line message; the page keeps its settings."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import streamlit as st

from estimator import Device, ModelSpec, load_preset
from estimator.i18n import N_, _, localised_error, shown
from estimator.job.configs import MAX_CONFIG_BYTES, ConfigError, Merged, fit_targets, import_config, merge, model_choice
from estimator.job.configs._read import printable
from estimator.job.settings import BY_KEY, widget_value
from estimator.job.setup import ALL_LINEAR
from estimator.job.stack import default_settings
from estimator.models.hub import HubError, fetch_model
from estimator.options.quantization import QUANT_MODES
from estimator.options.stacks import get_stack
from estimator.report.configs import export_config
from ui.model_box import HUB_BOX, hub_token
from ui.params import AUTO, SIDEBAR_PARAMS, TABLE, TRAINER_PARAMS, UPLOAD, device_for
from ui.text import plain, warn_notes
from ui.url_state import RUN_DEFAULTS, is_hub_choice

if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_FILES = "config_files"  # the uploader (a config and, optionally, the DeepSpeed JSON it names)
CONFIG_TEXT = "config_text"  # the paste box
CONFIG_LIST = "config_list"  # which of the import's three lists is shown
CONFIG_OVERRIDES = "config_overrides"  # torchtune's key=value overrides
STATE = "_config_import"  # {"name", "result" (ImportedConfig) or "error", "notes"}
MAX_LIST_LINES = 200  # rows shown per list (a hostile file can have thousands of keys)
_IMAGE_KEYS = ("images", "tower")  # no image inputs in a training config; the tower toggle is set apart (multimodal only)
_MLX_KEYS = ("lora_layers", "dora", "quant")  # set by _set_mlx
_LADDER_NAMES = {"prompt_len": N_("prompt length"), "completion_len": N_("max completion length")}  # else the label
# Settings the sidebar has no control for (the CLI applies them): named in a note when a config sets them.
# max_grad_norm changes no memory (clip_grad_norm_ keeps per-tensor norms only), so it needs none.
_NOT_IN_SIDEBAR = {"adapter_dtype": "adapter dtype", "qlora_prep": "QLoRA preparation",
                   "load_16bit_first": "16-bit load before quantising"}


def _nearest(value: float, choices: tuple[Any, ...]) -> Any:
    """The ladder entry nearest a value (log scale for the power-of-two ladders)."""
    if value in choices:
        return value
    if all(isinstance(c, int) for c in choices) and value > 0:
        return min(choices, key=lambda c: abs(math.log2(c) - math.log2(value)))
    return min(choices, key=lambda c: abs(c - value))


def _ladder(key: str, value: Any, label: str, notes: list[str]) -> Any:
    p = TABLE[key]
    near = _nearest(value, p.choices)
    if near != value:
        notes.append(_("{setting} {value}: the sidebar takes {choices}; shown with {near}.").format(
            setting=label, value=value, choices=f"{p.choices[0]} … {p.choices[-1]}", near=near))
    return near


def _clamped(key: str, value: int) -> int:
    p = TABLE[key]
    return int(min(max(value, p.low), p.high))  # type: ignore[type-var]


def _spec_for(choice: str) -> ModelSpec | None:
    """The model's spec where it is at hand (a preset, or a Hub model the box has just read: cached)."""
    try:
        if is_hub_choice(choice):
            return fetch_model(choice, token=hub_token())[0]
        return load_preset(choice)
    except ValueError:
        return None


def _set_model(imported: Any, notes: list[str]) -> ModelSpec | None:
    ss = st.session_state
    choice, note = model_choice(imported.model, lambda model: fetch_model(model, token=hub_token()))
    if note:
        notes.append(shown(note))
    if choice is None:
        if imported.model.kind == "local":
            ss["model"] = UPLOAD
            ss["size"] = float(TABLE["size"].default)
        return None
    ss["model"] = choice
    ss["size"] = float(TABLE["size"].default)  # leaving by-size puts the size back (ui/model_box._model_changed)
    ss[HUB_BOX] = choice if is_hub_choice(choice) else ""
    return _spec_for(choice)


def _control_value(key: str, settings: Mapping[str, Any], notes: list[str]) -> Any:
    """A control's value for imported settings given by their names (the settings table converts them,
    estimator/job/settings.py): the control's default where they leave it to the stack, a whole number within the
    control's limits, a ladder's nearest step (with a note), text within its length."""
    p = TABLE[key]
    value = widget_value(key, settings, p.default)
    if p.widget == "select_slider":
        if isinstance(p.choices[0], float):
            value = round(float(value), 2)
        return _ladder(key, value, _(_LADDER_NAMES.get(key, p.label)), notes)
    if p.integer:
        return _clamped(key, value)
    if p.max_chars:
        return value[: p.max_chars]
    return value


def _set_setup(merged: Merged, imported: Any, spec: ModelSpec | None, notes: list[str]) -> None:
    """Every sidebar setting: the config's value, or the setting's default where the config leaves it to the
    stack (so nothing of the previous view stays). The controls also keep the config's values the job leaves
    out (its LoRA settings under full fine-tuning, its max length under GRPO), for when the method or the trainer
    changes back."""
    ss, s = st.session_state, {**merged.setup, **merged.unused}
    ss["stack"] = merged.stack
    # a batch or rank the config leaves out is the run's default for its stack and trainer (job.stack.
    # default_settings, as the CLI reads it and picking the stack by hand sets it: ui/inputs.py _stack_chosen)
    run = default_settings(merged.stack, trainer=merged.trainer.get("trainer", TABLE["trainer"].default))
    ss[RUN_DEFAULTS] = {"batch": run.batch, "rank": run.lora_rank}
    s.setdefault("lora_rank", run.lora_rank)
    s.setdefault("batch", run.batch)
    for key in SIDEBAR_PARAMS:
        if key not in BY_KEY or key in ("stack", *_IMAGE_KEYS, *_MLX_KEYS):
            continue
        if key == "targets" and spec is not None:  # torchtune's and LitGPT's switches name Llama's modules
            targets, note = fit_targets(spec, tuple(s.get("lora_targets", (ALL_LINEAR,))))
            if note:
                notes.append(shown(note))
            s["lora_targets"] = targets
        ss[key] = _control_value(key, s, notes)
    if spec is not None and spec.tower_kind:  # the toggle exists for multimodal models only (ui/inputs.py)
        ss["tower"] = bool(s.get("train_tower", False))
    _set_mlx(imported, spec, notes)
    left = [_(label) for key, label in _NOT_IN_SIDEBAR.items() if key in s]
    if left:
        notes.append(_("Not in the sidebar (the CLI applies it): {settings}.").format(settings=", ".join(left)))


def _set_mlx(imported: Any, spec: ModelSpec | None, notes: list[str]) -> None:
    """The trained blocks, DoRA and the QLoRA base's quantisation (mlx-lm's num_layers, fine_tune_type dora, the
    base's MLX quantisation). The sidebar's 0 means the stack's own count (16 on MLX-LM), so mlx-lm's "every block"
    is the model's own depth; the quantisation's bits and group size have no control (the mode's are used)."""
    ss, s = st.session_state, imported.setup_kwargs
    layers = s.get("lora_layers", 0)
    if layers == 0 and get_stack(imported.stack).lora_layers:  # the stack's own count of trained blocks
        layers = spec.num_layers if spec is not None else TABLE["lora_layers"].high
    ss["lora_layers"] = _clamped("lora_layers", layers)
    ss["dora"] = bool(s.get("dora", False))
    mode = s.get("quant_mode")
    ss["quant"] = widget_value("quant", s, AUTO)
    option = QUANT_MODES.get(mode)
    if option is not None and (s.get("quant_bits", option.bits[0]), s.get("quant_group", option.groups[0])) != (
            option.bits[0], option.groups[0]):
        notes.append(_("The sidebar quantises with {mode}'s default bits and group size; the config's {bits}-bit, "
                       "group {group} applies in the CLI (--quant-bits, --quant-group).").format(
            mode=mode, bits=s.get("quant_bits"), group=s.get("quant_group")))
    if get_stack(imported.stack).framework == "mlx":
        device = _current_device()
        if device is not None and device.kind != "unified":
            notes.append(_("An mlx-lm config: {device} runs MLX's CUDA backend (mlx[cuda]) or not at all; choose "
                           "your Mac in Device to price it on Metal.").format(device=device.name))


def _current_device() -> Device | None:
    """The sidebar's device as it stands (read before its widgets run: from the session state)."""
    ss = st.session_state
    try:
        return device_for(ss.get("device", TABLE["device"].default), ss.get("capacity", TABLE["capacity"].default),
                          ss.get("kind", TABLE["kind"].default))
    except ValueError:
        return None


def _set_trainer(merged: Merged, notes: list[str]) -> None:
    """Every trainer control: the config's value, or the control's default."""
    for key in TRAINER_PARAMS:
        st.session_state[key] = _control_value(key, merged.trainer, notes)


def apply_config(data: bytes | str, name: str, attachments: dict[str, bytes], overrides: tuple[str, ...]) -> None:
    """Read a config and set the sidebar from it; the outcome (lists or message) is kept for the box."""
    try:
        imported = import_config(data, name=name, overrides=overrides, attachments=attachments)
    except ConfigError as exc:
        st.session_state[STATE] = {"name": name, "error": localised_error(exc)}
        return
    notes: list[str] = []
    merged = merge(imported)  # no flags: the config's settings replace the sidebar's (the CLI's merge)
    spec = _set_model(imported, notes)
    _set_setup(merged, imported, spec, notes)
    _set_trainer(merged, notes)
    st.session_state[STATE] = {"name": name, "result": imported, "notes": notes}


def _overrides() -> tuple[str, ...]:
    return tuple(str(st.session_state.get(CONFIG_OVERRIDES, "")).split())


def _deepspeed_json(upload: Any) -> bool:
    """Is this uploaded file a DeepSpeed JSON (the attachment of a config, not the config)?"""
    if upload.size > MAX_CONFIG_BYTES:
        return False
    try:
        doc = json.loads(upload.getvalue())
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and ("zero_optimization" in doc or "train_micro_batch_size_per_gpu" in doc)


def _apply_upload() -> None:
    files = st.session_state.get(CONFIG_FILES) or []
    if not files:
        return
    blobs = {str(f.name)[:200]: f for f in files}
    # The config is the file the others are named by: a YAML first, else a JSON that is not a DeepSpeed config;
    # the rest are attachments.
    main = next((n for n in blobs if n.lower().endswith((".yaml", ".yml"))),
                next((n for n in blobs if not _deepspeed_json(blobs[n])), next(iter(blobs))))
    if blobs[main].size > MAX_CONFIG_BYTES:
        st.session_state[STATE] = {"name": main, "error": _("the config is larger than 1 MB; a training config is a "
                                                            "few kB")}
        return
    attachments = {n: f.getvalue() for n, f in blobs.items() if n != main and f.size <= MAX_CONFIG_BYTES}
    apply_config(blobs[main].getvalue(), main, attachments, _overrides())


def _apply_paste() -> None:
    text = str(st.session_state.get(CONFIG_TEXT, ""))
    if not text.strip():
        st.session_state[STATE] = {"name": _("pasted text"), "error": _("nothing pasted yet")}
        return
    apply_config(text, "", {}, _overrides())


def _lines(entries: tuple[Any, ...]) -> str:
    rows = []
    for e in entries[:MAX_LIST_LINES]:
        value = f": {e.value}" if e.value else ""
        rows.append(f"{e.key}{value} → {shown(e.detail)}")
    if len(entries) > MAX_LIST_LINES:
        rows.append(_("… and {n} more").format(n=len(entries) - MAX_LIST_LINES))
    return "\n".join(rows)


def _show_result(state: dict[str, Any] | None) -> None:
    if not state:
        return
    name = printable(state.get("name") or _("pasted text"), 60)
    if "error" in state:
        warn_notes([_("{name} could not be read: {error}. The settings are unchanged.").format(
            name=name, error=state["error"])])
        return
    imported = state["result"]
    st.caption(plain(_("{name}: {format} → stack {stack}").format(name=name, format=imported.format_label,
                                                                   stack=imported.stack)))
    warn_notes(state.get("notes", ()))
    lists = {"read": (_("Read ({n})"), _("key: value → the setting it set (a key left out: the tool's default)."),
                      imported.read),
             "ignored": (_("Ignored ({n})"), _("They change no memory the estimate prices."), imported.ignored),
             "not_honoured": (_("Not honoured ({n})"),
                              _("What the estimate could not apply, and why; everything else applies."),
                              imported.not_honoured)}
    titles = {key: title.format(n=len(entries)) for key, (title, _caption, entries) in lists.items()}
    # A segmented control that wraps onto a second row in the sidebar's width (st.tabs scrolled there, and cut
    # "Not honoured (1)" off at 1,440 px).
    shown = st.segmented_control(_("The config's keys"), list(lists), key=CONFIG_LIST, default="read", required=True,
                                 format_func=titles.__getitem__, wrap=True, label_visibility="collapsed")
    _title, caption, entries = lists[shown or "read"]
    st.caption(caption)
    if entries:
        with st.container(height=320 if len(entries) > 6 else "content", border=False):
            st.text(_lines(entries))  # plain text: never Markdown or HTML


def draw_config_box(sb: Any) -> None:
    """The sidebar's import box: upload or paste, torchtune overrides, and the last import's three lists."""
    state = st.session_state.get(STATE)
    with sb.expander(_("Import a training config"), expanded=bool(state)):
        st.caption(_("Axolotl, TRL (trl … --config) or TrainingArguments, torchtune, LitGPT or mlx-lm (mlx_lm.lora "
                     "--config), YAML or JSON: it sets the settings below, and the link then shares them."))
        st.file_uploader(_("Config file (and its DeepSpeed JSON)"), type=["yaml", "yml", "json"], key=CONFIG_FILES,
                         accept_multiple_files=True, on_change=_apply_upload,
                         help=_("At most 1 MB. A DeepSpeed file the config names (deepspeed: zero3.json) can be "
                                "uploaded with it; Axolotl's shipped ones are known by name."))
        st.text_area(_("…or paste it"), key=CONFIG_TEXT, height=120, max_chars=MAX_CONFIG_BYTES,
                     placeholder="base_model: meta-llama/Llama-3.2-1B\nadapter: lora\n…")
        st.text_input(_("torchtune overrides (key=value …)"), key=CONFIG_OVERRIDES, max_chars=2000,
                      placeholder="batch_size=4 tokenizer.max_seq_len=4096")
        st.button(_("Read the pasted config"), key="config_read", on_click=_apply_paste, icon=":material/input:")
        _show_result(state)


def export_section(spec: ModelSpec, setup: Any, trainer: Any) -> None:
    """The calculator's export: the stack's config file for this estimate, shown and downloadable."""
    try:
        exported = export_config(spec, setup, trainer)
    except (ValueError, HubError) as exc:
        st.caption(plain(_("No config file for this setup: {error}").format(error=localised_error(exc))))
        return
    box = st.expander(_("Config file for this estimate ({file})").format(file=exported.filename), key="config_file",
                      on_change="rerun")  # its contents run only when it is open
    if not box.open:
        return
    with box:
        st.caption(_("Import it again (sidebar) to get this estimate back. Run with: {command}").format(
            command=exported.command))
        st.code(exported.text, language="yaml")
        st.download_button(_("Download {file}").format(file=exported.filename), exported.text, exported.filename,
                           "application/yaml", key="download_config", on_click="ignore",
                           icon=":material/download:")


__all__ = ["apply_config", "draw_config_box", "export_section"]
