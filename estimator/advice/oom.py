"""What an out-of-memory message means for this job: the device's real capacity and its catalog entry, how far the
run was from fitting, whether the allocator's fragmentation or another process is to blame, and (priced with the
job's estimate) the comparison and the remedies (docs/formulas.md §11).

The reading comes from estimator/oom_message.py (text → bytes); this module adds the catalog, the estimate and
advise(). Every cause has a stable id (CAUSES); its sentence is a Text, translated where shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..memory.overhead import CUDA_CONTEXT_HIGH
from ..memory.verdict import verdict
from ..oom_message import FIGURES
from ..options.devices import CATALOG, CUSTOM_MAX_GB, CUSTOM_MIN_GB, custom_device
from ..units import GB, GiB
from .advise import advise

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..memory.result import Estimate
    from ..memory.verdict import Verdict
    from ..models.spec import ModelSpec
    from ..oom_message import OomReading
    from ..options.devices import Device
    from .advise import Advice

# cudaMemGetInfo's total (the message's "total capacity") is the card's memory less what the driver keeps back,
# so it sits a little below nvidia-smi's memory.total, the catalog's capacity: 14.74 GiB vs 15.0 GiB on a T4
# (huggingface/trl#4237), 79.15 GiB vs 80.0 GiB on an A100 80GB (axolotl-ai-cloud/axolotl#971), 23.68 GiB vs
# 24.0 GiB on an RTX 3090 (axolotl-ai-cloud/axolotl#1717); up to 3.1 % in the catalog's own CUDA totals (an RTX
# 4060, options/devices.py CUDA_TOTALS), and each moves a little with the driver. A catalog entry matches a message
# when its nvidia-smi figure is between the message's and 5 % above it; the entry whose CUDA total is nearest the
# message's comes first (an A100 80GB's 79.15 GiB, not the H100's 79.11 with a smaller nvidia-smi figure).
CUDA_TOTAL_MATCH = 1.05
# PyTorch's MPS allocator: "max allowed" = high watermark ratio × Metal's recommendedMaxWorkingSetSize, the ratio
# 1.7 by default (aten/src/ATen/mps/MPSAllocator.h default_high_watermark_ratio); macOS sets the working set to
# two thirds to three quarters of RAM on the Macs in the public messages (18.13 GB allowed = 1.7 × 10.67 GiB on a
# 16 GB Mac: pytorch/pytorch#152351; 20.40 GB = 1.7 × 12 GiB on an 18 GB M3 Pro: pytorch/pytorch#130112).
MPS_HIGH_WATERMARK = 1.7
MAC_WORKING_SET = (0.62, 0.80)  # the working set's share of RAM the inferred Mac may have
# A cause must matter: another process's memory or the allocator's cached pieces count when they are at least
# this share of the device (or the shortfall they would have covered).
NOTABLE_SHARE = 0.05
FULL_SHARE = 0.85  # the run itself is too big when its tensors and the request reach this share of the device

CAUSES = ("request_exceeds_device", "fraction_limit", "other_processes", "fragmentation", "run_too_big",
          "mps_watermark", "mps_other_allocations", "metal_buffer_limit", "metal_resource_limit",
          "metal_out_of_memory", "logits", "no_figures", "partial_message")


@dataclass(frozen=True)
class Finding:
    """One thing the diagnosis learned: a stable id (CAUSES, or an action's id) and its sentence (a Text)."""

    key: str
    text: str


@dataclass(frozen=True)
class OomDiagnosis:
    """An out-of-memory message read and judged, with the job priced on the device it names."""

    reading: OomReading
    capacity_bytes: int | None  # the device's memory: CUDA's total, or a Mac's RAM inferred from MPS's limit
    capacity_inferred: bool  # True when capacity_bytes was worked out, not read
    matches: tuple[Device, ...]  # catalog entries with that memory, closest first
    device: Device | None  # the device the job was priced on
    short_by_bytes: float | None  # at that moment the device lacked at least this much
    causes: tuple[Finding, ...]  # why (CAUSES ids), most telling first
    actions: tuple[Finding, ...]  # what to do about the causes (beyond the job's remedies)
    expandable_segments: bool  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True would help
    estimate: Estimate | None = None
    verdict: Verdict | None = None
    comparison: str = ""  # the estimate against what the message shows (a Text)
    advice: Advice | None = None
    notes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        """The CLI's `oom` object: the reading in bytes, then the diagnosis with stable ids."""
        doc: dict[str, object] = dict(self.reading.as_json())
        diag: dict[str, object] = {
            "causes": [c.key for c in self.causes],
            "findings": [{"key": c.key, "text": str(c.text)} for c in self.causes],
            "actions": [{"key": a.key, "text": str(a.text)} for a in self.actions],
            "expandable_segments": self.expandable_segments,
            "matched_devices": [d.id for d in self.matches],
        }
        if self.capacity_bytes is not None:
            diag["capacity_bytes"] = self.capacity_bytes
            diag["capacity_inferred"] = self.capacity_inferred
        if self.short_by_bytes is not None:
            diag["short_by_bytes"] = int(round(self.short_by_bytes))
        if self.device is not None:
            diag["priced_on"] = self.device.id
        if self.estimate is not None and self.verdict is not None:
            diag["estimate_total_bytes"] = int(round(self.estimate.total_bytes))
            diag["estimate_fits"] = self.verdict.fits
            diag["estimate_band"] = self.verdict.band
            diag["comparison"] = str(self.comparison)
        diag["notes"] = [str(n) for n in self.notes]
        doc["diagnosis"] = diag
        return doc


def _gb(nbytes: float) -> Text:
    """A size for a sentence: decimal GB and binary GiB, numbers in the reader's language."""
    return Text("{gb} GB ({gib} GiB)", gb=(nbytes / GB, 2), gib=(nbytes / GiB, 2))


# ---- the device the message names -------------------------------------------------------------------------------

def cuda_matches(capacity_bytes: int) -> tuple[Device, ...]:
    """Discrete catalog devices whose nvidia-smi memory is the message's CUDA total or up to 5 % above it (the
    driver's reserve), the one whose own CUDA total (Device.runtime_total_bytes) is nearest the message's first."""
    found = [d for d in CATALOG if d.kind == "discrete" and capacity_bytes <= d.capacity_bytes
             <= capacity_bytes * CUDA_TOTAL_MATCH]
    return tuple(sorted(found, key=lambda d: (abs(d.runtime_total_bytes - capacity_bytes), d.capacity_bytes, d.id)))


def mps_matches(limit_bytes: int) -> tuple[Device, ...]:
    """Macs whose RAM fits MPS's "max allowed" at the default watermark: the working set (limit ÷ 1.7) between
    62 and 80 % of their RAM; the one nearest two thirds first."""
    working_set = limit_bytes / MPS_HIGH_WATERMARK
    low, high = MAC_WORKING_SET
    found = [d for d in CATALOG if d.kind == "unified" and d.id != "laptop-36gb"
             and low <= working_set / d.capacity_bytes <= high]
    return tuple(sorted(found, key=lambda d: (abs(working_set / d.capacity_bytes - 2 / 3), d.capacity_bytes)))


def _device_for(reading: OomReading, matches: tuple[Device, ...], capacity: int | None) -> Device | None:
    """The catalog's closest entry, else a custom device of the message's capacity."""
    if matches:
        return matches[0]
    if capacity is None:
        return None
    gb = capacity / GB
    if not CUSTOM_MIN_GB <= gb <= CUSTOM_MAX_GB:
        return None
    return custom_device(round(gb, 2), "unified" if reading.kind == "mps" else "discrete")


# ---- the causes ---------------------------------------------------------------------------------------------------

def _cuda_causes(r: OomReading) -> tuple[list[Finding], list[Finding], float | None, bool]:
    """(causes, actions, short by, expandable segments helps) for a CUDA message, current or older."""
    causes: list[Finding] = []
    actions: list[Finding] = []
    req, cap, free = r.requested_bytes, r.capacity_bytes, r.free_bytes
    short = max(req - free, 0) if req is not None and free is not None else None
    if req is not None and cap is not None and req > cap:
        causes.append(Finding("request_exceeds_device", Text(
            N_("The failed request alone, {request}, is larger than the whole device ({capacity}): no allocator "
               "setting and no other process explains it. One tensor is too big: shorten the max length, lower the "
               "batch, or use a chunked or fused loss if it is the logits."), request=_gb(req), capacity=_gb(cap))))
    limit = r.allowed_bytes
    if limit is not None and r.allocated_bytes is not None and req is not None \
            and r.allocated_bytes + req > limit:
        causes.append(Finding("fraction_limit", Text(
            N_("A per-process limit of {limit} is set (torch.cuda.set_per_process_memory_fraction): PyTorch may not "
               "go past it even when the device has memory free."), limit=_gb(limit))))
    others, pids = _others(r)
    if others is not None and cap is not None and others >= NOTABLE_SHARE * cap and (
            short is None or others >= short):
        causes.append(Finding("other_processes", Text(
            N_("Other processes hold {others} of this device ({pids}); without them the request would have "
               "fitted. Stop them, or give this run a device of its own."), others=_gb(others),
            pids=Text(N_("NVML lists {pids}"), pids=pids) if pids else Text(N_("not listed by NVML: the total less "
                                                                               "the free memory and this process's")))))
        actions.append(Finding("stop_other_processes", Text(
            N_("Free the device: stop the other processes on it (nvidia-smi lists them), or pick another device "
               "with CUDA_VISIBLE_DEVICES."))))
    unallocated = r.reserved_unallocated_bytes
    # Fragmentation is to blame when the allocator's cached pieces would have covered the request with the free
    # memory, and there are enough of them to matter (a few MiB of pieces on a full card are not the problem).
    fragmented = (unallocated is not None and req is not None and free is not None and unallocated > 0
                  and free + unallocated >= req and (cap is None or unallocated >= NOTABLE_SHARE * cap))
    if fragmented:
        causes.append(Finding("fragmentation", Text(
            N_("PyTorch's allocator holds {unallocated} reserved but unused, in pieces: together with the {free} "
               "free that would have covered the {request} asked for, but no piece was large enough. That is "
               "fragmentation."), unallocated=_gb(unallocated), free=_gb(free), request=_gb(req))))
        if r.kind == "cuda_legacy" or r.hint == "max_split_size_mb":
            actions.append(Finding("expandable_segments", Text(
                N_("This PyTorch predates expandable segments (its message suggests max_split_size_mb): upgrade "
                   "PyTorch and set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or set "
                   "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 as the message says."))))
        else:
            actions.append(Finding("expandable_segments", Text(
                N_("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before starting the run: the allocator "
                   "then grows one segment instead of leaving unusable pieces."))))
    too_big = (r.allocated_bytes is not None and cap is not None and req is not None and req <= cap
               and r.allocated_bytes + req >= FULL_SHARE * cap)
    if (too_big or not causes) and r.allocated_bytes is not None and cap is not None:
        causes.append(Finding("run_too_big", Text(
            N_("The run itself filled the device: PyTorch held {allocated} in tensors of the {capacity} and asked "
               "for {request} more. Neither another process nor fragmentation explains it: the job needs less "
               "memory or a larger device."), allocated=_gb(r.allocated_bytes), capacity=_gb(cap),
            request=_gb(req or 0))))
    return causes, actions, short, fragmented


def _others(r: OomReading) -> tuple[float | None, str]:
    """Memory on the device that is neither this process's nor free. NVML's process list says it directly; a lone
    "Process N" line with no "this process" line is this process seen from another PID namespace (a container)
    when it holds what PyTorch reserved; without a list, total − free − what PyTorch reserved, less a CUDA
    context, is the bound. Returns (bytes, the other processes' pids as the message lists them)."""
    listed = [(pid, b) for pid, b in r.other_processes if b is not None]
    if listed:
        reserved = (r.allocated_bytes or 0) + (r.reserved_unallocated_bytes or 0)
        if r.in_use_bytes is None:  # which one is this process? the smallest listing that covers PyTorch's
            covering = sorted((b, pid) for pid, b in listed if b >= reserved)
            if covering:
                listed = [(pid, b) for pid, b in listed if pid != covering[0][1]]
        return float(sum(b for _pid, b in listed)), ", ".join(str(pid) for pid, _b in listed)
    cap, free = r.capacity_bytes, r.free_bytes
    if cap is None or free is None:
        return None, ""
    if r.in_use_bytes is not None:
        if r.in_use_bytes < (r.allocated_bytes or 0):
            return None, ""  # NVML said less than PyTorch holds (0 bytes on some drivers): not believed
        return max(cap - free - r.in_use_bytes, 0), ""
    if r.kind == "cuda_legacy" and r.reserved_bytes is not None:
        return max(cap - free - r.reserved_bytes - CUDA_CONTEXT_HIGH, 0), ""
    return None, ""


def _mps_causes(r: OomReading) -> tuple[list[Finding], list[Finding], float | None]:
    causes: list[Finding] = []
    actions: list[Finding] = []
    short = None
    alloc, other, limit, req = r.allocated_bytes, r.other_bytes, r.limit_bytes, r.requested_bytes
    if limit is not None and alloc is not None and other is not None and req is not None:
        short = max(alloc + other + req - limit, 0)
        causes.append(Finding("mps_watermark", Text(
            N_("PyTorch's MPS limit is {limit} (its high watermark, 1.7 × Metal's recommended working set by "
               "default): tensors {allocated} plus other allocations {other} plus the {request} asked for pass it "
               "by {short}."), limit=_gb(limit), allocated=_gb(alloc), other=_gb(other), request=_gb(req),
            short=_gb(short))))
        actions.append(Finding("mps_watermark", Text(
            N_("PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 lifts the limit but lets macOS swap or stop the machine; "
               "making the job smaller is safer."))))
    if other is not None and alloc is not None and other >= max(alloc, 1) * 0.5:
        causes.append(Finding("mps_other_allocations", Text(
            N_("Other allocations on the GPU, {other}, are large next to PyTorch's {allocated}: other apps' GPU "
               "memory and Metal's own caches count against the same limit. Close other GPU apps."),
            other=_gb(other), allocated=_gb(alloc))))
    return causes, actions, short


def _mlx_causes(r: OomReading) -> tuple[list[Finding], list[Finding], float | None]:
    causes: list[Finding] = []
    actions: list[Finding] = []
    short = None
    if r.kind == "mlx_buffer" and r.requested_bytes is not None and r.max_buffer_bytes is not None:
        short = max(r.requested_bytes - r.max_buffer_bytes, 0)
        causes.append(Finding("metal_buffer_limit", Text(
            N_("One array of {request} is larger than Metal's largest buffer, {limit} (MTLDevice.maxBufferLength): "
               "free memory does not help. The biggest array must shrink: shorter sequences, a smaller batch (the "
               "logits are batch × length × vocabulary)."), request=_gb(r.requested_bytes),
            limit=_gb(r.max_buffer_bytes))))
    elif r.kind == "mlx_resource_limit":
        causes.append(Finding("metal_resource_limit", Text(
            N_("MLX ran out of Metal buffer handles ({n} at most), not of memory: more buffers were alive than "
               "Metal allows. Update mlx and mlx-lm, or clear MLX's cache more often (mx.clear_cache())."),
            n=r.resource_limit if r.resource_limit is not None else "?")))
    elif r.kind in ("mlx_malloc", "mlx_command_buffer"):
        peak = (Text(N_(" mlx-lm reported a peak of {peak} before the failure."), peak=_gb(r.peak_bytes))
                if r.peak_bytes is not None else "")
        causes.append(Finding("metal_out_of_memory", Text(
            N_("Metal refused the work for lack of memory: the arrays alive at once passed what macOS lets the GPU "
               "wire.{peak} Lower the batch or max length, turn on gradient checkpointing, or train fewer "
               "layers."), peak=peak)))
    return causes, actions, short


def _partial_finding(r: OomReading, found: bool) -> Finding:
    """A message cut short: which of its template's figures it lacks, and what cannot be judged without them
    (nothing is worked out from a figure the message does not give). found: other causes were read from the
    figures it does give."""
    labels = dict(FIGURES)
    missing = [Text(labels[name]) for name in r.missing if name in labels]
    listed = Text("; ".join(f"{{m{i}}}" for i in range(len(missing))), **{f"m{i}": m for i, m in enumerate(missing)})
    if found:
        unknown = Text(N_("What is said above rests on the figures it does give."))
    elif r.kind in ("cuda", "cuda_legacy"):
        short_unknown = r.requested_bytes is None or r.free_bytes is None
        unknown = Text(N_("Without them it cannot be told whether the job itself, the allocator's fragmentation or "
                          "another process made the run fail, nor by how much the device fell short.") if short_unknown
                       else N_("Without them it cannot be told whether the job itself, the allocator's fragmentation "
                               "or another process made the run fail."))
        unknown = Text("{a} {b}", a=unknown, b=Text(N_("PyTorch prints every figure in one message: paste it whole, "
                                                       "or judge by the job's estimate below.")))
    else:
        unknown = Text(N_("Without them it cannot be told how far the run was from fitting: paste the whole "
                          "message, or judge by the job's estimate below."))
    return Finding("partial_message", Text(N_("The message is cut short; it does not give: {missing}. {unknown}"),
                                           missing=listed, unknown=unknown))


def _logits_finding(r: OomReading, spec: ModelSpec, setup: TrainingSetup) -> Finding | None:
    """Is the failed request the logits (micro-batch × length × vocabulary, 16- or 32-bit)? PyTorch rounds a large
    request up to 2 MiB (kRoundLarge in c10/cuda/CUDACachingAllocator.cpp)."""
    if r.requested_bytes is None:
        return None
    for width in (4, 2):
        logits = setup.tokens * spec.vocab_size * width
        if abs(r.requested_bytes - logits) <= max(2 * 2**20, 0.01 * logits):
            return Finding("logits", Text(
                N_("The failed request matches the logits: batch {batch} × {tokens} tokens × {vocab} vocabulary × "
                   "{width} bytes. A chunked or fused loss never holds them whole."),
                batch=setup.batch, tokens=setup.lm_seq_len, vocab=spec.vocab_size, width=width))
    return None


# ---- the diagnosis ------------------------------------------------------------------------------------------------

def diagnose_oom(reading: OomReading, spec: ModelSpec | None = None, setup: TrainingSetup | None = None,
                 trainer: TrainerSetup | None = None, device: Device | None = None,
                 fallback: Device | None = None, price: bool = True) -> OomDiagnosis:
    """Judge a reading; with a job (spec and setup), price it on the device (the one given, else the message's
    closest catalog entry, else a custom device of its capacity), compare with the message and give advise()'s
    remedies; `fallback` (the sidebar's device) prices it when the message names no device (MLX's messages carry
    no capacity). Never raises for a job the estimator refuses: the notes say why it was not priced."""
    notes: list[str] = []
    capacity: int | None = reading.capacity_bytes
    inferred = False
    matches: tuple[Device, ...] = ()
    expandable = False
    if reading.kind in ("cuda", "cuda_legacy"):
        causes, actions, short, expandable = _cuda_causes(reading)
        matches = cuda_matches(capacity) if capacity else ()
    elif reading.kind == "mps":
        causes, actions, short = _mps_causes(reading)
        if reading.limit_bytes is not None:
            matches = mps_matches(reading.limit_bytes)
            if matches:
                capacity, inferred = matches[0].capacity_bytes, True
                notes.append(Text(N_("The Mac's RAM is worked out from 'max allowed': PyTorch allows 1.7 × Metal's "
                                     "recommended working set by default (PYTORCH_MPS_HIGH_WATERMARK_RATIO), which "
                                     "macOS sets to two thirds to three quarters of RAM. A changed ratio changes "
                                     "the answer.")))
    else:
        causes, actions, short = _mlx_causes(reading)
    if reading.kind == "cuda_error" or (reading.kind == "mlx_command_buffer" and reading.peak_bytes is None):
        causes.append(Finding("no_figures", Text(
            N_("The message carries no figures: the run's own estimate below is the way to see how far it is from "
               "fitting."))))
    if reading.missing:
        causes.append(_partial_finding(reading, found=bool(causes)))
    priced_on = device or _device_for(reading, matches, capacity) or fallback
    diag = OomDiagnosis(reading, capacity, inferred, matches, priced_on, short, tuple(causes), tuple(actions),
                        expandable, notes=tuple(notes))
    if not price or spec is None or setup is None or priced_on is None:
        return diag
    return _priced(diag, spec, setup, trainer)


def _priced(diag: OomDiagnosis, spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup | None
            ) -> OomDiagnosis:
    """The job's estimate on the diagnosis's device, compared with the message, and the remedies."""
    from dataclasses import replace

    from ..memory.price import estimate

    device = diag.device
    assert device is not None
    try:
        est = estimate(spec, setup, trainer=trainer, device_capacity=device.runtime_total_bytes)
        advice = advise(spec, setup, device, trainer)
    except ValueError as exc:
        return replace(diag, notes=(*diag.notes, Text(N_("The job could not be priced: {error}"),
                                                      error=exc.args[0] if exc.args else str(exc))))
    v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
    causes = list(diag.causes)
    logits = _logits_finding(diag.reading, est.model, setup)
    if logits is not None:
        causes.append(logits)
    return replace(diag, estimate=est, verdict=v, comparison=_comparison(diag, est, v, device), advice=advice,
                   causes=tuple(causes))


def _comparison(diag: OomDiagnosis, est: Estimate, v: Verdict, device: Device) -> Text:
    """The estimate against what the message shows."""
    r = diag.reading
    # Two figures of the estimate, each named: its total (what the verdict weighs against the usable memory, with
    # the runtime's context and the allocator's slack) and its tensors at the peak (est.tensor_bytes: what PyTorch's
    # allocator hands out, the figure a message's "allocated by PyTorch" plus the request is compared with).
    head = Text(N_("The estimate for this job on {device}: {total} at the peak, counting the {runtime} context and "
                   "the allocator's slack; {band} ({usable} usable)."), device=device.title,
                total=_gb(est.total_bytes), runtime=device.runtime, band=Text(v.band), usable=_gb(device.usable_bytes))
    seen = None
    if r.allocated_bytes is not None and r.requested_bytes is not None and r.kind in ("cuda", "cuda_legacy", "mps"):
        seen = r.allocated_bytes + r.requested_bytes
    elif r.peak_bytes is not None:
        seen = r.peak_bytes
    if seen is None:
        return head
    blamed = {c.key for c in diag.causes} & {"other_processes", "fragmentation", "fraction_limit",
                                             "mps_other_allocations"}
    if v.fits and blamed:
        tail = Text(N_("The job fits by the estimate; by the message the run needed at least {seen} (tensors held "
                       "plus the request), so what is named above made it fail, not the job's size."), seen=_gb(seen))
    elif v.fits:
        tail = Text(N_("The estimate says it fits, but by the message the run needed at least {seen} (tensors held "
                       "plus the request), more than the estimate's {tensors} of tensors at its peak (without the "
                       "context and the slack, as the message counts): the run that failed may differ from this "
                       "setup (a longer sequence than the max length, a larger batch, an evaluation step), or "
                       "something else shares the device."), seen=_gb(seen), tensors=_gb(est.tensor_bytes))
    elif est.tensor_bytes >= 0.9 * seen:
        tail = Text(N_("The message agrees: the run needed at least {seen} when it failed, on the way to the "
                       "estimate's {tensors} of tensors at its peak (without the context and the slack, as the "
                       "message counts); the job needs {short} more than the device has."),
                    seen=_gb(seen), tensors=_gb(est.tensor_bytes), short=_gb(-v.margin_bytes))
    else:
        tail = Text(N_("By the message the run needed at least {seen}, more than the estimate's {tensors} of tensors "
                       "at its peak (without the context and the slack, as the message counts): the run that failed "
                       "holds more than this setup (check batch, max length and method against the sidebar)."),
                    seen=_gb(seen), tensors=_gb(est.tensor_bytes))
    return Text("{head} {tail}", head=head, tail=tail)
