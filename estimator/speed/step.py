"""The time of one optimizer step: FLOPs at the device's sustained throughput, bandwidth-bound kernels at its memory
bandwidth, offload's PCIe transfers, sharding's collectives and the launch overhead, summed.

How the parts combine (a roofline per kernel class, then a sum):
- each matmul pass (forward, backward, recompute, a reference forward) takes max(FLOPs / sustained FLOP/s, the weights
  it streams / sustained bandwidth): the roofline of a kernel is the larger of its compute and memory times
  (Williams et al. 2009, "Roofline", CACM 52(4)); a pass over a small micro-batch is bound by reading its weights;
- the elementwise kernels (optimizer step, QLoRA's dequantisation, DoRA's norm, gradient accumulation, autocast's
  casts) run between the matmuls on the same CUDA stream: their times add;
- offload transfers and collectives run on their own streams and overlap the compute they can hide behind (ZeRO-
  Offload overlaps the gradient copy with the backward, Ren et al. 2021 arXiv 2101.06840 §4.2; DDP overlaps the all-
  reduce with the backward, Li et al. 2020 arXiv 2006.15704 §3.2.3; FSDP prefetches the next all-gather, Zhao et al.
  2023 arXiv 2304.11277 §3.3.2; torchtune's activation offload uses its own stream: its table shows −0.11 % tokens/s,
  pytorch/torchtune README "Optimization flags"): only what sticks out past that compute adds;
- every decoder layer a pass crosses costs a fixed launch overhead (efficiency.Calibration.launch_*).

One optimizer step = grad_accum micro-steps of batch × length tokens on each GPU, then the optimizer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.trainer import policy_setup
from .efficiency import (
    CALIBRATION,
    COLLECTIVE_EFFICIENCY,
    GPUS_PER_NODE,
    HOST_MEMORY_GBPS,
    NODE_LINK_GBPS,
    STACK_FAMILY,
    Calibration,
)
from .flops import forward_flops, step_flops, trained_layer_share
from .traffic import (
    accumulation_bytes,
    compute_weight_bytes,
    dequant_bytes_per_use,
    dora_bytes_per_forward,
    frozen_base_params,
    head_params,
    optimizer_bytes,
    param_bytes,
    trainable_params,
)

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device

# The compute dtype of each precision recipe: mixed precision's matmuls run in bf16 under autocast.
COMPUTE_DTYPE = {"bf16": "bf16", "fp16": "fp16", "mixed": "bf16", "fp32": "fp32"}

CATEGORIES = ("compute", "memory", "transfer", "collective", "overhead")
CATEGORY_LABELS = {
    "compute": N_("compute (matmuls at the sustained TFLOPS)"),
    "memory": N_("memory-bound (weights streamed, optimizer, dequantisation, DoRA)"),
    "transfer": N_("host transfers (offload over PCIe)"),
    "collective": N_("collectives between GPUs"),
    "overhead": N_("launch overhead per layer"),
}

NO_COMPUTE = N_("{device} has no compute figures (a custom device): give its TFLOPS and memory bandwidth, or the time "
                "stays unknown")
NO_DTYPE = N_("{device} has no published {dtype} throughput ({precision} precision); choose another precision")


@dataclass(frozen=True)
class TimeTerm:
    """One part of the step time: a stable key, its category (CATEGORIES), seconds per optimizer step, and what
    it is (display text, translated where shown)."""

    key: str
    category: str
    seconds: float
    label: str


@dataclass(frozen=True)
class StepTime:
    """One optimizer step on one GPU (all GPUs run the same step). tokens_per_step: the positions one GPU trains on
    per optimizer step (batch × length × accumulation; a preference trainer's sequences per example included);
    examples_per_step: the dataset examples one GPU consumes per step (a GRPO completion counts as one)."""

    step_seconds: float
    tokens_per_step: int
    examples_per_step: int
    gpus: int
    micro_steps: int
    flops_per_step: float
    terms: tuple[TimeTerm, ...]
    dtype: str
    peak_tflops: float
    efficiency: float
    family: str

    @property
    def tokens_per_second_per_gpu(self) -> float:
        return self.tokens_per_step / self.step_seconds

    @property
    def tokens_per_second(self) -> float:
        """Tokens per second over all GPUs."""
        return self.tokens_per_step * self.gpus / self.step_seconds

    @property
    def examples_per_second(self) -> float:
        return self.examples_per_step * self.gpus / self.step_seconds

    @property
    def achieved_tflops(self) -> float:
        """The FLOPs the model counts per step over the step time, per GPU (recomputation included)."""
        return self.flops_per_step / self.step_seconds / 1e12

    def seconds_by_category(self) -> dict[str, float]:
        out = dict.fromkeys(CATEGORIES, 0.0)
        for term in self.terms:
            out[term.category] += term.seconds
        return out


def platform(compute: Compute) -> str:
    return "apple" if compute.gpu_class == "apple" else "cuda"


def stack_family(setup: TrainingSetup) -> str:
    """The efficiency class of the setup's stack; an explicit setup (no stack) runs transformers + PEFT, the
    TrainingSetup defaults' baseline."""
    return STACK_FAMILY.get(setup.stack or "", "transformers")


def device_compute(device: Device, compute: Compute | None = None) -> Compute:
    """The figures to time on: the user's (compute) or the device's; ValueError when there are none."""
    figures = compute or device.compute
    if figures is None:
        raise ValueError(Text(NO_COMPUTE, device=device.title))
    return figures


def _pass(flops: float, weight_bytes: float, flop_rate: float, bandwidth: float) -> tuple[float, float]:
    """(compute seconds, memory seconds beyond them) of a matmul pass: max(FLOPs/rate, bytes/bandwidth) split so the
    compute part and the extra the weight streaming adds sum to the roofline time."""
    t_compute = flops / flop_rate
    t_memory = weight_bytes / bandwidth
    return t_compute, max(0.0, t_memory - t_compute)


def _generation(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup, flop_rate: float, bandwidth: float,
                launch: float) -> tuple[float, float, float]:
    """GRPO's generation per optimizer step: (compute s, memory s, overhead s). Every GPU generates for its share of
    the generation batch, batch × accumulation completions (steps_per_generation = gradient_accumulation_steps,
    trl/trainer/grpo_config.py, TRL 1.16.0), in one call: a prefill of the prompts, then one decode step per
    completion token that reads every weight once and each sequence's KV cache (decode is bandwidth-bound: Pope et
    al. 2022 arXiv 2211.05102 §2). transformers generate pays the launch overhead per layer per token; vLLM captures
    the decode step in CUDA graphs (vLLM's docs: "CUDA/HIP graph" for "fast model execution", and its launch blog,
    https://blog.vllm.ai/2023/06/20/vllm.html: up to 24x the throughput of HF Transformers), so no per-layer cost."""
    sequences = setup.batch * setup.grad_accum
    prompt, completion = trainer.prompt_length, trainer.completion_length
    n = 2.0 * (frozen_base_params(spec) + head_params(spec))  # matmul FLOPs per token
    kv_per_token = 2 * spec.num_layers * spec.kv_dim * 2  # K and V, 16-bit, every layer
    vllm = trainer.generation_mode.startswith("vllm")
    # weights per decode step: vLLM holds 16-bit weights; transformers generate on a QLoRA base dequantises each use
    per_param = 2.0 if vllm or setup.method != "qlora" else (dequant_bytes_per_use(spec, setup, False)
                                                             / max(frozen_base_params(spec), 1.0) + 2.0)
    weights = per_param * frozen_base_params(spec) + 2.0 * head_params(spec)
    prefill_c, prefill_m = _pass(n * sequences * prompt, weights, flop_rate, bandwidth)
    context = prompt + completion / 2.0
    decode_c, decode_m = _pass(n * sequences, weights + sequences * context * kv_per_token, flop_rate, bandwidth)
    overhead = 0.0 if vllm else launch * spec.num_layers * (1 + completion)
    return prefill_c + completion * decode_c, prefill_m + completion * decode_m, overhead


def _extra_forwards(trainer: TrainerSetup | None) -> int:
    """No-grad forwards a trainer adds per micro-step: DPO's reference forward over chosen + rejected, KTO's KL
    forward on the policy and its two reference forwards, GRPO's reference forward when beta > 0 (TRL 1.16.0:
    dpo_trainer.py l. 1285-1339, kto_trainer.py l. 1370-1445, grpo_trainer.py l. 983-1003)."""
    if trainer is None:
        return 0
    opt = trainer.option
    if opt.id == "kto":
        return 1 + (2 if trainer.uses_reference() else 0)
    return 1 if trainer.uses_reference() else 0


def step_time(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
              compute: Compute | None = None, calibration: Calibration = CALIBRATION) -> StepTime:
    """The time of one optimizer step of `setup` (a resolved TrainingSetup) on `device`, with a preference/RL
    trainer's extra forwards and generation. compute: the user's own figures for a device without any (a custom
    device); ValueError (one translatable line) when there are none or the device has no figure for the precision."""
    figures = device_compute(device, compute)
    dtype = COMPUTE_DTYPE[setup.precision]
    peak = figures.tflops_for(dtype)
    if peak is None:
        raise ValueError(Text(NO_DTYPE, device=device.title, dtype=dtype, precision=setup.precision))
    family = stack_family(setup)
    mlx = family == "mlx"
    eff = calibration.efficiency(family, platform(figures), figures.arch, figures.gpu_class)
    if setup.compile and family == "torchtune":
        eff *= calibration.compile_speedup
    flop_rate = peak * 1e12 * eff
    bandwidth = figures.memory_bytes_per_s * calibration.bandwidth
    launch = calibration.launch_seconds(family)

    policy = policy_setup(setup, trainer) if trainer is not None else setup
    score_head = trainer is not None and trainer.option.head == "score"
    causal_skip = setup.attention == "sdpa" and not mlx
    flops = step_flops(spec, policy, causal_skip, score_head)
    share = trained_layer_share(spec, setup)
    ckpt = 1.0 if setup.grad_ckpt else 0.0
    full = setup.method == "full"

    # Weights a pass streams: the 16-bit (or fp32) copy every matmul reads; a QLoRA base on MLX is read packed.
    w_elem = frozen_base_params(spec) + head_params(spec)
    if setup.method == "qlora" and mlx:
        w_bytes = frozen_base_params(spec) * (setup.quant_bits / 8 + 4 / setup.quant_group) + 2 * head_params(spec)
    else:
        w_bytes = w_elem * compute_weight_bytes(setup)
    terms: dict[str, list[float]] = {}

    def add(key: str, seconds: float) -> None:
        terms.setdefault(key, []).append(seconds)

    # --- one micro-step's passes -------------------------------------------------------------------------------
    fwd = _pass(flops.forward, w_bytes, flop_rate, bandwidth)
    # backward: input gradients read the weights again; full fine-tuning also writes every weight gradient
    bwd_bytes = w_bytes * share + (w_elem * share * param_bytes(setup) if full else 0.0)
    bwd = _pass(flops.backward, bwd_bytes, flop_rate, bandwidth)
    rec = _pass(flops.recompute, w_bytes * share * ckpt, flop_rate, bandwidth) if ckpt else (0.0, 0.0)
    extra = _extra_forwards(trainer)
    ref = _pass(forward_flops(spec, policy, causal_skip, score_head), w_bytes, flop_rate, bandwidth)
    micro_compute = fwd[0] + bwd[0] + rec[0] + extra * ref[0]
    micro_weights = fwd[1] + bwd[1] + rec[1] + extra * ref[1]
    # elementwise kernels between the matmuls
    uses = 2 + ckpt + extra  # forward, backward (+ recompute, + reference forwards)
    micro_dequant = dequant_bytes_per_use(spec, setup, mlx) * uses / bandwidth
    micro_dora = dora_bytes_per_forward(spec, setup, mlx) * (1 + ckpt) / bandwidth
    # autocast casts each fp32 master weight to bf16 once per forward (read 4 B, write 2 B; torch autocast caches the
    # cast for the rest of the forward: torch/csrc/autograd/autocast_mode.cpp cached_cast)
    micro_cast = (w_elem * 6 * (1 + ckpt) / bandwidth) if setup.precision == "mixed" else 0.0
    micro_launch = launch * spec.num_layers * (1 + share * (1 + ckpt) + extra)
    n_micro = setup.grad_accum
    add("compute", micro_compute * n_micro)
    add("weights", micro_weights * n_micro)
    add("dequant", micro_dequant * n_micro)
    add("dora", micro_dora * n_micro)
    add("cast", micro_cast * n_micro)
    add("overhead", micro_launch * n_micro)

    # --- once per optimizer step ---------------------------------------------------------------------------------
    gpus = setup.gpus
    trainable = trainable_params(spec, setup)
    shard = trainable / gpus if setup.sharding != "none" else trainable
    grad_bytes = 4 if not full and setup.adapter_dtype == "fp32" else param_bytes(setup)
    add("accumulation", accumulation_bytes(setup, trainable) / bandwidth)
    backward_window = (bwd[0] + bwd[1]) * n_micro
    if setup.offload_optimizer:
        # ZeRO-Offload: gradients down (hidden behind the backward), the CPU updates fp32 states at host memory
        # speed (param, grad, m, v read; param, m, v written: 28 B), the updated 16-bit parameters come back up
        host = figures.host_bytes_per_s
        down = shard * grad_bytes / host
        add("offload", max(0.0, down - backward_window) + shard * 2 / host)
        add("cpu_optimizer", shard * 28 / (HOST_MEMORY_GBPS * 1e9))
    else:
        add("optimizer", optimizer_bytes(setup, shard) / bandwidth)
    if setup.offload_params:
        # ZeRO-3 parameter offload: every pass fetches this GPU's parameter shard from CPU RAM, prefetched behind the
        # pass's compute (DeepSpeed zero_optimization.offload_param; Rajbhandari et al. 2021 arXiv 2104.07857 §5)
        host = figures.host_bytes_per_s
        fetch = (frozen_base_params(spec) + head_params(spec)) * 2 / gpus / host
        passes = [fwd, bwd] + ([rec] if ckpt else [])
        add("offload", n_micro * sum(max(0.0, fetch - (c + m)) for c, m in passes))
    if setup.offload_activations and setup.grad_ckpt:
        # the checkpointed layer inputs (batch × length × hidden, 16-bit, every trained layer) go down during the
        # forward and back during the backward, on a side stream
        host = figures.host_bytes_per_s
        ckpt_bytes = policy.batch * policy.lm_seq_len * spec.hidden_size * 2 * spec.num_layers * share
        add("offload", n_micro * (max(0.0, ckpt_bytes / host - (fwd[0] + fwd[1]))
                                  + max(0.0, ckpt_bytes / host - (bwd[0] + bwd[1]))))
    add("collectives", _collectives(spec, setup, figures, trainable, grad_bytes, n_micro, fwd, bwd))
    if trainer is not None and trainer.option.generates:
        g_c, g_m, g_o = _generation(spec, setup, trainer, flop_rate, bandwidth, launch)
        add("generation", g_c + g_m)
        add("overhead", g_o)

    categories = {"compute": "compute", "weights": "memory", "dequant": "memory", "dora": "memory", "cast": "memory",
                  "accumulation": "memory", "optimizer": "memory", "generation": "memory", "cpu_optimizer": "transfer",
                  "offload": "transfer", "collectives": "collective", "overhead": "overhead"}
    out = tuple(TimeTerm(key, categories[key], sum(values), TERM_LABELS[key])
                for key, values in terms.items() if sum(values) > 0)
    step = sum(t.seconds for t in out)
    tokens = policy.batch * policy.lm_seq_len * n_micro
    examples = setup.batch * n_micro
    total_flops = (flops.total + extra * forward_flops(spec, policy, causal_skip, score_head)) * n_micro
    return StepTime(step, tokens, examples, gpus, n_micro, total_flops, out, dtype, peak, eff, family)


def _collectives(spec: ModelSpec, setup: TrainingSetup, figures: Compute, trainable: float, grad_bytes: int,
                 n_micro: int, fwd: tuple[float, float], bwd: tuple[float, float]) -> float:
    """Seconds of communication a step cannot hide. Ring collectives move (n−1)/n of the buffer per GPU for a
    reduce-scatter or an all-gather and twice that for an all-reduce (Patarasuk & Yuan 2009; NCCL's busbw in
    NVIDIA/nccl-tests doc/PERFORMANCE.md). DDP all-reduces the gradients once per optimizer step (no_sync during
    accumulation); ZeRO-1 reduce-scatters them once and all-gathers the updated parameters; ZeRO-2 reduce-scatters
    each micro-step; ZeRO-3/FSDP all-gathers the parameters for the forward and again for the backward and reduce-
    scatters the gradients, every micro-step (Rajbhandari et al. 2020 arXiv 1910.02054 §5; Zhao et al. 2023 §3)."""
    n = setup.gpus
    if n <= 1:
        return 0.0
    bus = figures.peer_bytes_per_s * COLLECTIVE_EFFICIENCY
    if n > GPUS_PER_NODE:
        bus = min(bus, NODE_LINK_GBPS * 1e9)
    part = (n - 1) / n
    grads = trainable * grad_bytes
    fwd_window = fwd[0] + fwd[1]
    bwd_window = bwd[0] + bwd[1]
    if setup.sharding == "none":
        return max(0.0, 2 * part * grads / bus - bwd_window)
    gather_trained = part * trainable * 2 / bus  # the updated 16-bit parameters, after the step (not hidden)
    if setup.sharding == "zero1":
        return max(0.0, part * grads / bus - bwd_window) + gather_trained
    if setup.sharding == "zero2":
        return n_micro * max(0.0, part * grads / bus - bwd_window) + gather_trained
    weights = frozen_base_params(spec) * (0.5 if setup.method == "qlora" else 2) + head_params(spec) * 2
    gather = part * weights / bus
    return n_micro * (max(0.0, gather - fwd_window) + max(0.0, gather + part * grads / bus - bwd_window))


TERM_LABELS = {
    "compute": N_("matmuls (forward, backward, recomputation, reference forwards)"),
    "weights": N_("weights streamed where a pass is bandwidth-bound"),
    "dequant": N_("QLoRA dequantisation of the 4-bit base"),
    "dora": N_("DoRA weight norms"),
    "cast": N_("autocast copies of the fp32 weights"),
    "accumulation": N_("gradient accumulation"),
    "optimizer": N_("optimizer step"),
    "cpu_optimizer": N_("optimizer step on the CPU"),
    "offload": N_("offload transfers not hidden behind compute"),
    "collectives": N_("collectives not hidden behind compute"),
    "generation": N_("GRPO generation"),
    "overhead": N_("launch overhead per layer"),
}


def with_length(setup: TrainingSetup, length: int) -> TrainingSetup:
    """The setup with another example length (a dataset's typical length instead of the max length)."""
    return replace(setup, seq_len=length)
