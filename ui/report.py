"""The numbers a page shows, as data and plain text: the breakdown table (and its CSV), the seed rule's gap
to the detailed estimate, remedy and solver lines, and the share link. Pure (no Streamlit), so the page
stays thin and these are tested directly. Sizes are labelled GB (10⁹ B) and GiB (2³⁰ B)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import pandas as pd

from estimator import Device, Estimate, Remedy, Verdict, component_keys, to_gb, to_gib
from estimator.i18n import _, format_int, format_number, get_language
from estimator.memory.host import LOAD_KEYS, HostVerdict
from estimator.memory.result import CONTEXT_KEY, component_label, context_label
from estimator.oom_message import FIGURES, OomReading
from ui.charts import both_units
from ui.once import remembered

# Streamlit's own viewer options: not part of a setup, so never copied into a share link.
VIEWER_PARAMS = frozenset({"embed", "embed_options"})
NEGLIGIBLE_BYTES = 0.05e9  # below what one decimal of GB shows: "saves nothing", not "saves 0.0 GB"
BREAKDOWN_COLUMNS = ("component", "item", "bytes", "gb", "gib", "share")


# The breakdown's text columns in pixels: they hold the longest labels, the Total row's "peak: backward,
# recomputing last layer" included, and with the number columns stay inside the main column at 1,440 px (980 px
# beside the sidebar), so no row or column is cut (st.column_config "medium" cut the Total row's text).
BREAKDOWN_WIDTHS: dict[str, int] = {"component": 190, "item": 340}


def breakdown_frame(est: Estimate, device: Device | None = None) -> pd.DataFrame:
    """One row per detail item at the peak phase (component order), then a total row. Columns: component
    label, item, bytes, GB, GiB, share of the total (0–1). The items of a component sum to it. The overhead
    and its runtime item are named for the device (a Mac has Metal's runtime, not a CUDA context)."""
    rows = []
    total = float(est.total_bytes)
    for key in component_keys(est):
        for item in (d for d in est.details if d.component == key and d.bytes > 0):
            label = context_label(device) if item.key == CONTEXT_KEY else _(item.label)
            rows.append((component_label(key, device), label, float(round(item.bytes)), to_gb(item.bytes),
                         to_gib(item.bytes), item.bytes / total if total else 0.0))
    rows.append((_("Total"), _("peak: {phase}").format(phase=_(est.peak_phase)), float(round(total)), to_gb(total), to_gib(total), 1.0))
    # Bytes as float64: absurd setups (400B, fp32, 2M tokens × 256) pass int64, which Arrow cannot hold.
    return pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS))


HOST_COLUMNS = ("item", "when", "bytes", "gb", "gib")


def host_frame(hv: HostVerdict) -> pd.DataFrame:
    """The host RAM terms (estimator/memory/host.py), one row each with when it is held (the model load or the
    training steps; the processes at both), then the peak row."""
    rows = []
    base = {"host.process_baseline", "host.cuda_runtime"}
    for item in hv.host.details:
        when = (_("load and training") if item.key in base else _("model load") if item.key in LOAD_KEYS
                else _("training"))
        rows.append((_(item.label), when, float(round(item.bytes)), to_gb(item.bytes), to_gib(item.bytes)))
    peak = hv.host.total_bytes
    phase = _("model load") if hv.host.peak_phase == "load" else _("training")
    rows.append((_("Host peak"), phase, float(round(peak)), to_gb(peak), to_gib(peak)))
    return pd.DataFrame(rows, columns=list(HOST_COLUMNS))


def host_line(hv: HostVerdict) -> str:
    """The line under the host verdict: the peak, its moment and what dominates it (plain text)."""
    host = hv.host
    at_peak = [x for x in host.details if (x.key in LOAD_KEYS) == (host.peak_phase == "load")
               or x.key in ("host.process_baseline", "host.cuda_runtime")]
    biggest = max(at_peak or host.details, key=lambda x: x.bytes)
    phase = _("model load") if host.peak_phase == "load" else _("training")
    return _("Host RAM at its peak ({phase}): {amount} for {n} process(es); largest: {item} {item_amount}").format(
        phase=phase, amount=both_units(host.total_bytes), n=host.processes, item=_(biggest.label),
        item_amount=both_units(biggest.bytes))


def oom_frame(reading: OomReading) -> pd.DataFrame:
    """The message's figures, one row each (only those it gives), then the other processes NVML listed."""
    rows = [(_(label), float(getattr(reading, name)), to_gb(getattr(reading, name)), to_gib(getattr(reading, name)))
            for name, label in FIGURES if getattr(reading, name) is not None]
    for pid, used in reading.other_processes:
        label = _("Process {pid} (NVML)").format(pid=pid)
        rows.append((label, float(used), to_gb(used), to_gib(used)) if used is not None
                    else (label + " — " + _("not reported"), float("nan"), float("nan"), float("nan")))
    return pd.DataFrame(rows, columns=["figure", "bytes", "gb", "gib"])


def breakdown_csv(est: Estimate, device: Device | None = None) -> str:
    """The breakdown table as CSV: the same rows and numbers as on screen, bytes exact. Remembered for the
    last few estimates, per device and language (ui.once.remembered: the estimator hands back the same Estimate
    object for the same inputs, so a rerun that changed nothing the table shows does not build it again)."""
    return remembered("report.breakdown_csv", est, lambda: _breakdown_csv(est, device), device, get_language())


def _breakdown_csv(est: Estimate, device: Device | None) -> str:
    frame = breakdown_frame(est, device)
    frame["bytes"] = [int(b) for b in frame["bytes"]]  # whole bytes, exact (Python ints)
    return frame.to_csv(index=False, float_format="%.4f")


def verdict_detail(est: Estimate, device: Device, v: Verdict) -> tuple[str, str]:
    """The two lines under the headline (plain text, no Markdown): the estimate (expected peak in both
    units, the likely range, the peak phase) and the device (usable and total memory)."""
    parts = [_("Expected peak {amount}").format(amount=both_units(est.total_bytes))]
    if est.high_bytes != est.low_bytes:
        n = format_number
        parts.append(_("likely {low_gb}–{high_gb} GB ({low_gib}–{high_gib} GiB)").format(
            low_gb=n(to_gb(est.low_bytes)), high_gb=n(to_gb(est.high_bytes)),
            low_gib=n(to_gib(est.low_bytes)), high_gib=n(to_gib(est.high_bytes))))
    parts.append(_("peak during: {phase}").format(phase=_(est.peak_phase)))
    if device.cuda_total_mib is not None:  # a catalog GPU: usable is the total CUDA (ROCm) gives PyTorch
        device_line = _("{device}: {usable} usable of {capacity}, the total {runtime} gives PyTorch (the driver "
                        "keeps the rest)").format(device=device.name, usable=both_units(v.usable_bytes),
                                                  capacity=both_units(device.capacity_bytes), runtime=device.runtime)
    else:
        device_line = _("{device}: {usable} usable of {capacity}").format(
            device=device.name, usable=both_units(v.usable_bytes), capacity=both_units(device.capacity_bytes))
    return " · ".join(parts), device_line


def band_warning(est: Estimate, v: Verdict) -> str | None:
    """A caution when the verdict hangs on the estimate's error: it fits but the high end does not, or it
    does not fit but the low end would."""
    if v.fits and not v.high_fits:
        return _("Close call: the upper end of the likely range ({high}) is above the usable {usable}. Leave some "
                 "headroom or apply a change below.").format(high=both_units(est.high_bytes),
                                                             usable=both_units(v.usable_bytes))
    if not v.fits and est.low_bytes <= v.usable_bytes:
        return _("Borderline: the lower end of the likely range ({low}) would fit in {usable}; a small change "
                 "below should make it fit.").format(low=both_units(est.low_bytes), usable=both_units(v.usable_bytes))
    return None


@dataclass(frozen=True)
class RuleGap:
    """How far the detailed estimate is from the seed's rule of thumb."""

    seed_bytes: float
    detailed_bytes: float

    @property
    def diff_bytes(self) -> float:
        """detailed − seed: positive when the rule under-estimates."""
        return self.detailed_bytes - self.seed_bytes

    @property
    def diff_pct(self) -> float:
        """The difference relative to the seed's number, in percent."""
        return 100.0 * self.diff_bytes / self.seed_bytes if self.seed_bytes else float("inf")

    def sentence(self) -> str:
        if abs(self.diff_bytes) < 0.05e9:
            return _("The detailed estimate ({detailed}) matches the rule of thumb.").format(
                detailed=both_units(self.detailed_bytes))
        template = (_("Rule of thumb {rule} · detailed estimate {detailed}: the detailed estimate is {gb} GB ({gib} "
                      "GiB, {pct} %) above the rule.") if self.diff_bytes > 0 else
                    _("Rule of thumb {rule} · detailed estimate {detailed}: the detailed estimate is {gb} GB ({gib} "
                      "GiB, {pct} %) below the rule."))
        return template.format(rule=both_units(self.seed_bytes), detailed=both_units(self.detailed_bytes),
                               gb=format_number(to_gb(abs(self.diff_bytes))),
                               gib=format_number(to_gib(abs(self.diff_bytes))), pct=format_number(abs(self.diff_pct), 0))


def remedy_line(r: Remedy, usable_bytes: float) -> str:
    """'saves 8.7 GB (8.1 GiB) → 25.4 GB, fits' (plain text). A change that does not apply says so; one
    that costs memory here (QLoRA's fp32 upcasts can outweigh its 4-bit base) says how much it adds."""
    if not r.applicable:
        return _("not available here (already applied, or at its minimum).")
    fits = _("fits") if r.new_total_bytes <= usable_bytes else _("still too big")
    after = format_number(to_gb(r.new_total_bytes))
    if abs(r.saves_bytes) < NEGLIGIBLE_BYTES:
        return _("saves nothing here ({after} GB after).").format(after=after)
    if r.saves_bytes < 0:
        return _("adds {amount} here → {after} GB, {fits}").format(amount=both_units(-r.saves_bytes), after=after,
                                                                   fits=fits)
    return _("saves {amount} → {after} GB, {fits}").format(amount=both_units(r.saves_bytes), after=after, fits=fits)


def limit_text(value: int | None, limit: int, unit: str) -> str:
    """A solver's answer: 'None fits', '4,096 tokens', or '256 or more' when the search hit its limit. unit is
    shown translated (mark it with N_ where it is written)."""
    if value is None:
        return _("none fits (not even 1 {unit})").format(unit=_(unit))
    if value >= limit:
        return _("{limit} or more").format(limit=format_int(limit))
    return format_int(value)


def share_url(base_url: str | None, params: Mapping[str, Iterable[str]]) -> str:
    """The link that reproduces the view: the app's URL and every setup parameter now in the address bar
    (defaults are absent there and stay absent), minus Streamlit's viewer options."""
    pairs = [(k, v) for k, values in params.items() if k not in VIEWER_PARAMS for v in values]
    query = urlencode(pairs)
    base = (base_url or "").rstrip("/")
    if not urlsplit(base).path:  # the app's root: "http://host/" (a page keeps its path: "http://host/compare")
        base += "/"
    return base + ("?" + query if query else "")
