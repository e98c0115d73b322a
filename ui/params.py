"""One table of the link parameters: each parameter's name, default, limits or choices, widget, label and help,
written once. Defaults and limits come from the estimator's own setup: TrainingSetup's and TrainerSetup's field
defaults (the settings table, estimator/job/settings.py, names the field behind each key: max_len is seq_len), the
limits their checks enforce (estimator/job/setup.py, estimator/memory/trainers.py, estimator/models/config.py,
estimator/options/devices.py) and the option descriptions' ids (estimator/options/, estimator/options/stacks.py). The
sidebar (ui/inputs.py), the trainer box (ui/trainer_inputs.py) and the pages' own controls draw their widgets from it
with `widget()`, and the link notes check a link's values against it with `Param.accepts`;
tests/test_params.py checks the table against the estimator, so neither can drift."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any

import streamlit as st

from estimator import CATALOG, MAX_SIZE_B, MIN_SIZE_B, TrainerSetup, TrainingSetup, list_presets
from estimator.i18n import N_, Text, _
from estimator.job.settings import AUTO, BY_KEY, CKPT_CHOICES, widget_value
from estimator.job.setup import MAX_BATCH, MAX_GPUS, MAX_GRAD_ACCUM, MAX_LORA_LAYERS, MAX_RANK, MAX_SEQ_LEN
from estimator.memory.rule import rule_sentence
from estimator.options.compute import CUSTOM_MAX_GBPS, CUSTOM_MAX_TFLOPS
from estimator.options.devices import CUSTOM_MAX_GB, CUSTOM_MIN_GB, DEVICE_KINDS, Device, custom_device, get_device
from estimator.options.losses import LOSSES
from estimator.options.methods import ATTENTIONS, METHODS, SHARDING_LABELS, SHARDINGS
from estimator.options.optimizers import OPTIMIZER_LABELS, OPTIMIZERS
from estimator.options.precisions import PRECISION_IDS, PRECISION_LABELS
from estimator.options.quantization import QUANT_MODE_IDS, QUANT_MODES
from estimator.options.stacks import DEFAULT_STACK, MLX_STACK, STACK_IDS, STACKS
from estimator.options.trainers import (
    DEFAULT_PROMPT_LEN,
    GENERATION_IDS,
    GENERATION_MODES,
    GRPO_MAX_COMPLETION_LENGTH,
    GRPO_NUM_GENERATIONS,
    MAX_GENERATIONS,
    MIN_GENERATIONS,
    TRAINER_IDS,
    TRAINERS,
    TRL_VERSION,
    VLLM_GPU_MEMORY_UTILIZATION,
)
from estimator.speed.run import MAX_EPOCHS, MAX_EXAMPLES, MAX_PRICE, MAX_TOKENS
from ui.grids import SEED_SIZES_B, VARIANT_OPTIONS, size_and_preset_options, size_label

BY_SIZE = "by-size"
UPLOAD = "upload"
CUSTOM = "custom"


def device_for(choice: str, capacity: float, kind: str) -> Device:
    """The Device picker's device: a catalog entry, or with CUSTOM one of the given capacity (GB) and kind."""
    return custom_device(float(capacity), str(kind)) if choice == CUSTOM else get_device(str(choice))


def setup_default(cls: type, name: str) -> Any:
    """A frozen dataclass field's default (TrainingSetup, TrainerSetup): the estimator's own baseline."""
    field = next(f for f in fields(cls) if f.name == name)
    return field.default if field.default is not MISSING else field.default_factory()  # type: ignore[misc]


def _default(key: str) -> Any:
    """A setting's link default: its dataclass field's default (the settings table, estimator/job/settings.py, names
    the field behind the key), as the widget shows it."""
    setting = BY_KEY[key][0]
    owner = TrainingSetup if setting.owner == "setup" else TrainerSetup
    return widget_value(key, {setting.name: setup_default(owner, setting.name)}, None)


def _powers_of_two(low: int, high: int) -> tuple[int, ...]:
    return tuple(2**k for k in range(math.ceil(math.log2(low)), int(math.log2(high)) + 1))


@dataclass(frozen=True)
class Param:
    """One link parameter and the widget bound to it (its key is both)."""

    key: str
    label: str
    # selectbox, segmented, multiselect, slider, select_slider, number, toggle, text; or list: several values a page
    # keeps itself (no widget: the Compare page's pins, read and noted by ui/pins.py)
    widget: str
    default: Any
    choices: tuple[Any, ...] = ()  # the options (selectbox, segmented, multiselect, select_slider)
    low: float | None = None  # slider / number limits (inclusive)
    high: float | None = None
    integer: bool = False
    step: float | None = None
    fmt: str | None = None  # number_input format
    max_chars: int | None = None  # text
    help: str | None = None  # marked N_(): translated when drawn (help_text)
    help_items: tuple[tuple[str, str], ...] = ()  # (option id, its description, marked N_): listed after help
    help_args: tuple[tuple[str, object], ...] = ()  # values for help's {placeholders}
    group: str = "sidebar"  # sidebar (every page), trainer (the trainer box, every page too) or page (one page's own)
    source: str = ""  # where the default and limits come from

    def accepts(self, raw: str) -> bool:
        """Would the bound widget take this link value? (Streamlit drops a refused value silently; we say so.)
        Choice widgets match the option as Streamlit writes it into the address (str(option))."""
        if self.widget == "toggle":
            return raw.lower() in ("true", "false")
        if self.widget == "text":
            return 0 < len(raw) <= (self.max_chars or 200)
        if self.widget == "list":  # the page reads each value and notes what it cannot (ui/pins.py decode_pin)
            return 0 < len(raw) <= (self.max_chars or 200) and "." in raw
        if self.choices:
            return raw in {url_value(c) for c in self.choices}
        try:
            value = float(raw)
        except ValueError:
            return False
        if not math.isfinite(value) or not self.low <= value <= self.high:  # type: ignore[operator]
            return False
        return not self.integer or value == int(value)

    @property
    def default_text(self) -> str:
        """The default as the address writes it (7, not 7.0; false, not False)."""
        return url_value(self.default)


def url_value(value: object) -> str:
    """A widget value as its bound parameter shows it in the address: true/false, 7 (not 7.0), 0.5, qlora."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _rows() -> tuple[Param, ...]:
    setup_src = "estimator.job.setup.TrainingSetup"
    trainer_src = f"estimator.options.trainers ({TRL_VERSION} GRPOConfig defaults)"
    return (
        # --- the shared sidebar, in the README's order ---
        Param("model", N_("Model"), "selectbox", "llama-3.1-8b",
              tuple(p.id for p in list_presets()) + (BY_SIZE, UPLOAD),
              help=N_("A preset (a real config.json), 'by-size' (a generic decoder of the size below), 'upload' "
                      "(your own config.json), or the Hugging Face model id typed below."),
              source="estimator.list_presets (the app's default model)"),
        Param("size", N_("Exact size (billions)"), "number", 7.0, low=MIN_SIZE_B, high=MAX_SIZE_B, step=1.0, fmt="%g",
              help=N_("Any size from {low} to {high} billion parameters (13, 34, 72, 405…)."),
              help_args=(("low", f"{MIN_SIZE_B:g}"), ("high", f"{MAX_SIZE_B:g}")),
              source="estimator.models.presets MIN_SIZE_B, MAX_SIZE_B (generic_spec)"),
        Param("stack", N_("Training stack"), "selectbox", AUTO, (AUTO, *STACK_IDS),
              help=N_("The framework you train with: its defaults fill every setting left on 'auto' (checkpointing, "
                      "loss, optimizer, adapter dtypes, QLoRA preparation, LoRA layers). auto = MLX-LM on an Apple "
                      "device, TRL elsewhere."),
              help_items=tuple((k, s.label) for k, s in STACKS.items()),
              source=f"estimator.options.stacks STACK_IDS (auto: {MLX_STACK} on a unified device, {DEFAULT_STACK} "
                     "otherwise)"),
        Param("method", N_("Method"), "segmented", _default("method"), METHODS,
              help=N_("full = every weight trains; lora = frozen 16-bit base + small adapters; qlora = frozen 4-bit "
                      "base + adapters."), source=setup_src),
        Param("precision", N_("Precision"), "selectbox", _default("precision"), PRECISION_IDS,
              help_items=tuple(PRECISION_LABELS.items()), source=setup_src),
        Param("optimizer", N_("Optimizer"), "selectbox", AUTO, (AUTO, *OPTIMIZERS),
              help=N_("auto = the stack's default"), help_items=tuple(OPTIMIZER_LABELS.items()),
              source="estimator.options.optimizers.OPTIMIZERS (auto: the stack's)"),
        Param("batch", N_("Batch size (per GPU)"), "slider", _default("batch"), low=1, high=MAX_BATCH, integer=True,
              step=1, source=f"{setup_src} (batch, MAX_BATCH)"),
        Param("max_len", N_("Exact max length"), "number", _default("max_len"), low=1, high=MAX_SEQ_LEN, integer=True,
              step=128, source=f"{setup_src} (seq_len, MAX_SEQ_LEN)"),
        Param("ckpt", N_("Gradient checkpointing"), "segmented", AUTO, CKPT_CHOICES,
              help=N_("auto = what the training stack does; true = keep only each layer's input and recompute the "
                      "rest in backward (far less activation memory, 20–30 % slower); offload = the same with those "
                      "inputs in CPU RAM (transformers' offloaded checkpointing, Unsloth's default)."),
              source=f"{setup_src} (grad_ckpt, offload_activations; auto: the stack's)"),
        Param("loss", N_("Loss"), "selectbox", AUTO, (AUTO, *LOSSES),
              help=N_("auto = the stack's loss"), help_items=tuple((k, o.summary) for k, o in LOSSES.items()),
              source="estimator.options.losses.LOSSES (auto: the stack's)"),
        Param("attn", N_("Attention"), "selectbox", _default("attn"), ATTENTIONS,
              help=N_("sdpa = PyTorch SDPA / flash (no s² memory); eager = materialised scores."), source=setup_src),
        Param("rank", N_("LoRA rank"), "select_slider", _default("rank"), _powers_of_two(1, MAX_RANK),
              source=f"{setup_src} (lora_rank, MAX_RANK; powers of two)"),
        Param("targets", N_("LoRA targets"), "text", _default("targets"), max_chars=200,
              source=f"{setup_src} (lora_targets)"),
        Param("lora_layers", N_("LoRA layers (the last N)"), "number", 0, low=0, high=MAX_LORA_LAYERS, integer=True,
              step=1, help=N_("Adapters on the last N decoder layers only (mlx-lm's --num-layers, PEFT's "
                              "layers_to_transform); on MLX-LM, full fine-tuning trains those N. 0 = the stack's: "
                              "every layer, 16 on MLX-LM."),
              source=f"{setup_src} (lora_layers, MAX_LORA_LAYERS; 0: the stack's)"),
        Param("dora", "DoRA", "toggle", _default("dora"),
              help=N_("Weight-decomposed LoRA (mlx-lm fine_tune_type 'dora'); modelled for MLX-LM."),
              source=f"{setup_src} (dora)"),
        Param("quant", N_("QLoRA quantisation"), "selectbox", AUTO, (AUTO, *QUANT_MODE_IDS),
              help=N_("How the QLoRA base is quantised: auto = the stack's (bitsandbytes NF4 on the PyTorch stacks, "
                      "MLX affine 4-bit on MLX-LM)."),
              help_items=tuple((k, q.label) for k, q in QUANT_MODES.items()),
              source="estimator.options.quantization.QUANT_MODES (auto: the stack's quant_mode)"),
        Param("gpus", N_("GPUs"), "number", _default("gpus"), low=1, high=MAX_GPUS, integer=True, step=1,
              source=f"{setup_src} (gpus, MAX_GPUS)"),
        Param("sharding", N_("Sharding"), "selectbox", _default("sharding"), SHARDINGS,
              help_items=tuple(SHARDING_LABELS.items()), source=setup_src),
        Param("offload_params", N_("Parameters in CPU RAM (ZeRO-3 offload)"), "toggle", _default("offload_params"),
              help=N_("DeepSpeed ZeRO-3 offload_param: every parameter lives in CPU RAM and the GPU gathers one layer "
                      "at a time (slower steps; the host needs the whole model). Needs sharding zero3, on one GPU or "
                      "more."), source=f"{setup_src} (offload_params)"),
        Param("accum", N_("Gradient accumulation steps"), "number", _default("accum"), low=1, high=MAX_GRAD_ACCUM,
              integer=True, step=1,
              help=N_("Micro-batches per optimizer step: above 1 the gradients stay alive through the next forward "
                      "(GRPO: steps per generation)."), source=f"{setup_src} (grad_accum, MAX_GRAD_ACCUM)"),
        Param("opt_offload", N_("Optimizer state in CPU RAM"), "toggle", _default("opt_offload"),
              help=N_("ZeRO-Offload / FSDP CPU offload: the optimizer state and its step live in CPU RAM (one GPU, "
                      "or with ZeRO/FSDP sharding)."), source=f"{setup_src} (offload_optimizer)"),
        Param("compile", N_("torch.compile (torchtune)"), "toggle", _default("compile"),
              help=N_("torchtune compile=True: its compiled cross-entropy keeps 16-bit logits. torchtune stack only."),
              source=f"{setup_src} (compile)"),
        Param("in_bwd", N_("Optimizer step in backward (torchtune)"), "toggle", _default("in_bwd"),
              help=N_("torchtune optimizer_in_bwd=True: each gradient is applied and freed during backward. torchtune "
                      "stack, full fine-tuning, no gradient accumulation."), source=f"{setup_src} (optimizer_in_bwd)"),
        Param("dq", N_("NF4 double quantisation"), "segmented", AUTO, (AUTO, "true", "false"),
              help=N_("QLoRA: also quantise the 4-bit weights' scales (bnb_4bit_use_double_quant). auto = the "
                      "stack's."), source=f"{setup_src} (nf4_double_quant; auto: the stack's)"),
        Param("device", N_("Device"), "selectbox", "rtx-4090", tuple(d.id for d in CATALOG) + (CUSTOM,),
              help=N_("Unified-memory laptops can give about 75 % of RAM to training; a PC's limit is its graphics "
                      "card's own memory, not its RAM."), source="estimator.options.devices.CATALOG (the app's default device)"),
        Param("capacity", N_("Custom capacity (GB)"), "number", 24.0, low=CUSTOM_MIN_GB, high=CUSTOM_MAX_GB, step=1.0,
              source="estimator.options.devices CUSTOM_MIN_GB, CUSTOM_MAX_GB (custom_device)"),
        Param("kind", N_("Custom memory kind"), "segmented", DEVICE_KINDS[0], DEVICE_KINDS,
              help=N_("unified = shared RAM (about 75 % usable); discrete = a GPU's own memory."),
              source="estimator.options.devices.DEVICE_KINDS"),
        Param("host_ram", N_("Machine RAM (GB)"), "number", 0.0, low=0.0, high=CUSTOM_MAX_GB, step=8.0, fmt="%g",
              help=N_("The computer's RAM in GB, for the host verdict: the CPU RAM the setup needs (the training "
                      "processes, loading the model, anything offloaded). 0 = not given. On a Mac the device's RAM is "
                      "the machine's RAM: the GPU side and the host side add up against it."),
              source="estimator.memory.host (host_verdict); limits: estimator.options.devices CUSTOM_MAX_GB"),
        Param("rule", N_("Rule of thumb"), "toggle", False,
              help=N_("The rule of thumb: {rule}. Off = the detailed, architecture-aware estimate."),
              help_args=(("rule", rule_sentence()),), source="estimator.memory.rule"),
        Param("present", N_("Presentation mode"), "toggle", False,
              help=N_("Larger verdict and fonts for meetings; still linkable."), source="the app"),
        Param("images", N_("Image tokens per example"), "number", _default("images"), low=0, high=MAX_SEQ_LEN,
              integer=True, step=256,
              help=N_("For training on images: the placeholder tokens each example's images add to the language "
                      "model's sequence (Gemma 3: 256 per image). 0 = text only."),
              source=f"{setup_src} (image_tokens, MAX_SEQ_LEN)"),
        Param("tower", N_("Train the vision tower"), "toggle", _default("tower"),
              help=N_("Multimodal models: train the vision tower and projector too (full: all their weights; LoRA: "
                      "adapters on their linear layers). Off = frozen; only the language model trains."),
              source=f"{setup_src} (train_tower)"),
        Param("versions", N_("Your releases"), "text", AUTO, max_chars=400,
              help=N_("The releases installed, as PKG==VERSION separated by commas (auto = the newest modelled)."),
              source="ui/versions_box.py (a pasted pip freeze or the pickers; estimator.options.versions "
                     "STACK_PACKAGES, PACKAGES)"),
        # --- the trainer box (ui/trainer_inputs.py), in every page's sidebar ---
        Param("trainer", N_("Trainer"), "selectbox", _default("trainer"), TRAINER_IDS,
              help_items=tuple((k, o.label) for k, o in TRAINERS.items()), group="trainer",
              source="estimator.job.trainer.TrainerSetup"),
        Param("gens", N_("Generations per prompt"), "slider", GRPO_NUM_GENERATIONS, low=MIN_GENERATIONS,
              high=MAX_GENERATIONS, integer=True, step=1,
              help=N_("GRPO num_generations; TRL needs batch × GPUs × accumulation divisible by it."),
              group="trainer",
              source=f"{trainer_src}: num_generations, MIN_GENERATIONS, MAX_GENERATIONS"),
        Param("prompt_len", N_("Prompt length (tokens)"), "select_slider", DEFAULT_PROMPT_LEN,
              _powers_of_two(16, MAX_SEQ_LEN // 2),
              help=N_("GRPOConfig has no prompt limit: the dataset's longest prompt."), group="trainer",
              source=f"{trainer_src}: DEFAULT_PROMPT_LEN; prompt + completion ≤ MAX_SEQ_LEN"),
        Param("completion_len", N_("Max completion length (tokens)"), "select_slider", GRPO_MAX_COMPLETION_LENGTH,
              _powers_of_two(16, MAX_SEQ_LEN // 2), group="trainer",
              source=f"{trainer_src}: max_completion_length; prompt + completion ≤ MAX_SEQ_LEN"),
        Param("gen", N_("Generation"), "segmented", TrainerSetup("grpo").generation_mode, GENERATION_IDS,
              help_items=tuple((k, m.label) for k, m in GENERATION_MODES.items()), group="trainer",
              source="estimator.options.trainers.GENERATION_MODES (TrainerSetup.generation_mode)"),
        Param("vllm_util", "vllm_gpu_memory_utilization", "select_slider", VLLM_GPU_MEMORY_UTILIZATION,
              tuple(round(0.05 * k, 2) for k in range(1, 20)),
              help=N_("The share of the device vLLM reserves in colocate mode."), group="trainer",
              source=f"{trainer_src}: vllm_gpu_memory_utilization, between 0 and 1 exclusive"),
        Param("beta", N_("Beta"), "text", AUTO, max_chars=20, group="trainer",
              source="estimator.job.trainer TrainerSetup.beta (auto: the trainer's default), MAX_BETA"),
        Param("precompute_ref", N_("Precompute reference log-probs"), "toggle", _default("precompute_ref"),
              help=N_("DPO/KTO precompute_ref_log_probs=True: no reference during training."), group="trainer",
              source="estimator.job.trainer.TrainerSetup"),
        Param("vllm_sleep", N_("vLLM sleep mode"), "toggle", _default("vllm_sleep"),
              help=N_("vllm_enable_sleep_mode=True: vLLM discards its weights and KV cache after each generation "
                      "(sleep level 2), so the training step does not share the device with them."), group="trainer",
              source="estimator.job.trainer.TrainerSetup (GRPOConfig vllm_enable_sleep_mode)"),
        # --- one page's own controls ---
        Param("methods", N_("Methods"), "multiselect", METHODS, METHODS, group="page",
              help=N_("full = every weight trains; lora = frozen 16-bit base + adapters; qlora = frozen 4-bit base + "
                      "adapters."), source="estimator.options.methods.METHODS (compare, fits)"),
        Param("variants", N_("Also compare with precision or optimizer"), "multiselect", (), VARIANT_OPTIONS,
              help=N_("Adds a bar per chosen method with this precision or optimizer instead of the sidebar's."),
              group="page", source="estimator PRECISION_IDS, OPTIMIZERS (compare)"),
        Param("models", N_("Models"), "multiselect", tuple(size_label(s) for s in SEED_SIZES_B),
              tuple(size_and_preset_options()), group="page",
              help=N_("Common sizes (generic Llama-style decoders with that many parameters) and the presets (real "
                      "config.json files)."), source="estimator presets and the seed's sizes (fits)"),
        Param("maxgpus", N_("Up to this many GPUs"), "select_slider", 64, (8, 16, 32, 64), group="page",
              source="scale out's search range (estimator.job.setup.MAX_GPUS bounds it)"),
        Param("pins", N_("Pinned setups"), "list", (), max_chars=600, group="page",
              help=N_("Up to four setups pinned on the Compare page, each one value: its settings as key.value "
                      "pairs joined by ~ (ui/pins.py)."),
              source="ui/pins.py (compare: MAX_PINS, MAX_PIN_CHARS)"),
        Param("pernode", N_("GPUs per node"), "segmented", 1, (1, 2, 4, 8), group="page",
              help=N_("1 = any GPU count; 8 = the GPUs come in servers of 8, so counts are whole nodes (8, 16, "
                      "24…)."),
              source="scale out: GPUs per server"),
        # a run's time and cost (estimator/speed/run.py's limits): drawn in the calculator's sidebar box
        # (ui/time_view.py) and above Compare's pins (ui/pins_view.py: tokens, epochs, price); 0 = not given
        Param("tokens", N_("Dataset tokens"), "number", 0, low=0, high=MAX_TOKENS, integer=True, step=1_000_000,
              group="page",
              help=N_("The tokens the run trains on per epoch (packed into full rows). 0 = not given; or give the "
                      "examples below, not both."),
              source="estimator.speed.run DatasetSize.tokens, MAX_TOKENS (calculator, compare; the CLI's --tokens)"),
        Param("examples", N_("Dataset examples"), "number", 0, low=0, high=MAX_EXAMPLES, integer=True, step=1000,
              group="page", help=N_("The examples per epoch, each a row of the max length (or of the typical length "
                                    "below). 0 = not given."),
              source="estimator.speed.run DatasetSize.examples, MAX_EXAMPLES"),
        Param("typical_len", N_("Typical example length (tokens)"), "number", 0, low=0, high=MAX_SEQ_LEN,
              integer=True, step=64, group="page",
              help=N_("With examples: the tokens of a typical example (dynamic padding or packing). 0 = each "
                      "example padded to the max length."),
              source="estimator.speed.run DatasetSize.typical_len, MAX_SEQ_LEN"),
        Param("epochs", N_("Epochs"), "number", 1.0, low=0.01, high=MAX_EPOCHS, step=1.0, fmt="%g", group="page",
              source="estimator.speed.run DatasetSize.epochs, MAX_EPOCHS (calculator, compare; the CLI's --epochs)"),
        Param("price", N_("Price per GPU-hour"), "number", 0.0, low=0.0, high=MAX_PRICE, step=0.5, fmt="%g",
              group="page",
              help=N_("What one GPU-hour costs you, in any currency (no price list is built in). 0 = not given."),
              source="estimator.speed.run run_cost, MAX_PRICE (calculator, compare; the CLI's --price-per-gpu-hour)"),
        Param("tflops", N_("Custom device TFLOPS (dense 16-bit)"), "number", 0.0, low=0.0, high=CUSTOM_MAX_TFLOPS,
              step=10.0, fmt="%g", group="page",
              help=N_("A custom device's dense bf16/fp16 tensor TFLOPS (the datasheet's figure without sparsity), "
                      "with its memory bandwidth: without them its time is unknown. 0 = not given."),
              source="estimator.options.compute custom_compute, CUSTOM_MAX_TFLOPS"),
        Param("bandwidth", N_("Custom device memory bandwidth (GB/s)"), "number", 0.0, low=0.0,
              high=CUSTOM_MAX_GBPS, step=100.0, fmt="%g", group="page",
              help=N_("A custom device's memory bandwidth in GB/s. 0 = not given."),
              source="estimator.options.compute custom_compute, CUSTOM_MAX_GBPS"),
    )


TABLE: dict[str, Param] = {p.key: p for p in _rows()}
SIDEBAR_PARAMS: tuple[str, ...] = tuple(k for k, p in TABLE.items() if p.group == "sidebar")
TRAINER_PARAMS: tuple[str, ...] = tuple(k for k, p in TABLE.items() if p.group == "trainer")
PAGE_ONLY_PARAMS: tuple[str, ...] = tuple(k for k, p in TABLE.items() if p.group == "page")


def typed(key: str, value: Any) -> Any:
    """A widget's value in its row's type (a toggle's bool, a whole number's int, a choice as its option's type):
    what the settings take, whatever Session State held."""
    p = TABLE[key]
    if p.widget == "toggle":
        return bool(value)
    if p.integer or (p.choices and all(isinstance(c, int) and not isinstance(c, bool) for c in p.choices)):
        return int(value)
    if p.choices and all(isinstance(c, str) for c in p.choices):
        return str(value)
    return value


def help_text(p: Param) -> str:
    """A row's help in the page's language: its sentence, then its options' descriptions ('sdpa: …; eager: …')."""
    args = {k: _(v) if isinstance(v, Text) else v for k, v in p.help_args}  # a Text (the rule) in the page's language
    sentence = _(p.help).format(**args) if p.help else ""
    items = "; ".join(f"{k}: {_(v)}" for k, v in p.help_items)
    if sentence and items:
        return sentence + (" " if sentence.endswith(".") else "; ") + items
    return sentence or items


def widget(key: str, container: Any = None, default: Any = None, **overrides: Any) -> Any:
    """Draw the widget of table row `key` in `container` (default: the main area), bound to the address, with
    its label, default, limits and help from the table; `default` replaces the table's default (batch and rank:
    the run's, estimator.job.stack.default_settings); `overrides` pass dynamic arguments (disabled, on_change,
    help that depends on the model, options that include a Hub id…) through to Streamlit."""
    p = TABLE[key]
    if default is not None:
        p = replace(p, default=default)
    box = container if container is not None else st
    common: dict[str, Any] = {"key": p.key, "bind": "query-params"}
    help_ = help_text(p)
    if help_:
        common["help"] = help_
    label = _(p.label)
    if p.widget == "selectbox":
        options = list(overrides.pop("options", p.choices))
        return box.selectbox(label, options, index=options.index(p.default), **common | overrides)
    if p.widget == "segmented":
        return box.segmented_control(label, list(p.choices), default=p.default, required=True,
                                     **common | overrides)
    if p.widget == "multiselect":
        # the empty box's prompt in the page's language (Streamlit's own "Choose options" is English only)
        return box.multiselect(label, list(p.choices), default=list(p.default), placeholder=_("Choose options"),
                               **common | overrides)
    if p.widget == "select_slider":
        return box.select_slider(label, options=list(p.choices), value=p.default, **common | overrides)
    if p.widget == "slider":
        return box.slider(label, int(p.low), int(p.high), p.default, step=int(p.step or 1),  # type: ignore[arg-type]
                          **common | overrides)
    if p.widget == "number":
        cast = int if p.integer else float
        extra = {"format": p.fmt} if p.fmt else {}
        return box.number_input(label, min_value=cast(p.low), max_value=cast(p.high), value=cast(p.default),
                                step=cast(p.step or 1), **common | extra | overrides)
    if p.widget == "toggle":
        return box.toggle(label, value=p.default, **common | overrides)
    if p.widget == "text":
        return box.text_input(label, value=p.default, max_chars=p.max_chars, **common | overrides)
    raise ValueError(f"unknown widget kind {p.widget!r}")
