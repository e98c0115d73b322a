"""The releases the estimate models, per stack and package, and the version forks: releases whose changes move a
training step's peak memory by 5 % or more in some setting (docs/versions.md has each one's worked example and the
changes checked that move less).

Pure data and two small readers. A package is named by its canonical PyPI name (packaging.utils.canonicalize_name:
"unsloth-zoo", "mlx-lm"); a version compares by its release numbers only (packaging.version.Version.release, trailing
zeros dropped), so a pre-release, a development build or a local build of X (5.0.0rc1, 2.13.0+cpu) counts as X.
The user's versions are read by estimator/job/versions.py; the runtimes ask `fork_applies` which side of each fork
the run is on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from ..i18n import N_, Text

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True)
class PackageRange:
    """The releases of one package the estimate can model: `oldest` to `newest`, both included. The default (a
    package the user does not give) is the newest: the release the stack's sources were read at."""

    package: str  # canonical PyPI name
    oldest: str
    newest: str
    source: str  # why these bounds

    @property
    def default(self) -> str:
        return self.newest


@dataclass(frozen=True)
class Fork:
    """One release of one package that changes what a step keeps in memory. `since` is the first release with the
    new behaviour, `last_without` the last release before it; the estimate's default (the newest release) is on the
    new side of every fork, so a fork says what an older release does differently."""

    id: str
    package: str
    since: str
    last_without: str
    description: str  # N_(): what changed, for a note beside the estimate
    term: str  # the memory term that moves (developer text)
    settings: str  # where it matters: method, trainer, family, backend (developer text)
    source: str  # the commit and the file:line before and after
    example: str  # one worked example, in the estimator's own numbers
    stacks: tuple[str, ...]  # the stacks whose estimate it moves
    requires: tuple[tuple[str, str], ...] = ()  # other packages' releases the new behaviour also needs
    # Where it can move an estimate at all (memory/forks.py prices a fork's other side only there; empty = anywhere):
    methods: tuple[str, ...] = ()  # the setup's method
    trainers: tuple[str, ...] = ()  # the trainer
    moe: bool = False  # a mixture-of-experts model only
    backends: tuple[str, ...] = ()  # the setup's backend
    losses: tuple[str, ...] = ()  # the setup's loss kind
    stack_defaults: tuple[str, ...] = ()  # only while these settings are the stack's (TrainingSetup.from_stack)
    config_only: bool = False  # decides what a training config implies (its precision), not the step's memory


def _r(package: str, oldest: str, newest: str, source: str) -> PackageRange:
    return PackageRange(package, oldest, newest, source)


_WINDOW = "the release current in December 2024 (two years back)"
# Every package a stack's memory depends on, over the window the forks below were searched in (December 2024 to the
# release each stack's sources were read at, estimator/options/stacks.py).
PACKAGES: dict[str, PackageRange] = {r.package: r for r in (
    _r("transformers", "4.46.0", "5.24.0", f"{_WINDOW}; newest: stacks.py's transformers 5.24.0"),
    _r("trl", "0.12.0", "1.16.0", f"{_WINDOW}; newest: options/trainers.py TRL_RELEASE"),
    _r("peft", "0.13.0", "0.21.2", f"{_WINDOW}; newest: peft 0.21.2 (models/moe.py, requirements-calibration.txt)"),
    _r("bitsandbytes", "0.44.0", "0.50.2", f"{_WINDOW}; newest: bitsandbytes 0.50.2 (calibration)"),
    _r("torch", "2.4.0", "2.13.0", "2.4.0: Unsloth's floor (unsloth 2026.10.9 METADATA torch>=2.4.0); newest: the "
                                   "allocator's torch 2.13 (memory/allocator.py)"),
    _r("unsloth", "2024.12.1", "2026.10.9", "2024.12: the release Unsloth's published tables measured "
                                           "(memory/unsloth_model.py published_tables_path); newest: stacks.py"),
    _r("unsloth-zoo", "2024.12.1", "2026.10.9", "released with unsloth; newest: stacks.py"),
    _r("axolotl", "0.5.0", "0.19.0", f"{_WINDOW}; newest: stacks.py"),
    _r("torchtune", "0.5.0", "0.6.1", "0.5.0 (2024-12-20): the first release in the window; 0.6.1 is the last "
                                      "release (torchtune README: wind-down)"),
    _r("litgpt", "0.5.4", "0.5.13", "0.5.4 (2024-12-23): the first release in the window; newest: stacks.py"),
    _r("mlx", "0.21.0", "0.32.4", f"{_WINDOW}; newest: stacks.py"),
    _r("mlx-lm", "0.20.0", "0.32.2", f"{_WINDOW}; newest: stacks.py"),
    _r("llamafactory", "0.9.5", "0.9.5", "the release the stack's sources were read at (stacks.py); older releases "
                                        "were not read"),
    _r("ms-swift", "4.6.0", "4.6.0", "the release the stack's sources were read at (stacks.py); older releases were "
                                  "not read"),
)}

# The stacks' packages. A stack whose newest framework release pins or caps a dependency below its global newest takes
# that cap as its newest (and default): the pairs below are read from the framework wheel's METADATA Requires-Dist.
_OVERRIDES: dict[str, dict[str, PackageRange]] = {
    "unsloth": {
        "transformers": _r("transformers", "4.46.0", "5.17.0", "unsloth 2026.10.9 METADATA: transformers<=5.17.0"),
        "trl": _r("trl", "0.12.0", "1.15.0", "unsloth 2026.10.9 METADATA: trl<=1.15.0"),
    },
    "llamafactory": {
        "transformers": _r("transformers", "4.55.0", "5.6.0", "llamafactory 0.9.5 pyproject.toml: "
                                                            "transformers>=4.55.0,<=5.6.0"),
        "peft": _r("peft", "0.18.0", "0.18.1", "llamafactory 0.9.5 pyproject.toml: peft>=0.18.0,<=0.18.1"),
        "trl": _r("trl", "0.18.0", "0.24.0", "llamafactory 0.9.5 pyproject.toml: trl>=0.18.0,<=0.24.0"),
    },
    "swift": {
        "transformers": _r("transformers", "4.46.0", "5.19.0", "ms-swift 4.6.0 requirements/framework.txt: "
                                                            "transformers>=4.33,<5.20.0"),
        "peft": _r("peft", "0.13.0", "0.20.0", "ms-swift 4.6.0 requirements/framework.txt: peft>=0.11,<0.21"),
        "trl": _r("trl", "0.15.0", "0.29.1", "ms-swift 4.6.0 requirements/framework.txt: trl>=0.15,<1.0"),
    },
    "axolotl": {
        "transformers": _r("transformers", "4.46.0", "5.16.1", "axolotl 0.19.0 METADATA: transformers==5.16.1"),
        "peft": _r("peft", "0.13.0", "0.20.0", "axolotl 0.19.0 METADATA: peft==0.20.0"),
        "trl": _r("trl", "0.12.0", "1.9.0", "axolotl 0.19.0 METADATA: trl==1.9.0"),
    },
}
_STACK_PACKAGE_NAMES: dict[str, tuple[str, ...]] = {
    "trl": ("trl", "transformers", "peft", "bitsandbytes", "torch"),
    "trainer": ("transformers", "peft", "bitsandbytes", "torch"),
    "unsloth": ("unsloth", "unsloth-zoo", "transformers", "trl", "peft", "bitsandbytes", "torch"),
    "axolotl": ("axolotl", "transformers", "peft", "trl", "bitsandbytes", "torch"),
    "torchtune": ("torchtune", "torch"),
    "litgpt": ("litgpt", "bitsandbytes", "torch"),
    "plain": ("torch", "transformers", "peft", "bitsandbytes"),
    "mlx": ("mlx", "mlx-lm"),
    "llamafactory": ("llamafactory", "transformers", "peft", "trl", "bitsandbytes", "torch"),
    "swift": ("ms-swift", "transformers", "peft", "trl", "bitsandbytes", "torch"),
}
STACK_PACKAGES: dict[str, tuple[PackageRange, ...]] = {
    stack: tuple(_OVERRIDES.get(stack, {}).get(name, PACKAGES[name]) for name in names)
    for stack, names in _STACK_PACKAGE_NAMES.items()
}

# The package that says a stack is installed (its framework), and frameworks no stack models yet: a package list
# that names one of those and not the chosen stack's own is a stack the estimate does not model.
STACK_FRAMEWORK: dict[str, str] = {
    "trl": "trl", "trainer": "transformers", "unsloth": "unsloth", "axolotl": "axolotl", "torchtune": "torchtune",
    "litgpt": "litgpt", "plain": "torch", "mlx": "mlx-lm", "llamafactory": "llamafactory", "swift": "ms-swift",
}
UNMODELLED_FRAMEWORKS: dict[str, str] = {
    "xtuner": "XTuner", "openrlhf": "OpenRLHF",
    "verl": "verl", "torchtitan": "torchtitan",
}

# The first transformers release with each model type the HF-code stacks (TRL, Trainer, Axolotl, plain, Unsloth's
# FastModel) price: the first wheel with transformers/models/<dir>/modeling_<dir>.py. An older transformers cannot
# load the family at all.
TRANSFORMERS_FAMILIES: dict[str, str] = {
    "cohere2": "4.48.0", "ernie4_5": "4.54.0", "gemma": "4.46.0", "gemma2": "4.46.0", "gemma3_text": "4.50.0",
    "gpt_neox": "4.46.0", "granite": "4.46.0", "llama": "4.46.0", "ministral": "4.57.0", "mistral": "4.46.0",
    "mixtral": "4.46.0", "olmo2": "4.47.0", "olmo3": "4.57.0", "phi": "4.46.0", "phi3": "4.46.0", "qwen2": "4.46.0",
    "qwen2_moe": "4.46.0", "qwen3": "4.51.0", "qwen3_moe": "4.51.0", "smollm3": "4.53.0", "starcoder2": "4.46.0",
    "deepseek_v3": "4.51.0", "ernie4_5_moe": "4.54.0", "glm4_moe": "4.54.0", "gpt_oss": "4.55.0",
    "llama4_text": "4.51.0", "qwen3_next": "4.57.0", "qwen3_5_text": "5.2.0", "qwen3_5_moe_text": "5.2.0",
    "gemma3n_text": "4.53.0", "gemma4_text": "5.5.0",
}

_HF = ("trl", "trainer", "axolotl", "plain")
_HF_UNSLOTH = (*_HF, "unsloth")
# Model types whose routed experts transformers 4.x built as nn.ModuleList of nn.Linear (4.57.6 modeling files);
# gpt_oss and llama4 already had fused 3-D experts in 4.x.
MOE_UNFUSED_IN_4 = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "glm4_moe", "qwen3_next",
                              "ernie4_5_moe", "olmoe"})


FORKS: dict[str, Fork] = {f.id: f for f in (
    # ---- transformers ------------------------------------------------------------------------------------------
    Fork("transformers_fused_moe_experts", "transformers", "5.0.0", "4.57.6",
       N_("transformers 5 stores a mixture-of-experts layer's routed experts as fused 3-D parameters, which "
          "bitsandbytes does not quantise: on a 4-bit base they stay 16-bit (fp32 after PEFT's k-bit preparation). "
          "On transformers 4 each expert is an nn.Linear, quantised to 4 bits."),
       "QLoRA frozen weights: routed-expert params × (16-bit or fp32 bytes) instead of × NF4 bytes; LoRA adapters on "
       "the experts (4.x: r·(in+out) per expert linear; 5.x: PEFT's fused-tensor wrap)",
       "method qlora, MoE families in MOE_UNFUSED_IN_4, stacks that quantise through transformers' bitsandbytes "
       "integration",
       "transformers models/mixtral/modeling_mixtral.py:57-65, 97 (4.57.6: MixtralBlockSparseTop2MLP w1/w2/w3 "
       "nn.Linear in an nn.ModuleList) → :63-72 (5.0.0: MixtralExperts gate_up_proj/down_proj nn.Parameter); "
       "integrations/bitsandbytes.py:167 (4.57.6) and :184 (5.0.0) replace nn.Linear/Conv1D only; bitsandbytes "
       "issue #1849 (open)",
       "Mixtral-8x7B QLoRA, batch 1 × 2,048: 45,097,156,608 expert params; TRL stack 103.5 GB → 36.5 GB on 4.57 "
       "(−64.7 %), Trainer stack (PEFT fp32 upcast) 329.2 GB → 172.1 GB (−47.7 %)",
       (*_HF_UNSLOTH, "llamafactory", "swift"),
       methods=("lora", "qlora"), moe=True),
    Fork("transformers_dtype_auto", "transformers", "5.0.0", "4.57.6",
       N_("transformers 5 loads a checkpoint in its own dtype when from_pretrained is given none (dtype='auto'); "
          "transformers 4 loaded it in fp32."),
       "weights (and, for full fine-tuning, gradients and optimizer state) at 4 B instead of 2 B per param; "
       "activations fp32 unless bf16/fp16 autocast",
       "a script or config that loads the model without a dtype (precision default of a config import)",
       "transformers modeling_utils.py:4628-4629 (4.57.6: dtype None kept, torch's fp32 default) → :3934-3935 (5.0.0: "
       "'if dtype is None: dtype = \"auto\"'); transformers PR #42805 (commit 6217adc6)",
       "Llama-3.1-8B LoRA on the HF Trainer, batch 1 × 2,048: 36.3 GB (bf16 weights) → 68.9 GB (fp32 weights under "
       "bf16 autocast, 'mixed') (+90 %)",
       _HF,
       config_only=True),
    Fork("transformers_loss_no_logits_copy", "transformers", "4.49.0", "4.48.3",
       N_("transformers 4.49 stopped copying the fp32 logits to shift them in the causal-LM loss (it pads the "
          "labels instead): before it, the loss's forward held one more fp32 [tokens × vocabulary] tensor."),
       "loss forward transient: + 4·T·V bytes (the shifted contiguous copy of the fp32 logits)",
       "the standard (full-logits) loss of the HF stacks: Trainer, plain loop, Axolotl, TRL before 1.7",
       "transformers loss/loss_utils.py:36-39 (4.48.0: logits.float(); shift_logits = logits[..., :-1, :]"
       ".contiguous()) → :36-39 (4.49.0: labels = nn.functional.pad(labels, (0, 1), …)); transformers PR #35646",
       "Qwen2.5-0.5B LoRA on the HF Trainer, batch 8 × 1,024 (T·V = 1.24 × 10⁹): the loss forward holds 14·T·V "
       "(bf16 logits, fp32 upcast, its shifted copy, the log-softmax) instead of 10·T·V, above the backward's 12·T·V: "
       "+2·T·V = 2.49 GB on the 30.0 GB estimate (+8.3 %)",
       ("trainer", "plain", "axolotl", "trl", "swift"),
       losses=("standard",)),
    Fork("transformers_fused_adamw_default", "transformers", "4.54.0", "4.53.3",
       N_("transformers 4.54 made the Trainer's default optimizer torch's fused AdamW (with torch 2.8 or newer); "
          "before, it was the foreach AdamW, which allocates a parameter-sized temporary at each step."),
       "optimizer step: + one trainable-parameter-sized temporary (OPTIMIZERS['adamw_foreach'].step_temporaries)",
       "full fine-tuning (the temporary is the size of the trainable parameters) on the HF Trainer and TRL stacks",
       "transformers training_args.py:1281-1284 (4.53.0: default_optim = 'adamw_torch', the fused default "
       "commented out) → :1291 (4.54.0: 'adamw_torch_fused' if torch ≥ 2.8); transformers PR #37358",
       "Llama-3.2-1B full fine-tuning on the HF Trainer, batch 1 × 1,024: 12.0 GB (fused) → 13.5 GB (foreach) "
       "(+12.4 %)",
       ("trainer", "trl", "swift"), requires=(("torch", "2.8.0"),),
       stack_defaults=("optimizer",)),
    Fork("transformers_model_level_rope", "transformers", "4.48.0", "4.47.1",
       N_("transformers 4.48 moved the rotary embedding from each attention layer to the model: Unsloth's 2024 "
          "releases kept a RoPE cache per layer on transformers 4.46–4.47."),
       "Unsloth: RoPE cos/sin caches × layers (activations/unsloth.py rope_cache_tensors, RELEASE_2024 branch)",
       "Unsloth stack on its own kernels (FastLlamaModel); the HF stacks recompute cos/sin per forward (no cache)",
       "transformers models/llama/modeling_llama.py:288 (4.47.0: LlamaAttention.__init__ self.rotary_emb) → only "
       ":501 (4.48.0: LlamaModel.rotary_emb)",
       "part of the Unsloth 2024.12 path: Llama-3.1-8B QLoRA at 8,192 tokens, 32 layers × 2 × 8,192 × 128 × 2 B = "
       "134 MB of caches",
       ("unsloth",)),
    # ---- TRL ---------------------------------------------------------------------------------------------------
    Fork("trl_bf16_default", "trl", "0.19.0", "0.18.2",
       N_("TRL 0.19 turned bf16 on by default in every trainer config; before it, a config without bf16 trained "
          "without autocast (in fp32 when the weights are fp32)."),
       "activations, logits and loss at 4 B instead of 2 B per value when the weights are fp32 (precision 'fp32' "
       "instead of 'mixed')",
       "TRL configs that set neither bf16 nor fp16, with fp32 weights (TRL's model loading before 0.26 on "
       "transformers 4, or from 0.27 on)",
       "trl commit 32ffa1170 '🎀 New defaults: bf16=True (#3515)'; trl/trainer/sft_config.py:111-117, :252 (0.19.1: "
       "bf16=None → not fp16); 0.18.2 has no bf16 field (TrainingArguments: bf16=False)",
       "Qwen2.5-0.5B DPO full fine-tuning, batch 8 × 1,024, checkpointing off: 55.2 GB in fp32 (TRL 0.16 "
       "defaults) with today's fused head",
       ("trl",),
       config_only=True),
    Fork("trl_gradient_checkpointing_default", "trl", "0.22.0", "0.21.0",
       N_("TRL 0.22 turned gradient checkpointing on by default in every trainer config; before it, checkpointing "
          "was off unless asked for."),
       "saved activations: every layer's activations (grad_ckpt False) instead of each layer's input",
       "every TRL trainer when the config does not set gradient_checkpointing",
       "trl commit a222aeb46 '🎀 New defaults: gradient_checkpointing=True (#3510)'; trl/trainer/sft_config.py:111-"
       "116 (0.22.0), base_config.py:62 (1.16.0); 0.21.0 inherits TrainingArguments (False)",
       "Llama-3.1-8B LoRA on TRL, batch 1 × 2,048: 19.2 GB (on) → 33.2 GB (off) (+72.7 %)",
       ("trl",),
       stack_defaults=("grad_ckpt",)),
    Fork("trl_model_dtype_auto", "trl", "0.26.0", "0.25.1",
       N_("TRL 0.26 loads a model named by its id in the checkpoint's dtype ('auto'); before it, TRL left the "
          "dtype to transformers (fp32 on transformers 4)."),
       "weights (and full fine-tuning's gradients and optimizer state): 2 B instead of 4 B per param",
       "a TRL config that names the model by id and sets no dtype",
       "trl commit 799b39b86 (#4509); trl/trainer/utils.py:1989 (0.25.0: kwargs.get('dtype') → None) → :2007 "
       "(0.26.0: kwargs.get('dtype', 'auto'))",
       "as transformers_dtype_auto: Llama-3.1-8B LoRA 36.3 GB (bf16) vs 68.9 GB (fp32 weights under autocast)",
       ("trl",),
       config_only=True),
    Fork("trl_model_dtype_float32", "trl", "0.27.0", "0.26.2",
       N_("TRL 0.27 loads a model named by its id in fp32 by default (mixed precision with bf16 autocast); 0.26 "
          "loaded it in the checkpoint's dtype."),
       "weights (and full fine-tuning's states): 4 B instead of 2 B per param",
       "a TRL config that names the model by id and sets no dtype",
       "trl commit 4d52e0249 'Set dtype default to float32 (#4778)'; trl/trainer/utils.py:2007 (0.26.0: 'auto') → "
       ":1154 (0.27.0), :1332 (1.16.0: kwargs.get('dtype', 'float32'))",
       "the reverse of trl_model_dtype_auto: 36.3 GB → 68.9 GB for Llama-3.1-8B LoRA",
       ("trl",),
       config_only=True),
    Fork("trl_kbit_prep_norms_only", "trl", "0.22.0", "0.21.0",
       N_("TRL 0.22 replaced PEFT's k-bit preparation in SFT, GRPO and reward training with its own, which casts "
          "only the norms to fp32; before it, the embeddings and the output head were cast to fp32 too."),
       "QLoRA frozen non-4-bit weights: embeddings and head 2 B instead of 4 B per param, fp32 logits kept "
       "(QLORA_PREPS 'norms' instead of 'peft')",
       "method qlora (or any k-bit base) on SFT, GRPO and the reward trainer",
       "trl commit 65d7894b6 (#3882); trl/trainer/sft_trainer.py:610, 633-640 (0.21.0: peft.prepare_model_for_"
       "kbit_training) → trl/models/utils.py:475-516, 584 (0.25.0: norms only)",
       "Llama-3.1-8B QLoRA on TRL, batch 1 × 2,048: 11.0 GB ('peft') → 8.7 GB ('norms') (−20 %)",
       ("trl",),
       methods=("qlora",)),
    Fork("trl_no_kbit_prep", "trl", "0.26.0", "0.25.1",
       N_("TRL 0.26 stopped preparing a k-bit model in SFT, GRPO and reward training: the norms, embeddings and "
          "head stay 16-bit."),
       "QLoRA: norms (and the residual stream after them) stay 16-bit (QLORA_PREPS 'none' instead of 'norms')",
       "method qlora on SFT, GRPO and the reward trainer",
       "trl commit 2af35fb0d 'Clean up model preparation (#4577)' (and #4704); trl/models/utils.py:584 (0.25.0) → "
       "no call in 0.26.0",
       "Llama-3.1-8B QLoRA on TRL, batch 1 × 2,048: 8.7 GB ('norms') → 8.0 GB ('none') (−8.8 %)",
       ("trl",),
       methods=("qlora",)),
    Fork("trl_dpo_no_kbit_prep", "trl", "0.29.0", "0.28.0",
       N_("TRL 0.29's rewritten DPO trainer no longer calls PEFT's k-bit preparation; before it, a 4-bit DPO model "
          "had its embeddings, head and norms cast to fp32."),
       "QLoRA DPO: QLORA_PREPS 'peft' before 0.29, 'none' from 0.29",
       "trainer dpo, method qlora",
       "trl commit e3b7897c8 'Refactor DPO (#3906)'; trl/trainer/dpo_trainer.py:618 (0.28.0) → no call (0.29.0)",
       "Llama-3.1-8B QLoRA: the SFT figures above, 11.0 GB ('peft') → 8.0 GB ('none') (−27 %), DPO adds its own "
       "phases on top",
       ("trl",),
       methods=("qlora",), trainers=("dpo",)),
    Fork("trl_kto_no_kbit_prep", "trl", "1.4.0", "1.3.0",
       N_("TRL 1.4's KTO trainer no longer calls PEFT's k-bit preparation; before it, a 4-bit KTO model had its "
          "embeddings, head and norms cast to fp32."),
       "QLoRA KTO: QLORA_PREPS 'peft' before 1.4, 'none' from 1.4",
       "trainer kto, method qlora",
       "trl commit 9516563e3 'Align KTO with DPO: Align PEFT handling (#5661)'; trl/experimental/kto/"
       "kto_trainer.py:328 (1.3.0) → no call (1.4.0)",
       "as trl_dpo_no_kbit_prep: Llama-3.1-8B QLoRA 11.0 GB → 8.0 GB",
       ("trl",),
       methods=("qlora",), trainers=("kto",)),
    Fork("trl_dpo_rewrite", "trl", "0.29.0", "0.28.0",
       N_("TRL 0.29 rewrote the DPO trainer: the model's outputs (the full logits) stay alive through the loss, and "
          "the shifted logits of the policy and of the reference are copied."),
       "DPO logits head before 1.15: ≤ 0.28 keeps one c·T·V (bf16: the rows' log-softmax; fp32: the logits, saved by "
       "logsumexp); 0.29–1.5 keeps the logits + a contiguous shifted copy + the log-softmax (3·c·T·V in bf16, "
       "2·4·T·V in fp32) and the reference adds its logits + copy",
       "trainer dpo before TRL 1.15 (fused head)",
       "trl commit e3b7897c8 'Refactor DPO (#3906)'; trl/trainer/dpo_trainer.py:1105-1230 (0.16.0 concatenated_"
       "forward: logits freed after selective_log_softmax) → :1120-1124, 1158 (0.29.0: outputs kept, shift_logits "
       "= outputs.logits[..., :-1, :].contiguous())",
       "Qwen2.5-0.5B DPO, batch 8 × 1,024 (T = 16,384, V = 151,936): c·T·V = 4.98 GB in bf16; each extra copy is "
       "one more",
       ("trl",),
       trainers=("dpo",)),
    Fork("trl_dpo_no_contiguous", "trl", "1.6.0", "1.5.1",
       N_("TRL 1.6 stopped copying the shifted logits in DPO (policy and reference)."),
       "DPO logits head: − c·T·V for the policy and − c·T·V for the reference forward",
       "trainer dpo from 0.29 to 1.14",
       "trl commit c3f21ede9 'Remove redundant .contiguous() calls in DPOTrainer to reduce peak memory with 15% save "
       "(#5926)'; trl/trainer/dpo_trainer.py:1121, 1158 (0.29.0, .contiguous()) → :1079, 1195, 1232 (1.6.0)",
       "Qwen2.5-0.5B DPO bf16, batch 8 × 1,024: 2 × 4.98 GB less (the PR measured 15 %)",
       ("trl",),
       trainers=("dpo",)),
    Fork("trl_sft_chunked_nll_default", "trl", "1.7.0", "1.6.0",
       N_("TRL 1.7 made SFT's default loss the chunked cross-entropy (256 tokens at a time, no full logits); "
          "before it, SFT built the full logits and the transformers loss upcast them to fp32."),
       "SFT loss: full fp32 logits (loss 'standard', impl 'hf': 12·T·V at the peak, plus TRL's token-accuracy and "
       "entropy metrics over the logits) instead of one [256, V] chunk at a time",
       "trainer sft on TRL, every method",
       "trl commit b58947c7e 'Default SFT loss to chunked_nll (#5846)'; trl/trainer/sft_config.py:308 (1.6.0: "
       "loss_type = 'nll') → :336 (1.7.0: 'chunked_nll' unless Liger), sft_trainer.py:76 (1.7.0: chunk 256)",
       "Llama-3.1-8B LoRA on TRL, batch 1 × 4,096: 20.5 GB (chunked) → 25.7 GB (full logits) (+25 %); Qwen2.5-0.5B "
       "LoRA, batch 8 × 1,024: 2.9 GB → 17.7 GB",
       ("trl",),
       trainers=("sft",), stack_defaults=("loss",)),
    Fork("trl_fused_logprob_head", "trl", "1.15.0", "1.14.0",
       N_("TRL 1.15 computes DPO, KTO and GRPO log-probabilities (and SFT's loss) in a fused chunked head, without "
          "the full logits; before it, these trainers built the [tokens × vocabulary] logits of the policy and of "
          "the reference."),
       "trainer head: TrainerOption.head 'fused' → 'logits' (policy logits + row log-softmax kept; reference forward "
       "adds c·T·V, scoring_forward_bytes(fused=False)); GRPO: logits of the completion tokens only",
       "trainers dpo, kto, grpo (and sft between 1.7 and 1.14: chunked_nll, about the same bytes)",
       "trl/kernels/chunked_logprob.py:22 TOKEN_CHUNK_SIZE (1.15.0; absent in 1.14.0); trl/trainer/dpo_trainer.py:"
       "1347 (1.14.0: shift_logits = outputs.logits[..., :-1, :]) → :1275 (1.15.0: model(..., fused_lm_head=True)); "
       "tracking issue trl #7063 (the commit is not in the stored snapshot, which ends at 1.9.0)",
       "Qwen2.5-0.5B DPO full fine-tuning, fp32, batch 8 × 1,024, no checkpointing (TRL 0.16's defaults; T·V = "
       "2.49 × 10⁹): 55.2 GB with the fused head; TRL 0.16's path at the loss backward: 51.5 − 1.1 (fused head) + "
       "4·T·V kept (9.96) + two fp32 logits gradients (19.9) = 80.3 GB of tensors, 83.4 GB with the context (the "
       "real run ran out of memory on 80 GB); ORPO's logits head as the estimator prices it gives 86.0 GB. bf16 "
       "with checkpointing (1.6–1.14's layout): 7.0 GB → 21.8 GB",
       ("trl",),
       trainers=("dpo", "kto", "grpo")),
    # ---- Unsloth -----------------------------------------------------------------------------------------------
    Fork("unsloth_dequant_scratch", "unsloth", "2025.2.2", "2024.12.12",
       N_("Unsloth 2025.2 dequantises 4-bit weights in its forward into one reused scratch buffer; 2024 releases "
          "made a fresh tensor each time."),
       "QLoRA: dequant_scratch_bytes (one largest weight in bf16, kept) instead of a fresh weight per matmul",
       "Unsloth stack, method qlora, its own kernels",
       "unsloth commit 144190bd06 (#1620); unsloth/kernels/utils.py fast_dequantize(use_global_buffer) (2025.2.2; "
       "absent in 2024.12.12, kernels/utils.py:119-160 fresh tensor)",
       "part of the 2024.12 path (see unsloth_fused_ce)",
       ("unsloth",),
       methods=("qlora",)),
    Fork("unsloth_lora_inplace", "unsloth", "2025.3.1", "2025.2.15",
       N_("Unsloth 2025.3 adds the LoRA term in place (addmm_); before it, matmul_lora built the LoRA product out of "
          "place, one more [tokens × width] tensor in the MLP backward."),
       "Unsloth MLP backward: + one c·T·i product (activations/unsloth.py mlp_backward_tensors, RELEASE_2024 branch)",
       "Unsloth stack with the fused MLP kernel",
       "unsloth commit 4f166026d7 'LoRA'; unsloth/kernels/utils.py matmul_lora: out += (X @ A) @ (s·B) (2025.2.15) → "
       "out.addmm_(XA, B, alpha=s) (2025.3.1)",
       "part of the 2024.12 path (see unsloth_fused_ce)",
       ("unsloth",),
       methods=("lora", "qlora")),
    Fork("unsloth_fused_ce", "unsloth", "2025.8.5", "2025.8.4",
       N_("Unsloth 2025.8.5 replaced Apple's Cut Cross-Entropy with its own fused linear cross-entropy."),
       "Unsloth loss: cce_2024_tensors (Cut Cross-Entropy's kept and backward buffers) → loss_pass_bytes (tiled or "
       "chunked pass)",
       "Unsloth stack, every method",
       "unsloth commit 806bee2433 'Nightly (#3148)'; unsloth/models/llama.py: fused_linear_cross_entropy from "
       "cut_cross_entropy (2025.8.4) → unsloth_fused_ce_loss (2025.8.5)",
       "the whole 2024.12 path (published_tables_path) against today's, Llama-3.1-8B QLoRA batch 1: 8.16 GB vs "
       "7.30 GB at 2,048 tokens (+11.8 %), 8.88 GB vs 8.41 GB at 8,192 (+5.5 %); the release-keyed parts (Cut "
       "Cross-Entropy, per-layer RoPE caches, fresh dequantisation) make +12.4 % and +5.9 %",
       ("unsloth",),
       methods=("lora", "qlora")),
    Fork("unsloth_offload_embedding_auto", "unsloth", "2026.10.1", "2026.9.14",
       N_("Unsloth 2026.10 moves the frozen input embedding of its fast Llama-family path to CPU RAM when the card is "
          "tight (offload_embedding='auto'); before it that path kept the embedding on the GPU."),
       "frozen weights: − 2·V·h bytes (the untied bf16 input embedding) on cards where Unsloth's own step reserve "
       "exceeds the memory left after loading (model.embedding_offloaded) only from 2026.10.1",
       "Unsloth stack on its own kernels (FastLlamaModel families), untied embedding, small cards",
       "unsloth/models/loader.py:1462-1468 (2026.9.14: 'The optimized path never carried offload_embedding, so a "
       "request for one is dropped'; the same at :1037-1045 from 2026.8.20, when FastLanguageModel's default became "
       "'auto'; False before) → unsloth/models/llama.py:3399-3409 (2026.10.1: offload_embedding == "
       "OFFLOAD_EMBEDDING_AUTO → offload_embedding_if_tight), :4357-4366 (2026.10.9); after the stored history "
       "(2026-08-22), bracketed by the PyPI wheels",
       "Llama-3.1-8B QLoRA, batch 1 × 2,048, on an 8 GB RTX 4060 (8,188 MiB): 6.25 GB from 2026.10.1 (the 1.05 GB embedding in CPU RAM) vs 7.30 GB on 2026.9.14 (+16.8 %); the longest length that fits at batch 1: 15,704 vs 9,604 tokens. No change on a 24 GB card at Unsloth Studio's defaults (2 × 8,192)",
       ("unsloth",),
       methods=("lora", "qlora")),
    Fork("unsloth_zoo_pinned_offload", "unsloth-zoo", "2025.1.1", "2024.12.7",
       N_("unsloth_zoo 2025.1 offloads each checkpointed layer input into pinned CPU RAM slots and reloads it into "
          "one kept GPU buffer; before it, every input was copied to pageable CPU RAM and back into a new GPU "
          "tensor in its layer's backward."),
       "Unsloth offloaded checkpointing: checkpointing 'reload' (a fresh GPU copy of the input per layer backward, "
       "pageable host RAM, no staging buffers or pinned slots) instead of 'offload'",
       "Unsloth stack, use_gradient_checkpointing='unsloth' (the default), its own kernels",
       "unsloth_zoo commit 5572cc46 'January release v1 (#33)': gradient_checkpointing.py CPU_BUFFERS (2025.1.1); "
       "2024.12.1 gradient_checkpointing.py:145-174 Unsloth_Offloaded_Gradient_Checkpointer (.to('cpu'), reloaded "
       "at :167)",
       "part of the 2024.12 path: −0.2 % at 2,048 tokens, −0.8 % at 8,192 (Llama-3.1-8B QLoRA batch 1)",
       ("unsloth",)),
    Fork("unsloth_zoo_moe_4bit_experts", "unsloth-zoo", "2026.6.2", "2026.6.1",
       N_("unsloth_zoo 2026.6.2 quantises transformers 5's fused mixture-of-experts tensors to 4 bits; before it, "
          "Unsloth on transformers 5 left them 16-bit like bitsandbytes does."),
       "QLoRA frozen weights: routed experts at NF4 bytes again on transformers 5 (undoes transformers_fused_moe_"
       "experts on the Unsloth stack)",
       "Unsloth stack, method qlora, MoE families, transformers ≥ 5",
       "unsloth_zoo commit 9adee937 '[MoE] Quantisation support and patches: Bnb and FP8 #659' (with PR #527); "
       "unsloth_zoo/temporary_patches/moe_utils_bnb4bit.py:1-8 (2026.6.2 and 2026.10.9; absent in 2026.6.1)",
       "Qwen3-30B-A3B QLoRA on Unsloth, batch 1 × 2,048: 71.9 GB (experts 16-bit, today's estimate) → 28.9 GB "
       "(experts NF4) (−60 %)",
       ("unsloth",), requires=(("transformers", "5.0.0"),),
       methods=("qlora",), moe=True),
    # ---- LitGPT ------------------------------------------------------------------------------------------------
    Fork("litgpt_lora_fsdp_linear_wrap", "litgpt", "0.5.8", "0.5.7",
       N_("LitGPT 0.5.8 wraps each nn.Linear as an FSDP unit in LoRA runs on several GPUs; before it each Block was "
          "one unit holding frozen weights and adapters, so FSDP made a gradient for every Block weight (whole, on "
          "every GPU, while gradients accumulate)."),
       "LoRA on several GPUs (FSDP1, use_orig_params): gradient bytes of the Blocks' flat parameters (every Block "
       "parameter) instead of the root's (embedding, norms, adapters); unsharded under no_sync (grad_accum > 1)",
       "LitGPT stack, method lora, gpus > 1 (FSDPStrategy FULL_SHARD)",
       "litgpt commit 281510ab 'Do not wrap LoRA layers with FSDP (#1538)'; litgpt/finetune/lora.py:149-156 (0.5.4, "
       "0.5.7: auto_wrap_policy={Block}) → :155-161 (0.5.8, 0.5.10: auto_wrap_policy={torch.nn.Linear}); "
       "torch/distributed/fsdp/_wrap_utils.py:158-167 (2.13.0: a unit with frozen and trainable parameters gets "
       "the gradient of all of them); memory/litgpt/fsdp.py",
       "Llama-3.1-8B LoRA (all linears) on 2 GPUs, batch 4 × 512, checkpointing, accumulation 8: 14.0 GB (0.5.8–0.5.10) → 27.6 GB on 0.5.7 (+97 %: the Blocks' 7.0 × 10⁹ parameters' bf16 gradients whole on each GPU); without accumulation 12.9 → 18.9 GB (sharded)",
       ("litgpt",),
       methods=("lora",)),
    Fork("litgpt_lora_fsdp2", "litgpt", "0.5.11", "0.5.10",
       N_("LitGPT 0.5.11 shards LoRA runs on several GPUs with FSDP2 (per parameter): only the adapters get "
          "gradients. Before it, FSDP1's root unit gave the embedding and the norms a gradient too, kept whole on "
          "every GPU while gradients accumulate."),
       "LoRA on several GPUs: FSDP1 flat-parameter gradients (see litgpt_lora_fsdp_linear_wrap; unsharded under "
       "no_sync) → FSDP2, the adapters' gradients only",
       "LitGPT stack, method lora, gpus > 1",
       "litgpt commit 5ac69b06 'finetune_lora upgrades (#2086)'; litgpt/finetune/lora.py:155-161 (0.5.10: "
       "FSDPStrategy) → :157-161 and parallelize_fn :522-536 (0.5.11, 0.5.13: ModelParallelStrategy, fully_shard); "
       "memory/litgpt/fsdp.py",
       "the same job: 12.9 GB (0.5.11) → 14.0 GB on 0.5.10 (+8.5 %: the root unit's embedding, 0.53 × 10⁹ parameters, gets a bf16 gradient kept whole under no_sync); without accumulation the two are equal to 0.1 GB",
       ("litgpt",),
       methods=("lora",)),
    # ---- MLX ---------------------------------------------------------------------------------------------------
    Fork("mlx_sdpa_fused_masked", "mlx", "0.24.0", "0.23.2",
       N_("mlx 0.24 ran masked attention through the fused kernel on Metal, training included: the attention "
          "probabilities were not kept for backward."),
       "MLX attention probabilities: B·H·L² per trained block kept (unfused) or 0 kept and one block's rebuilt in "
       "backward (fused forward, fallback VJP)",
       "MLX stack on Metal, head_dim 64, 80 or 128, length ≥ 32 (fast.cpp threshold); together with mlx_no_sdpa_"
       "in_grad: fused only for 0.24.x",
       "mlx commit 9adcd1a65 'Support fused masking in Attention (#1924)'; mlx/fast.cpp:715 (0.23.2: supports_sdpa_"
       "full needs !mask) → :724-733 (0.24.0: array or causal masks, head dims 64/80/128)",
       "see mlx_no_sdpa_in_grad",
       ("mlx",),
       backends=("metal",)),
    Fork("mlx_no_sdpa_in_grad", "mlx", "0.25.0", "0.24.2",
       N_("mlx 0.25 trains attention unfused: each trained block keeps its attention probabilities (batch × heads "
          "× length²) for backward; on 0.24 the fused kernel kept none and backward rebuilt one block's at a time."),
       "MLX attention probabilities: 0.24.x → _probs_per_block = 0 and BLOCK_REST_PROBS once (as the CUDA "
       "fused-forward, fallback-VJP case in mlx_step.py); 0.25 → B·H·L²·b per trained block",
       "MLX stack on Metal, head_dim 64, 80 or 128 (mlx 0.24.x only)",
       "mlx commit e5d35aa18 'no sdpa in grad (#2054)'; mlx/fast.cpp:775 (0.24.2: if (implementation_supports_use_"
       "case)) → :773 (0.25.0: if (!detail::in_grad_tracing() && …)); Custom::vjp (fast.cpp:15-28, 0.24.2) "
       "differentiates the fallback",
       "Llama-3.2-1B LoRA on the last 16 blocks, batch 4 × 2,048, Metal: B·H·L²·2 B = 4 × 32 × 2,048² × 2 = 1.07 GB "
       "per block; today's 48.5 GB (loss backward) holds 17.2 GB of them; on 0.24 about 31.3 GB (−35 %), one "
       "block's probabilities rebuilt at a time in backward",
       ("mlx",),
       backends=("metal",)),
    Fork("mlx_cuda_cudnn_attention", "mlx", "0.30.0", "0.29.4",
       N_("mlx 0.30 runs training attention through cuDNN on CUDA (forward and backward): no attention "
          "probabilities are kept; before it, the CUDA backend kept them like Metal."),
       "MLX on CUDA: _cudnn_attention/_cudnn_vjp (mlx_step.py) only from 0.30; before: B·H·L²·b per trained block",
       "MLX stack, backend cuda",
       "mlx commits 3b2ffcefc '[CUDA] cuDNN forward attention (#2743)' and 6f35017d1 '[CUDA] cuDNN backward "
       "attention (#2762)', both first in v0.30.0",
       "as mlx_no_sdpa_in_grad: Llama-3.2-1B, 16 blocks, 4 × 2,048: 17.2 GB of probabilities on 0.29",
       ("mlx",),
       backends=("cuda",)),
)}


# The Unsloth release line its published context-length tables measured (Llama 3.3 blog, 2024-12-10: unsloth 2024.12.4,
# unsloth_zoo 2024.12.1, cut_cross_entropy 24.12.1; estimator/memory/unsloth/kernels.py RELEASE_2024). Besides the forks
# above, the Unsloth runtime prices this line as the tables ran it: attention through xformers with K/V expanded
# (llama.py:391-410, 2024.12.4; flash-attn not installed) on padded batches, the input embedding never moved to CPU RAM,
# and the PYTORCH_CUDA_ALLOC_CONF unsloth/__init__.py:58 set (roundup_power2_divisions, read by the torch 2.5 parser);
# each of those moves a step by less than 1 % and is not dated release by release (docs/versions.md).
UNSLOTH_PUBLISHED = PackageRange(
    "unsloth", "2024.12.1", "2024.12.12", "the release line of Unsloth's published tables (the December 2024 releases; "
    "2025.1.1 is the first of the next line)")


@dataclass(frozen=True)
class Companions:
    """The releases a framework release ran with, for the stack packages the user does not give: their newest
    modelled release is one that framework release could not run (its METADATA caps none of them), so a package left
    out is modelled at its companion instead (Versions.sources: "framework")."""

    framework: PackageRange  # the framework's releases these companions belong to
    packages: tuple[tuple[str, str], ...]  # canonical package name → its release
    source: str


COMPANIONS: tuple[Companions, ...] = (
    Companions(UNSLOTH_PUBLISHED, (("unsloth-zoo", "2024.12.1"), ("transformers", "4.46.3"), ("torch", "2.5.1")),
               "unsloth_zoo 2024.12.1: the published tables' (kernels.py RELEASE_2024); transformers 4.46.3: unsloth's "
               "pyproject.toml at commit 58bcf66d27 (2024-12-20, the 2024.12 line) pins transformers>=4.46.1,<=4.46.3; "
               "torch 2.5.1: the torch 2.5 whose allocator parser the tables ran under (memory/unsloth/model.py "
               "ALLOCATOR_2024)"),
)


def companions(framework: str, version: object) -> dict[str, str]:
    """package → release, for the stack packages a framework release ran with (COMPANIONS); {} for any other."""
    for c in COMPANIONS:
        if c.framework.package == framework and in_range(version, c.framework):
            return dict(c.packages)
    return {}


def _key(version: object) -> tuple[int, ...]:
    """The release numbers of a version, trailing zeros dropped (5.0 == 5.0.0); pre-release, dev and local parts
    ignored. ValueError for a string that is not a PEP 440 version."""
    try:
        release = (version if isinstance(version, Version) else Version(str(version))).release
    except InvalidVersion as exc:
        raise ValueError(Text(N_("not a PEP 440 version: {version}"), version=repr(str(version)[:40]))) from exc
    parts = list(release)
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def at_least(version: object, floor: object) -> bool:
    """Is `version` the release `floor` or a later one (release numbers only)?"""
    return _key(version) >= _key(floor)


def in_range(version: object, r: PackageRange) -> bool:
    """Is `version` between the range's oldest and newest releases, both included?"""
    return _key(r.oldest) <= _key(version) <= _key(r.newest)


def get_fork(fork_id: str) -> Fork:
    """A fork by id; ValueError listing none (the ids are code's, not the user's)."""
    if fork_id not in FORKS:
        raise ValueError(Text(N_("unknown version fork {fork}"), fork=repr(str(fork_id)[:40])))
    return FORKS[fork_id]


def fork_applies(fork_id: str, versions: Mapping[str, object]) -> bool:
    """Does the fork's new behaviour apply to these versions (canonical package name → version)? True when the
    fork's package is `since` or newer and every package in `requires` is at least its release. A package missing
    from `versions` counts at its newest modelled release (the default)."""
    fork = get_fork(fork_id)

    def version(package: str) -> object:
        return versions[package] if package in versions else PACKAGES[package].newest

    return at_least(version(fork.package), fork.since) and all(
        at_least(version(p), floor) for p, floor in fork.requires)


def stack_packages(stack: str) -> tuple[PackageRange, ...]:
    """The packages whose releases move this stack's estimate, with the range modelled for each."""
    if stack not in STACK_PACKAGES:
        raise ValueError(Text(N_("unknown stack '{stack}'; choose one of: {choices}"), stack=str(stack)[:40],
                              choices=", ".join(STACK_PACKAGES)))
    return STACK_PACKAGES[stack]


def stack_forks(stack: str) -> tuple[Fork, ...]:
    """The forks that move this stack's estimate."""
    stack_packages(stack)
    return tuple(f for f in FORKS.values() if stack in f.stacks)


def default_versions(stack: str) -> dict[str, str]:
    """package → the release the stack is modelled at when the user gives none (the newest)."""
    return {r.package: r.default for r in stack_packages(stack)}

