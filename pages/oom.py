"""Out of memory? Paste (or upload) the message a run printed when it ran out of memory: what it says in bytes, the
device it names (a button switches the sidebar to it), why it failed, what to do, and the sidebar's job priced on
that device with the remedies. Thin: inputs → estimator (parse_oom, diagnose_oom) → ui builders → render.

A page of its own rather than a section of the calculator: the calculator answers "will it fit?" for the sidebar's
job, live as its sliders move; this page starts from a failure, reads text the user brings, and prices the job on
the device the message names, which may not be the sidebar's. The shared sidebar (ui.inputs.live_page) still
gives it the job, so the same link carries both."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from estimator.advice.oom import diagnose_oom
from estimator.i18n import _, format_number, localised_error
from estimator.oom_message import MAX_TEXT_CHARS, parse_oom
from estimator.units import GB
from ui.charts import both_units
from ui.inputs import live_page
from ui.lang import localised, number_columns
from ui.live_chart import live_plotly_chart
from ui.page_charts import oom_chart_spec
from ui.report import oom_frame, remedy_line
from ui.text import plain, show_notes
from ui.trainer_inputs import resolve_box
from ui.url_state import share_box

if TYPE_CHECKING:
    from estimator import Device
    from estimator.advice.oom import OomDiagnosis
    from ui.values import Inputs

TEXT_KEY = "oom_text"
# A real message, to try the page with: huggingface/trl#4237 (four test processes on one T4).
EXAMPLE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.11 GiB. GPU 0 has a total capacity of "
           "14.74 GiB of which 1.65 GiB is free. Process 19066 has 6.79 GiB memory in use. Process 19069 has 514.00 "
           "MiB memory in use. Process 19060 has 4.93 GiB memory in use. Process 19063 has 894.00 MiB memory in use. "
           "Of the allocated memory 4.50 GiB is allocated by PyTorch, and 2.14 GiB is reserved by PyTorch but "
           "unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


def _use_example() -> None:
    st.session_state[TEXT_KEY] = EXAMPLE


def _use_device(device_id: str, capacity_gb: float | None = None, kind: str | None = None) -> None:
    """Point the sidebar at the message's device (a catalog id, or a custom capacity)."""
    st.session_state["device"] = device_id
    if capacity_gb is not None:
        st.session_state["capacity"] = float(capacity_gb)
        st.session_state["kind"] = kind or "discrete"


def _message_text() -> str:
    """The pasted text, or an uploaded log's (at most MAX_TEXT_CHARS)."""
    st.text_area(_("The out-of-memory message"), key=TEXT_KEY, height=180, max_chars=MAX_TEXT_CHARS,
                 placeholder="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …",
                 help=_("Paste the lines PyTorch or MLX printed: CUDA (current and 1.x messages), MPS on a Mac, "
                        "MLX's [metal::malloc] or [METAL] Command buffer errors. Nothing leaves the page."))
    cols = st.columns([1, 3])
    cols[0].button(_("Try an example"), on_click=_use_example, key="oom_example",
                   help=_("A real message from a public issue (huggingface/trl#4237)."))
    upload = cols[1].file_uploader(_("…or upload a log file"), type=["txt", "log", "out", "err"], key="oom_upload")
    if upload is not None:
        data = upload.getvalue()
        if len(data) > MAX_TEXT_CHARS:
            st.warning(plain(_("The file is {n} bytes; the limit is {limit}: keep the error's last lines.").format(
                n=f"{len(data):,}", limit=f"{MAX_TEXT_CHARS:,}")), icon=":material/info:")
            return ""
        return data.decode("utf-8", errors="replace")
    return str(st.session_state.get(TEXT_KEY) or "")


def answer(inputs: Inputs) -> OomDiagnosis | None:
    """The page's answer: the message read and judged, with the sidebar's job priced on its device."""
    st.title(_("Out of memory?"), anchor=False)
    st.caption(_("Paste the error your run printed. The page reads its figures, finds the device, says whether "
                 "the job, the allocator's fragmentation or another process is to blame, and prices the sidebar's "
                 "job on that device."))
    show_notes(inputs)
    text = _message_text()
    if not text.strip():
        st.info(_("Paste a message above (or try the example) to read it."), icon=":material/content_paste:")
        return None
    try:
        reading = parse_oom(text)
    except ValueError as exc:
        st.warning(plain(localised_error(exc), limit=600), icon=":material/info:")
        return None
    box = resolve_box(inputs.setup, inputs.trainer_box)
    diag = diagnose_oom(reading, inputs.model, box.setup, box.trainer, fallback=inputs.device)
    _reading(diag)
    return diag


def _reading(diag: OomDiagnosis) -> None:
    """What the message says, in bytes, with its chart and notes."""
    r = diag.reading
    st.subheader(_("What the message says"), anchor=False)
    st.markdown(plain(_(r.label)))
    frame = oom_frame(r)
    if len(frame):
        numbers = {"bytes": (0, ""), "gb": (2, " GB"), "gib": (2, " GiB")}
        st.dataframe(localised(frame, numbers), hide_index=True, key="oom_figures", width="stretch",
                     column_config={"figure": st.column_config.TextColumn(_("Figure"), width="large")}
                     | number_columns(numbers, {"bytes": _("Bytes"), "gb": "GB", "gib": "GiB"}))
    if r.capacity_bytes or r.limit_bytes:
        live_plotly_chart(oom_chart_spec(r), key="oom_chart", config={"displayModeBar": False})  # a plain spec
    if r.resource_limit is not None:
        st.markdown(plain(_("Metal buffer limit: {n} buffers").format(n=r.resource_limit)))
    for note in r.notes:
        st.caption(plain(_(note), limit=600))


def rest(inputs: Inputs, diag: OomDiagnosis | None) -> None:
    """The device, why it failed, what to do, and the job priced on the device."""
    if diag is not None:
        _device(inputs, diag)
        _why(diag)
        _priced(diag)
    share_box()


def _device(inputs: Inputs, diag: OomDiagnosis) -> None:
    """The device's real capacity, the catalog entries that match, and buttons that switch the sidebar to one."""
    st.subheader(_("The device"), anchor=False)
    r = diag.reading
    if diag.capacity_bytes is not None:
        key = (_("Worked out from the message: {amount}") if diag.capacity_inferred
               else _("Capacity as the runtime reports it: {amount}"))
        st.markdown(plain(key.format(amount=both_units(diag.capacity_bytes, 2))))
    for note in diag.notes:
        st.caption(plain(_(note), limit=600))
    if diag.matches:
        st.caption(_("Macs whose RAM this limit means, the likeliest first:") if r.kind == "mps" else
                   _("Catalog devices with this memory (nvidia-smi's figure, a little above CUDA's total: the driver "
                     "keeps some back), closest first:"))
        for d in diag.matches[:4]:
            _switch_button(inputs.device, d, d.id)
    elif diag.capacity_bytes is not None and r.kind != "mps":
        gb = round(diag.capacity_bytes / GB, 2)
        st.caption(_("No catalog device has this memory; a custom device of {gb} GB can stand for it.").format(
            gb=format_number(gb, 2)))
        if st.button(_("Use a custom {gb} GB device in the sidebar").format(gb=format_number(gb, 2)),
                     key="oom_use_custom", on_click=_use_device, args=("custom", gb, "discrete")):
            st.rerun()
    elif diag.device is not None:
        st.caption(plain(_("The message names no device; the job is priced on the sidebar's: {device}.").format(
            device=diag.device.name)))


def _switch_button(current: Device, device: Device, key: str) -> None:
    if current.id == device.id:
        st.markdown(":green[✓] " + plain(_("{device} (the sidebar's device)").format(device=device.name)))
        return
    if st.button(_("Use {device} in the sidebar").format(device=device.name), key=f"oom_use_{key}",
                 on_click=_use_device, args=(device.id,)):
        st.rerun()  # the sidebar is outside this page's fragment: draw it again with the new device


def _why(diag: OomDiagnosis) -> None:
    """The causes, most telling first, then what to do about them."""
    st.subheader(_("Why it failed"), anchor=False)
    if diag.short_by_bytes is not None:
        st.markdown(plain(_("At that moment the device lacked at least {amount}.").format(
            amount=both_units(diag.short_by_bytes, 2))))
    if diag.causes:
        st.markdown("\n".join(f"- {plain(_(c.text), limit=800)}" for c in diag.causes))
    if diag.actions:
        st.markdown("**" + _("What to do about it") + "**")
        st.markdown("\n".join(f"- {plain(_(a.text), limit=800)}" for a in diag.actions))
    if diag.expandable_segments:
        st.code("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", language="bash")
    if diag.short_by_bytes is None and not diag.causes and not diag.actions:  # never an empty section
        st.markdown(_("Nothing in the message says why: judge by the job's estimate below."))


def _priced(diag: OomDiagnosis) -> None:
    """The sidebar's job on the message's device: the comparison and the remedies that help."""
    if diag.estimate is None or diag.verdict is None or diag.device is None:
        return
    st.subheader(_("Your job on this device"), anchor=False)
    v = diag.verdict
    color = "green" if v.fits else "red"
    st.markdown(f":{color}[**{plain(v.headline)}**]")
    st.markdown(plain(_(diag.comparison), limit=1200))
    if diag.advice is None:
        return
    usable = diag.device.usable_bytes
    helps = [r for r in diag.advice.remedies if r.applicable and abs(r.saves_bytes) >= 0.05e9]
    if helps:
        st.markdown("**" + _("What to change in the job") + "**")
        st.markdown("\n".join(f"{i}. **{plain(r.title)}** ({plain(r.change)}): {plain(remedy_line(r, usable))}"
                              for i, r in enumerate(helps, 1)))
    if diag.advice.smallest_device is not None:
        st.caption(plain(_("Smallest catalog device that fits this job: {device}").format(
            device=diag.advice.smallest_device.name)))


live_page(answer, rest)
