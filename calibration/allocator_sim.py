"""A block-level model of PyTorch's CUDA caching allocator, to replay a traced step's allocations and frees.

The estimator prices the allocator with a closed form (estimator/memory/allocator.py, docs/formulas.md §5.1); this
module checks it. It replays an event log (calibration/allocator_trace.py records one from Unsloth's traced step:
every storage made and freed, in order, with its bytes) through the allocator's rules, read in PyTorch 2.13's
c10/cuda/CUDACachingAllocator.cpp (cited by function), and finds the smallest memory the sequence runs in.

Modelled: round_size and the two pools (≤ 1 MiB small); best fit (get_free_block: the smallest free block of the
pool that fits, with expandable_size for blocks next to unmapped space); splitting (should_split: expandable or small
pool when ≥ 512 B remain, else when > 1 MiB remains); merging of free neighbours (free_block → try_merge_blocks).
Expandable segments: one segment per pool whose pages (2 MiB small, 20 MiB large) are mapped on demand at the lowest
address that fits (find_expandable_block, map_block); when mapping would pass the capacity every free page is
unmapped (release_cached_blocks → unmap_block) and the request retried once. Without them: cudaMalloc segments of
get_allocation_size (2 MiB, 20 MiB or the request rounded to 2 MiB); on failure every segment that is wholly free is
cudaFree'd (release_cached_blocks → release_block) and the request retried. One stream; no events, no CUDA graphs,
no max_split_size (PyTorch's default: unlimited) and no garbage collection threshold (default 0).

Pure Python (no torch): runs in the app's venv and in the tests."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from estimator.memory.allocator import (
    LARGE_SEGMENT,
    MIN_BLOCK,
    MIN_LARGE_ALLOC,
    ROUND_LARGE,
    SMALL_BUFFER,
    SMALL_SIZE,
    AllocatorConfig,
    round_size,
)

# An event: ("a", id, bytes) makes a storage, ("f", id) frees it.
Event = tuple


class OutOfMemory(Exception):
    pass


@dataclass(eq=False)
class _Block:
    ptr: int
    size: int
    seg: _Segment
    allocated: bool = False
    mapped: bool = True
    prev: _Block | None = None
    next: _Block | None = None

    def key(self) -> tuple[int, int]:
        return (self.size, self.ptr)


@dataclass(eq=False)
class _Segment:
    base: int
    size: int
    page: int
    small: bool
    mapped_pages: set


def _split(b: _Block, keep: int, mapped: bool) -> _Block:
    """Cut b after its first `keep` bytes; the rest becomes the next block (alloc_found_block, map_block)."""
    rest = _Block(b.ptr + keep, b.size - keep, b.seg, mapped=mapped, prev=b, next=b.next)
    if b.next:
        b.next.prev = rest
    b.next = rest
    b.size = keep
    return rest


class _Pool:
    """One BlockPool: free mapped blocks sorted by (size, address) and, with expandable segments, the unmapped
    blocks sorted by address."""

    def __init__(self, small: bool) -> None:
        self.small = small
        self.free: list[tuple[int, int, _Block]] = []  # (size, ptr, block)
        self.unmapped: list[tuple[int, _Block]] = []  # (ptr, block)

    def add_free(self, b: _Block) -> None:
        bisect.insort(self.free, (b.size, b.ptr, b), key=lambda t: (t[0], t[1]))

    def remove_free(self, b: _Block) -> None:
        i = bisect.bisect_left(self.free, (b.size, b.ptr), key=lambda t: (t[0], t[1]))
        assert self.free[i][2] is b
        del self.free[i]

    def add_unmapped(self, b: _Block) -> None:
        bisect.insort(self.unmapped, (b.ptr, b), key=lambda t: t[0])

    def remove_unmapped(self, b: _Block) -> None:
        i = bisect.bisect_left(self.unmapped, b.ptr, key=lambda t: t[0])
        assert self.unmapped[i][1] is b
        del self.unmapped[i]


class Allocator:
    """DeviceCachingAllocator for one device and one stream, with a capacity on the physical memory it may hold
    (the card's memory less what is not the allocator's)."""

    def __init__(self, cfg: AllocatorConfig, capacity: int, device_total: int | None = None) -> None:
        self.cfg = cfg
        self.capacity = capacity
        self.device_total = device_total or capacity
        self.reserved = 0  # bytes mapped (expandable) or cudaMalloc'd
        self.allocated = 0  # Σ block sizes handed out (memory_allocated)
        self.requested = 0  # Σ requested bytes
        self.peak_reserved = 0
        self.peak_allocated = 0
        self.peak_requested = 0
        self.pools = {True: _Pool(True), False: _Pool(False)}
        self.segments: dict[bool, list[_Segment]] = {True: [], False: []}
        self._next_va = 1 << 40
        self.live: dict = {}
        self.retries = 0

    # -- public -----------------------------------------------------------------------------------------------
    def malloc(self, key, orig: int) -> None:
        size = round_size(orig, self.cfg)
        small = size <= SMALL_SIZE  # get_pool
        pool = self.pools[small]
        block = self._get_free_block(pool, size)
        if block is None:
            block = self._alloc_block(pool, size, small)
            if block is None:
                self.retries += 1
                self._release_cached_blocks()
                block = self._alloc_block(pool, size, small)
                if block is None:
                    raise OutOfMemory(f"{orig} B with {self.reserved} B reserved, {self.allocated} B allocated")
        if self._should_split(block, size, small):
            pool.add_free(_split(block, size, mapped=True))
        block.allocated = True
        self.live[key] = (block, orig)
        self.allocated += block.size
        self.requested += orig
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_requested = max(self.peak_requested, self.requested)

    def free(self, key) -> None:
        block, orig = self.live.pop(key)
        self.allocated -= block.size
        self.requested -= orig
        block.allocated = False
        pool = self.pools[block.seg.small]
        for other in (block.prev, block.next):  # free_block → try_merge_blocks
            if other is not None and not other.allocated and other.mapped == block.mapped:
                if other.mapped:
                    pool.remove_free(other)
                else:
                    pool.remove_unmapped(other)
                self._merge(block, other)
        pool.add_free(block)

    # -- allocator internals --------------------------------------------------------------------------------------
    def _merge(self, dst: _Block, src: _Block) -> None:
        if dst.prev is src:
            dst.ptr = src.ptr
            dst.prev = src.prev
            if dst.prev:
                dst.prev.next = dst
        else:
            dst.next = src.next
            if dst.next:
                dst.next.prev = dst
        dst.size += src.size

    def _get_free_block(self, pool: _Pool, size: int) -> _Block | None:
        """get_free_block: the smallest free block ≥ size; among expandable blocks, keep going while the next one
        can expand less (expandable_size)."""
        i = bisect.bisect_left(pool.free, (size, -1), key=lambda t: (t[0], t[1]))
        if i >= len(pool.free):
            return None
        if self.cfg.expandable:
            def expandable_size(b: _Block) -> int:
                return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)
            while i + 1 < len(pool.free) and expandable_size(pool.free[i + 1][2]) < expandable_size(pool.free[i][2]):
                i += 1
        block = pool.free[i][2]
        del pool.free[i]
        return block

    def _should_split(self, block: _Block, size: int, small: bool) -> bool:
        remaining = block.size - size
        if small or self.cfg.expandable:
            return remaining >= MIN_BLOCK
        return remaining > SMALL_SIZE

    def _alloc_block(self, pool: _Pool, size: int, small: bool) -> _Block | None:
        if self.cfg.expandable:
            return self._try_allocate_expandable_block(pool, size, small)
        alloc = SMALL_BUFFER if size <= SMALL_SIZE else (
            LARGE_SEGMENT if size < MIN_LARGE_ALLOC else ROUND_LARGE * -(-size // ROUND_LARGE))
        if self.reserved + alloc > self.capacity:
            return None
        seg = _Segment(self._next_va, alloc, alloc, small, set())
        self._next_va += alloc + (1 << 30)
        self.segments[small].append(seg)
        self._reserve(alloc)
        return _Block(seg.base, alloc, seg)

    def _reserve(self, n: int) -> None:
        self.reserved += n
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    # -- expandable segments ---------------------------------------------------------------------------------------
    def _new_segment(self, pool: _Pool, small: bool) -> _Block:
        page = SMALL_BUFFER if small else LARGE_SEGMENT
        total = self.device_total + self.device_total // 8  # ExpandableSegment: 1 1/8 of the GPU's memory
        pages = -(-total // page)
        seg = _Segment(self._next_va, pages * page, page, small, set())
        self._next_va += pages * page + (1 << 30)
        self.segments[small].append(seg)
        b = _Block(seg.base, seg.size, seg, mapped=False)
        pool.add_unmapped(b)
        return b

    def _find_expandable_block(self, pool: _Pool, size: int, small: bool) -> _Block:
        def allocatable(b: _Block | None) -> bool:
            return b is not None and not b.allocated

        def room(b: _Block | None) -> bool:
            n = 0
            while n < size and allocatable(b):
                n += b.size
                b = b.next
            return n >= size

        for _, c in list(pool.unmapped):
            if allocatable(c.prev):
                c = c.prev
            if room(c):
                return c
        return self._new_segment(pool, small)

    def _map_block(self, pool: _Pool, b: _Block, size: int) -> bool:
        seg = b.seg
        first = (b.ptr - seg.base) // seg.page
        last = -(-(b.ptr + size - seg.base) // seg.page)
        n = last - first
        if self.reserved + n * seg.page > self.capacity:
            return False
        seg.mapped_pages.update(range(first, last))
        self._reserve(n * seg.page)
        pool.remove_unmapped(b)
        mapped = n * seg.page
        if mapped < b.size:
            pool.add_unmapped(_split(b, mapped, mapped=False))
        b.mapped = True
        for other in (b.prev, b.next):
            if other is not None and not other.allocated and other.mapped:
                pool.remove_free(other)
                self._merge(b, other)
        pool.add_free(b)
        return True

    def _try_allocate_expandable_block(self, pool: _Pool, size: int, small: bool) -> _Block | None:
        c = self._find_expandable_block(pool, size, small)
        if not c.mapped and not self._map_block(pool, c, min(c.size, size)):
            return None
        while c.size < size:  # map the unmapped block after it; map_block merges c into it
            nxt = c.next
            if not self._map_block(pool, nxt, min(size - c.size, nxt.size)):
                return None
            c = nxt
        pool.remove_free(c)
        return c

    def _release_cached_blocks(self) -> None:
        """release_blocks on both pools: unmap every page wholly inside a free block (expandable), or cudaFree every
        free block that is a whole segment."""
        for small, pool in self.pools.items():
            for _, _, b in list(pool.free):
                if self.cfg.expandable:
                    self._unmap_block(pool, b)
                elif b.prev is None and b.next is None:
                    pool.remove_free(b)
                    self.segments[small].remove(b.seg)
                    self.reserved -= b.size

    def _unmap_block(self, pool: _Pool, b: _Block) -> None:
        seg = b.seg
        first = -(-(b.ptr - seg.base) // seg.page)
        last = (b.ptr + b.size - seg.base) // seg.page
        if first >= last:
            return
        pool.remove_free(b)
        start, end = seg.base + first * seg.page, seg.base + last * seg.page
        if start > b.ptr:
            before = _Block(b.ptr, start - b.ptr, seg, prev=b.prev, next=b)
            if b.prev:
                b.prev.next = before
            b.prev = before
            pool.add_free(before)
        if end < b.ptr + b.size:
            after = _Block(end, b.ptr + b.size - end, seg, prev=b, next=b.next)
            if b.next:
                b.next.prev = after
            b.next = after
            pool.add_free(after)
        b.ptr, b.size, b.mapped = start, end - start, False
        seg.mapped_pages.difference_update(range(first, last))
        self.reserved -= end - start
        for other in (b.prev, b.next):
            if other is not None and not other.allocated and not other.mapped:
                pool.remove_unmapped(other)
                self._merge(b, other)
        pool.add_unmapped(b)


def replay(events: Iterable[Event], cfg: AllocatorConfig, capacity: int, device_total: int | None = None
           ) -> Allocator:
    """Run the events; OutOfMemory if they do not fit in `capacity` bytes."""
    a = Allocator(cfg, capacity, device_total)
    for ev in events:
        if ev[0] == "a":
            a.malloc(ev[1], int(ev[2]))
        else:
            a.free(ev[1])
    return a


def peak_requested(events: Sequence[Event]) -> int:
    """The tensors' high-water mark: what the tracer measures (Σ requested bytes alive)."""
    live: dict = {}
    cur = peak = 0
    for ev in events:
        if ev[0] == "a":
            live[ev[1]] = int(ev[2])
            cur += int(ev[2])
            peak = max(peak, cur)
        else:
            cur -= live.pop(ev[1])
    return peak


def smallest_capacity(events: Sequence[Event], cfg: AllocatorConfig, step: int = 1 * (1 << 20),
                      device_total: int | None = None) -> int:
    """The least capacity (to `step`) the events run in: a bisection between the tensors' peak and the reserved
    peak of an unconstrained run (the allocator never needs more than it reserves when nothing limits it)."""
    lo = peak_requested(events)
    hi = replay(events, cfg, 1 << 62, device_total).peak_reserved
    lo = (lo // step) * step
    hi = -(-hi // step) * step

    def fits(cap: int) -> bool:
        try:
            replay(events, cfg, cap, device_total)
            return True
        except OutOfMemory:
            return False

    if fits(lo):
        return lo
    while hi - lo > step:
        mid = ((lo + hi) // 2 // step) * step
        if mid <= lo:
            mid = lo + step
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi
