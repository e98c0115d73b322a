"""The verdict: does the estimate fit the device's usable memory, by how much, and in which band (fits, close call,
borderline, too big)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import N_

if TYPE_CHECKING:
    from ..options.devices import Device


# The verdict bands (Verdict.band), marked for the catalogue: the band is an English id, translated where shown.
VERDICT_BANDS = (N_("fits"), N_("close call"), N_("borderline"), N_("too big"))


@dataclass(frozen=True)
class Verdict:
    """Does the estimate fit the device's usable memory, and by how much."""

    fits: bool
    total_bytes: float
    usable_bytes: int
    margin_bytes: float  # usable − total: headroom when it fits, shortfall (negative) when not
    high_fits: bool  # does the upper end of the band fit too?
    low_fits: bool = False  # does the lower end of the band fit? (the expected peak may not)

    @property
    def band(self) -> str:
        """The verdict band every page shows for an estimate with its likely range (docs/formulas.md §0, the
        band): 'fits' (the upper end of the likely range fits too), 'close call' (the expected peak fits, the
        upper end does not), 'borderline' (the expected peak does not fit, the lower end would) or 'too big'."""
        if self.fits:
            return "fits" if self.high_fits else "close call"
        return "borderline" if self.low_fits else "too big"

    @property
    def headline(self) -> str:
        from ..i18n import _, format_number
        from ..units import fmt_gb

        if self.fits:
            return _("Fits: {total} of {usable} usable").format(total=fmt_gb(self.total_bytes),
                                                                usable=fmt_gb(self.usable_bytes))
        shortfall = -self.margin_bytes
        if shortfall < 0.05e9:  # one decimal would say "0.0 GB": give megabytes and say what it means
            return _("Too big by {mb} MB: right at the limit").format(mb=format_number(max(shortfall / 1e6, 1), 0))
        return _("Too big by {shortfall}").format(shortfall=fmt_gb(shortfall))


def verdict(total_bytes: float, device: Device, high_bytes: float | None = None,
            low_bytes: float | None = None) -> Verdict:
    """The verdict of an estimate on a device; with the likely range's ends, its band (Verdict.band)."""
    usable = device.usable_bytes
    high = total_bytes if high_bytes is None else high_bytes
    low = total_bytes if low_bytes is None else low_bytes
    return Verdict(fits=total_bytes <= usable, total_bytes=total_bytes, usable_bytes=usable,
                   margin_bytes=usable - total_bytes, high_fits=high <= usable, low_fits=low <= usable)
