"""The one search every solver uses (`bisect_last`) and the estimate function a solver prices with (a trainer's
step, or the detailed SFT estimate)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

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
    from ..memory.step import estimate

    return estimate(spec, setup)


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
    fwd, inv = coord or (float, float)
    seen: dict[T, float] = {}

    def f(x: T) -> float:
        if x not in seen:
            seen[x] = value(x)
        return seen[x]

    def step_up(a: T) -> T:  # the next point worth probing above a
        return a + 1 if integer else a * (1 + 0.75 * rel_tol)  # type: ignore[return-value]

    def inside(x: float, a: T, b: T) -> T:  # a probe strictly between a and b, on the fitting side of x
        if integer:
            return min(max(math.floor(x), a + 1), b - 1)  # type: ignore[return-value]
        return min(max(x / (1 + rel_tol / 4), a * (1 + rel_tol / 4)), b / (1 + rel_tol / 4))  # type: ignore

    def done(a: T, b: T) -> bool:
        return b - a <= 1 if integer else b / a <= 1 + rel_tol

    def line(x0: T, x1: T) -> float | None:
        """Where the line through (x0, f(x0)) and (x1, f(x1)) reaches limit, when it rises."""
        u0, u1, v0, v1 = fwd(x0), fwd(x1), f(x0), f(x1)
        if v1 <= v0 or u1 == u0:
            return None
        try:
            return inv(u0 + (limit - v0) * (u1 - u0) / (v1 - v0))
        except (ValueError, ZeroDivisionError, OverflowError):
            return None

    def secant(side: str) -> float | None:
        """Where the line through the two nearest known points on one side of the answer reaches limit: the
        two largest fitting points ("fit") or the two smallest failing ones ("fail")."""
        if side == "fit":
            pts = sorted(x for x in seen if seen[x] <= limit)[-2:]
        else:
            pts = sorted(x for x in seen if seen[x] > limit)[:2]
        return line(pts[0], pts[1]) if len(pts) == 2 else None

    def aim(a: T, b: T, last_fit: bool) -> float | None:
        """The interpolated answer: the secant on the side of the last probe, else the other side's, else the
        chord a–b; None when none of them lands inside [a, b]."""
        for guess in (secant("fit" if last_fit else "fail"), secant("fail" if last_fit else "fit"), line(a, b)):
            if guess is not None and a <= guess <= b:
                return guess
        return None

    known = {x for x in hints if lo <= x <= hi}
    fits_at = [x for x in sorted(known) if f(x) <= limit]
    fails_at = [x for x in sorted(known) if f(x) > limit]
    a, b = (fits_at[-1] if fits_at else None), (fails_at[0] if fails_at else None)
    # One side of the answer known: follow the line through its two nearest points across (two probes at most)
    # before falling back to the ends of the range.
    for _probe in range(2):
        if (a is None) == (b is None):
            break
        guess = secant("fit" if b is None else "fail")
        if guess is None:
            break
        if b is None:
            x = step_up(a) if guess < step_up(a) else inside(guess, a, hi)
            if not a < x < hi:
                break
        else:
            x = inside(guess, lo, b) if guess > lo else lo
            if not lo < x < b:
                break
        if f(x) <= limit:
            a = x
        else:
            b = x
    if a is None:
        if f(lo) > limit:
            return None
        a = lo
    if b is None:
        if f(hi) <= limit:
            return hi
        b = hi
    widths: list[float] = []
    last_fit = True
    while not done(a, b):
        widths.append(abs(fwd(b) - fwd(a)))
        guess = aim(a, b, last_fit)
        if guess is None or not a <= guess <= b or (len(widths) > 2 and widths[-1] > widths[-3] / 2):
            mid = (a + b) / 2 if integer or coord else math.sqrt(a * b)  # halve
            x = inside(mid, a, b) if integer else mid
        elif guess < step_up(a):  # the line says a is the answer: check the point just above
            x = inside(step_up(a), a, b) if not integer else min(step_up(a), b - 1)
        else:
            x = inside(guess, a, b)
        last_fit = f(x) <= limit
        if last_fit:
            a = x
        else:
            b = x
    return a


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
