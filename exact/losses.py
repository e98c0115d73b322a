"""Loss heads and activation offloading for the tracer (case setup keys ``loss`` and ``offload_activations``).

``loss``:

* ``"standard"`` -- the model's own forward: ``lm_head`` -> HF ``ForCausalLMLoss`` (``logits.float()`` +
  ``cross_entropy``).  Nothing here.
* ``"chunked"`` -- TRL 1.16 ``SFTTrainer``'s loss.  ``SFTTrainer.__init__`` (trl/trainer/sft_trainer.py:1142-1147)
  always calls ``add_fused_lm_head(model.get_base_model() if PEFT else model,
  outputs=("log_probs", "entropy", "is_top1"))`` and ``compute_loss`` (sft_trainer.py:1599-1617) runs
  ``model(**inputs, fused_lm_head=True)`` and sums ``-outputs.log_probs`` over ``label_mask``.  The head is TRL's
  own ``ChunkedLogProbFunction`` (trl/kernels/chunked_logprob.py): tiles of ``TOKEN_CHUNK_SIZE = 4096`` tokens
  x ``chunk_size = 32768`` vocabulary entries (``_CHUNKED_LOGPROB_CHUNK_SIZE``, trl/trainer/utils.py:1506).
  The REAL TRL code runs here (trl==1.16.0 in .venv-cal); see ``trl_gpu_path`` for the three stand-ins that make
  its CPU run allocate exactly what its GPU (Triton) path allocates.
* ``"fused"`` -- Liger's fused linear cross-entropy (liger_kernel 0.8.5,
  liger_kernel/ops/fused_linear_cross_entropy.py), as the HF Trainer / Axolotl apply it with
  ``use_liger_kernel=True`` (``model.forward = MethodType(lce_forward, model)``, liger_kernel/transformers/
  monkey_patch.py:302-306).  Liger needs Triton, so ``LigerFLCEStandIn`` re-implements its forward/backward in
  torch, allocation for allocation (every line cites the Liger source line it stands for); the Triton kernels
  (``liger_cross_entropy_kernel``, ``element_mul_kernel``) work in place and allocate nothing.  Only the loss
  head is patched: Liger's other kernels (RMSNorm, SwiGLU, RoPE), which ``use_liger_kernel=True`` also swaps in,
  are NOT modelled (their activation footprint differs from HF's modules).

``offload_activations`` (with ``grad_ckpt`` only): transformers 5.24 ``activation_checkpointing_enable(...,
offload=True)`` (modeling_utils.py:3160-3167) wraps every layer checkpoint in
``torch.autograd.graph.save_on_cpu(pin_memory=True)``.  ``offloaded_checkpoint_inputs`` runs that very code with
``save_on_cpu`` replaced by ``_OffDevice``: same ``saved_tensors_hooks`` structure, but the pack hook drops the
tensor (recording its shape/dtype) instead of copying it to host memory -- on this CPU-only tracer a host copy
would be counted as device memory -- and the unpack hook allocates the tensor again on the device, which is the
H2D copy ``save_on_cpu``'s unpack makes (``packed.to(device)``).
"""

from __future__ import annotations

import contextlib
import math
import types
from typing import Any

import torch

aten = torch.ops.aten


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t)


# ==================================================================================================
# Activation offloading (transformers 5.24 modeling_utils.py:3160-3167)
# ==================================================================================================
class _OffDevice(torch.autograd.graph.saved_tensors_hooks):
    """Stand-in for ``torch.autograd.graph.save_on_cpu`` (torch/autograd/graph.py ``class save_on_cpu``).

    ``save_on_cpu``'s pack hook copies the saved tensor into a new (pinned) host tensor and keeps only that copy;
    its unpack hook returns ``packed.to(device, non_blocking=pin_memory)``, a fresh contiguous device tensor.  Here
    pack keeps only (size, dtype, device) -- so the device storage is released exactly when ``save_on_cpu`` would
    release it and no host copy is counted -- and unpack allocates the same fresh contiguous device tensor (its
    values are not restored: memory, not numerics, is what the tracer measures).
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(tensor: torch.Tensor):
            return (tuple(tensor.size()), tensor.dtype, tensor.device)

        def unpack(packed):
            size, dtype, device = packed
            return torch.empty(size, dtype=dtype, device=device)

        super().__init__(pack, unpack)


@contextlib.contextmanager
def offloaded_checkpoint_inputs():
    """Make ``activation_checkpointing_enable(offload=True)`` offload to nowhere instead of host memory.

    transformers' ``checkpoint_func`` (modeling_utils.py:3165-3167) looks ``save_on_cpu`` up as a module global at
    every call, so the swap must stay in place for the whole trace.
    """
    from transformers import modeling_utils

    orig = modeling_utils.save_on_cpu
    modeling_utils.save_on_cpu = _OffDevice
    try:
        yield
    finally:
        modeling_utils.save_on_cpu = orig


# ==================================================================================================
# "chunked": TRL 1.16 add_fused_lm_head + ChunkedLogProbFunction, GPU path
# ==================================================================================================
def _fake_nonzero_all_true(fake_mode, func, arg):
    # aten.nonzero under FakeTensorMode needs a ShapeEnv (data-dependent size).  Our labels are input_ids (no
    # -100), so every boolean mask TRL builds (``labels != -100``) is all True: nnz = numel.  Same layout as the
    # stock fake kernel (torch/_subclasses/fake_impls.py ``nonzero``).
    n = arg.numel()
    return arg.new_empty_strided((n, arg.dim()), (1, n), dtype=torch.int64)


def _fake_masked_select_all_true(fake_mode, func, self, mask):
    # masked_select with an all-True mask: numel of the broadcast shape (masked_scatter's backward uses it).
    n = math.prod(torch.broadcast_shapes(self.shape, mask.shape))
    return self.new_empty((n,))


def _trl_forward_fold(tile, tile_stride, targets, running_max, sum_exp, *args, **kwargs) -> None:
    # Stands for the Triton ``_forward_kernel`` (trl/kernels/chunked_logprob.py:78-148): it folds the tile into the
    # per-token running statistics in place and allocates nothing.  TRL's torch fallback ``_forward_tile``
    # (chunked_logprob.py:211-254) instead makes fp32 copies of the whole tile (``tile.float()``, ``exp``, masks),
    # which the GPU path never has.  Two in-place fills keep the CPU self-check's loss finite.
    running_max.zero_()
    sum_exp.fill_(1.0)


def _trl_backward_fold(*args, **kwargs) -> None:
    # Stands for the Triton ``_backward_kernel`` (chunked_logprob.py:150-208): overwrites the logits tile with the
    # logits gradient in place, no allocation.  (The fallback ``_backward_tile`` allocates ~5 fp32 tile copies.)
    return None


def _trl_addmm_fp32(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    # Stands for ``_addmm_fp32`` (chunked_logprob.py:52-62) as it runs on CUDA with torch >= 2.8:
    # ``torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)`` -- fp32 accumulation of bf16 operands, no
    # temporary.  The CPU branch ``acc.addmm_(a.float(), b.float())`` would allocate fp32 copies of the
    # [4096, 32768] tile and of the weight chunk.
    if a.dtype == acc.dtype and b.dtype == acc.dtype:
        acc.addmm_(a, b)  # fp32 operands: TRL's own call, exact on every device (``.float()`` is a no-op)
    elif _is_fake(acc):
        torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)  # the CUDA call (meta kernel: no allocation)
    else:
        # real CPU self-check: aten::addmm.dtype_out has no CPU kernel; skip the arithmetic (it allocates nothing
        # on the GPU either, and gradient values do not change any tensor's size)
        pass


@contextlib.contextmanager
def trl_gpu_path():
    """Run TRL 1.16's real ``add_fused_lm_head`` / ``ChunkedLogProbFunction`` with its GPU allocation pattern.

    Patched (and nothing else):

    (a) ``trl.trainer.utils._use_triton`` -> True, so ``_fused_forward`` takes the "compact" path it takes on
        CUDA (trl/trainer/utils.py:1642-1660): ``hidden_states[mask]`` / ``labels[mask]`` (only the positions with
        a label; all of them here, labels = input_ids) and ``masked_scatter`` back.  ``chunked_logprob._use_triton``
        stays False so that the kernels are called through the (patched) fallback names;
    (b) in ``trl.kernels.chunked_logprob``: ``_forward_tile`` / ``_backward_tile`` (the fallbacks of the Triton
        fold kernels) -> no-allocation stand-ins, and ``_addmm_fp32`` -> the in-place ``out_dtype`` addmm the CUDA
        branch runs.  So every allocation left is one the GPU path makes: the seven [N] fp32 statistics, the
        ``mm_buf`` tile [min(N, 4096), 32768] in the compute dtype (forward and backward), the weight / hidden
        chunk casts (``.to(compute_dtype)``, only when the dtype differs), the fp32 ``grad_hidden`` [N, H] and
        ``grad_weight`` [V, H] accumulators and their final casts (``.to(hidden.dtype)`` / ``.to(weight.dtype)``);
    (c) FakeTensorMode only: ``aten.nonzero`` / ``aten.masked_select`` answer "all True" (their output size is
        data-dependent, which FakeTensorMode without a ShapeEnv refuses).  Exact here because no label is -100.
        The int64 ``nonzero`` index that CUDA's boolean indexing builds inside ``aten.index`` / ``index_put_``
        (16 B per token, transient) is internal to the kernel and not seen by the tracer, fake or real.
    """
    import trl.kernels.chunked_logprob as clp
    import trl.trainer.utils as tu
    from torch._subclasses import fake_impls

    saved: list[tuple[Any, str, Any]] = [
        (tu, "_use_triton", tu._use_triton),
        (clp, "_forward_tile", clp._forward_tile),
        (clp, "_backward_tile", clp._backward_tile),
        (clp, "_addmm_fp32", clp._addmm_fp32),
    ]
    impls = fake_impls.op_implementations_dict
    saved_impls = {op: impls.get(op) for op in (aten.nonzero.default, aten.masked_select.default)}
    tu._use_triton = lambda device: True
    clp._forward_tile = _trl_forward_fold
    clp._backward_tile = _trl_backward_fold
    clp._addmm_fp32 = _trl_addmm_fp32
    impls[aten.nonzero.default] = _fake_nonzero_all_true
    impls[aten.masked_select.default] = _fake_masked_select_all_true
    try:
        yield
    finally:
        for mod, name, val in saved:
            setattr(mod, name, val)
        for op, fn in saved_impls.items():
            if fn is None:
                impls.pop(op, None)
            else:
                impls[op] = fn


def add_trl_fused_head(model) -> None:
    """``SFTTrainer.__init__`` (sft_trainer.py:1142-1147): the fused head goes on the base model (under PEFT)."""
    from trl.trainer.utils import add_fused_lm_head

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    add_fused_lm_head(base, outputs=("log_probs", "entropy", "is_top1"))


def trl_sft_loss(model, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``SFTTrainer.compute_loss`` (sft_trainer.py:1560-1644) without distributed/metric plumbing.

    ``inputs["use_cache"] = False``; ``outputs = model(**inputs, fused_lm_head=True)``; loss =
    ``(-outputs.log_probs).sum() / outputs.label_mask.sum().clamp(min=1)``.  The entropy / accuracy metrics are
    reduced as TRL does (``entropy.detach().sum()``, ``is_top1.sum()``); their ``.item()`` is skipped (fake
    tensors have no values).  No reference to ``outputs`` survives the call.
    """
    outputs = model(input_ids=input_ids, labels=labels, use_cache=False, fused_lm_head=True)
    per_token_loss = -outputs.log_probs  # zero on ignored positions
    num_tokens = outputs.label_mask.sum()
    loss = per_token_loss.sum() / torch.as_tensor(num_tokens).clamp(min=1)
    _ = outputs.label_mask.sum(), outputs.entropy.detach().sum(), outputs.is_top1.sum()  # metrics (sft:1640-1642)
    del outputs, per_token_loss, num_tokens, _
    return loss


def trl_tool_version() -> str:
    import trl

    return trl.__version__


# ==================================================================================================
# "fused": Liger fused linear cross-entropy (liger_kernel 0.8.5), CPU stand-in
# ==================================================================================================
LIGER_VERSION = "0.8.5"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def liger_chunk_size(bt: int, hidden: int, vocab: int, chunk_mem_const: int = 1) -> int:
    """ops/fused_linear_cross_entropy.py:103-105."""
    inc_factor = _cdiv(vocab, chunk_mem_const * hidden)
    return min(_next_power_of_2(_cdiv(bt, inc_factor)), bt)


def _can_use_mm_out(_input: torch.Tensor, weight: torch.Tensor) -> bool:
    """ops/fused_linear_cross_entropy.py:32-48 ``_can_use_mm_out``, evaluated as on a CUDA (non-HIP) device.

    The tracer's CPU autocast stands for CUDA autocast (``torch.is_autocast_enabled()`` in Liger).
    """
    if (
        torch.is_grad_enabled()
        or _input.dtype != weight.dtype
        or _input.dtype not in (torch.float16, torch.bfloat16, torch.float32)
    ):
        return False
    if torch.is_autocast_enabled("cpu"):
        return _input.dtype == torch.get_autocast_dtype("cpu")
    return True


def _liger_flce_forward(_input, weight, target, ignore_index: int = -100):
    """``fused_linear_cross_entropy_forward`` (ops/fused_linear_cross_entropy.py:51-415) with its defaults as
    ``LigerForCausalLMLoss`` calls it: bias=None, ce_weight=None, accum_dtype=None, reduction="mean" (the tracer
    passes no ``num_items_in_batch``; "sum" allocates the same), no z-loss / token accuracy / token scaling,
    ce_impl=None (the Triton ``liger_cross_entropy_kernel``).  Device = CUDA, compute capability >= 8.
    Returns (loss, grad_input, grad_weight)."""
    input_requires_grad = _input.requires_grad  # :89
    weight_needs_grad = weight.requires_grad  # :90
    BT, H = _input.shape  # :99
    V = weight.shape[0]  # :100
    chunk_size = liger_chunk_size(BT, H, V)  # :103-105
    num_chunks = _cdiv(BT, chunk_size)  # :106

    grad_input = torch.zeros_like(_input)  # :108  [BT, H] in the input dtype
    if input_requires_grad:  # :114-120 accum_dtype None -> parameter dtype
        grad_weight = torch.zeros_like(weight) if weight_needs_grad else None  # :116  [V, H]
    else:
        grad_weight = None
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=_input.device)  # :125
    target_mask = target != ignore_index  # :131  bool [BT]
    _n_non_ignore = target_mask.sum()  # :132  (``.item()`` skipped: no values under FakeTensorMode)
    del _n_non_ignore, target_mask
    use_mm_out = _can_use_mm_out(_input, weight)  # :147
    logits_storage = (  # :150-154  one [chunk_size, V] logits buffer, reused by every chunk
        torch.empty((chunk_size, V), dtype=_input.dtype, device=_input.device) if use_mm_out else None
    )
    for chunk_id in range(num_chunks):  # :156
        start_idx = chunk_id * chunk_size
        end_idx = min((chunk_id + 1) * chunk_size, BT)
        _input_chunk = _input[start_idx:end_idx]  # :159  view
        if logits_storage is not None:  # :162-166
            logits_chunk = logits_storage[: end_idx - start_idx]
            torch.mm(_input_chunk, weight.t(), out=logits_chunk)
        else:  # :167-170  new [chunk, V] tensor; under autocast: bf16 casts of the input chunk (transient) and of
            #             the weight (kept in the autocast cache when the weight requires grad, else transient)
            logits_chunk = _input_chunk @ weight.t()
        target_chunk = target[start_idx:end_idx]  # :172
        logits_chunk = logits_chunk.contiguous()  # :209  no-op
        target_chunk = target_chunk.contiguous()  # :210  no-op
        # :212-250 liger_cross_entropy_kernel: writes loss_1d[start:end] and overwrites logits_chunk with the logits
        # gradient, in place (no allocation)
        loss_1d_slice = loss_1d[start_idx:end_idx]  # :213
        grad_logits_chunk = logits_chunk  # :250
        del logits_chunk  # :285
        loss_1d[start_idx:end_idx] = loss_1d_slice  # :293  (copy onto itself)
        if input_requires_grad:  # :318-322
            if use_mm_out and grad_logits_chunk.dtype == grad_input.dtype:
                torch.mm(grad_logits_chunk, weight, out=grad_input[start_idx:end_idx])
            else:
                grad_input[start_idx:end_idx] = grad_logits_chunk @ weight  # [chunk, H] temporary + copy
        if grad_weight is not None and input_requires_grad:  # :324
            grad_logits_t = grad_logits_chunk.t()  # :325
            if grad_weight.dtype == torch.float32 and grad_logits_t.dtype in (torch.float16, torch.bfloat16):
                # :326-348 fp32 accumulator (fp32 params under AMP): addmm(out_dtype=fp32, out=grad_weight); the
                # input chunk is cast to the logits dtype first (a [chunk, H] temporary when it differs)
                input_chunk = _input_chunk
                if input_chunk.dtype != grad_logits_t.dtype:
                    input_chunk = input_chunk.to(grad_logits_t.dtype)
                _addmm_out(grad_weight, grad_logits_t, input_chunk, out_dtype=torch.float32)
                del input_chunk
            elif grad_logits_t.dtype in (torch.float16, torch.bfloat16) and grad_weight.dtype == grad_logits_t.dtype:
                # :349-369 low-precision accumulator of the same dtype: addmm(out=grad_weight), no temporary
                input_chunk = _input_chunk
                if input_chunk.dtype != grad_logits_t.dtype:
                    input_chunk = input_chunk.to(grad_logits_t.dtype)
                _addmm_out(grad_weight, grad_logits_t, input_chunk, out_dtype=None)
                del input_chunk
            else:
                # :370-375 legacy fallback (fp32 logits: fp32 model without autocast): a parameter-sized [V, H]
                # temporary per chunk
                grad_weight += torch.mm(grad_logits_chunk.t(), _input_chunk).float()
            del grad_logits_t  # :376
        del grad_logits_chunk, _input_chunk, target_chunk  # :388
    del logits_storage  # :391
    loss = torch.sum(loss_1d)  # :404  (reduction "mean": the kernel already divided by n_non_ignore)
    del loss_1d
    grad_weight = grad_weight.to(weight.dtype) if grad_weight is not None else None  # :412  no-op (same dtype)
    return loss, grad_input, grad_weight


def _addmm_out(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out_dtype) -> None:
    """``torch.addmm(acc, a, b[, out_dtype=fp32], out=acc)`` as Liger calls it on CUDA: in place, no temporary."""
    if out_dtype is None or (a.dtype == acc.dtype and b.dtype == acc.dtype):
        torch.addmm(acc, a, b, out=acc)
    elif _is_fake(acc):
        torch.addmm(acc, a, b, out_dtype=out_dtype, out=acc)  # meta kernel: no allocation
    else:
        pass  # real CPU self-check: no CPU kernel for addmm.dtype_out; values are irrelevant, no allocation


class LigerFLCEStandIn(torch.autograd.Function):
    """``LigerFusedLinearCrossEntropyFunction`` (ops/fused_linear_cross_entropy.py:467-640), reduction "mean".

    Forward computes the loss AND both gradients (grad_input [BT, H] in the input dtype, grad_weight [V, H] in the
    weight dtype when the head is trainable) and saves the gradients for backward (:572-578): they stay alive from
    the loss forward to the start of backward.  Backward (``fused_linear_cross_entropy_backward``, :418-464) scales
    them in place (``element_mul_kernel``) unless grad_output is 1.0, and returns them.
    ``@amp_custom_fwd`` / ``@amp_custom_bwd`` = ``torch.amp.custom_fwd/bwd(device_type=...)`` without
    cast_inputs (ops/utils.py:86-98): autocast stays as it is around forward.
    """

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, _input, weight, target):
        loss, grad_input, grad_weight = _liger_flce_forward(_input, weight, target)
        ctx.save_for_backward(grad_input.detach(), grad_weight.detach() if grad_weight is not None else None)
        return loss

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad_output):
        grad_input, grad_weight = ctx.saved_tensors
        # :420 ``torch.equal(grad_output, torch.tensor(1.0, device=...))``: a 4-byte scalar; both outcomes allocate
        # nothing else (element_mul_kernel scales in place).
        _one = torch.tensor(1.0, device=grad_output.device)
        del _one
        return grad_input, grad_weight, None


def _liger_causal_lm_loss(hidden_states, lm_head_weight, labels, hidden_size: int, ignore_index: int = -100):
    """``LigerForCausalLMLoss`` (liger_kernel/transformers/model/loss_utils.py:67-105)."""
    labels = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)  # :87  int64 [b, s+1]
    shift_labels = labels[..., 1:].contiguous()  # :88  int64 [b, s]
    hidden_states = hidden_states.view(-1, hidden_size)  # :91
    shift_labels = shift_labels.view(-1)  # :92
    return LigerFLCEStandIn.apply(hidden_states, lm_head_weight, shift_labels)


def _liger_lce_forward(self, input_ids=None, labels=None, **kwargs):
    """``lce_forward`` (liger_kernel/transformers/model/llama.py:24-200; qwen2/qwen3/gemma2 are the same for the
    loss; gemma2 also passes ``final_logit_softcapping``, applied inside the Triton kernel, no allocation).

    In training with labels, ``skip_logits`` is True: the decoder output goes to ``LigerForCausalLMLoss`` with
    ``lm_head.weight`` and no logits are returned."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    kwargs.pop("num_items_in_batch", None)
    outputs = self.model(input_ids=input_ids, **kwargs)
    hidden_states = outputs[0]
    kept_hidden_states = hidden_states[:, slice(0, None), :]  # logits_to_keep=0
    loss = _liger_causal_lm_loss(kept_hidden_states, self.lm_head.weight, labels, self.config.hidden_size)
    return CausalLMOutputWithPast(loss=loss, logits=None)


def apply_liger_flce(model) -> None:
    """``apply_liger_kernel_to_<family>(fused_linear_cross_entropy=True, model=...)``: instance forward swap on the
    causal-LM module (under PEFT: the base model, which PEFT's forward calls)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.forward = types.MethodType(_liger_lce_forward, base)
