"""Trace the tensor-level memory peak of real Hugging Face training steps: the tracer behind the exact trace
(exact/worker.py runs it for the app's and the CLI's --exact) and the accuracy fixtures (`python -m
calibration.trace`, the developer tool's command around `trace_case`).

The model is a real ``AutoModelForCausalLM`` built from a config dict, optionally wrapped by PEFT LoRA, and
trained for two steps exactly as the HF Trainer would (AdamW fused, zero_grad(set_to_none=True), autocast for
mixed precision, non-reentrant gradient checkpointing).  The steps run under ``FakeTensorMode`` (shapes and
dtypes only, no real memory) and ``torch.distributed._tools.mem_tracker.MemTracker`` records every tensor
storage that is alive, by category.  The reported peak is the steady-state (second step) high-water mark of
the sum of all live storages -- what ``torch.cuda.max_memory_allocated`` would show without the CUDA context,
cuBLAS workspaces and caching-allocator slack.

Needs torch, transformers and peft (requirements-exact.txt, or the calibration venv). A case dict's schema is in
calibration/cases.py.  Setup keys "loss" ("standard" | "chunked": TRL 1.16 SFT's fused chunked LM head | "fused":
Liger FLCE) and "offload_activations" (transformers' offloaded checkpointing) are implemented in exact/losses.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import contextlib  # noqa: E402
import copy  # noqa: E402
import gc  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import weakref  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from torch.autograd.graph import _get_grad_fn_or_grad_acc  # noqa: E402
from torch.distributed._tools.mem_tracker import (  # noqa: E402
    _TOTAL_KEY,
    MemTracker,
    _MemRefType,
)
from torch.distributed._tools.mod_tracker import ModTracker  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from estimator.models.spec import TOWER_MODULES  # noqa: E402

warnings.filterwarnings("ignore")
# FakeTensorMode logs a traceback for every op whose meta kernel refuses the inputs (e.g. fp32 grouped_mm);
# trace_case handles those failures itself.
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)

CATEGORY_NAMES = {
    _MemRefType.PARAM: "parameters",
    _MemRefType.BUFFER: "buffers",
    _MemRefType.GRAD: "gradients",
    _MemRefType.ACT: "activations",
    _MemRefType.TEMP: "temp",
    _MemRefType.OPT: "optimizer_states",
    _MemRefType.OTH: "other",
}

PRECISION_DTYPE = {"bf16": torch.bfloat16, "mixed": torch.float32, "fp32": torch.float32}


# --------------------------------------------------------------------------------------------------
# MemTracker subclass
# --------------------------------------------------------------------------------------------------
def _register_all_grads_hook(tensors: list[torch.Tensor], fn) -> None:
    """``register_multi_grad_hook(tensors, fn, mode="all")`` without the permanent reference cycle.

    The stock version keeps the tensors' grad_fn / AccumulateGrad nodes in the hook closure for good, while the
    hooks live on those nodes: a cycle through C++ that gc.collect() cannot break.  Here the nodes are dropped as
    soon as the first hook of a backward pass has computed how many hooks will fire.
    """
    state: dict[str, Any] = {"nodes": [_get_grad_fn_or_grad_acc(t) for t in tensors], "nb": None, "count": {}}

    def make(_idx: int):
        def inner(_grad: torch.Tensor) -> None:
            gid = torch._C._current_graph_task_id()
            cnt = state["count"].get(gid, 0)
            if cnt == 0:
                nodes = state["nodes"]
                if nodes is not None:
                    state["nb"] = sum(map(torch._C._will_engine_execute_node, nodes))
                    state["nodes"] = None  # break the cycle
            state["count"][gid] = cnt + 1
            if cnt + 1 == state["nb"]:
                del state["count"][gid]
                fn()

        return inner

    for i, t in enumerate(tensors):
        t.register_hook(make(i))


class _ModTracker(ModTracker):
    """ModTracker whose backward markers do not keep the previous step's tensors alive.

    The stock ``_fw_pre_hook`` uses ``register_multi_grad_hook(mode="all")`` on the grad-requiring inputs of every
    module; that hook's closure holds the inputs' grad_fn nodes for good, and the hook itself is stored on those
    nodes: a reference cycle through C++ that even gc.collect() cannot break.  With LoRA + non-reentrant gradient
    checkpointing the cycle reaches the checkpoint frame, which holds the layer inputs, so every step's embedding
    output (a grad-requiring leaf after ``enable_input_require_grads``) stayed alive for good: +2*h*T bytes per
    past step, an artifact of the tracker.  ``_register_all_grads_hook`` drops the nodes after first use.
    """

    last_bw_module: str | None = None  # the module whose backward (or recompute) started most recently

    def _get_append_fn(self, w_mod, name, is_bw):
        append = super()._get_append_fn(w_mod, name, is_bw)

        def fn(*args):
            if self.is_bw:
                self.last_bw_module = name
            return append(*args)

        return fn

    def _fw_pre_hook(self, mod, input):
        if torch._dynamo.eval_frame._is_in_optimized_module():
            return
        name = self._get_mod_name(mod)
        w_mod = weakref.ref(mod)
        self._get_append_fn(w_mod, name, False)()
        if self._user_pre_fw_hook is not None:
            self._user_pre_fw_hook(mod, input)
        args, _ = tree_flatten(input)
        tensors = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        if not self.is_bw:
            if tensors:
                _register_all_grads_hook(tensors, self._get_pop_fn(w_mod, name, True))
            else:
                self._post_bw_callbacks_to_enqueue.append(self._get_pop_fn(w_mod, name, True))


class Tracker(MemTracker):
    """MemTracker that

    * installs gradient hooks only on parameters that require grad (the stock tracker calls
      ``param.register_hook`` on every parameter and raises on frozen ones, e.g. a LoRA base model);
    * remembers where the global peak happened (phase + innermost module) and the per-phase peaks;
    * can restart the peak statistics between steps (steady-state measurement).
    """

    def __init__(self) -> None:
        super().__init__()
        self._mod_tracker = _ModTracker()
        self._reset_phase_stats()

    # -- frozen-parameter-safe registration ------------------------------------------------------
    def _track_module_params_and_buffers(self, module, install_grad_hooks: bool = True):
        param_mem, buffer_mem = super()._track_module_params_and_buffers(module, install_grad_hooks=False)
        if install_grad_hooks:
            for param in module.parameters():
                if not param.requires_grad or self._param_to_grad_hook_handles.get(param, None) is not None:
                    continue

                def _grad_hook(grad: torch.Tensor) -> None:
                    self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)

                def _post_acc(p: torch.Tensor) -> None:
                    if p.grad is not None:
                        self._update_and_maybe_create_winfos(p.grad, _MemRefType.GRAD)

                self._param_to_grad_hook_handles[param] = (
                    param.register_hook(_grad_hook),
                    param.register_post_accumulate_grad_hook(_post_acc),
                )
        return param_mem, buffer_mem

    # -- peak bookkeeping ---------------------------------------------------------------------------
    def _reset_phase_stats(self) -> None:
        self.peak_where: dict[str, Any] = {"phase": None, "region": None, "module": None, "op": None}
        self.phase_peaks: dict[str, int] = {}
        self.phase_peak_snaps: dict[str, dict[str, int]] = {}
        self.region_peaks: dict[str, int] = {}
        self.region_peak_snaps: dict[str, dict[str, int]] = {}

    phase_override: str | None = None  # set by the step driver around non-module work (gradient clipping)

    def current_phase(self) -> str:
        if self._in_opt:
            return "optimizer_step"
        if self._mod_tracker.is_bw:
            return "backward_recompute" if self._in_ac else "backward"
        if self.phase_override:
            return self.phase_override
        return "forward"

    def new_step(self) -> None:
        self._layers_seen = {"forward": False, "backward": False}
        self._mod_tracker.last_bw_module = None

    # Substring of a module name that marks a decoder layer: transformers names them "model.layers.N"
    # (calibration/litgpt_trace.py overrides it with LitGPT's "transformer.h.N").
    layer_pattern = ".layers."

    def current_region(self) -> str:
        """Where in the model the current op runs.

        forward:  "embed" (before the first decoder layer), "layers", "head" (final norm, lm_head, loss)
        backward: "head" (loss, lm_head, final norm: the start of backward), "layers", "embed" (after the last
                  decoder layer's backward: embeddings, end of backward)
        """
        mod = self._innermost_module()
        phase = "backward" if self._mod_tracker.is_bw else "forward"
        seen = getattr(self, "_layers_seen", None)
        if seen is None:
            self.new_step()
            seen = self._layers_seen
        if mod is not None and self.layer_pattern in mod + ".":
            seen[phase] = True
            return "layers"
        if phase == "forward":
            return "head" if seen["forward"] else "embed"
        return "embed" if seen["backward"] else "head"

    def _innermost_module(self) -> str | None:
        # In backward, ModTracker's parent set goes stale (HF modules get their inputs as kwargs, which the
        # module hooks do not see, so their "end of backward" markers only fire at the very end): use the module
        # whose backward started last instead.
        if self._mod_tracker.is_bw and self._mod_tracker.last_bw_module is not None:
            return self._mod_tracker.last_bw_module
        parents = [p for p in self._mod_tracker.parents if p != "Global"]
        if not parents:
            return None
        return max(parents, key=lambda s: (s.count("."), len(s)))

    _cur_op: str | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._cur_op = str(func)
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _update_peak_stats(self, peak_state) -> None:
        before = sum(self._peak_mem.values())
        super()._update_peak_stats(peak_state)
        total = _total(self._curr_mem_snap)
        phase = self.current_phase()
        if total > self.phase_peaks.get(phase, -1):
            self.phase_peaks[phase] = total
            self.phase_peak_snaps[phase] = categories(self._curr_mem_snap)
        if phase in ("forward", "backward"):
            key = f"{phase}:{self.current_region()}"
            if total > self.region_peaks.get(key, -1):
                self.region_peaks[key] = total
                self.region_peak_snaps[key] = categories(self._curr_mem_snap)
                self.region_peak_snaps[key]["op"] = self._cur_op
                self.region_peak_snaps[key]["module"] = self._innermost_module()
        if sum(self._peak_mem.values()) != before:
            self.peak_where = {
                "phase": phase,
                "region": self.current_region(),
                "module": self._innermost_module(),
                "op": self._cur_op,
            }

    def restart_peak(self) -> None:
        """Forget the peak so far; the new peak starts from the current live memory."""
        self._peak_mem_snap = copy.deepcopy(self._curr_mem_snap)
        self._peak_mem = {dev: snap[_TOTAL_KEY] for dev, snap in self._peak_mem_snap.items()}
        self._reset_phase_stats()

    def peak_total(self) -> int:
        return sum(self._peak_mem.values())


def _total(snap: dict) -> int:
    return sum(dev_snap.get(_TOTAL_KEY, 0) for dev_snap in snap.values())


def categories(snap: dict) -> dict[str, int]:
    out = {name: 0 for name in CATEGORY_NAMES.values()}
    for dev_snap in snap.values():
        for key, val in dev_snap.items():
            if key in CATEGORY_NAMES:
                out[CATEGORY_NAMES[key]] += int(val)
    out["total"] = _total(snap)
    return out


# --------------------------------------------------------------------------------------------------
# Model construction
# --------------------------------------------------------------------------------------------------
def hf_config(case: dict):
    from transformers import AutoConfig

    cfg = dict(case["config"])
    cfg.pop("model_type", None)
    return AutoConfig.for_model(case["family"], **cfg)


def tie_groups(model: torch.nn.Module) -> list[list[tuple[torch.nn.Module, str]]]:
    """Groups of (module, attr) that share one Parameter object (tied weights)."""
    by_id: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for mod in model.modules():
        for name, p in mod._parameters.items():
            if p is not None:
                by_id.setdefault(id(p), []).append((mod, name))
    return [g for g in by_id.values() if len(g) > 1]


def retie(groups) -> None:
    for group in groups:
        first_mod, first_name = group[0]
        shared = first_mod._parameters[first_name]
        for mod, name in group[1:]:
            mod._parameters[name] = shared


def enable_grad_ckpt(model, offload: bool = False) -> None:
    kwargs = {"use_reentrant": False}
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if hasattr(base, "activation_checkpointing_enable"):
        if offload:  # transformers 5.24 modeling_utils.py:3160-3167 (save_on_cpu swapped, see exact/losses.py)
            base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs, offload=True)
        else:
            base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:  # older transformers
        if offload:
            raise ValueError("offload_activations needs transformers >= 5 (activation_checkpointing_enable)")
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if hasattr(base.config, "use_cache"):
        base.config.use_cache = False  # what HF does when checkpointing during training


# nn.Linear subclasses that return a tuple: PEFT's all-linear wraps them, and the wrapper's forward then fails
_TUPLE_LINEARS = frozenset({"Llama4Router"})


def all_linear_exclude(model: torch.nn.Module, wrapper: bool) -> str | None:
    """exclude_modules for LoraConfig(target_modules="all-linear") as the estimator counts it: a multimodal wrapper's
    towers and projector stay without adapters, and so do the nn.Linear subclasses that return a tuple
    (Llama4Router returns router scores and logits, transformers 5.24.0 modeling_llama4.py; PEFT 0.21.2's
    lora.Linear.forward reads result.dtype of the base layer's output and fails, so a user must exclude them)."""
    import re

    names = sorted({n for n, m in model.named_modules() if type(m).__name__ in _TUPLE_LINEARS})
    parts = ([TOWER_MODULES] if wrapper else []) + [re.escape(n) for n in names]
    return "|".join(f"(?:{p})" for p in parts) or None


def build_model(case: dict, device: str):
    """Build the (PEFT-wrapped) model on ``device`` ("meta" for fake tracing, "cpu" for real runs)."""
    from transformers import AutoModelForCausalLM

    setup = case["setup"]
    dtype = PRECISION_DTYPE[setup["precision"]]
    cfg = hf_config(case)
    wrapper = getattr(cfg, "vision_config", None) is not None
    with torch.device(device):
        if wrapper:  # multimodal wrapper (gemma3, mistral3): the ...ForConditionalGeneration class, towers included
            from transformers import AutoModelForImageTextToText

            model = AutoModelForImageTextToText.from_config(cfg, dtype=dtype, attn_implementation=setup["attention"])
        else:
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=setup["attention"])
    if wrapper and setup["method"] == "full" and not setup.get("train_tower", False):
        # the vision tower and projector stay frozen; the language model (and its head) trains
        keep = {id(p) for p in model.get_decoder().parameters()} | {
            id(p) for p in model.get_output_embeddings().parameters()}
        for p in model.parameters():
            if id(p) not in keep:
                p.requires_grad_(False)
    if setup["method"] == "lora":
        from peft import LoraConfig, get_peft_model

        targets = setup["lora_targets"]
        # multimodal wrappers: adapters on the language model only (the towers stay as they are); all-linear also
        # leaves out the tuple-returning linears that PEFT's wrapper cannot run (all_linear_exclude)
        exclude = all_linear_exclude(model, wrapper) if targets == "all-linear" else (TOWER_MODULES if wrapper
                                                                                       else None)
        lcfg = LoraConfig(
            r=int(setup["lora_rank"]),
            lora_alpha=int(setup.get("lora_alpha", 2 * int(setup["lora_rank"]))),
            target_modules=targets if isinstance(targets, str) else list(targets),
            lora_dropout=float(setup.get("lora_dropout", 0.0)),
            bias="none",
            task_type="CAUSAL_LM",
            exclude_modules=exclude,
        )
        model = get_peft_model(model, lcfg)  # autocast_adapter_dtype=True: adapters in fp32
    elif setup["method"] != "full":
        raise ValueError(f"unknown method {setup['method']!r}")
    loss = loss_kind(setup)
    if loss == "chunked":
        from exact.losses import add_trl_fused_head

        add_trl_fused_head(model)  # SFTTrainer.__init__: after PEFT, on the base model
    elif loss == "fused":
        from exact.losses import apply_liger_flce

        apply_liger_flce(model)
    elif loss != "standard":
        raise ValueError(f"unknown loss {loss!r}")
    offload = bool(setup.get("offload_activations", False))
    if offload and not setup.get("grad_ckpt"):
        raise ValueError("offload_activations needs grad_ckpt")
    if setup.get("grad_ckpt"):
        enable_grad_ckpt(model, offload=offload)
    model.train()
    return model


def loss_kind(setup: dict) -> str:
    """Case setup key "loss" (older fixtures have no key: "standard")."""
    return setup.get("loss") or "standard"


def loss_and_offload_ctx(setup: dict) -> contextlib.ExitStack:
    """Patches that must stay in place for the whole trace (see exact/losses.py)."""
    stack = contextlib.ExitStack()
    if loss_kind(setup) == "chunked":
        from exact.losses import trl_gpu_path

        stack.enter_context(trl_gpu_path())
    if setup.get("offload_activations"):
        from exact.losses import offloaded_checkpoint_inputs

        stack.enter_context(offloaded_checkpoint_inputs())
    return stack


def param_counts(model: torch.nn.Module) -> tuple[int, int]:
    seen: dict[int, torch.nn.Parameter] = {}
    for p in model.parameters():  # parameters() already de-duplicates shared Parameters
        seen[id(p)] = p
    total = sum(p.numel() for p in seen.values())
    trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
    return int(total), int(trainable)


# --------------------------------------------------------------------------------------------------
# The training step
# --------------------------------------------------------------------------------------------------
def autocast_ctx(setup: dict):
    if setup["precision"] == "mixed" or (setup["method"] == "lora" and setup["precision"] == "bf16"):
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _train_step(model, opt, setup: dict, vocab: int, tracker: Tracker, snaps: dict | None, max_grad_norm):
    image = setup.get("_image")  # multimodal: (image token id, image tokens, pixel shape) or None
    # the language model runs on seq_len text positions plus the image placeholder tokens (estimator
    # TrainingSetup.lm_seq_len)
    b, s = int(setup["batch"]), int(setup["seq_len"]) + (image[1] if image is not None else 0)
    tracker.new_step()
    tracker.phase_override = "inputs"
    low, high = 0, vocab
    if image is not None:  # text tokens never collide with the image placeholder token
        low, high = (image[0] + 1, vocab) if image[0] < vocab // 2 else (0, image[0])
    input_ids = torch.randint(low, high, (b, s), dtype=torch.long)
    extra = {}
    if image is not None and image[1]:
        # one image per example: its placeholder tokens open the sequence (Gemma 3: 256 soft tokens), the
        # processor's token_type_ids mark them, and the collator masks them out of the labels
        input_ids[:, : image[1]] = image[0]
        extra["pixel_values"] = torch.randn(b, *image[2], dtype=PRECISION_DTYPE[setup["precision"]])
        extra["token_type_ids"] = (input_ids == image[0]).long()
    labels = input_ids.clone()  # DataCollatorForLanguageModeling: labels = input_ids.clone()
    if image is not None and image[1]:
        labels[:, : image[1]] = -100
    tracker.phase_override = None
    with autocast_ctx(setup):
        if loss_kind(setup) == "chunked":  # TRL SFTTrainer.compute_loss with the fused chunked LM head
            from exact.losses import trl_sft_loss

            loss = trl_sft_loss(model, input_ids, labels)
        else:  # "standard" (HF ForCausalLMLoss) or "fused" (Liger lce_forward stand-in): the model's own loss
            loss = model(input_ids=input_ids, labels=labels, **extra).loss  # no reference to the outputs is kept
    if snaps is not None:
        snaps["after_forward"] = categories(tracker._curr_mem_snap)
    loss.backward()
    if snaps is not None:
        snaps["after_backward"] = categories(tracker._curr_mem_snap)
    if max_grad_norm:  # HF Trainer default max_grad_norm=1.0
        tracker.phase_override = "grad_clip"
        torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], max_grad_norm)
        tracker.phase_override = None
    tracker.phase_override = "optimizer_step"  # Optimizer.step's record_function runs before the step hooks
    opt.step()
    opt.zero_grad(set_to_none=True)
    tracker.phase_override = None
    del loss, input_ids, labels, extra
    if snaps is not None:
        snaps["after_step"] = categories(tracker._curr_mem_snap)


def make_optimizer(model, setup: dict):
    opt_name = setup.get("optimizer", "adamw")
    if opt_name != "adamw":
        raise ValueError(f"unsupported optimizer {opt_name!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    # HF Trainer default optim "adamw_torch_fused" -> torch.optim.AdamW(fused=True), lr 5e-5, wd 0.0
    return torch.optim.AdamW(params, lr=5e-5, weight_decay=0.0, fused=True)


@contextlib.contextmanager
def real_mode_mask_decisions():
    """Make transformers take the same attention-mask decisions under FakeTensorMode as in a real run.

    ``masking_utils.find_packed_sequence_indices`` (called when there is no attention mask and no KV cache, i.e.
    with gradient checkpointing, which sets use_cache=False) returns None for ordinary position ids in a real run,
    but treats fake tensors as "tracing" and returns the (unknowable) packed-sequence ids, which makes
    ``create_causal_mask`` materialise a (b, 1, s, s) bool mask and SDPA lose ``enable_gqa``.  Our inputs are never
    packed, so under fake mode we answer None like the real run does.
    """
    try:
        from transformers import masking_utils
    except ImportError:  # pragma: no cover
        yield
        return
    orig = getattr(masking_utils, "find_packed_sequence_indices", None)
    if orig is None:  # pragma: no cover
        yield
        return

    def _never_packed(position_ids):
        from torch._subclasses.fake_tensor import is_fake

        if is_fake(position_ids):
            return None
        return orig(position_ids)

    masking_utils.find_packed_sequence_indices = _never_packed
    # The multimodal wrappers check that the image placeholder tokens match the image features
    # (get_placeholder_mask: torch_compilable_check on a tensor, which reads its value). A fake tensor has no
    # value (DataDependentOutputException, and trace_case used to fall back to a real CPU run that did not finish);
    # _train_step builds the inputs so that the check holds, so under fake mode it is skipped.
    checked = [m for name, m in list(sys.modules.items())
               if name.startswith("transformers.models.") and hasattr(m, "torch_compilable_check")]
    orig_checks = [m.torch_compilable_check for m in checked]

    def _check_unless_fake(cond, *args, **kwargs):
        from torch._subclasses.fake_tensor import is_fake

        if isinstance(cond, torch.Tensor) and is_fake(cond):
            return None
        return orig_checks[0](cond, *args, **kwargs)

    for m in checked:
        m.torch_compilable_check = _check_unless_fake
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = orig
        for m, f in zip(checked, orig_checks, strict=True):
            m.torch_compilable_check = f


def _run(case: dict, mode: str) -> dict:
    with loss_and_offload_ctx(case["setup"]):
        return _run_inner(case, mode)


def _image_inputs(case: dict) -> tuple[int, int, tuple[int, int, int]] | None:
    """(image token id, image tokens per example, pixel_values shape per example) of a multimodal case (None: text
    only and no image token in the config)."""
    cfg, setup = case["config"], case["setup"]
    token = cfg.get("image_token_index", cfg.get("image_token_id"))
    n = int(setup.get("image_tokens", 0) or 0)
    if n and cfg.get("model_type") != "gemma3":
        raise ValueError("image inputs are traced for gemma3 only")
    if not n:  # text only: the token id keeps text tokens off the placeholder; no pixels (any vision config)
        return (int(token), 0, (0, 0, 0)) if isinstance(token, int) else None
    if n != int(cfg.get("mm_tokens_per_image", 256)):
        raise ValueError("gemma3: image_tokens must equal mm_tokens_per_image (one image per example)")
    v = cfg["vision_config"]
    return int(token), n, (3, int(v["image_size"]), int(v["image_size"]))


def _run_inner(case: dict, mode: str) -> dict:
    setup = case["setup"]
    text_cfg = case["config"].get("text_config") or case["config"]
    vocab = int(text_cfg["vocab_size"])
    if "vision_config" in case["config"]:
        setup = dict(setup, _image=_image_inputs(case))
    torch.manual_seed(0)
    if mode == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        model = build_model(case, "meta")
        groups = tie_groups(model)
        outer = contextlib.ExitStack()
        outer.enter_context(real_mode_mask_decisions())
        outer.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
    else:
        model = build_model(case, "cpu")
        groups = []
        outer = contextlib.nullcontext()

    with outer:
        if mode == "fake":
            model.to_empty(device="cpu")  # fake CPU tensors (no memory)
            retie(groups)  # to_empty creates one new Parameter per module: tied weights must be re-tied
        p_total, p_train = param_counts(model)
        opt = make_optimizer(model, setup)
        tracker = Tracker()
        tracker.track_external(model, opt)
        max_grad_norm = setup.get("max_grad_norm", 1.0)
        with tracker:
            gc.collect()
            _train_step(model, opt, setup, vocab, tracker, None, max_grad_norm)
            gc.collect()  # nothing of step 1 may leak into the steady-state measurement
            first_peak = tracker.peak_total()
            first_where = dict(tracker.peak_where)
            tracker.reset_mod_stats()
            tracker.restart_peak()
            snaps: dict[str, dict[str, int]] = {}
            _train_step(model, opt, setup, vocab, tracker, snaps, max_grad_norm)
            peak = tracker.peak_total()
            peak_snap = categories(tracker.get_tracker_snapshot("peak"))
            where = dict(tracker.peak_where)
            phase_peaks = dict(tracker.phase_peaks)
            phase_snaps = dict(tracker.phase_peak_snaps)
            region_peaks = dict(tracker.region_peaks)
            region_snaps = dict(tracker.region_peak_snaps)
    peak_snap.pop("total", None)
    n_opt_state = sum(
        v.numel() * v.element_size()
        for st in opt.state.values()
        for v in st.values()
        if isinstance(v, torch.Tensor)
    )
    after_step = snaps["after_step"]
    measured = {
        "peak_bytes": int(peak),
        "peak_by_category": {k: int(v) for k, v in peak_snap.items()},
        "first_step_peak_bytes": int(first_peak),
        "params_total": p_total,
        "params_trainable": p_train,
        "mode": mode,
        "peak_phase": where["phase"],
        "peak_region": where["region"],
        "peak_module": where["module"],
        "peak_op": where["op"],
        "first_step_peak_phase": first_where["phase"],
        "phase_peaks": {k: int(v) for k, v in phase_peaks.items()},
        "phase_peak_by_category": phase_snaps,
        "region_peaks": {k: int(v) for k, v in region_peaks.items()},
        "region_peak_by_category": region_snaps,
        "snapshots": snaps,
        "optimizer_state_bytes": int(n_opt_state),
        # activations/temp still alive after the step (gc.collect() not run): must be 0, else something leaks
        "leaked_after_step_bytes": int(after_step["activations"] + after_step["temp"] + after_step["gradients"]),
    }
    return measured


def tool_versions(case: dict | None = None) -> dict[str, str]:
    """torch / transformers / peft, plus trl for the "chunked" loss and the Liger version the "fused" stand-in
    reproduces (older fixtures, loss "standard", keep exactly the three keys)."""
    import peft
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
    loss = loss_kind(case["setup"]) if case else "standard"
    if loss == "chunked":
        from exact.losses import trl_tool_version

        out["trl"] = trl_tool_version()
    elif loss == "fused":
        from exact.losses import LIGER_VERSION

        out["liger_kernel"] = f"{LIGER_VERSION} (CPU stand-in, exact/losses.py)"
    return out


def trace_case(case: dict) -> dict:
    """Trace one case; returns a copy of ``case`` with ``measured`` and ``tool`` added.

    ``case["mode"]`` may be "fake" (default "auto": fake, falling back to a real CPU run when the model cannot
    run under FakeTensorMode) or "real".
    """
    want = case.get("mode", "auto")
    t0 = time.perf_counter()
    fake_error = None
    if want in ("auto", "fake"):
        try:
            measured = _run(case, "fake")
        except Exception as exc:  # noqa: BLE001 - any failure of the fake trace -> real CPU run
            if want == "fake":
                raise
            fake_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            measured = _run(case, "real")
    elif want == "real":
        measured = _run(case, "real")
    else:
        raise ValueError(f"unknown mode {want!r}")
    if fake_error:
        measured["fake_error"] = fake_error
    measured["trace_seconds"] = round(time.perf_counter() - t0, 2)
    out = copy.deepcopy(case)
    out["measured"] = measured
    out["tool"] = tool_versions(case)
    return out
