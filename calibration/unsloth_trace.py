"""Trace one Unsloth training step on the CPU: Unsloth's own autograd functions, Triton kernels stood in for.

Unsloth (unsloth / unsloth_zoo 2026.10.9) needs CUDA and Triton, so its training step cannot run here.  Its memory is
decided by Python code, though: which tensors each ``torch.autograd.Function`` saves, what its backward allocates,
where the offloaded checkpoint copies the layer input and what the fused loss keeps.  This tracer executes that code
-- the functions and classes are read from the released wheels (``calibration/unsloth_src.py``) and run line for
line -- under ``FakeTensorMode`` and the tracer's tracker (``exact/trace.py``), with stand-ins only where the
CUDA path launches a Triton kernel or talks to the CUDA runtime.  Each stand-in allocates what the CUDA path
allocates (the output tensors the Python code creates) and nothing else; the source line is cited beside it.

What runs as Unsloth wrote it (file:line at 2026.10.9):
  * ``unsloth/kernels/fast_lora.py`` whole (LoRA_MLP, LoRA_QKV, LoRA_W, apply_lora_*; their dropout/bias routes);
  * ``unsloth/kernels/utils.py`` matmul_lora, addmm_, _scratch, get_lora_parameters and the adapter checks;
  * ``unsloth/kernels/rms_layernorm.py`` Fast_RMS_Layernorm, fast_rms_layernorm, _rms_forward/_rms_backward;
  * ``unsloth/kernels/rope_embedding.py`` Fast_RoPE_Embedding_QK(_Positions), _bshd_buffer, fast_rope_embedding;
  * ``unsloth/kernels/swiglu.py`` swiglu_fg_kernel, swiglu_DWf_DW_dfg_kernel (their Triton kernels stubbed);
  * ``unsloth/models/llama.py`` LlamaDecoderLayer_fast_forward, LlamaAttention_fast_forward, original_apply_qkv/o;
  * ``unsloth/utils/attention_dispatch.py`` select_attention_backend, run_attention, _run_attention,
    _sdpa_packed_segments, _training_sdpa (SDPA itself is torch's);
  * ``unsloth_zoo/gradient_checkpointing.py`` whole: UnslothCheckpointFunction, unsloth_checkpoint, the staging
    buffers, double buffering, LAST_GC_INDEX, MINIMUM_SIZE;
  * ``unsloth_zoo/fused_losses/fused_linear.py`` _ce_impl, _tiled_forward, _Buffers, _scale_rows_impl and helpers.

Stand-ins (allocation for allocation): the NF4 dequantisation (``fast_dequantize``: the global scratch or one fresh
16-bit weight, utils.py:915-1011 / nf4.py:410), the Triton kernel launches (no allocation: they write into buffers the
Python code made), ``torch.mm(out_dtype=fp32, out=...)`` (in place on CUDA), xformers' memory-efficient attention
(it saves q, k, v, out and an fp32 logsumexp), CUDA streams/events, pinned host buffers (kept on the ``meta`` device so
they are not counted as device memory; their bytes are tallied separately as host RAM).  The model-level loop
(embedding, one checkpoint per decoder layer, final norm, fused loss) follows LlamaModel_fast_forward and
CausalLM_fast_forward (llama.py:1296-1705, 1965-2196) for the training branch only.

Usage (.venv-cal, torch 2.13 CPU; the wheels are fetched with pip on first use):

    .venv-cal/bin/python -m calibration.unsloth_trace --case u-llama8b-L2-qlora-r32-b1s4096
    .venv-cal/bin/python -m calibration.unsloth_trace --all --out validation/data/unsloth_traces.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import math
import sys
import time
import types
import typing
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from calibration.unsloth_src import UNSLOTH_VERSION, load
from exact.trace import Tracker, categories

GiB = 1 << 30


# ------------------------------------------------------------------------------------------------------------------
# Stand-ins for Triton kernels and the CUDA runtime
# ------------------------------------------------------------------------------------------------------------------
class _NoKernel:
    """A ``@triton.jit`` kernel: ``kernel[grid](...)`` writes into tensors its caller allocated; nothing to count."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None

    def __call__(self, *args, **kwargs):
        return None


_triton = types.SimpleNamespace(
    cdiv=lambda a, b: -(-a // b),
    next_power_of_2=lambda n: 1 << max(int(n) - 1, 0).bit_length(),
    runtime=types.SimpleNamespace(autotuner=types.SimpleNamespace(Heuristics=type("Heuristics", (), {}))),
)


class _Stream:
    """A CUDA stream or event: ordering only, no memory."""

    def wait_stream(self, *a):
        return None

    def wait_event(self, *a):
        return None

    def record(self, *a):
        return None

    def record_event(self, *a):
        return _Stream()

    def synchronize(self):
        return None

    @property
    def cuda_stream(self):
        return 0


class _AnyKey(dict):
    """Per-device slots keyed by device.index; a CPU tensor's index is None, so any key maps to one slot."""

    def __init__(self, factory):
        super().__init__()
        self._factory = factory

    def __missing__(self, key):
        value = self[key] = self._factory(key)
        return value

    def __iter__(self):
        return iter(self.values())


# ------------------------------------------------------------------------------------------------------------------
# The 4-bit base weight: bitsandbytes' packed NF4 storage with its quant state, as Unsloth reads it
# ------------------------------------------------------------------------------------------------------------------
NF4_BLOCK = 64  # bitsandbytes blocksize (Unsloth's BitsAndBytesConfig, llama.py:4015-4021: nf4 + double quant)
NF4_BLOCK2 = 256  # nested (double) quantisation of the absmax


@dataclass
class _QuantState:
    """bitsandbytes QuantState: what fast_dequantize reads (the 16-bit shape and dtype)."""

    shape: torch.Size
    dtype: torch.dtype
    absmax: Any = None
    quant_type: str = "nf4"


class Linear4bit(nn.Linear):
    """bitsandbytes Linear4bit as Unsloth sees it: packed uint8 weight [out·in/2, 1] (the (N, 1) shape
    get_lora_parameters/_base_quant_state look for, utils.py:366-385) and a quant_state attribute. The double-quantised
    absmax (uint8 per 64, fp32 per 256 blocks) is a buffer, so the stored bytes are bitsandbytes'."""

    def __init__(self, in_features: int, out_features: int, device: str | torch.device = "meta",
                 bias: bool = False) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        n = in_features * out_features
        self.weight = nn.Parameter(torch.empty(n // 2, 1, dtype=torch.uint8, device=device), requires_grad=False)
        self.register_buffer("absmax", torch.empty(n // NF4_BLOCK, dtype=torch.uint8, device=device))
        self.register_buffer("absmax2", torch.empty(-(-n // NF4_BLOCK // NF4_BLOCK2), dtype=torch.float32,
                                                    device=device))
        self.bias = nn.Parameter(torch.empty(out_features, dtype=torch.bfloat16, device=device),
                                 requires_grad=False) if bias else None
        self.quant_state = _QuantState(torch.Size((out_features, in_features)), torch.bfloat16)

    def forward(self, x):  # the PEFT fallback path: bitsandbytes matmul_4bit (bnb 0.45+: saves only the weight)
        out = _MatMul4Bit.apply(x, self)
        return out if self.bias is None else out + self.bias


class _MatMul4Bit(torch.autograd.Function):
    """bitsandbytes 0.45+ MatMul4Bit (autograd/_functions.py): forward dequantises the weight to a fresh 16-bit
    tensor, matmuls and keeps only the quantised weight (ctx.tensors = (None, B)); backward dequantises again."""

    @staticmethod
    def forward(ctx, x, layer):
        ctx.layer = layer
        w = torch.empty(layer.quant_state.shape, dtype=x.dtype)  # dequantize_4bit output
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        w = torch.empty(ctx.layer.quant_state.shape, dtype=g.dtype)
        return g @ w, None


# ------------------------------------------------------------------------------------------------------------------
# Unsloth's kernels, loaded from the wheel
# ------------------------------------------------------------------------------------------------------------------
class _Unsloth:
    """The Unsloth code the trace runs, one namespace per source file."""

    def __init__(self, *, xformers: bool, flash_min_rows: int, free_bytes: int, double_buffer: bool) -> None:
        self.xformers, self.free_bytes = xformers, free_bytes
        self.host_bytes = 0  # pinned host RAM the offloaded checkpoints hold (bytes, power-of-two blocks)
        self.host_buffers: dict[int, int] = {}
        self._utils()
        self._rms()
        self._rope()
        self._swiglu()
        self._fast_lora()
        self._attention()
        self._llama()
        self._checkpointing(double_buffer)
        self._loss(flash_min_rows)

    # unsloth/kernels/utils.py ------------------------------------------------------------------------------------
    def _utils(self) -> None:
        ns: dict[str, Any] = {"torch": torch, "torch_Tensor": torch.Tensor, "torch_empty": torch.empty,
                              "torch_matmul": torch.matmul, "torch_float32": torch.float32,
                              "Float8Tensor": type("Float8Tensor", (), {}), "Int4QuantState": type("Int4", (), {}),
                              "fp8_linear": None, "_int4_matmul": None, "_is_compiling": lambda: False}
        ns = load("unsloth/kernels/utils.py", ns, {
            "QUANT_STATE", "_base_quant_state", "_FP8_WEIGHT_DTYPES", "_has_multiple_active_adapters",
            "_has_active_dora_adapter", "_has_non_lora_adapter", "_has_active_lora_bias", "has_mxfp4_base",
            "_packed_base", "_has_packed_qweight", "_is_packed_state", "get_lora_parameters",
            "get_lora_parameters_bias", "_SCRATCH", "_scratch", "addmm_", "matmul_lora", "_HAS_ADDMM_OP"})
        # Eager training runs on the default stream, where the scratch is used (utils.py:640-646).
        ns["_can_use_scratch"] = lambda device: True

        def fast_dequantize(W, quant_state=None, out=None, use_global_buffer=False, dtype=None):
            """utils.py:915-1011 (CUDA, NF4 kernels): no quant state → W itself (:927); use_global_buffer → a view
            of the per-device scratch (:974-975, grown only when a larger weight arrives, :649-656); else the
            kernel's own fresh output (nf4.py:410 dequantize_nf4: torch.empty(shape, dtype)); transposed W
            → out.t() (:1010-1011)."""
            if quant_state is None:
                return W
            shape, qdtype = quant_state.shape, quant_state.dtype
            if out is None and use_global_buffer and ns["_can_use_scratch"](W.device):
                out = ns["_scratch"]("weight", W.device, shape[0] * shape[1], qdtype).view(shape)
            elif out is None:
                out = torch.empty(shape, dtype=qdtype, device=W.device)
            return out.t() if W.shape[0] == 1 else out

        ns["fast_dequantize"] = fast_dequantize
        ns["torch_amp_custom_fwd"] = torch.amp.custom_fwd(device_type="cpu")  # utils.py: custom_fwd("cuda")
        ns["torch_amp_custom_bwd"] = torch.amp.custom_bwd(device_type="cpu")
        self.utils = ns

    # unsloth/kernels/rms_layernorm.py ----------------------------------------------------------------------------
    def _rms(self) -> None:
        ns: dict[str, Any] = {"torch": torch, "os": __import__("os"), "torch_gpu_device": lambda d: contextlib.nullcontext(),
                              "_multirow_checked": lambda *a: None, "long_indexing": lambda *a, **k: False,
                              "_launch": lambda *a, **k: None, "_settings": lambda *a, **k: (1024, 4),
                              "_INDEX_MARGIN": 1 << 20, "_cdiv": lambda a, b: -(-a // b),
                              "_dw_row_config": lambda device, n: (1024, 4, 1024, {}),
                              "_dw_split": lambda rows, progs: (min(rows, progs), -(-rows // max(progs, 1))),
                              "_rms_layernorm_forward": _NoKernel(), "_gemma_rms_layernorm_forward": _NoKernel(),
                              "_rms_layernorm_backward": _NoKernel(), "_rms_sum_dw_partials": _NoKernel()}
        ns = load("unsloth/kernels/rms_layernorm.py", ns, {
            "_rms_forward", "_rms_backward", "_rms_sum_partials", "_eager_kernel", "_SAVE_OUTPUT",
            "_save_output_ok", "Fast_RMS_Layernorm", "fast_rms_layernorm"})
        ns["_multirow_checked"] = lambda *a: False  # one-row kernels: the same Y, r and dW buffers
        self.rms = ns

    # unsloth/kernels/rope_embedding.py ---------------------------------------------------------------------------
    def _rope(self) -> None:
        ns: dict[str, Any] = {"torch": torch, "torch_gpu_device": lambda d: contextlib.nullcontext(),
                              "_rope_qk": lambda *a, **k: None, "_rope_launch": lambda *a, **k: None,
                              "_rope_rows": lambda *a, **k: None, "_eager_kernel": None,
                              "_sync_if_split": lambda *a: None, "_TRACEABLE": False, "_BF16_TRACEABLE": False}
        ns = load("unsloth/kernels/rope_embedding.py", ns, {
            "_bshd_buffer", "Fast_RoPE_Embedding_QK", "Fast_RoPE_Embedding_QK_Positions", "Fast_RoPE_Embedding",
            "_fast_rope_embedding_eager", "fast_rope_embedding"})
        ns["_fast_rope_embedding_untraced"] = ns["_fast_rope_embedding_eager"]
        self.rope = ns

    # unsloth/kernels/swiglu.py, geglu.py -------------------------------------------------------------------------
    def _swiglu(self) -> None:
        ns: dict[str, Any] = {"torch": torch, "triton": _triton, "torch_gpu_device": lambda d: contextlib.nullcontext(),
                              "_fg_kernel": _NoKernel(), "_DWf_DW_dfg_kernel": _NoKernel()}
        ns = load("unsloth/kernels/swiglu.py", ns, {
            "NUM_INT32_ELEMENTS", "SAFE_INT32_BUFFER_MULTIPLIER", "BLOCK_SIZE", "INT32_SAFETY_BUFFER",
            "swiglu_fg_kernel", "_DWf_DW_dfg_traced", "swiglu_DWf_DW_dfg_kernel"})
        self.swiglu = ns

    # unsloth/kernels/fast_lora.py (whole file) --------------------------------------------------------------------
    def _fast_lora(self) -> None:
        from packaging.version import Version

        u = self.utils
        ns: dict[str, Any] = {"torch": torch, "os": __import__("os"), "sys": sys, "Version": Version,
                              "_rms_layernorm": types.SimpleNamespace(_SAVE_OUTPUT=False)}
        for name in ("_has_active_dora_adapter", "_has_active_lora_bias", "_has_multiple_active_adapters",
                     "addmm_", "fast_dequantize", "_base_quant_state", "get_lora_parameters",
                     "get_lora_parameters_bias", "matmul_lora", "torch_amp_custom_fwd", "torch_amp_custom_bwd"):
            ns[name] = u[name]
        ns["swiglu_fg_kernel"] = self.swiglu["swiglu_fg_kernel"]
        ns["swiglu_DWf_DW_dfg_kernel"] = self.swiglu["swiglu_DWf_DW_dfg_kernel"]
        for name in ("geglu_exact_forward_kernel", "geglu_exact_backward_kernel", "geglu_approx_forward_kernel",
                     "geglu_approx_backward_kernel"):
            ns[name] = None  # Llama/Mistral/Qwen2 use SwiGLU (llama.py:5253-5258)
        ns = load("unsloth/kernels/fast_lora.py", ns)
        self.lora = ns

    # unsloth/utils/attention_dispatch.py -------------------------------------------------------------------------
    def _attention(self) -> None:
        self.xformer_calls = 0
        lower = type("LowerTriangularMask", (), {})
        xformers_mod = types.SimpleNamespace(attn_bias=types.SimpleNamespace(
            LowerTriangularMask=lower, BlockDiagonalCausalMask=type("BlockDiagonalCausalMask", (), {})))
        tracer = self

        def xformers_attention(q, k, v, attn_bias=None, **kwargs):
            tracer.xformer_calls += 1
            return _XFormersStandIn.apply(q, k, v)

        from dataclasses import dataclass as _dc

        ns: dict[str, Any] = {
            "torch": torch, "F": F, "Tensor": torch.Tensor, "dataclass": _dc, "Optional": typing.Optional,
            "Tuple": tuple, "Any": typing.Any, "functools": functools,
            "HAS_FLASH_ATTENTION": False,  # the default install: flash-attn is not an Unsloth dependency
            "xformers": xformers_mod, "xformers_attention": xformers_attention,
            "get_cp_manager": lambda: None, "_DEVICE_BACKENDS": None, "_xformers_rejects_fp32": lambda d: False,
            "_VARLEN_INT32_GUARD_DISABLED": True, "_SDPA_PACKED_SEGMENTS": True,
            # sm ≥ 80 CUDA with torch ≥ 2.12 (varlen loaded): native kernels beat xformers on packed rows (:1130-1143)
            "_NATIVE_BEATS_XFORMERS": True, "_TORCH_VARLEN_ATTN": None, "_LEAN_VARLEN": False,
            # On sm ≥ 80, bf16, head_dim ≤ 256 SDPA runs the flash kernel with enable_gqa (:909-919, :796-835)
            "_sdpa_takes_gqa": lambda *a, **k: True, "_avoids_cudnn": lambda Q, training: False,
            "_cudnn_length_bucket_applies": lambda *a, **k: False,
            "build_xformers_block_causal_mask": lambda seq_info, **k: k.get("base_mask"),
            "move_xformers_attention_bias": lambda bias, device: bias,
            "packed_segment_lengths": lambda seq_info, total=None: seq_info[3],
            "cover_padded_cu_seqlens": lambda seq_info, total: (seq_info[1], seq_info[2]),
            "packed_block_mask": None, "flash_attn_func": None, "flash_attn_varlen_func": None,
            "ulysses_attention": None, "_flex_shared_prefix_attention": None, "SUPPORTS_BFLOAT16": True,
        }
        ns = load("unsloth/utils/attention_dispatch.py", ns, {
            "FLASH_VARLEN", "FLASH_DENSE", "XFORMERS", "SDPA", "AttentionConfig", "AttentionContext",
            "_ring_attention_active", "select_attention_backend", "_packed_fp32_prefers_xformers", "run_attention",
            "_run_attention", "scaled_dot_product_attention", "_training_sdpa", "_inference_sdpa",
            "_sdpa_packed_segments", "_configured_softcap", "_torch_varlen_takes"})
        ns["HAS_XFORMERS"] = self.xformers
        ns["XFORMERS_BLOCK_DIAG_CLS"] = xformers_mod.attn_bias.BlockDiagonalCausalMask
        self.attn = ns

    # unsloth/models/llama.py: the decoder layer and attention forwards -----------------------------------------------
    def _llama(self) -> None:
        a = self.attn

        def get_packed_info_from_kwargs(kwargs, device, position_ids=None):
            """packing.py:1724-1790: (lengths int32, cu_seqlens int32, max_seqlen) from packed_seq_lengths; the
            host tuple of lengths is kept beside it (here: the 4th entry, for packed_segment_lengths)."""
            lengths = kwargs.get("packed_seq_lengths")
            if lengths is None:
                return None
            host = tuple(kwargs["_host_lengths"])
            dev = torch.empty(len(host), dtype=torch.int32)
            cu = torch.empty(len(host) + 1, dtype=torch.int32)
            return (dev, cu, max(host), host)

        ns: dict[str, Any] = {
            "torch": torch, "Optional": typing.Optional, "Tuple": tuple, "BlockDiagonalCausalMask": object,
            "get_packed_info_from_kwargs": get_packed_info_from_kwargs, "get_cp_manager": lambda: None,
            "fast_rope_embedding": self.rope["fast_rope_embedding"], "SDPA": a["SDPA"],
            "select_attention_backend": a["select_attention_backend"], "AttentionConfig": a["AttentionConfig"],
            "AttentionContext": a["AttentionContext"], "resolve_prefix_seg_info": lambda *args: None,
            "run_attention": a["run_attention"], "fast_rms_layernorm": self.rms["fast_rms_layernorm"],
            "fast_rms_layernorm_inference": None, "fast_swiglu_inference": None,
        }
        ns = load("unsloth/models/llama.py", ns, {"original_apply_qkv", "original_apply_o", "LlamaAttention_fast_forward",
                                             "LlamaDecoderLayer_fast_forward"})
        self.llama = ns

    # unsloth_zoo/gradient_checkpointing.py (whole file) -----------------------------------------------------------
    def _checkpointing(self, double_buffer: bool) -> None:
        import collections
        import heapq
        import inspect
        import os
        import threading
        import warnings
        import weakref
        from collections.abc import Callable
        from contextlib import contextmanager, nullcontext
        from typing import Union

        import numpy as np
        import torch.utils.checkpoint as tuc
        from packaging.version import Version

        ns: dict[str, Any] = {
            "torch": torch, "np": np, "Union": Union, "Optional": typing.Optional, "List": list, "Any": Any,
            "Callable": Callable, "Tuple": tuple, "contextmanager": contextmanager, "nullcontext": nullcontext,
            "os": os, "functools": functools, "inspect": inspect, "warnings": warnings, "gc": gc,
            "collections": collections, "heapq": heapq, "threading": threading, "weakref": weakref,
            "_get_dtype": lambda d: d, "Version": Version, "is_distributed": lambda: False,
            "_any_device_integrated": lambda: False, "is_hip": lambda: False, "get_device_type": lambda: "cuda",
            "DEVICE_TYPE": "cuda", "DEVICE_TYPE_TORCH": "cuda", "DEVICE_COUNT": 1, "ALLOW_PREQUANTIZED_MODELS": True,
            "contextlib": contextlib,
        }
        for name in ("check_backward_validity", "_infer_device_type", "_get_autocast_kwargs", "_get_device_module",
                     "get_device_states", "detach_variable", "DefaultDeviceType", "ContextManager",
                     "_DEFAULT_DETERMINISM_MODE", "_checkpoint_without_reentrant_generator", "noop_context_fn"):
            ns[name] = getattr(tuc, name)
        ns = load("unsloth_zoo/gradient_checkpointing.py", ns)
        tracer = self

        def host_buffer(numel, dtype):
            """_new_host_buffer (:141-151): a pinned host block. Kept on the meta device (not device memory);
            torch's CachingHostAllocator rounds each pinned block up to a power of two (:195-201)."""
            t = torch.empty(numel, dtype=dtype, device="meta")
            nbytes = numel * dtype.itemsize
            tracer.host_buffers[id(t)] = 1 << max(nbytes - 1, 0).bit_length()
            setattr(t, ns["HOST_PINNED_ATTR"], False)  # resized through _new_host_buffer, never resize_ in place
            return t

        ns["_new_host_buffer"] = host_buffer
        ns["_release_pool_pinned"] = lambda: None
        ns["_reset_pinned_cap"] = lambda: None
        ns["_visible_device_count"] = lambda: 1
        ns["_double_buffer_disabled"] = lambda: not double_buffer
        ns["_double_buffer_event_ctor"] = lambda: _Stream
        ns["_new_device_event"] = _Stream
        ns["torch_gpu_stream"] = lambda stream: contextlib.nullcontext()
        ns["_compute_stream"] = lambda index: _Stream()
        ns["_cuda_tensor_arg_devices"] = lambda args: None
        ns["initialize_unsloth_gradient_checkpointing"](torch.bfloat16)
        # One CUDA device: per-device slots keyed by a CPU tensor's device.index (None).
        def gpu(index):  # _new_gpu_buffer (:1114)
            return torch.empty(ns["INITIAL_GPU_BUFFER_SIZE"], dtype=torch.bfloat16)

        ns["GPU_BUFFERS"] = _AnyKey(gpu)
        ns["GPU_BUFFERS_B"] = _AnyKey(gpu) if double_buffer else None
        ns["EXTRA_STREAMS"] = _AnyKey(lambda i: _Stream())
        ns["MAIN_STREAMS"] = _AnyKey(lambda i: _Stream())
        ns["NEXT_BUFFER_SLOT"] = _AnyKey(lambda i: 0)
        ns["BUFFER_EVENTS_A"] = _AnyKey(lambda i: _Stream())
        ns["BUFFER_EVENTS_B"] = _AnyKey(lambda i: _Stream())
        free = self.free_bytes

        class _Cuda:
            """torch.cuda as the double-buffering check reads it (:1425-1446): free memory of the card."""

            @staticmethod
            def mem_get_info(index=None):
                return free, free

        ns["torch"] = types.SimpleNamespace(**{k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
        ns["torch"].cuda = _Cuda
        self.ckpt = ns

    def host_ram(self) -> int:
        """Pinned host bytes the checkpoint pool holds now (CPU_BUFFERS slots, power-of-two blocks)."""
        return sum(self.host_buffers.get(id(t), 0) for t in self.ckpt["CPU_BUFFERS"])

    # unsloth_zoo/fused_losses/fused_linear.py ------------------------------------------------------------------
    def _loss(self, flash_min_rows: int) -> None:
        import os
        import warnings

        budget = max(int(min(2.0, self.free_bytes / GiB * 0.5) * GiB), 1)  # _budget_bytes (:118-127)
        ns: dict[str, Any] = {"torch": torch, "os": os, "math": math, "functools": functools, "warnings": warnings,
                              "triton": _triton, "tl": None, "Optional": typing.Optional,
                              "_guarded": lambda fn: fn}  # errors raise here instead of falling back to torch
        ns = load("unsloth_zoo/fused_losses/fused_linear.py", ns, {
            "_env_float", "_TRITON", "_FORWARD_GRAD", "_ACCURACY", "_U_FP32", "_RECOMPUTE_FP32", "_BWD_EXACT_TOP",
            "_SINGLE_MIN_COLS", "_TOP_COLS", "_CHUNK_GB", "_MIN_LOGITS", "_MIN_ROWS", "_MAX_ROWS", "_BLOCK",
            "_SPLIT_COLS", "_SPLIT_BLOCK", "_HIP_TILES", "_BWD_ROWS", "_BWD_TILE_BYTES", "_HALF", "_FLASH",
            "_FLASH_MIN_ROWS", "_SMALL_CARD_BYTES", "_FWD_TILE_COLS", "_IS_HIP", "CALLS", "_pow2",
            "fused_linear_rows", "_bytes_per_logit", "_chunk_rows", "_split_block", "_tiled_vocab", "_top_cols",
            "_stat_dtype", "_Buffers", "_aligned", "_logits_into", "_project", "_dz_w", "_dz_w_acc", "_dz_t_h",
            "_u_dtype", "_row_forward", "_tiled_layout", "_tiled_forward", "_row_backward", "_scalars",
            "_saved_index", "_rows_of", "_ce_impl", "_scale_rows_impl", "_num_warps", "_TRITON_BROKEN"})
        ns["_HAS_TRITON"] = True
        ns["_use_triton"] = lambda device: True  # CUDA sm ≥ 70 with Triton (:783-792)
        ns["_launch"] = lambda device, fn: None  # the kernels write into the buffers _ce_impl allocated
        ns["_flash_min_rows"] = lambda device: flash_min_rows  # 0 on cards ≤ 24.5 GiB, else 4096 (:90-105)
        ns["_flash_ce_ok"] = lambda device: True  # sm ≥ 80 (:130-133)
        ns["_logits_mode"] = lambda device, dtype=None: (True, False)  # fp32 logits on sm ≥ 80 (:181-190)
        ns["_budget_bytes"] = lambda device: budget

        def mm_fp32(a, b, out=None):
            """_mm_fp32 on CUDA (:199-204): torch.mm(a, b, out_dtype=fp32[, out=out]) — in place when out is given."""
            if out is not None:
                return out
            return torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32)

        ns["_mm_fp32"] = mm_fp32
        ns["_addmm_fp32"] = lambda acc, a, b: None  # torch.addmm(acc, a, b, out_dtype=fp32, out=acc) (:215-218)
        ns["_exact_target"] = None  # exact mode is off with fp32 logits (_logits_mode)
        self.fl = ns
        self.keep_rows = None  # labelled rows of the current batch (set by the driver)

        def keep_index(targets, mask, vocab_size, ignore_index):
            """_keep_index (:1232-1239): keep.nonzero() — the int64 index of the labelled rows (data-dependent size,
            so the driver states it: every position but the last of each sequence)."""
            n = self.keep_rows
            return torch.empty(n, dtype=torch.int64), n

        ns["_keep_index"] = keep_index
        ns["_ce_checked"] = ns["_ce_impl"]
        # unsloth/kernels/cross_entropy_loss.py: the loss on returned logits (UNSLOTH_RETURN_LOGITS=1)
        ce: dict[str, Any] = {"torch": torch, "torch_gpu_device": lambda d: contextlib.nullcontext(),
                              "calculate_settings": lambda n: (65536, 32), "is_cdna": lambda: False,
                              "_chunked_forward_config": lambda device, v: (4096, 8), "_chunked_evict_policy":
                              lambda device: None, "_cross_entropy_forward": _NoKernel(),
                              "_chunked_cross_entropy_forward": _NoKernel(), "_cross_entropy_backward": _NoKernel(),
                              "Version": __import__("packaging.version", fromlist=["Version"]).Version,
                              "MAX_FUSED_SIZE": 65536}  # kernels/utils.py MAX_FUSED_SIZE
        self.ce = load("unsloth/kernels/cross_entropy_loss.py", ce, {"Fast_CrossEntropyLoss", "fast_cross_entropy_loss"})


class _XFormersStandIn(torch.autograd.Function):
    """xformers.ops.memory_efficient_attention (fmha __init__.py _fMHA): forward allocates the output [B, M, H, K]
    and an fp32 logsumexp [B, H, M] and saves q, k, v, out, lse; backward allocates grad_q, grad_k, grad_v."""

    @staticmethod
    def forward(ctx, q, k, v):
        out = torch.empty(q.shape, dtype=q.dtype)
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, out, lse = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


# ------------------------------------------------------------------------------------------------------------------
# The model: transformers' Llama module tree with Unsloth's forwards, PEFT's LoRA layers
# ------------------------------------------------------------------------------------------------------------------
class _Norm(nn.Module):
    def __init__(self, h, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(h, dtype=dtype, device="meta"), requires_grad=False)
        self.variance_epsilon = 1e-5


class _Attn(nn.Module):
    def __init__(self, cfg, lin):
        super().__init__()
        h, nh, kv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.config = types.SimpleNamespace(num_attention_heads=nh, num_key_value_heads=kv)
        self.num_key_value_groups, self.head_dim = nh // kv, d
        qkv_bias = cfg.get("model_type") == "qwen2"  # Qwen2Attention: q/k/v with bias (modeling_qwen2.py)
        self.q_proj = lin(h, nh * d, qkv_bias)
        self.k_proj, self.v_proj = lin(h, kv * d, qkv_bias), lin(h, kv * d, qkv_bias)
        self.o_proj = lin(nh * d, h)


class _MLP(nn.Module):
    def __init__(self, cfg, lin):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj, self.up_proj, self.down_proj = lin(h, i), lin(h, i), lin(i, h)
        self.act_fn = nn.SiLU()

    def forward(self, x):  # transformers LlamaMLP, when Unsloth leaves the MLP to PEFT (llama.py:5347-5374)
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class _Layer(nn.Module):
    def __init__(self, cfg, lin, dtype):
        super().__init__()
        h = cfg["hidden_size"]
        self.input_layernorm, self.post_attention_layernorm = _Norm(h, dtype), _Norm(h, dtype)
        self.self_attn, self.mlp = _Attn(cfg, lin), _MLP(cfg, lin)


class _Inner(nn.Module):
    def __init__(self, cfg, lin, dtype):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"], device="meta", dtype=dtype)
        self.layers = nn.ModuleList(_Layer(cfg, lin, dtype) for _ in range(cfg["num_hidden_layers"]))
        self.norm = _Norm(cfg["hidden_size"], dtype)


class _CausalLM(nn.Module):
    def __init__(self, cfg, four_bit: bool, dtype=torch.bfloat16):
        super().__init__()

        def lin(i, o, bias=False):
            if four_bit:
                return Linear4bit(i, o, bias=bias)
            return nn.Linear(i, o, bias=bias, device="meta", dtype=dtype)

        self.model = _Inner(cfg, lin, dtype)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False, device="meta", dtype=dtype)
        if cfg.get("tie_word_embeddings"):
            self.lm_head.weight = self.model.embed_tokens.weight


def build(case: dict) -> tuple[nn.Module, list[nn.Parameter]]:
    """The model on meta: Unsloth's load (bf16, decoder linears NF4 for QLoRA, llama.py:4015-4021), PEFT's LoRA on the
    targets (get_peft_model defaults r, alpha = r, dropout 0, bias 'none': llama.py:4569-4582), adapters upcast to
    fp32 and everything else frozen (unsloth_zoo training_utils.py:404-466)."""
    from peft import LoraConfig, inject_adapter_in_model

    cfg, s = case["config"], case["setup"]
    model = _CausalLM(cfg, four_bit=s["method"] == "qlora")
    targets = s.get("lora_targets") or ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    config = LoraConfig(r=s["lora_rank"], lora_alpha=s["lora_rank"], lora_dropout=s.get("lora_dropout", 0.0),
                        target_modules=targets, bias="none")
    inject_adapter_in_model(config, model)
    trainable = []
    for name, p in model.named_parameters():
        lora = ".lora_A." in name or ".lora_B." in name
        p.requires_grad_(lora)
        if lora:
            p.data = p.data.to(torch.float32)  # training_utils.py:453 (upcast = True for LoRA weights)
            trainable.append(p)
    return model, trainable


def patch_layers(model: nn.Module, u: _Unsloth) -> dict[str, int]:
    """FastLlamaModel.patch_peft_model (llama.py:5313-5420): the fused kernels go on a layer's MLP / QKV / O only when
    every projection of the group carries LoRA, without a base bias or DoRA; else PEFT's modules run (bound here as
    original_apply_qkv / original_apply_o / the plain MLP forward). Every layer's forward is Unsloth's."""
    counts = {"mlp": 0, "qkv": 0, "o": 0}
    lora = u.lora
    for layer in model.model.layers:
        layer.forward = types.MethodType(u.llama["LlamaDecoderLayer_fast_forward"], layer)
        attn, mlp = layer.self_attn, layer.mlp
        attn.forward = types.MethodType(u.llama["LlamaAttention_fast_forward"], attn)
        attn.apply_qkv, attn.apply_o = u.llama["original_apply_qkv"], u.llama["original_apply_o"]
        if all(hasattr(getattr(mlp, p), "lora_A") for p in ("gate_proj", "up_proj", "down_proj")):
            mlp.forward = types.MethodType(lora["apply_lora_mlp_swiglu"], mlp)
            counts["mlp"] += 1
        if all(hasattr(getattr(attn, p), "lora_A") and getattr(attn, p).base_layer.bias is None
               for p in ("q_proj", "k_proj", "v_proj")):
            attn.apply_qkv = lora["apply_lora_qkv"]
            counts["qkv"] += 1
        if hasattr(attn.o_proj, "lora_A"):
            attn.apply_o = lora["apply_lora_o"]
            counts["o"] += 1
    return counts


# ------------------------------------------------------------------------------------------------------------------
# One training step as Unsloth's forward runs it
# ------------------------------------------------------------------------------------------------------------------
class _CE(torch.autograd.Function):
    """The registered op unsloth_zoo::fused_linear_ce_v2 (fused_linear.py:1671-1716) with its real body _ce_impl:
    under FakeTensorMode a custom op would run only its fake kernel, so the autograd registration is replayed here —
    forward returns (loss, grad_h, grad_w, grad_b) and saves the stored gradients and the scaling (_ce_setup,
    :1692-1698); backward rescales them with _scale_rows_impl (a fresh tensor each, _ce_backward :1700-1714)."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, divisor, scaling, u):
        loss, grad_h, grad_w, grad_b = u.fl["_ce_impl"](
            hidden, weight, None, targets, divisor, scaling, -100, 0.0, 0.0, 0.0, 0.0, None, hidden.dtype,
            True, False, False, False, 0)
        ctx.save_for_backward(grad_h, grad_w, grad_b, scaling)
        ctx.u = u
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w, grad_b, scaling = ctx.saved_tensors
        s = (grad_loss.to(torch.float64) / scaling.to(torch.float64))
        return ctx.u.fl["_scale_rows_impl"](grad_h, s, grad_h.dtype), None, None, None, None, None


def _rope_cache(cfg: dict, setup: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """LlamaRotaryEmbedding's cos/sin cache [rows, head_dim], built once per device and kept (llama.py:2572-2694):
    it starts at min(32,768, max_position_embeddings) rows in the default dtype (:2609-2615; bf16 inside
    from_pretrained, which sets the model's dtype as the default while building it); the model asks
    for max_position_embeddings rows (grown in steps of 8,192, in the hidden dtype, :2551-2569) and materialises
    them all when position_ids are passed (padding-free rows), else max(T, max_seq_length) (llama.py:1576-1590)."""
    mpe, t = cfg.get("max_position_embeddings", setup["seq_len"]), setup["seq_len"]
    start = min(4 * 8192, mpe)
    grown = mpe > start
    wanted = mpe if setup.get("padding_free", True) else max(t, start)
    rows = max(start, -(-wanted // 8192) * 8192) if grown else start
    dtype = torch.bfloat16
    return (torch.empty(rows, cfg["head_dim"], dtype=dtype), torch.empty(rows, cfg["head_dim"], dtype=dtype))


def forward_loss(model: nn.Module, u: _Unsloth, case: dict, rope: tuple) -> torch.Tensor:
    """LlamaModel_fast_forward's training branch (llama.py:1296-1705) and CausalLM_fast_forward's fused loss
    (:2087-2137): embed, one UnslothCheckpointFunction per decoder layer (GradientCheckpointingLayer.__call__ with
    the checkpoint function Unsloth installs), the final norm (reuse_grad: the head reads it, :1678-1685), then
    unsloth_fused_ce_loss → unsloth_chunked_ce_loss → fused_linear_cross_entropy (chunked_logprob.py:430-458,
    fused_linear.py:2312-2355)."""
    s = case["setup"]
    b, t = s["batch"], s["seq_len"]
    h = case["config"]["hidden_size"]
    packed = s.get("padding_free", True)
    ids = torch.empty(b, t, dtype=torch.int64)
    labels = torch.empty(b, t, dtype=torch.int64)
    kwargs: dict[str, Any] = {}
    if packed:
        # TRL's padding-free collator: one row of b·t tokens with position_ids; Unsloth infers the segment lengths
        # (llama.py:1340-1353) and passes them on as packed_seq_lengths.
        ids, labels = ids.view(1, b * t), labels.view(1, b * t)
        position_ids = torch.empty(1, b * t, dtype=torch.int32)  # .to(torch.int32) (llama.py:1385)
        kwargs = {"packed_seq_lengths": torch.empty(b, dtype=torch.int32), "_host_lengths": [t] * b}
    else:
        position_ids = None
    x = model.model.embed_tokens(ids)
    x.requires_grad_(True)  # enable_input_require_grads (training_utils.py:512-520)
    mask = u.attn["xformers"].attn_bias.LowerTriangularMask()  # CausalLM_fast_forward (llama.py:2017-2018)
    mode = s.get("checkpointing", "offload")
    for layer in model.model.layers:
        fn = functools.partial(layer.forward, causal_mask=mask, attention_mask=None, position_ids=position_ids,
                               past_key_value=None, output_attentions=False, use_cache=False, padding_mask=None,
                               position_embeddings=rope, **kwargs)
        if mode == "offload":  # use_gradient_checkpointing="unsloth": UnslothCheckpointFunction
            x = u.ckpt["unsloth_checkpoint"](fn, x, use_reentrant=True)[0]
        elif mode == "plain":  # True (or "unsloth" below max_seq_length 512): transformers' default, non-reentrant
            x = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)[0]
        else:
            x = fn(x)[0]
    x = u.rms["fast_rms_layernorm"](model.model.norm, x, gemma=False, reuse_grad=True)
    if s.get("loss", "fused") == "standard":
        # UNSLOTH_RETURN_LOGITS=1 (llama.py:2141-2178): bf16 logits from lm_head, shifted labels, Unsloth's
        # Triton cross-entropy (cross_entropy_loss.py:531-568)
        logits = model.lm_head(x.to(model.lm_head.weight.dtype))
        shift = torch.empty_like(labels)
        return u.ce["fast_cross_entropy_loss"](logits=logits, labels=shift, n_items=torch.ones((), dtype=torch.int64))
    # unsloth_chunked_ce_loss (chunked_logprob.py:430-458): shifted flat targets, divisor = labelled count.
    n = x.shape[0] * x.shape[1]
    targets = torch.empty(n, dtype=torch.int64)  # _ce_targets: torch.cat((labels[..., 1:], pad)) → reshape(-1)
    divisor = torch.empty((), dtype=torch.float32)
    scaling = torch.ones((), dtype=torch.float32)
    u.keep_rows = n - b  # every position but each sequence's last has a label
    return _CE.apply(x.reshape(-1, h), model.lm_head.weight, targets, divisor, scaling, u)


def train_step(model, opt, u, case, rope, tracker, snaps=None) -> None:
    """One Trainer step: loss.backward(), clip_grad_norm_(1.0), optimizer.step(), zero_grad(set_to_none=True)."""
    tracker.new_step()
    # The Trainer's bf16=True (Unsloth's trainer sets it on an Ampere card, models/rl.py:2613-2678): the forward runs
    # under bf16 autocast (CPU autocast here: custom_fwd/custom_bwd and the checkpoint's recompute follow it as
    # they follow CUDA's); backward runs outside it.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = forward_loss(model, u, case, rope)
    if snaps is not None:
        snaps["after_forward"] = categories(tracker.get_tracker_snapshot("current"))
        snaps["after_forward_host_bytes"] = u.host_ram()
    loss.backward()
    del loss
    tracker.phase_override = "grad_clip"
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    tracker.phase_override = None
    opt.step()
    opt.zero_grad(set_to_none=True)
    if snaps is not None:
        snaps["after_step"] = categories(tracker.get_tracker_snapshot("current"))


class _AdamW8bit(torch.optim.Optimizer):
    """bitsandbytes AdamW8bit (Unsloth's trainer default optim='adamw_8bit', models/rl.py:3318): two uint8 states +
    one fp32 absmax per 256 elements for tensors of ≥ 4096 elements (optim/optimizer.py min_8bit_size), else two fp32
    states; the step is a fused kernel (no temporaries)."""

    def __init__(self, params):
        super().__init__(params, {})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    if p.numel() >= 4096:
                        st["state1"] = torch.empty(p.shape, dtype=torch.uint8)
                        st["state2"] = torch.empty(p.shape, dtype=torch.uint8)
                        st["absmax1"] = torch.empty(-(-p.numel() // 256), dtype=torch.float32)
                        st["absmax2"] = torch.empty(-(-p.numel() // 256), dtype=torch.float32)
                    else:
                        st["state1"] = torch.empty(p.shape, dtype=torch.float32)
                        st["state2"] = torch.empty(p.shape, dtype=torch.float32)


class _HostlessTracker(Tracker):
    """The calibration tracker, blind to the meta device: pinned host buffers are not device memory."""

    def _update_and_maybe_create_winfos(self, t, reftype, update_existing=False):
        if t.device.type == "meta":
            return set()
        return super()._update_and_maybe_create_winfos(t, reftype, update_existing)

    def _track(self, reftype, t):
        if t.device.type != "meta":
            super()._track(reftype, t)


def trace_case(case: dict) -> dict:
    """Two steps of the case; the second (steady state) is measured."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    s, cfg = case["setup"], case["config"]
    u = _Unsloth(xformers=True, flash_min_rows=s.get("flash_min_rows", 0),
                 free_bytes=int(s.get("free_gb", 20) * GiB), double_buffer=s.get("double_buffer", True))
    if s.get("min_offload_bytes") is not None:
        u.ckpt["MINIMUM_SIZE"] = s["min_offload_bytes"]
    torch.manual_seed(0)
    model, trainable = build(case)
    counts = patch_layers(model, u)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        if cfg.get("tie_word_embeddings"):
            model.lm_head.weight = model.model.embed_tokens.weight
        for layer in model.model.layers:  # to_empty made new parameters; adapters stay fp32, nothing else trains
            for name, p in layer.named_parameters():
                p.requires_grad_(".lora_" in name)
        model.lm_head.weight.requires_grad_(False)
        model.model.embed_tokens.weight.requires_grad_(False)
        model.model.norm.weight.requires_grad_(False)
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = _AdamW8bit(trainable)
        rope = _rope_cache(cfg, s)
        model.train()
        tracker = _HostlessTracker()
        tracker.track_external(model, opt)
        with tracker:
            gc.collect()
            train_step(model, opt, u, case, rope, tracker)
            gc.collect()
            first = tracker.peak_total()
            tracker.reset_mod_stats()
            tracker.restart_peak()
            snaps: dict[str, Any] = {}
            train_step(model, opt, u, case, rope, tracker, snaps)
            peak = tracker.peak_total()
            peak_snap = categories(tracker.get_tracker_snapshot("peak"))
            where = dict(tracker.peak_where)
            phase_peaks = dict(tracker.phase_peaks)
            region_peaks = dict(tracker.region_peaks)
    peak_snap.pop("total", None)
    return {
        "peak_bytes": int(peak),
        "peak_by_category": {k: int(v) for k, v in peak_snap.items()},
        "first_step_peak_bytes": int(first),
        "peak_phase": where["phase"], "peak_region": where["region"], "peak_module": where["module"],
        "peak_op": where["op"],
        "phase_peaks": {k: int(v) for k, v in phase_peaks.items()},
        "region_peaks": {k: int(v) for k, v in region_peaks.items()},
        "snapshots": snaps,
        "host_bytes": int(snaps.get("after_forward_host_bytes", 0)),
        "fused": counts,
        "xformers_calls": u.xformer_calls,
        "double_buffer": bool(u.ckpt["USE_DOUBLE_BUFFER"]),
        "scratch_bytes": int(sum(t.numel() * t.element_size() for t in u.utils["_SCRATCH"].values())),
    }


# ------------------------------------------------------------------------------------------------------------------
# Cases
# ------------------------------------------------------------------------------------------------------------------
LLAMA_8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": False}
LLAMA_3B = {"hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 24, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": True}
MISTRAL_7B = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 32768, "max_position_embeddings": 32768, "tie_word_embeddings": False}
LLAMA_70B = {"hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8,
             "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": False}
QWEN2_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4,
            "head_dim": 128, "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False,
            "model_type": "qwen2"}
ALL7 = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _case(cid: str, cfg: dict, layers: int, **setup: Any) -> dict:
    base = {"method": "qlora", "lora_rank": 32, "lora_targets": ALL7, "batch": 1, "seq_len": 4096,
            "padding_free": True, "double_buffer": True, "free_gb": 20, "flash_min_rows": 0}
    base.update(setup)
    return {"id": cid, "config": {**cfg, "num_hidden_layers": layers, "model_type": cfg.get("model_type", "llama")},
            "setup": base, "unsloth": UNSLOTH_VERSION}


def get_cases() -> list[dict]:
    """The Unsloth trace matrix: Llama-3.1-8B widths (2 layers: one offloaded, the last kept), Llama-3.2-3B (tied
    head) and Mistral-7B widths; QLoRA and 16-bit LoRA; padding-free (SDPA) and padded (xformers) batches; double
    buffering on/off; the small-card and large-card loss paths; partial targets (PEFT fallback); inputs under
    MINIMUM_SIZE; batch 2."""
    return [
        _case("u-llama8b-L2-qlora-r32-b1s4096", LLAMA_8B, 2),
        _case("u-llama8b-L2-qlora-r32-b1s8192", LLAMA_8B, 2, seq_len=8192),
        _case("u-llama8b-L3-qlora-r32-b1s4096", LLAMA_8B, 3),
        _case("u-llama8b-L2-qlora-r32-b1s4096-single", LLAMA_8B, 2, double_buffer=False),
        _case("u-llama8b-L2-qlora-r32-b1s4096-padded", LLAMA_8B, 2, padding_free=False),
        _case("u-llama8b-L2-qlora-r32-b1s2048-bigcard", LLAMA_8B, 2, seq_len=2048, flash_min_rows=4096, free_gb=60),
        _case("u-llama8b-L2-qlora-r32-b1s8192-bigcard", LLAMA_8B, 2, seq_len=8192, flash_min_rows=4096, free_gb=60),
        _case("u-llama8b-L2-lora-r16-b1s4096", LLAMA_8B, 2, method="lora", lora_rank=16),
        _case("u-llama8b-L2-qlora-r16-qv-b1s4096", LLAMA_8B, 2, lora_rank=16, lora_targets=["q_proj", "v_proj"]),
        _case("u-llama8b-L2-qlora-r32-b2s2048", LLAMA_8B, 2, batch=2, seq_len=2048),
        _case("u-llama8b-L2-qlora-r32-b1s256", LLAMA_8B, 2, seq_len=256),
        _case("u-llama3b-L2-qlora-r32-b1s4096", LLAMA_3B, 2),
        _case("u-mistral7b-L2-qlora-r32-b1s4096", MISTRAL_7B, 2),
        _case("u-llama70b-L2-qlora-r32-b1s2048", LLAMA_70B, 2, seq_len=2048),
        _case("u-qwen2-7b-L2-qlora-r16-b1s4096", QWEN2_7B, 2, lora_rank=16),
        _case("u-llama8b-L2-qlora-r16-attn-b1s4096", LLAMA_8B, 2, lora_rank=16,
              lora_targets=["q_proj", "k_proj", "v_proj", "o_proj"]),
        _case("u-llama8b-L2-qlora-r16-gateup-b1s4096", LLAMA_8B, 2, lora_rank=16,
              lora_targets=["q_proj", "v_proj", "gate_proj", "up_proj"]),
        _case("u-llama8b-L2-qlora-r32-b1s4096-plain", LLAMA_8B, 2, checkpointing="plain"),
        _case("u-llama8b-L2-qlora-r32-b1s2048-nockpt", LLAMA_8B, 2, seq_len=2048, checkpointing="none"),
        _case("u-llama8b-L2-qlora-r32-b1s2048-standard", LLAMA_8B, 2, seq_len=2048, loss="standard"),
        _case("u-llama3b-L2-qlora-r32-b1s1024", LLAMA_3B, 2, seq_len=1024),
        _case("u-llama3b-L2-qlora-r32-b1s1024-bigcard", LLAMA_3B, 2, seq_len=1024, flash_min_rows=4096, free_gb=60),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", default=[])
    p.add_argument("--all", action="store_true")
    p.add_argument("--out")
    args = p.parse_args(argv)
    cases = [c for c in get_cases() if args.all or c["id"] in args.case]
    if not cases:
        print("no case selected; ids: " + ", ".join(c["id"] for c in get_cases()), file=sys.stderr)
        return 2
    out = []
    for case in cases:
        t0 = time.time()
        measured = trace_case(case)
        out.append({**case, "measured": measured,
                    "tool": {"torch": torch.__version__, "unsloth": UNSLOTH_VERSION, "unsloth_zoo": UNSLOTH_VERSION}})
        print(f"{case['id']:<46} peak {measured['peak_bytes'] / 1e9:8.4f} GB  host {measured['host_bytes'] / 1e9:7.3f}"
              f" GB  fused {measured['fused']}  {measured['peak_phase']}/{measured['peak_region']} "
              f"({time.time() - t0:.0f} s)", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1, sort_keys=True)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
