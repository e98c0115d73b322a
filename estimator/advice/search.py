"""The one search every solver uses (`bisect_last`) and the estimate function a solver prices with (a trainer's
step, or the detailed SFT estimate)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from ..job.setup import TrainingSetup
from ..memory.price import estimate as price
from ..memory.result import Estimate
from ..models.spec import ModelSpec

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..job.trainer import TrainerSetup


EstimateFn = Callable[[ModelSpec, TrainingSetup], Estimate]
T = TypeVar("T", int, float)


def _default_estimate(spec: ModelSpec, setup: TrainingSetup) -> Estimate:
    from ..memory.price import detailed_estimate as estimate

    return estimate(spec, setup)


class _Search(Generic[T]):
    """One bisect_last search: the probes made so far and the interpolation steps on them."""

    def __init__(self, value: Callable[[T], float], limit: float, integer: bool, rel_tol: float,
                 coord: tuple[Callable[[float], float], Callable[[float], float]] | None) -> None:
        self.value, self.limit, self.integer, self.rel_tol, self.coord = value, limit, integer, rel_tol, coord
        self.fwd, self.inv = coord or (float, float)
        self.seen: dict[T, float] = {}

    def f(self, x: T) -> float:
        """value(x), each point probed once."""
        if x not in self.seen:
            self.seen[x] = self.value(x)
        return self.seen[x]

    def step_up(self, a: T) -> T:
        """The next point worth probing above a."""
        return a + 1 if self.integer else a * (1 + 0.75 * self.rel_tol)  # type: ignore[return-value]

    def inside(self, x: float, a: T, b: T) -> T:
        """A probe strictly between a and b, on the fitting side of x."""
        if self.integer:
            return min(max(math.floor(x), a + 1), b - 1)  # type: ignore[return-value]
        q = 1 + self.rel_tol / 4
        return min(max(x / q, a * q), b / q)  # type: ignore

    def done(self, a: T, b: T) -> bool:
        """Whether the bracket [a, b] is narrow enough."""
        return b - a <= 1 if self.integer else b / a <= 1 + self.rel_tol

    def line(self, x0: T, x1: T) -> float | None:
        """Where the line through (x0, f(x0)) and (x1, f(x1)) reaches limit, when it rises."""
        u0, u1, v0, v1 = self.fwd(x0), self.fwd(x1), self.f(x0), self.f(x1)
        if v1 <= v0 or u1 == u0:
            return None
        try:
            return self.inv(u0 + (self.limit - v0) * (u1 - u0) / (v1 - v0))
        except (ValueError, ZeroDivisionError, OverflowError):
            return None

    def secant(self, side: str) -> float | None:
        """Where the line through the two nearest known points on one side of the answer reaches limit: the
        two largest fitting points ("fit") or the two smallest failing ones ("fail")."""
        seen, limit = self.seen, self.limit
        if side == "fit":
            pts = sorted(x for x in seen if seen[x] <= limit)[-2:]
        else:
            pts = sorted(x for x in seen if seen[x] > limit)[:2]
        return self.line(pts[0], pts[1]) if len(pts) == 2 else None

    def aim(self, a: T, b: T, last_fit: bool) -> float | None:
        """The interpolated answer: the secant on the side of the last probe, else the other side's, else the
        chord a–b; None when none of them lands inside [a, b]."""
        for guess in (self.secant("fit" if last_fit else "fail"), self.secant("fail" if last_fit else "fit"),
                      self.line(a, b)):
            if guess is not None and a <= guess <= b:
                return guess
        return None

    def from_hints(self, lo: T, hi: T, hints: Iterable[T]) -> tuple[T | None, T | None]:
        """The bracket the hints give: the largest fitting and the smallest failing hint, then (one side known)
        the line through its two nearest points followed across, two probes at most."""
        known = {x for x in hints if lo <= x <= hi}
        fits_at = [x for x in sorted(known) if self.f(x) <= self.limit]
        fails_at = [x for x in sorted(known) if self.f(x) > self.limit]
        a, b = (fits_at[-1] if fits_at else None), (fails_at[0] if fails_at else None)
        # One side of the answer known: follow the line through its two nearest points across (two probes at most)
        # before falling back to the ends of the range.
        for _probe in range(2):
            if (a is None) == (b is None):
                break
            guess = self.secant("fit" if b is None else "fail")
            if guess is None:
                break
            if b is None:
                x = self.step_up(a) if guess < self.step_up(a) else self.inside(guess, a, hi)
                if not a < x < hi:
                    break
            else:
                x = self.inside(guess, lo, b) if guess > lo else lo
                if not lo < x < b:
                    break
            if self.f(x) <= self.limit:
                a = x
            else:
                b = x
        return a, b

    def narrow(self, a: T, b: T) -> T:
        """Shrink the bracket [a, b] (a fits, b does not) to the answer: interpolate, or halve when two steps
        did not halve it."""
        widths: list[float] = []
        last_fit = True
        while not self.done(a, b):
            widths.append(abs(self.fwd(b) - self.fwd(a)))
            guess = self.aim(a, b, last_fit)
            if guess is None or not a <= guess <= b or (len(widths) > 2 and widths[-1] > widths[-3] / 2):
                mid = (a + b) / 2 if self.integer or self.coord else math.sqrt(a * b)  # halve
                x = self.inside(mid, a, b) if self.integer else mid
            elif guess < self.step_up(a):  # the line says a is the answer: check the point just above
                x = self.inside(self.step_up(a), a, b) if not self.integer else min(self.step_up(a), b - 1)
            else:
                x = self.inside(guess, a, b)
            last_fit = self.f(x) <= self.limit
            if last_fit:
                a = x
            else:
                b = x
        return a


def bisect_last(lo: T, hi: T, value: Callable[[T], float], limit: float, *, integer: bool = True,
                rel_tol: float = 0.002, hints: Iterable[T] = (),
                coord: tuple[Callable[[float], float], Callable[[float], float]] | None = None) -> T | None:
    """The one search every solver uses: the largest x in [lo, hi] with value(x) <= limit, for value
    nondecreasing in x; None if not even lo fits. Whole numbers (integer=True) are searched to the exact
    answer, other numbers until the bracket's ratio is within 1 + rel_tol.

    A bisection sped up by interpolation: memory is piecewise linear in batch, length and model size (each
    phase is affine in the tokens and the parameters, docs/formulas.md §0), so the line through the two
    largest fitting points usually lands on the answer, and one more probe confirms it. A plain halving step
    is taken whenever two steps did not halve the bracket, so the worst case stays a bisection. `hints` are
    points to classify first (the page's own setup and the remedies' halves: estimates already computed, so
    free with the estimate cache); `coord` = (forward, inverse) maps x to the coordinate in which value is
    nearest to linear (per-GPU memory is linear in 1 / GPUs)."""
    s: _Search[T] = _Search(value, limit, integer, rel_tol, coord)
    a, b = s.from_hints(lo, hi, hints)
    if a is None:
        if s.f(lo) > limit:
            return None
        a = lo
    if b is None:
        if s.f(hi) <= limit:
            return hi
        b = hi
    return s.narrow(a, b)


def _smallest_int(lo: int, hi: int, value: Callable[[int], float], limit: float,
                  coord: tuple[Callable[[float], float], Callable[[float], float]] | None = None,
                  hints: Iterable[int] = ()) -> int | None:
    """The smallest n in [lo, hi] with value(n) <= limit, for value nonincreasing in n (per-GPU memory as GPUs
    are added); None if not even hi fits. The mirror of bisect_last: the last n that does not fit, plus one."""
    last_unfit = bisect_last(lo, hi, lambda n: -value(n), math.nextafter(-limit, -math.inf), coord=coord,
                             hints=hints)
    if last_unfit is None:
        return lo
    return last_unfit + 1 if last_unfit < hi else None



def solver_estimate_fn(tr: TrainerSetup, device_capacity: float | None = None):
    """An estimate function for the solvers and remedies (advice.EstimateFn): the trainer's estimate without the
    batch-divisibility checks, since the memory does not depend on them (the solvers try every batch)."""

    def fn(spec: ModelSpec, setup: TrainingSetup) -> Estimate:
        return price(spec, setup, trainer=tr, device_capacity=device_capacity, strict=False)

    return fn
