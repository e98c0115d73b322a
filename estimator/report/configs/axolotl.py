"""Axolotl's YAML config (the snippet is already one), with Axolotl's rl / trl / vllm keys for the trainers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.trainer import TrainerSetup
from ..snippets.axolotl import _axolotl, _line
from ..snippets.common import (
    _header,
)
from ._common import ExportedConfig, _hub_revision, _marker, _offload_note, _text

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


_AXOLOTL_RL = {"dpo": "dpo", "orpo": "orpo", "kto": "kto", "simpo": "simpo", "grpo": "grpo"}


def _axolotl_trainer_lines(setup: TrainingSetup, tr: TrainerSetup) -> list[str]:
    """rl, rl_beta, precompute_ref_log_probs, reward_model, GRPO's trl: and vllm: blocks (axolotl 0.19.0
    utils/schemas/config.py, trl.py, vllm.py; core/builders/rl.py)."""
    if tr.trainer == "sft":
        return []
    if tr.trainer == "reward":
        return ["", "# Reward model (TRL RewardTrainer).", _line("reward_model", True)]
    out = ["", f"# {tr.option.label} (TRL {tr.option.trainer_class} through Axolotl's rl:).",
           _line("rl", _AXOLOTL_RL[tr.trainer])]
    if tr.option.generates:
        block: dict[str, object] = {"beta": tr.beta_value, "num_generations": tr.gens,
                                    "max_completion_length": tr.completion_length,
                                    "reward_funcs": ["your_rewards.reward_len"]}
        if tr.generation_mode != "hf":
            block |= {"use_vllm": True, "vllm_mode": "server" if tr.generation_mode == "vllm-server" else "colocate"}
            if tr.generation_mode == "vllm-colocate":
                block["vllm_enable_sleep_mode"] = tr.vllm_sleep
        out += [_line("trl", block), _line("max_prompt_len", tr.prompt_length)]
        if tr.generation_mode == "vllm-colocate":
            out.append(_line("vllm", {"gpu_memory_utilization": tr.vllm_util}))
        return out
    out.append(_line("rl_beta", tr.beta_value))
    if tr.option.can_precompute:
        out.append(_line("precompute_ref_log_probs", tr.precompute_ref))
    return out


def _export_axolotl(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    notes: list[str] = []
    body = _axolotl(spec, setup, notes)
    _offload_note(setup, notes, "DeepSpeed offloads under ZeRO stage 2 here")
    revision = _hub_revision(spec)
    if revision:
        body.insert(next(i for i, line in enumerate(body) if line.startswith("base_model:")) + 1,
                    _line("revision_of_model", revision))
    launch = [i for i, line in enumerate(body) if line.startswith("# Launch with:")]
    at = launch[0] if launch else len(body)
    body[at:at] = _axolotl_trainer_lines(setup, tr)
    lines = [_marker(setup, tr), *_header(spec, setup, notes), *body]
    return ExportedConfig("axolotl", "axolotl_config.yml", _text(lines), "axolotl train axolotl_config.yml",
                          tuple(notes))
