"""The sidebar's Model section: the Model picker (presets, by size, upload, a Hugging Face model id), its
caption, the Hub id box and the config.json uploader, and the model they describe. Part of the sidebar
(ui/inputs.py draws it); the size slider is drawn by the live part (ui/sliders.py)."""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from estimator import ModelSpec, list_presets, load_preset, parse_config_text
from estimator.i18n import _, error_message, localised_error
from estimator.models.hub import HubError, fetch_model, normalise_model_id
from ui.params import BY_SIZE, TABLE, UPLOAD, widget
from ui.text import plain
from ui.url_state import DEFAULTS, is_hub_choice, is_valid

DEFAULT_MODEL: str = TABLE["model"].default
HUB_BOX = "hub_id"  # the "Hugging Face model id" text box (not in the URL: the Model picker carries the id)
_HUB_NOTE = "_hub_id_note"


def model_options(hub_model: str | None = None) -> list[str]:
    """The Model picker's options: the presets, by-size, upload, and the Hub model id in use, if any."""
    return list(TABLE["model"].choices) + ([hub_model] if hub_model else [])


def _model_label(option: str) -> str:
    names = {p.id: p.name for p in list_presets()}
    return names.get(option, {"by-size": _("By size (generic decoder)"), "upload": _("Upload config.json")}.get(
        option, option))


def _hub_model_option() -> str | None:
    """The Hub id the Model picker offers this run: the current choice, else the link's, else the box's."""
    for raw in (st.session_state.get("model"), st.query_params.get("model"), st.session_state.get(HUB_BOX)):
        if is_hub_choice(raw):
            return str(raw)
    return None


def _use_hub_id() -> None:
    """The Hugging Face model id box: point the Model picker (and so the URL's `model`) at the typed id."""
    raw = str(st.session_state.get(HUB_BOX, "")).strip()
    st.session_state[_HUB_NOTE] = ""
    if not raw:
        if is_hub_choice(st.session_state.get("model")):
            st.session_state["model"] = DEFAULT_MODEL  # the box emptied: back to the default model
        return
    try:
        canonical = normalise_model_id(raw)
    except HubError as exc:
        st.session_state[_HUB_NOTE] = error_message(exc)  # a Text: translated where shown
        return
    st.session_state[HUB_BOX] = canonical
    st.session_state["model"] = canonical
    _model_changed()


def hub_token() -> str | None:
    """The server's Hugging Face token for gated or private models: Streamlit secrets' HF_TOKEN, else None
    (estimator.hub then reads the HF_TOKEN environment variable). Never shown, logged or put in a link."""
    try:
        value = st.secrets.get("HF_TOKEN")
    except Exception:  # no secrets file: st.secrets raises when read
        return None
    return str(value) if value else None


def _size_means_by_size() -> None:
    """A hand-written link with size= but no model= means a model of that size: on a link's first run (before
    the Model picker binds), choose 'by-size' and write it into the address."""
    size = st.query_params.get("size")
    if size is not None and is_valid("size", size) and "model" not in st.query_params \
            and "model" not in st.session_state:
        st.session_state["model"] = BY_SIZE
        try:
            st.query_params["model"] = BY_SIZE
        except StreamlitAPIException:
            pass


def _model_changed() -> None:
    """Leaving 'by-size' puts the size back to its default, so no address ever holds a size without the
    by-size model it belongs to (a link with size= alone means by size)."""
    if st.session_state.get("model") != BY_SIZE:
        st.session_state["size"] = float(DEFAULTS["size"])  # type: ignore[arg-type]


def _draw_picker(sb: Any) -> tuple[str, Any]:
    """The Model picker, its caption (returned: a Hub model's label replaces it) and the Hub id box."""
    # Bound selectboxes carry their *displayed* option in the URL (Streamlit serialises the format_func
    # label), so the options are shown as their stable ids (?model=by-size) and the name goes underneath.
    hub_option = _hub_model_option()
    if hub_option and HUB_BOX not in st.session_state:
        st.session_state[HUB_BOX] = hub_option  # a link to a Hub model shows its id in the box
    options = model_options(hub_option)
    _size_means_by_size()
    choice = widget("model", sb, options=options, on_change=_model_changed)
    model_caption = sb.empty()
    model_caption.caption(plain(_model_label(choice)))
    sb.text_input(_("…or a Hugging Face model id"), key=HUB_BOX, on_change=_use_hub_id, max_chars=200,
                  placeholder=_("org/name or org/name@revision"),
                  help=_("Reads the model's config.json (and its safetensors headers for the exact parameter count) "
                         "from the Hugging Face Hub. The link then carries the id. Gated and private models need a "
                         "token on the server (HF_TOKEN)."))
    if st.session_state.get(_HUB_NOTE):
        sb.caption(plain(_(st.session_state[_HUB_NOTE])))
    return str(choice), model_caption


def _uploaded_model(sb: Any, notes: list[str]) -> ModelSpec:
    """The config.json uploader and the model it holds (the default model until one is uploaded)."""
    upload = sb.file_uploader("config.json", type=["json"], key="upload",
                              help=_("A Hugging Face config.json (llama, mistral, qwen2/3, qwen3_5, gemma 1–4, "
                                     "gemma3n, phi3, gpt_oss, deepseek_v3, llama4 and the other families the "
                                     "README lists; other decoders get a Llama-like estimate with a caveat)."))
    spec = load_preset(DEFAULT_MODEL)
    if upload is None:
        notes.append(_("No config.json uploaded yet; showing {model}.").format(model=spec.name))
        return spec
    try:
        return parse_config_text(upload.getvalue(), name=str(upload.name)[:60])
    except ValueError as exc:
        notes.append(_("That config.json could not be used: {error}. Showing {model}.").format(
            error=localised_error(exc), model=spec.name))
        return spec


def _hub_model(choice: str, model_caption: Any, notes: list[str]) -> ModelSpec:
    """The Hub model the picker names (read once, then cached by estimator.hub), its label under the picker."""
    try:
        with st.spinner(_("Reading {model} from the Hugging Face Hub…").format(model=choice)):
            spec, hub = fetch_model(choice, token=hub_token())
        model_caption.caption(plain(hub.label) + (f"  \n{plain(hub.stored)}" if hub.stored else ""))
        return spec
    except HubError as exc:
        spec = load_preset(DEFAULT_MODEL)
        model_caption.caption(plain(_("{model}: not read from the Hub").format(model=choice)))
        notes.append(_("The Hub model '{model}' could not be used: {error}. Showing {fallback}.").format(
            model=choice, error=localised_error(exc), fallback=spec.name))
        return spec


def draw_model_section(sb: Any, notes: list[str]) -> tuple[str, Any, ModelSpec | None]:
    """The Model section up to the size slider: the choice, a slot for the size slider and its number box
    (drawn by the live part), and the model (None for 'by-size': the live part builds it from the size)."""
    choice, model_caption = _draw_picker(sb)
    size_slot = sb.container()  # the size slider and its number box (ui/sliders.py)
    if choice == UPLOAD:
        return choice, size_slot, _uploaded_model(sb, notes)
    if is_hub_choice(choice):
        return choice, size_slot, _hub_model(choice, model_caption, notes)
    return choice, size_slot, None if choice == BY_SIZE else load_preset(choice)
