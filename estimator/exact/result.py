"""The exact trace's result: the traced peak plus what a CPU trace cannot see (CUDA context, allocator slack,
bitsandbytes storage, CUDA-only optimizers), each listed (`ExactResult.added`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..memory.allocator import stack_allocator, step_slack
from ..memory.overhead import ALLOCATOR_SLACK, CUDA_CONTEXT_BYTES
from ..memory.precision import NF4_BYTES, NF4_DQ_BYTES
from ..memory.result import detail_bytes
from .config import TRACED_OPTIMIZERS

if TYPE_CHECKING:
    from typing import Any

    from ..job.setup import TrainingSetup
    from ..memory.result import Estimate


# The How page shows these (one description of the feature; README.md says the same in prose).
WHAT_EXACT_MEANS = N_(  # N_: translated where shown (the How page: ui/how_accuracy.py)
    "**Exact** is PyTorch's own count, not a formula: two real Hugging Face training steps of your model and "
    "setup — transformers builds the model from its config.json, PEFT adds the adapters, the HF Trainer's "
    "AdamW (fused), gradient clipping and autocast — run on the server's CPU under `FakeTensorMode` (shapes and "
    "dtypes only: no memory, no GPU, no weights downloaded), while `torch.distributed._tools.mem_tracker."
    "MemTracker` records every live tensor. The answer is the steady-state (second step) peak that "
    "`torch.cuda.max_memory_allocated()` would report, by category, with the phase and operation where it "
    "happens. Tracing costs CPU time per layer, so a deep model is traced at two shallow depths — multiples of "
    "its layer pattern (sliding/full attention, dense-first MoE layers, linear-attention hybrids), e.g. 2 and 4 "
    "layers — and the peak and every category are extrapolated linearly to the real depth: exact when the layers "
    "repeat (every period adds the same bytes), checked by the peak falling at the same moment at both depths "
    "and no other phase's peak, extrapolated too, overtaking it; "
    "otherwise, or when the pattern cannot be kept in fewer layers, the full depth is traced. The result says "
    "which. It is the tracer behind the accuracy fixtures (`calibration/trace.py`); on a CPU, fake and real "
    "runs agree byte for byte (`calibration/selfcheck.py`)."
)
WHAT_EXACT_LEAVES_OUT = (
    N_("CUDA context and cuBLAS workspaces: added from the estimator (docs/formulas.md §5)."),
    N_("The caching allocator's rounding and fragmentation: added, {slack} % of the traced bytes."),  # .format(slack=)
    N_("bitsandbytes' 4-bit kernels (QLoRA): the 16-bit equivalent is traced, its 16-bit linear weights are replaced "
       "by the NF4 storage and the dequantisation buffer is added; the result says so."),
    N_("Optimizers that exist only as CUDA kernels (8-bit, paged, Lion): AdamW is traced and its state replaced "
       "by the estimator's figure."),
    N_("Not counted at all: FlashAttention's and cuDNN's own workspaces, and memory outside PyTorch's allocator "
       "(vLLM, NCCL)."),
    N_("Not traced (refused, with the reason): several GPUs, ZeRO/FSDP sharding, optimizer offload, gradient "
       "accumulation, image inputs; a model given only by size; custom model code (`trust_remote_code`)."),
    N_("Attention transformers cannot run as SDPA (Gemma 2's soft-capping, gpt-oss' sinks) is traced as eager, "
       "which those models use by default; the result says so."),
)


# --------------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Added:
    label: str
    bytes: int
    source: str


@dataclass(frozen=True)
class ExactResult:
    """One trace, with what the trace cannot see added from the estimator."""

    peak_bytes: int  # the traced tensor-level peak (MemTracker, steady-state step)
    peak_by_category: dict[str, int]
    peak_phase: str
    peak_region: str
    peak_module: str
    peak_op: str
    seconds: float
    versions: dict[str, str]
    params_total: int
    params_trainable: int
    added: tuple[Added, ...]
    notes: tuple[str, ...]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    # {"traced": [a, b], "extrapolated_to": L, "how": one line} when two shallow copies were traced and the peak
    # extrapolated in depth; {"traced": [L], "extrapolated_to": None, ...} for a full-depth trace
    depth: dict[str, Any] = field(default_factory=dict)

    @property
    def depth_line(self) -> str:
        """One line: the depths traced and whether they were extrapolated ("" for an older worker's answer)."""
        return str(self.depth.get("how", ""))

    @property
    def total_bytes(self) -> int:
        """The device-level peak: the trace plus what it cannot see."""
        return self.peak_bytes + sum(a.bytes for a in self.added)

    @property
    def versions_label(self) -> str:
        v = self.versions
        return Text(N_("traced with torch {torch}, transformers {transformers}, peft {peft}"), torch=v.get("torch"),
                    transformers=v.get("transformers"), peft=v.get("peft"))

    def as_json(self, fast_total: float | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "peak_bytes": self.peak_bytes, "peak_by_category": dict(self.peak_by_category),
            "peak_phase": self.peak_phase, "peak_region": self.peak_region, "peak_module": self.peak_module,
            "peak_op": self.peak_op, "seconds": self.seconds, "versions": dict(self.versions),
            "params_total": self.params_total, "params_trainable": self.params_trainable,
            "added": [{"label": a.label, "bytes": a.bytes, "source": a.source} for a in self.added],
            "total_bytes": self.total_bytes, "notes": list(self.notes),
            "depth": {k: v for k, v in self.depth.items() if k != "how"} | {"note": self.depth_line},
        }
        if fast_total is not None:
            doc["fast_minus_exact_bytes"] = int(round(fast_total)) - self.total_bytes
            doc["fast_minus_exact_pct"] = round(100.0 * (fast_total - self.total_bytes) / self.total_bytes, 2)
        return doc


def _detail(est: Estimate | None, key: str) -> float:
    """The estimator's term `key` (a DetailItem.key): at its peak phase, else the largest over its phases (the QLoRA dequantisation
    buffer is not part of every phase, but one matmul of the traced peak's phase would need it)."""
    if est is None:
        return 0.0
    at_peak = detail_bytes(est.details, key)
    return at_peak or max((detail_bytes(p.details, key) for p in est.phases), default=0.0)


def combine(raw: dict[str, Any], setup: TrainingSetup, est: Estimate | None,
            notes: tuple[str, ...] = ()) -> ExactResult:
    """The worker's answer + what a CPU trace cannot see (from the estimator, each item named)."""
    added: list[Added] = []
    peak = int(raw["peak_bytes"])
    if setup.method == "qlora":
        nf4 = NF4_DQ_BYTES if setup.nf4_double_quant else NF4_BYTES
        q_params, q_bytes = int(raw["quantizable_params"]), int(raw["quantizable_bytes"])
        added.append(Added(Text(N_("16-bit linear weights bitsandbytes stores in 4-bit (traced, removed)")), -q_bytes,
                           f"{q_params:,} parameters counted in the trace"))
        added.append(Added(Text(N_("NF4 storage of those weights")), int(round(q_params * nf4)),
                           f"{nf4:.4f} B/parameter (bitsandbytes quantize_4bit, estimator/memory/precision.py)"))
        deq = _detail(est, "activations.qlora_dequant")
        if deq:
            added.append(Added(Text(N_("QLoRA dequantisation buffer (CUDA kernel)")), int(round(deq)), "estimator"))
    if setup.optimizer not in TRACED_OPTIMIZERS and est is not None:
        traced_opt = int(raw["peak_by_category"].get("optimizer_states", 0))
        added.append(Added(Text(N_("AdamW state at the peak (traced, replaced by {optimizer})"),
                                optimizer=setup.optimizer), -traced_opt, "trace"))
        added.append(Added(Text(N_("{optimizer} state"), optimizer=setup.optimizer),
                           int(round(_detail(est, "optimizer.state"))), "estimator"))
    tensor = peak + sum(a.bytes for a in added)
    ctx = _detail(est, "overhead.cuda_context") if est is not None else CUDA_CONTEXT_BYTES
    added.append(Added(Text(N_("CUDA context and workspaces")), int(round(ctx)), "estimator (docs/formulas.md §5)"))
    allocator = stack_allocator(setup.stack)
    if allocator.expandable:  # the stack turns on expandable segments (Unsloth): its own slack, no request list
        slack = step_slack(allocator, tensor)
        added.append(Added(Text(N_("Allocator slack")), int(round(slack.expected)),
                           f"estimator: {slack.formula} (docs/formulas.md §5.1)"))
    else:
        added.append(Added(Text(N_("Allocator slack")), int(round(ALLOCATOR_SLACK * tensor)),
                           f"estimator: {ALLOCATOR_SLACK:.0%} of the allocated bytes (docs/formulas.md §5)"))
    all_notes = (*[str(n) for n in raw.get("worker_notes") or ()], *notes, Text(N_(
        "Not counted: FlashAttention's and cuDNN's own workspaces (the CPU trace runs PyTorch's flash-style SDPA "
        "kernel, which saves the same tensors), and anything outside PyTorch's allocator (vLLM, NCCL).")))
    return ExactResult(
        peak_bytes=peak, peak_by_category={k: int(v) for k, v in raw["peak_by_category"].items()},
        peak_phase=str(raw.get("peak_phase")), peak_region=str(raw.get("peak_region")),
        peak_module=str(raw.get("peak_module")), peak_op=str(raw.get("peak_op")),
        seconds=float(raw.get("seconds", 0.0)), versions=dict(raw.get("versions", {})),
        params_total=int(raw.get("params_total", 0)), params_trainable=int(raw.get("params_trainable", 0)),
        added=tuple(added), notes=all_notes, raw=raw, depth=dict(raw.get("depth") or {}),
    )
