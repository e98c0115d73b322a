"""Memory traffic of the bandwidth-bound parts of a step, in bytes: the weights a pass streams through, the optimizer
step, QLoRA's dequantisation, DoRA's weight norm, gradient accumulation. Each is a run of elementwise kernels whose
time is its bytes over the device's memory bandwidth (they do a few FLOPs per byte: Williams et al. 2009, "Roofline",
CACM 52(4): below the ridge point a kernel's time is bytes / bandwidth)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..options.optimizers import BNB_8BIT_STATE_BYTES, OPTIMIZERS
from ..options.quantization import QUANT_MODES
from .flops import adapted_names, trained_layer_share

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "mixed": 4, "fp32": 4}  # a parameter's storage per precision recipe

# Element accesses of one optimizer step per trainable parameter, as (param, grad, state) reads + writes. The state
# count covers all of the optimizer's states and temporaries.
# - fused AdamW: one kernel reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq
#   (torch/optim/adam.py _fused_adam → torch._fused_adam_; AdamW passes decoupled weight decay to the same kernel).
# - foreach AdamW: torch/optim/adam.py _multi_tensor_adam, one pass per op: _foreach_lerp_(exp_avgs, grads) (m r/w,
#   g r), _foreach_mul_(exp_avg_sqs) (v r/w), _foreach_addcmul_(exp_avg_sqs, grads, grads) (v r/w, g r),
#   _foreach_mul_(params, 1 - lr·wd) (p r/w), _foreach_sqrt(exp_avg_sqs) (v r, t w), _foreach_div_ and _foreach_add_
#   on t (r/w each), _foreach_addcdiv_(params, exp_avgs, t) (p r/w, m r, t r): p 4, g 2, states and t 14.
# - bitsandbytes 8-bit and 32-bit Adam: one fused kernel (bitsandbytes/optim/optimizer.py Optimizer2State.update_step
#   → optimizer_update_8bit_blockwise / optimizer_update_32bit): p r/w, g r, two states r/w.
# - SGD with momentum: torch/optim/sgd.py _multi_tensor_sgd: _foreach_mul_/add_ on the momentum (r/w, g r) then
#   _foreach_add_(params, bufs) (p r/w, buf r).
# - Adafactor (transformers optimization.py): the factored row/column means read grad² twice, the update reads
#   them and writes the param: p 2, g 3, state ≈ 0 (the factors are a vector per matrix).
# - Lion (bitsandbytes Lion32bit): one kernel, p r/w, g r, exp_avg r/w.
# - MLX Adam / Muon: mlx_lm compiles the whole step (tuner/trainer.py: mx.compile of the step with the optimizer
#   state as its state), so the update fuses into one pass: p r/w, g r, states r/w (Muon adds Newton-Schulz
#   matmuls on each matrix; counted here as its one momentum pass).
_ACCESSES: dict[str, tuple[int, int, int]] = {
    "adamw": (2, 1, 4), "adamw_foreach": (4, 2, 14), "adamw_8bit": (2, 1, 4), "paged_adamw": (2, 1, 4),
    "paged_adamw_8bit": (2, 1, 4), "sgd": (2, 2, 3), "adafactor": (2, 3, 0), "lion": (2, 1, 2), "adam": (2, 1, 4),
    "muon": (2, 1, 2),
}
# torch.nn.utils.clip_grad_norm_ (foreach): one pass reading every gradient for the norms, then _foreach_mul_ of the
# gradients by the clip coefficient (read and write): 3 gradient accesses (torch/nn/utils/clip_grad.py).
CLIP_ACCESSES = 3

# bitsandbytes NF4: 4 bits per weight plus an 8-bit absmax per 64 weights and an fp32 scale per 256 of those (double
# quantisation; QLoRA paper arXiv 2305.14314 §3 "0.127 bits per parameter") read, and the 16-bit weight written, each
# time a frozen 4-bit linear is used: MatMul4Bit dequantizes in forward and again in backward
# (bitsandbytes/autograd/_functions.py MatMul4Bit.forward / .backward: F.dequantize_4bit, then a 16-bit matmul).
# torchao's NF4Tensor (torchtune) and Unsloth's fast_dequantize (unsloth/kernels/utils.py) do the same.
NF4_READ_BYTES = 0.5 + 0.127 / 8
DEQUANT_WRITE_BYTES = 2

# PEFT's DoRA recomputes the weight norm of every adapted linear in each forward (peft/tuners/lora/dora.py
# DoraLinearLayer.forward): lora_B(lora_A(eye(in))) builds B·A through an in × in identity (fp32 adapters: 4 B written
# and read), .T.to(x.dtype) copies it to 16-bit (4 B read, 2 B written), weight + scaling·lora_weight (2 B read, 2 B
# written, twice) and torch.linalg.norm reads it (2 B): ≈ 30 B per weight element of the adapted module, per forward.
# mlx-lm's DoRALinear (mlx_lm/tuner/dora.py) adds B·A to the weight and takes the norm in one compiled graph: the
# weight read (2 B), the sum written and read in fp32 (8 B), the norm's read (4 B): ≈ 14 B.
DORA_BYTES_PEFT = 30
DORA_BYTES_MLX = 14


def param_bytes(setup: TrainingSetup) -> int:
    """Bytes of one stored 16-bit/32-bit parameter under the precision recipe (mixed keeps an fp32 master)."""
    return DTYPE_BYTES[setup.precision]


def compute_weight_bytes(setup: TrainingSetup) -> int:
    """Bytes a matmul reads per weight element: the 16-bit copy under bf16/fp16 and mixed (autocast), 4 under fp32."""
    return 4 if setup.precision == "fp32" else 2


def frozen_base_params(spec: ModelSpec) -> float:
    """The decoder linears' weights (what QLoRA quantises and a pass streams through)."""
    return float(spec.params_quantizable)


def head_params(spec: ModelSpec) -> float:
    return float(spec.hidden_size * spec.vocab_size)


def optimizer_bytes(setup: TrainingSetup, trainable: float) -> float:
    """Bytes the optimizer step (and gradient clipping) moves for `trainable` parameters on this GPU."""
    opt = OPTIMIZERS[setup.optimizer]
    p = 4 if setup.method != "full" and setup.adapter_dtype == "fp32" else param_bytes(setup)
    g = p
    state = {"param": p, "fp32": 4, "8bit": BNB_8BIT_STATE_BYTES, "factored": 0}[opt.state_dtype]
    pa, ga, sa = _ACCESSES.get(setup.optimizer, (2, 1, 4))
    clip = CLIP_ACCESSES * g if setup.max_grad_norm else 0
    return trainable * (pa * p + ga * g + sa * state + clip)


def accumulation_bytes(setup: TrainingSetup, trainable: float) -> float:
    """Gradient accumulation: every micro-step after the first adds its gradient into .grad (autograd's
    AccumulateGrad: read and write the stored gradient, read the new one), per optimizer step."""
    if setup.grad_accum <= 1:
        return 0.0
    g = 4 if setup.method != "full" and setup.adapter_dtype == "fp32" else param_bytes(setup)
    return (setup.grad_accum - 1) * trainable * 3 * g


def dequant_bytes_per_use(spec: ModelSpec, setup: TrainingSetup, mlx: bool) -> float:
    """QLoRA: bytes one use of the 4-bit base moves to dequantise it (0 for MLX, whose quantized_matmul reads the
    packed weights inside the matmul kernel: mlx/backend/metal/kernels/quantized.h qmm, no 16-bit copy)."""
    if setup.method != "qlora" or mlx:
        return 0.0
    mode = QUANT_MODES.get(setup.quant_mode)
    read = NF4_READ_BYTES if mode is None or mode.id == "nf4" else setup.quant_bits / 8 + 4 / setup.quant_group
    return frozen_base_params(spec) * (read + DEQUANT_WRITE_BYTES)


def dora_bytes_per_forward(spec: ModelSpec, setup: TrainingSetup, mlx: bool) -> float:
    """DoRA's weight-norm traffic for one forward: the adapted linears' weight elements × the bytes per element."""
    if not setup.dora:
        return 0.0
    names = adapted_names(spec, setup)
    elements = sum(m.in_features * m.out_features * m.count * (m.layers or spec.num_layers)
                   for m in spec.linears if m.name in names) * trained_layer_share(spec, setup)
    return elements * (DORA_BYTES_MLX if mlx else DORA_BYTES_PEFT)


def trainable_params(spec: ModelSpec, setup: TrainingSetup) -> float:
    """Parameters the optimizer updates: every parameter for full fine-tuning (the last N layers' share when
    lora_layers limits it, plus the embeddings and head), else the LoRA adapters (r × (in + out) per adapted module;
    DoRA adds one magnitude per output)."""
    share = trained_layer_share(spec, setup)
    if setup.method == "full":
        body = spec.params_total - spec.params_embedding - spec.params_tower
        return body * share + spec.params_embedding
    names = adapted_names(spec, setup)
    r = setup.lora_rank
    total = r * (spec.hidden_size + spec.vocab_size) if "lm_head" in names else 0.0
    for m in spec.linears:
        if m.name in names:
            per = r * (m.in_features + m.out_features) + (m.out_features if setup.dora else 0)
            total += per * m.count * (m.layers or spec.num_layers) * share
    return float(total)
