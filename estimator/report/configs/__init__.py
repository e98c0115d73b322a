"""Export: the estimate's setup as its stack's config file, which `import_config` reads back to the same estimate.

- Axolotl: the YAML config (the snippet is already one), with Axolotl's rl / trl / vllm keys for the trainers;
- torchtune: the recipe YAML: torchtune 0.6.1's shipped single-device config for the model and method
  (torchtune_bases.json) with the estimate's values, for `tune run <recipe> --config FILE`;
- LitGPT: the finetune YAML (config_hub's layout) for `litgpt finetune_lora|finetune_full --config FILE`;
- TRL: the YAML `trl sft|dpo|kto|grpo|reward --config FILE` reads (the trainer's config, ModelConfig and
  accelerate's num_processes); ORPO and SimPO have no command in TRL 1.16, so theirs is for TrlParser in a script;
- MLX-LM: mlx-lm's lora_config.yaml for `mlx_lm.lora --config FILE` (SFT only: the stack refuses the other
  trainers); a base to quantise or cast is converted first with mlx_lm.convert (the command in the header, the model
  and conversion in the marker), and the file trains on the converted folder;
- LLaMA-Factory: the YAML `llamafactory-cli train FILE` reads (its hparams dataclasses' keys and transformers'
  TrainingArguments'), SFT only (its DPO, KTO and reward steps are its own, which the estimate does not price);
- ms-swift: the YAML `swift sft FILE` reads (SftArguments' keys, the GPUs in its ENV block), SFT only (its swift rlhf
  trainers are its own);
- HF Trainer, plain PyTorch loop, Unsloth: these have no config file of their own. Theirs is the same YAML under
  transformers TrainingArguments' and TRL ModelConfig's names, which a script reads with HfArgumentParser; the
  first line, a comment every tool ignores, names the stack, so importing it gives back the same stack.

Every file starts with the marker comment `# will-it-fit: stack=… trainer=… gpus=…` (plus the model where the
format has no field for it, and the trainer's options the tool's file cannot hold), then the snippet's header: what
the estimate assumes and what the file cannot express. Pure text; values in JSON syntax (a subset of YAML)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.trainer import TrainerSetup
from ...options.stacks import get_stack
from ..snippets.common import _stack_id
from ._common import ExportedConfig
from .axolotl import _export_axolotl
from .hf import _export_hf
from .litgpt import _export_litgpt
from .llamafactory import _export_llamafactory
from .mlx_lm import _export_mlx
from .swift import _export_swift
from .torchtune import _export_torchtune

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec

__all__ = ["ExportedConfig", "export_config"]

# one writer per format (estimator/job/configs: a format's ID); a stack's format is its Stack.config_format
_WRITERS = {"axolotl": _export_axolotl, "mlx_lm": _export_mlx, "torchtune": _export_torchtune, "litgpt": _export_litgpt,
            "trl": _export_hf, "llamafactory": _export_llamafactory, "swift": _export_swift}


def export_config(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup | None = None) -> ExportedConfig:
    """The setup's stack's config file (a setup without a stack: the HF Trainer's), which import_config reads back
    to the same setup and trainer wherever `notes` is empty."""
    return _WRITERS[get_stack(_stack_id(setup)).config_format](spec, setup, trainer or TrainerSetup())
