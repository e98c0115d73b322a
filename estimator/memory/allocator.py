"""PyTorch's CUDA caching allocator as the estimate needs it: how each request is rounded, how large its pages are,
and what that leaves between the tensors' bytes and the memory a step needs on the card (docs/formulas.md §5.1).

Read from PyTorch 2.13: the constants and defaults in the 2.13 wheel's headers (torch/include/c10/core/
AllocatorConfig.h, cited by line), the logic in c10/cuda/CUDACachingAllocator.cpp and c10/core/AllocatorConfig.cpp
(cited by function; the 2.13 wheel ships no .cpp). Pure Python: the configuration strings are parsed here the way
`AcceleratorAllocatorConfig::parseArgs` parses PYTORCH_ALLOC_CONF."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from ..options.stacks import get_stack
from .overhead import ALLOCATOR_SLACK

MiB = 1 << 20
Allocations = tuple[tuple[float, int], ...]  # (bytes of one request, how many): what the caching allocator is asked

# torch/include/c10/core/AllocatorConfig.h (2.13)
MIN_BLOCK = 512  # :19 kMinBlockSize — every request is rounded up to a multiple of 512 B
SMALL_SIZE = 1 * MiB  # :21 kSmallSize — requests up to 1 MiB go to the small pool
SMALL_BUFFER = 2 * MiB  # :17 kSmallBuffer — the small pool's segments (and its expandable pages)
MIN_LARGE_ALLOC = 10 * MiB  # :23 kMinLargeAlloc — below it a large request gets a 20 MiB segment
ROUND_LARGE = 2 * MiB  # :25 kRoundLarge — a larger segment is rounded up to 2 MiB
LARGE_SEGMENT = 20 * MiB  # :340 large_segment_size_ — the large pool's expandable pages ("20 MB by default")
# c10/core/AllocatorConfig.cpp (2.13) kRoundUpPowerOfTwoIntervals / Start: sixteen power-of-two intervals of request
# sizes, the first [1 MiB, 2 MiB), the last everything from 32 GiB on; each has its own number of divisions
INTERVALS = 16
INTERVAL_START_LOG2 = 20

# How the "[limit:divisions, …, >:divisions]" list fills the table. c10/core/AllocatorConfig.cpp (2.13)
# AcceleratorAllocatorConfig::parseRoundUpPower2Divisions fills ">" from the interval after the last limit
# ("torch2.13"); the parser of c10/cuda/CUDAAllocatorConfig.cpp that torch 2.5 shipped
# (CUDAAllocatorConfig::parseRoundUpPower2Divisions) filled it from the last limit's own interval ("torch2.5"), so
# there a ">" entry overwrites the limit before it.
PARSERS = ("torch2.13", "torch2.5")


@dataclass(frozen=True)
class AllocatorConfig:
    """One PYTORCH_ALLOC_CONF as the allocator reads it: expandable segments on or off and the divisions per
    power-of-two interval (0 or 1: no rounding beyond 512 B)."""

    id: str
    conf: str  # the string the framework sets ("" = PyTorch's defaults)
    source: str  # where it is set
    expandable: bool
    divisions: tuple[int, ...]


def parse_divisions(spec: str, parser: str = "torch2.13") -> tuple[int, ...]:
    """roundup_power2_divisions' value as the table of divisions per interval. "[64:128,256:64,>:32]": intervals
    below the first limit take its divisions, each limit (MiB, a power of two) sets its own interval (log2 of the
    limit: 64 → [64 MiB, 128 MiB)), ">" the rest (parser: see PARSERS); a bare number sets every interval."""
    if parser not in PARSERS:
        raise ValueError(f"unknown parser {parser!r}")
    table = [0] * INTERVALS
    spec = spec.strip()
    if not spec.startswith("["):
        return (int(spec),) * INTERVALS  # "Keep this for backwards compatibility": one value for all intervals
    first, last = True, 0
    for item in spec.strip("[]").split(","):
        limit, value = (x.strip() for x in item.split(":"))
        divisions = int(value)
        if limit == ">":
            start = last + 1 if parser == "torch2.13" else last
            table[start:] = [divisions] * (INTERVALS - start)
            continue
        index = min(max(int(limit).bit_length() - 1, 0), INTERVALS - 1)
        if first:
            table[:index] = [divisions] * index
            first = False
        table[index] = divisions
        last = index
    return tuple(table)


def config(id: str, conf: str, source: str, parser: str = "torch2.13") -> AllocatorConfig:
    """An AllocatorConfig from a PYTORCH_ALLOC_CONF string (the keys this estimate reads; others are ignored, as
    parseArgs skips them). Neither key set: PyTorch's defaults (no expandable segments, no power-of-two rounding)."""
    expandable = bool(re.search(r"expandable_segments\s*:\s*True", conf))
    m = re.search(r"roundup_power2_divisions\s*:\s*(\[[^\]]*\]|\d+)", conf)
    divisions = parse_divisions(m.group(1), parser) if m else (0,) * INTERVALS
    return AllocatorConfig(id=id, conf=conf, source=source, expandable=expandable, divisions=divisions)


def divisions_for(size: int, cfg: AllocatorConfig) -> int:
    """AcceleratorAllocatorConfig::roundup_power2_divisions(size): the interval of log2(size) from 1 MiB on."""
    index = min(max(size.bit_length() - 1 - INTERVAL_START_LOG2, 0), INTERVALS - 1)
    return cfg.divisions[index]


def round_size(size: int, cfg: AllocatorConfig) -> int:
    """DeviceCachingAllocator::round_size (c10/cuda/CUDACachingAllocator.cpp): at least 512 B; with d divisions
    (d > 1 and the request above 512·d B) up to the next of d equal steps between two powers of two
    (roundup_power2_next_division: a power of two stays), else up to a multiple of 512 B. The block keeps the
    rounded size: torch.cuda.memory_allocated counts it (alloc_found_block adds block->size)."""
    if size < MIN_BLOCK:
        return MIN_BLOCK
    d = divisions_for(size, cfg)
    if d > 1 and size > MIN_BLOCK * d:
        if size & (size - 1) == 0:
            return size
        floor = 1 << (size.bit_length() - 1)
        step = floor >> (d.bit_length() - 1)
        if step == 0:
            return floor << 1
        below = size & ~(step - 1)
        return size if below == size else below + step
    return MIN_BLOCK * -(-size // MIN_BLOCK)


# PyTorch's defaults: no PYTORCH_ALLOC_CONF (AllocatorConfig.h:353 use_expandable_segments_ false; the divisions
# are all 0, AcceleratorAllocatorConfig()).
TORCH_DEFAULT = config("torch_default", "", "PyTorch 2.13 defaults (c10/core/AllocatorConfig.h:340-353)")


@cache
def stack_allocator(stack_id: str | None) -> AllocatorConfig:
    """The allocator settings a stack runs under: the PYTORCH_ALLOC_CONF its framework sets when imported
    (options.stacks Stack.allocator_conf), else PyTorch's defaults."""
    if not stack_id:
        return TORCH_DEFAULT
    stack = get_stack(stack_id)
    if not stack.allocator_conf:
        return TORCH_DEFAULT
    return config(stack.id, stack.allocator_conf, stack.sources.get("allocator_conf", stack.version))


@dataclass(frozen=True)
class Slack:
    """What the caching allocator adds to a step's tensor bytes, bytes: the expected amount and the high band's."""

    expected: float
    high: float
    formula: str


def caching_slack(tensor_peak: float) -> Slack:
    """PyTorch's default allocator (no expandable segments): cudaMalloc'd segments that are freed only when wholly
    unused (release_cached_blocks → release_blocks frees unsplit blocks), so blocks split off a segment strand its
    free remainder; how much depends on the order of the requests. The estimate keeps a share of the tensor peak
    (overhead.ALLOCATOR_SLACK, docs/formulas.md §5)."""
    return Slack(expected=ALLOCATOR_SLACK * tensor_peak, high=ALLOCATOR_SLACK * tensor_peak,
                 formula=f"{ALLOCATOR_SLACK:.0%} of allocated (5–15 %)")


def rounding_bytes(allocations: Iterable[tuple[float, float]], cfg: AllocatorConfig) -> float:
    """Σ (round_size(s) − s) over the requests: the bytes each block is rounded up by (memory_allocated counts
    them; the tensors' bytes do not)."""
    total = 0
    for size, count in allocations:
        if count > 0 and size > 0:
            s = int(math.ceil(size))
            total += int(count) * (round_size(s, cfg) - s)
    return float(total)


def expandable_slack(allocations: Iterable[tuple[float, float]], cfg: AllocatorConfig, gradients: float,
                     tensor_peak: float) -> Slack:
    """Expandable segments (Note [Expandable Segments], c10/cuda/CUDACachingAllocator.cpp): one segment per pool grows
    page by page (map_block: 20 MiB pages in the large pool, 2 MiB in the small); when a page cannot be mapped the
    allocator unmaps every page no block uses (release_cached_blocks → release_blocks → unmap_block →
    ExpandableSegment::unmap, "unmaps all the completely empty segment_size_ segments") and retries, so free memory
    does not stay reserved. What a step needs beyond its tensors' bytes:
      expected = each request's rounding (round_size, over `allocations`: (bytes, count) alive at the peak) + half a
                 page of each pool (the segments' last pages are partly used);
      high     = the rounding + the free blocks stranded between blocks that stay, bounded by the bytes of one
                 backward's `gradients` (the backward places each by best fit, get_free_block, among freed
                 activations; the previous step's, freed by zero_grad, leave their holes) and by the default
                 allocator's share (ALLOCATOR_SLACK: unmapping never strands more than cudaFree of whole segments
                 does), both checked against replays of traced steps (calibration/allocator_trace.py) + a whole
                 page at each end of each pool's mapped range."""
    rounding = rounding_bytes(allocations, cfg)
    pages = LARGE_SEGMENT + SMALL_BUFFER
    stranded = min(float(gradients), ALLOCATOR_SLACK * tensor_peak)
    return Slack(expected=rounding + pages / 2, high=rounding + stranded + 2 * pages,
                 formula=f"per-request rounding {rounding / 1e6:.1f} MB + ½ page per pool (20 MiB, 2 MiB)")


def step_slack(cfg: AllocatorConfig, tensor_peak: float, allocations: Iterable[tuple[float, float]] = (),
               gradients: float = 0.0) -> Slack:
    """The allocator's slack for a step under `cfg`: expandable_slack with expandable segments (`allocations`
    empty when the requests are not known: without power-of-two divisions each then rounds by under 512 B,
    negligible), else caching_slack."""
    if cfg.expandable:
        return expandable_slack(allocations, cfg, gradients, tensor_peak)
    return caching_slack(tensor_peak)
