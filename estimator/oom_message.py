"""Read an out-of-memory message: the text PyTorch or MLX printed when an allocation failed, into bytes.

Pure text in, a frozen OomReading out (no device catalog, no estimate: the diagnosis is estimator/advice/oom.py).
Each message kind is read from the template its framework prints, field by field, so a message cut short still
gives what it has; every size comes back in bytes as the framework meant its unit (estimator/units.py
MESSAGE_UNITS). The templates, from the frameworks' source:

- CUDA, current: c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc (pytorch main, commit 001074d):
  "CUDA out of memory. Tried to allocate {alloc_size}. GPU {device} has a total capacity of {device_total} of which
  {device_free} is free. {proc_info}{allowed_info}Of the allocated memory {allocated} is allocated by PyTorch,
  {private_pool_msg}and {reserved − allocated} is reserved by PyTorch but unallocated. If reserved but unallocated
  memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True …", where proc_info (same file,
  reportProcessMemoryInfo, from NVML) is "Including non-PyTorch memory, this process has {used} memory in use. " for
  this process and "Process {pid} has {used} memory in use. " for each other one; allowed_info is "{max} allowed; "
  under torch.cuda.set_per_process_memory_fraction; private_pool_msg is "with {n} allocated in private pools (e.g.,
  CUDA Graphs), ". Early releases of this template spelled "total capacty" and suggested max_split_size_mb
  (axolotl-ai-cloud/axolotl#998); the same code prints "HIP out of memory" on ROCm builds and the XPU allocator
  "XPU out of memory" with the same sentences.
- CUDA, older (PyTorch 1.x, still printed by 2.0 under torch.cuda.OutOfMemoryError: axolotl-ai-cloud/axolotl#971):
  "CUDA out of memory. Tried to allocate {alloc_size} (GPU {device}; {total} total capacity; {allocated} already
  allocated; {free} free; [{max} allowed; ]{reserved} reserved in total by PyTorch)"; the oldest form ended
  "…; {free} free; {cached} cached)", the allocator's unused cache.
- MPS: aten/src/ATen/mps/MPSAllocator.mm, MPSHeapAllocatorImpl::malloc: "MPS backend out of memory (MPS allocated:
  {allocated}, other allocations: {other}[, max allowed: {max}]). Tried to allocate {size} on {shared|private}
  pool." Its KB/MB/GB are binary (estimator/units.py).
- MLX (mlx v0.32.1 mlx/backend/metal/allocator.cpp:116-157, device.cpp:540): "[metal::malloc] Attempting to allocate
  {n} bytes which is greater than the maximum allowed buffer size of {m} bytes.", "[metal::malloc] Resource limit
  ({n}) exceeded.", "[malloc] Unable to allocate {n} bytes." (older releases: "[malloc_or_wait]"), and a command
  buffer Metal refused: "[METAL] Command buffer execution failed: Insufficient Memory
  (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)." mlx-lm's training log prints "Peak mem {x} GB" every
  report (mlx_lm/tuner/trainer.py:345, get_peak_memory() / 1e9: decimal GB).
- A CUDA runtime error outside PyTorch's allocator (cuBLAS, NCCL, a kernel's workspace): "CUDA error: out of
  memory", with no figures.

The Python exception in front ("torch.OutOfMemoryError: ", "torch.cuda.OutOfMemoryError: ", "RuntimeError: ",
"libc++abi: terminating due to uncaught exception of type std::runtime_error: "), distributed ranks' "[rank1]: "
prefixes and line wrapping are read through."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .i18n import N_, Text
from .units import MESSAGE_UNITS

MAX_TEXT_CHARS = 1_000_000  # a pasted log or an --oom-log file: 1 MB of text, the app's upload limit for configs
# NVML reports "not available" as 2^64 − 1 bytes (NVML_VALUE_NOT_AVAILABLE, common under WSL and Windows), which
# format_size prints as "17179869184.00 GiB" (axolotl-ai-cloud/axolotl#998): any figure from 2^63 bytes up is that.
NVML_NOT_AVAILABLE = 1 << 63
IMPLAUSIBLE_BYTES = 10**18  # 1 EB: no single device or request comes near it; a larger figure is not believed

# Message kinds (OomReading.kind): stable ids, in the order the docs list them.
KINDS = ("cuda", "cuda_legacy", "cuda_error", "mps", "mlx_buffer", "mlx_malloc", "mlx_resource_limit",
         "mlx_command_buffer")
KIND_LABELS = {
    "cuda": N_("PyTorch CUDA caching allocator (current message)"),
    "cuda_legacy": N_("PyTorch CUDA caching allocator (older message, PyTorch 1.x)"),
    "cuda_error": N_("CUDA runtime error outside PyTorch's allocator (no figures)"),
    "mps": N_("PyTorch MPS allocator (Apple silicon)"),
    "mlx_buffer": N_("MLX: one array larger than Metal's largest buffer"),
    "mlx_malloc": N_("MLX allocator: allocation failed"),
    "mlx_resource_limit": N_("MLX: too many Metal buffers (resource limit, not a size)"),
    "mlx_command_buffer": N_("Metal command buffer out of memory (MLX)"),
}

# What an out-of-memory message can say (OomReading fields), in the order the page and the CLI list them (their labels, marked for translation).
FIGURES: tuple[tuple[str, str], ...] = (
    ("requested_bytes", N_("Requested (the allocation that failed)")),
    ("capacity_bytes", N_("Total capacity (as the runtime reports it)")),
    ("free_bytes", N_("Free on the device")),
    ("in_use_bytes", N_("In use by this process (all of it, NVML)")),
    ("allocated_bytes", N_("Allocated by PyTorch (live tensors)")),
    ("reserved_bytes", N_("Reserved by PyTorch in total")),
    ("reserved_unallocated_bytes", N_("Reserved by PyTorch but unallocated")),
    ("allowed_bytes", N_("Allowed (per-process memory fraction)")),
    ("private_pool_bytes", N_("In CUDA graphs' private pools")),
    ("other_bytes", N_("Other allocations (MPS)")),
    ("limit_bytes", N_("Max allowed (MPS high watermark)")),
    ("max_buffer_bytes", N_("Largest Metal buffer")),
    ("peak_bytes", N_("Peak before the failure (mlx-lm's log)")),
)


_SIZE = r"(\d{1,30}(?:\.\d{1,12})?)\s*(bytes|byte|[KMGT]i?B|B)\b"
_RANK_PREFIX = re.compile(r"\[(?:rank|RANK)\s*\d{1,6}\]:\s?")
# Where each message starts. The Metal command-buffer head eats its whole line (the kIOGPU… code inside it would
# otherwise start a second message).
_HEADS = (
    ("mlx_command_buffer", re.compile(r"\[METAL\] Command buffer execution failed:[^\n]*")),
    ("mlx_command_buffer", re.compile(r"kIOGPUCommandBufferCallbackErrorOutOfMemory")),
    ("cuda", re.compile(r"\b(?:CUDA|HIP|XPU) out of memory\b")),
    ("mps", re.compile(r"MPS backend out of memory")),
    ("mlx_buffer", re.compile(r"\[metal::malloc\] Attempting to allocate")),
    ("mlx_resource_limit", re.compile(r"\[metal::malloc\] Resource limit")),
    ("mlx_malloc", re.compile(r"\[(?:metal::)?malloc(?:_or_wait)?\] Unable to allocate")),
    ("cuda_error", re.compile(r"\bCUDA error: out of memory\b")),
)
_SEGMENT_CHARS = 4000  # one message's text at most: the longest template with a dozen processes is ~1,500 chars


def _field(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("SIZE", _SIZE), re.IGNORECASE)


_CUDA = {
    "requested": _field(r"Tried to allocate SIZE"),
    "capacity": _field(r"has a total capac(?:i)?ty of SIZE"),
    "device": re.compile(r"\bGPU ?(\d{0,4}) ?has a total capac"),
    "free": _field(r"of which SIZE is free"),
    "self": _field(r"Including non-PyTorch memory, this process has SIZE memory in use"),
    "process": _field(r"Process (\d{1,10}) has SIZE memory in use"),
    "allowed": _field(r"SIZE allowed;"),
    "allocated": _field(r"Of the allocated memory SIZE is allocated by PyTorch"),
    "private": _field(r"with SIZE allocated in private pools"),
    "unallocated": _field(r"and SIZE is reserved by PyTorch but unallocated"),
}
_LEGACY = {
    "requested": _field(r"Tried to allocate SIZE"),
    "device": re.compile(r"\(GPU ?(\d{0,4});"),
    "capacity": _field(r"SIZE total capacity"),
    "allocated": _field(r"SIZE already allocated"),
    "free": _field(r"SIZE free[;)]"),
    "allowed": _field(r"SIZE allowed;"),
    "reserved": _field(r"SIZE reserved in total by PyTorch"),
    "cached": _field(r"SIZE cached\)"),
}
_MPS = {
    "allocated": _field(r"MPS allocated: SIZE"),
    "other": _field(r"other allocations: SIZE"),
    "limit": _field(r"max allowed: SIZE"),
    "requested": _field(r"Tried to allocate SIZE"),
    "pool": re.compile(r"on (shared|private) pool"),
}
_MLX_BUFFER = re.compile(r"Attempting to allocate (\d{1,30}) bytes which is greater than the maximum allowed buffer "
                         r"size of (\d{1,30}) bytes")
_MLX_MALLOC = re.compile(r"Unable to allocate (\d{1,30}) bytes")
_MLX_RESOURCES = re.compile(r"Resource limit \((\d{1,12})\) exceeded")
_MLX_PEAK = re.compile(r"Peak mem (\d{1,12}(?:\.\d{1,6})?) GB")


@dataclass(frozen=True)
class OomReading:
    """What an out-of-memory message says, in bytes. A field is None where the message does not say it (or says
    something no device could mean: NVML's "not available" figure, a number beyond any machine)."""

    kind: str  # KINDS
    device_index: int | None = None
    requested_bytes: int | None = None  # the allocation that failed (PyTorch rounds it to its block size first)
    capacity_bytes: int | None = None  # the device's total memory as the runtime reports it (cudaMemGetInfo)
    free_bytes: int | None = None  # free on the device at that moment (all processes)
    in_use_bytes: int | None = None  # this process on the device, PyTorch's and everything else's (NVML)
    allocated_bytes: int | None = None  # held by live tensors (PyTorch's allocator; MPS: "MPS allocated")
    reserved_bytes: int | None = None  # older CUDA message: all the allocator holds, live or cached
    reserved_unallocated_bytes: int | None = None  # held by the allocator, not by tensors (cached pieces)
    allowed_bytes: int | None = None  # a per-process memory fraction's limit (set_per_process_memory_fraction)
    private_pool_bytes: int | None = None  # held by CUDA graphs' private pools
    other_processes: tuple[tuple[int, int | None], ...] = ()  # (pid, bytes in use) of the processes NVML listed
    other_bytes: int | None = None  # MPS: other allocations on the device (not PyTorch's tensors)
    limit_bytes: int | None = None  # MPS: "max allowed" (high watermark × Metal's recommended working set)
    max_buffer_bytes: int | None = None  # MLX: Metal's largest single buffer (MTLDevice.maxBufferLength)
    resource_limit: int | None = None  # MLX: how many Metal buffers may exist
    peak_bytes: int | None = None  # mlx-lm's last "Peak mem" report before the failure (decimal GB)
    pool: str | None = None  # MPS: "shared" or "private"
    hint: str | None = None  # what the message itself suggests: "expandable_segments" or "max_split_size_mb"
    messages: int = 1  # out-of-memory messages found in the text (the last one is read)
    notes: tuple[str, ...] = field(default_factory=tuple)  # Text: what could not be read, and why

    @property
    def label(self) -> str:
        return KIND_LABELS[self.kind]

    @property
    def complete(self) -> bool:
        """Does the reading hold every figure its template carries? (A cut-off message gives fewer.)"""
        return not self.missing

    @property
    def missing(self) -> tuple[str, ...]:
        """The fields of the figures its template carries that the reading lacks, in the template's order (a
        cut-off message: "Tried to allocate 2.00 GiB" and nothing after it lacks the total, the free memory and
        PyTorch's split)."""
        need = {
            "cuda": ("requested_bytes", "capacity_bytes", "free_bytes", "allocated_bytes",
                     "reserved_unallocated_bytes"),
            "cuda_legacy": ("requested_bytes", "capacity_bytes", "free_bytes", "allocated_bytes"),
            "mps": ("requested_bytes", "allocated_bytes", "other_bytes"),
            "mlx_buffer": ("requested_bytes", "max_buffer_bytes"),
            "mlx_malloc": ("requested_bytes",),
            "mlx_resource_limit": ("resource_limit",),
        }.get(self.kind, ())
        return tuple(name for name in need if getattr(self, name) is None)

    @property
    def others_bytes(self) -> int | None:
        """What the other processes NVML listed use together (None when it listed none or could not say)."""
        known = [b for _, b in self.other_processes if b is not None]
        return sum(known) if known else None

    def as_json(self) -> dict[str, object]:
        """The reading for the CLI's JSON: every figure in bytes, absent where the message does not say it."""
        doc: dict[str, object] = {"kind": self.kind}
        for name in ("device_index", "requested_bytes", "capacity_bytes", "free_bytes", "in_use_bytes",
                     "allocated_bytes", "reserved_bytes", "reserved_unallocated_bytes", "allowed_bytes",
                     "private_pool_bytes", "other_bytes", "limit_bytes", "max_buffer_bytes", "resource_limit",
                     "peak_bytes", "pool", "hint"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        if self.other_processes:
            doc["other_processes"] = [{"pid": pid, **({"bytes": b} if b is not None else {})}
                                      for pid, b in self.other_processes]
        doc["messages"] = self.messages
        doc["complete"] = self.complete
        doc["notes"] = list(self.notes)
        return doc


class _Sizes:
    """Reads sizes out of one message and remembers why a figure was not believed."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def size(self, match: re.Match[str] | None, what: str, first: int = 1) -> int | None:
        if match is None:
            return None
        number, unit = match.group(first), match.group(first + 1)
        return self.value(float(number), MESSAGE_UNITS[unit.lower()], f"{number} {unit}", what)

    def value(self, number: float, unit: int, shown: str, what: str) -> int | None:
        nbytes = number * unit
        if nbytes >= NVML_NOT_AVAILABLE:
            self.notes.append(Text(N_("{what} reads {shown}: that is NVML's 'not available' value (2^64 − 1 bytes), "
                                      "which the driver reports under WSL and Windows; it is left out"),
                                   what=Text(what), shown=shown))
            return None
        if nbytes >= IMPLAUSIBLE_BYTES:
            self.notes.append(Text(N_("{what} reads {shown}, more than any machine has; it is left out"),
                                   what=Text(what), shown=shown))
            return None
        return round(nbytes)


def _clean(text: str) -> str:
    """One line of text: ranks' prefixes gone, whitespace (line wraps included) collapsed."""
    return re.sub(r"\s+", " ", _RANK_PREFIX.sub("", text)).strip()


def _heads(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every message head, in order, none inside another's."""
    found = sorted((m.start(), m.end(), kind) for kind, rx in _HEADS for m in rx.finditer(text))
    heads: list[tuple[int, int, str]] = []
    for start, end, kind in found:
        if heads and start < heads[-1][1]:
            continue  # inside the previous head (the kIOGPU code of a [METAL] line)
        heads.append((start, end, kind))
    return heads


def _index(match: re.Match[str] | None) -> int | None:
    return int(match.group(1)) if match and match.group(1) else None


def _read_cuda(seg: str, sizes: _Sizes) -> dict[str, object]:
    if "total capacity;" in seg or "already allocated" in seg or re.search(r"\(GPU ?\d{0,4};", seg):
        return _read_legacy(seg, sizes)
    out: dict[str, object] = {"kind": "cuda", "device_index": _index(_CUDA["device"].search(seg))}
    for name, what in (("requested", N_("the request")), ("capacity", N_("the total capacity")),
                       ("free", N_("the free memory")), ("self", N_("this process's use")),
                       ("allowed", N_("the allowed memory")), ("allocated", N_("PyTorch's allocated memory")),
                       ("private", N_("the private pools")),
                       ("unallocated", N_("the reserved but unallocated memory"))):
        out[name] = sizes.size(_CUDA[name].search(seg), what)
    out["processes"] = tuple((int(m.group(1)), sizes.size(m, N_("another process's use"), first=2))
                             for m in _CUDA["process"].finditer(seg))
    return {"kind": "cuda", "device_index": out["device_index"], "requested_bytes": out["requested"],
            "capacity_bytes": out["capacity"], "free_bytes": out["free"], "in_use_bytes": out["self"],
            "allowed_bytes": out["allowed"], "allocated_bytes": out["allocated"],
            "private_pool_bytes": out["private"], "reserved_unallocated_bytes": out["unallocated"],
            "other_processes": out["processes"]}


def _read_legacy(seg: str, sizes: _Sizes) -> dict[str, object]:
    got = {name: sizes.size(_LEGACY[name].search(seg), what) for name, what in (
        ("requested", N_("the request")), ("capacity", N_("the total capacity")),
        ("allocated", N_("PyTorch's allocated memory")), ("free", N_("the free memory")),
        ("allowed", N_("the allowed memory")), ("reserved", N_("PyTorch's reserved memory")),
        ("cached", N_("the cached memory")))}
    unallocated = got["cached"]  # the oldest message's "cached": the allocator's unused cache
    if unallocated is None and got["reserved"] is not None and got["allocated"] is not None:
        unallocated = max(got["reserved"] - got["allocated"], 0)  # type: ignore[operator]
    return {"kind": "cuda_legacy", "device_index": _index(_LEGACY["device"].search(seg)),
            "requested_bytes": got["requested"], "capacity_bytes": got["capacity"], "free_bytes": got["free"],
            "allocated_bytes": got["allocated"], "allowed_bytes": got["allowed"], "reserved_bytes": got["reserved"],
            "reserved_unallocated_bytes": unallocated}


def _read_mps(seg: str, sizes: _Sizes) -> dict[str, object]:
    pool = _MPS["pool"].search(seg)
    return {"kind": "mps", "allocated_bytes": sizes.size(_MPS["allocated"].search(seg), N_("MPS allocated")),
            "other_bytes": sizes.size(_MPS["other"].search(seg), N_("the other allocations")),
            "limit_bytes": sizes.size(_MPS["limit"].search(seg), N_("the maximum allowed")),
            "requested_bytes": sizes.size(_MPS["requested"].search(seg), N_("the request")),
            "pool": pool.group(1) if pool else None}


def _read_mlx(kind: str, seg: str, sizes: _Sizes) -> dict[str, object]:
    if kind == "mlx_buffer":
        m = _MLX_BUFFER.search(seg)
        if m is None:
            return {"kind": kind}
        return {"kind": kind, "requested_bytes": sizes.value(float(m.group(1)), 1, m.group(1) + " bytes",
                                                              N_("the request")),
                "max_buffer_bytes": sizes.value(float(m.group(2)), 1, m.group(2) + " bytes",
                                                N_("the largest buffer"))}
    if kind == "mlx_malloc":
        m = _MLX_MALLOC.search(seg)
        return {"kind": kind, "requested_bytes": sizes.value(float(m.group(1)), 1, m.group(1) + " bytes",
                                                              N_("the request")) if m else None}
    if kind == "mlx_resource_limit":
        m = _MLX_RESOURCES.search(seg)
        return {"kind": kind, "resource_limit": int(m.group(1)) if m else None}
    return {"kind": kind}


def parse_oom(text: str) -> OomReading:
    """The last out-of-memory message in `text`, read into bytes. Raises ValueError (a Text: one clear sentence)
    when the text is too long, not text, or holds no message this reader knows; a message cut short is read as
    far as it goes, and the reading's notes say what is missing."""
    if not isinstance(text, str):
        raise ValueError(Text(N_("the out-of-memory message must be text")))
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(Text(N_("the text is {n} characters long; the limit is {limit}: paste the error's last "
                                 "lines"), n=len(text), limit=MAX_TEXT_CHARS))
    if "\x00" in text or (text and sum(ch.isprintable() or ch.isspace() for ch in text[:4096])
                          < 0.9 * len(text[:4096])):
        raise ValueError(Text(N_("this does not look like text: paste the error message as it was printed")))
    heads = _heads(text)
    if not heads:
        raise ValueError(Text(N_("no out-of-memory message found: expected PyTorch's 'CUDA out of memory' or "
                                 "'MPS backend out of memory', or MLX's '[metal::malloc]' or '[METAL] Command "
                                 "buffer execution failed: Insufficient Memory'")))
    start, _end, kind = heads[-1]
    stop = min(len(text), start + _SEGMENT_CHARS)
    seg = _clean(text[start:stop])
    sizes = _Sizes()
    if kind == "cuda":
        fields = _read_cuda(seg, sizes)
    elif kind == "mps":
        fields = _read_mps(seg, sizes)
    else:
        fields = _read_mlx(kind, seg, sizes)
    peaks = _MLX_PEAK.findall(text[:stop])
    if peaks:  # mlx-lm's log before the failure: decimal GB (get_peak_memory() / 1e9)
        fields["peak_bytes"] = sizes.value(float(peaks[-1]), 10**9, f"{peaks[-1]} GB", N_("the peak memory"))
    hint = ("expandable_segments" if "expandable_segments" in seg else
            "max_split_size_mb" if "max_split_size_mb" in seg else None)
    reading = OomReading(**fields, hint=hint, messages=len(heads))  # type: ignore[arg-type]
    notes = list(sizes.notes)
    if not reading.complete:
        notes.append(Text(N_("the message is cut short or altered: only part of its figures could be read")))
    if len(heads) > 1:
        notes.append(Text(N_("{n} out-of-memory messages found; the last one is read"), n=len(heads)))
    return OomReading(**{**reading.__dict__, "notes": tuple(notes)})
