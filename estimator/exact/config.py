"""What the exact trace accepts: the config dict it builds the model from (a preset's, a file's or the Hub's
config.json, checked and bounded) and the setup the tracer runs (`tracer_setup`), with the job's cache key."""

from __future__ import annotations

import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ..i18n import N_, Text, error_message
from ..job.setup import ALL_LINEAR
from ..options.stacks import get_stack

if TYPE_CHECKING:
    from typing import Any

    from ..job.setup import TrainingSetup


# Fake tracing costs CPU time per op, not memory per byte: ~10–15 s per decoder layer on a slow CPU. Deeper
# configs are refused before a worker is started (the largest released decoders have ~130 layers).
MAX_TRACE_LAYERS = 160
MAX_TRACE_DIM = 1 << 20
MAX_CONFIG_CHARS = 1_000_000
TRACED_OPTIMIZERS = ("adamw",)  # the tracer's optimizer: torch AdamW(fused=True), the HF Trainer default


class ExactUnavailable(RuntimeError):
    """No interpreter with the optional install: the message says what to install."""


class ExactRefused(ValueError):
    """This model or setup cannot be traced: the message (one line) says precisely why."""


# --------------------------------------------------------------------------------------------------
# Inputs: the config dict and the tracer's setup dict
# --------------------------------------------------------------------------------------------------
def preset_config(preset_id: str) -> dict[str, Any]:
    """The config.json shipped with a preset (the presets folder, one JSON per id)."""
    from ..models.presets import preset_ids

    if preset_id not in preset_ids():
        raise ExactRefused(Text(N_("unknown preset {preset}"), preset=repr(preset_id[:60])))
    text = resources.files("estimator.models.presets").joinpath(f"{preset_id}.json").read_text(encoding="utf-8")
    return json.loads(text)


def hub_config(hub: Any) -> dict[str, Any]:
    """The config.json of a Hub model the estimator has just read (estimator.hub.fetch_model cached it locally)."""
    return _hub_config(hub.repo_id, hub.revision, hub.model_id, local_only=False)


def hub_config_cached(model: str) -> dict[str, Any]:
    """The config.json of a Hub model id the fast estimator refused: huggingface_hub downloaded it into the local
    Hub cache before estimator.hub.fetch_model found it unusable, so it is read from there (never fetched again:
    a failed download stays a failure)."""
    from ..models.hub import HubError, model_id, parse_model_id

    try:
        repo, revision = parse_model_id(model)
    except HubError as exc:
        raise ExactRefused(error_message(exc)) from None
    return _hub_config(repo, revision, model_id(repo, revision), local_only=True)


def _hub_config(repo: str, revision: str | None, name: str, local_only: bool) -> dict[str, Any]:
    try:
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(repo, "config.json", revision=revision, local_files_only=True)
        except Exception:  # noqa: BLE001 - not in the local cache (e.g. another HF_HUB_CACHE): ask the Hub
            if local_only:
                raise
            path = hf_hub_download(repo, "config.json", revision=revision,
                                   endpoint=(os.environ.get("HF_ENDPOINT") or "").strip().rstrip("/") or None,
                                   token=os.environ.get("HF_TOKEN") or None)
        data = Path(path).read_bytes()
    except Exception as exc:  # noqa: BLE001 - any Hub failure is one line
        raise ExactRefused(Text(N_("the config.json of {model} could not be read again ({error})"), model=name,
                                error=type(exc).__name__)) from None
    if len(data) > MAX_CONFIG_CHARS:
        raise ExactRefused(Text(N_("the config is larger than 1 MB; a config.json is a few kB")))
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ExactRefused(Text(N_("the config.json of {model} is not JSON"), model=name)) from None


def check_config(cfg: Any) -> dict[str, Any]:
    """A JSON-clean copy of a config dict that may be traced, or ExactRefused (size guard: layers, widths)."""
    if not isinstance(cfg, dict):
        raise ExactRefused(Text(N_("the config must be a JSON object (a Hugging Face config.json)")))
    try:
        text = json.dumps(cfg, sort_keys=True)
    except (TypeError, ValueError):
        raise ExactRefused(Text(N_("the config holds values that are not JSON"))) from None
    if len(text) > MAX_CONFIG_CHARS:
        raise ExactRefused(Text(N_("the config is larger than 1 MB; a config.json is a few kB")))
    clean = json.loads(text)
    mt = clean.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise ExactRefused(Text(N_("the config has no model_type, so transformers cannot build it")))
    # Custom code is never run (transformers' own class for model_type builds the model), no quantisation is
    # applied on the CPU, and private keys ("_name_or_path", "_attn_implementation") never steer the build.
    for key in [k for k in clean if k in ("auto_map", "quantization_config", "trust_remote_code") or k.startswith("_")]:
        clean.pop(key)
    text_cfg = clean.get("text_config") if isinstance(clean.get("text_config"), dict) else {}
    for scope in (clean, text_cfg):
        layers = scope.get("num_hidden_layers", scope.get("n_layer", scope.get("num_layers")))
        if isinstance(layers, int) and not isinstance(layers, bool) and layers > MAX_TRACE_LAYERS:
            raise ExactRefused(Text(N_("{layers} layers are more than the exact trace takes ({limit}): tracing "
                                       "costs ~10 s per layer, so this would run for hours"), layers=layers,
                                    limit=str(MAX_TRACE_LAYERS)))
        for key in ("hidden_size", "intermediate_size", "vocab_size", "num_attention_heads"):
            val = scope.get(key)
            if isinstance(val, int) and not isinstance(val, bool) and not 0 < val <= MAX_TRACE_DIM:
                raise ExactRefused(Text(N_("{key} = {value} is outside what a real model has (1 … {limit})"),
                                        key=key, value=val, limit=MAX_TRACE_DIM))
    return clean


def tracer_setup(setup: TrainingSetup) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The tracer's setup dict for `setup`, and notes on what is traced differently. ExactRefused when the
    setup has something a one-device CPU trace cannot represent."""
    if setup.stack and get_stack(setup.stack).framework != "torch":
        raise ExactRefused(Text(N_("the exact trace runs PyTorch's model code; the MLX-LM stack is measured against real "
                                   "mlx-lm steps instead (calibration/mlx_trace.py, How it works: accuracy)")))
    if setup.lora_layers or setup.dora or setup.backend != "cuda":
        raise ExactRefused(Text(N_("the exact trace counts a CUDA run with adapters on every layer; --lora-layers, DoRA "
                                   "and the Apple/CPU backends are not traced")))
    if setup.gpus > 1 or setup.sharding != "none":
        raise ExactRefused(Text(N_("the exact trace runs one device without sharding; set GPUs to 1 (ZeRO/FSDP are "
                                   "not traced)")))
    if setup.offload_optimizer:
        raise ExactRefused(Text(N_("optimizer offloading (DeepSpeed/FSDP) is not traced; turn it off")))
    if setup.grad_accum > 1:
        raise ExactRefused(Text(N_("gradient accumulation is not traced (the tracer frees gradients every step); set it "
                                   "to 1")))
    if setup.image_tokens:
        raise ExactRefused(Text(N_("image inputs are not traced (a fake trace through a vision tower ran for over 20 "
                                   "minutes on two CPU cores); set image tokens to 0 to trace the language model on "
                                   "text")))
    notes: list[str] = []
    precision = setup.precision
    if precision == "fp16":
        precision = "bf16"  # same byte counts; CPU autocast is bf16 only
        notes.append(Text(N_("fp16 is traced as bf16 (the same bytes per value; CPU autocast only has bf16).")))
    method = "full" if setup.method == "full" else "lora"
    if setup.method == "qlora":
        notes.append(Text(N_("QLoRA's 4-bit kernels need CUDA: the 16-bit equivalent was traced, then its 16-bit "
                             "linear weights were replaced by bitsandbytes' NF4 storage and its dequantisation "
                             "buffer added.")))
        if setup.qlora_prep != "none":
            notes.append(Text(N_("prepare_model_for_kbit_training's fp32 upcast is not traced (16-bit embeddings "
                                 "and norms).")))
    if setup.method != "full" and setup.adapter_dtype != "fp32":
        notes.append(Text(N_("Adapters are traced in fp32 (PEFT's default); this stack keeps them in bf16.")))
    if setup.optimizer not in TRACED_OPTIMIZERS:
        notes.append(Text(N_("The optimizer {optimizer} runs CUDA or other kernels the trace does not have: AdamW "
                             "was traced and its state replaced by the estimator's figure for this optimizer."),
                          optimizer=setup.optimizer))
    if getattr(setup, "compile", False):
        notes.append(Text(N_("torch.compile is not traced: the step runs eagerly (a compiled loss may keep less).")))
    if getattr(setup, "optimizer_in_bwd", False):
        notes.append(Text(N_("The optimizer step is traced after backward, not inside it (optimizer_in_bwd): "
                             "gradients of all parameters exist at once in the trace.")))
    targets: Any = ALL_LINEAR if setup.lora_targets == (ALL_LINEAR,) else list(setup.lora_targets)
    out: dict[str, Any] = {
        "method": method, "precision": precision, "optimizer": "adamw", "batch": setup.batch,
        "seq_len": setup.seq_len, "grad_ckpt": setup.grad_ckpt, "attention": setup.attention,
        "loss": setup.loss, "max_grad_norm": setup.max_grad_norm,
    }
    if method == "lora":
        out.update(lora_rank=setup.lora_rank, lora_targets=targets)
    if setup.offload_activations:
        out["offload_activations"] = True
    return out, tuple(notes)


def job_key(cfg: dict[str, Any], tsetup: dict[str, Any], quantizable: bool) -> str:
    text = json.dumps({"config": cfg, "setup": tsetup, "q": quantizable}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]
