"""The trainer controls (SFT, DPO, ORPO, SimPO, KTO, GRPO, reward model) for the calculator: sidebar widgets bound
to the URL (`trainer`, `gens`, `prompt_len`, `completion_len`, `gen`, `vllm_util`, `beta`, `precompute_ref`,
`vllm_sleep`), in every page's sidebar.
Invalid link values and combinations TRL refuses fall back to a setting it accepts, with a plain-text note; the
page keeps working. The facts come from estimator/memory/trainers.py (one description per trainer)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from estimator import TrainingSetup
from estimator.i18n import N_, _, format_int, format_number, localised_error, ngettext
from estimator.job.settings import from_widgets
from estimator.job.trainer import TrainerSetup, check, fix_generations, trainer_loss
from estimator.options.trainers import (
    DEFAULT_PROMPT_LEN,
    GENERATION_MODES,
    GRPO_MAX_COMPLETION_LENGTH,
    GRPO_NUM_GENERATIONS,
    MAX_BETA,
    TRAINERS,
    TRL_RELEASE,
    TRL_VERSION,
    VLLM_GPU_MEMORY_UTILIZATION,
)
from ui.accuracy import trainer_traces
from ui.params import AUTO, TABLE, TRAINER_PARAMS, typed, widget
from ui.text import warn_notes
from ui.url_state import TRAINER_DEFAULTS, remember_values
from ui.values import Inputs, TrainerBox


@dataclass(frozen=True)
class TrainerInputs:
    trainer: TrainerSetup
    setup: TrainingSetup  # the setup, changed only where TRL would refuse it (then a note says how)
    notes: tuple[str, ...]


def _valid(key: str, raw: str) -> bool:
    """Would this link value be accepted? (Streamlit drops invalid bound values silently; we say so.)"""
    if key == "beta":
        return raw == AUTO or parse_beta(raw) is not None
    return TABLE[key].accepts(raw)


def parse_beta(raw: object) -> float | None:
    """'auto' → None; a finite number ≥ 0 → that number; anything else → None (the caller notes it)."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value < MAX_BETA else None


def trainer_url_notes() -> list[str]:
    """Plain-text notes for invalid trainer link values (checked before the widgets read them)."""
    notes = []
    for key in TRAINER_PARAMS:
        if key == "beta":
            continue  # a text box keeps any text: resolve_trainer notes a bad one
        for raw in st.query_params.get_all(key):
            if not _valid(key, raw):
                notes.append(_("The link's value for '{key}' was not valid; using the default ({default}).").format(
                    key=key, default=TABLE[key].default_text))
                break
    return notes


def resolve_trainer(setup: TrainingSetup, trainer: str, **values: Any) -> TrainerInputs:
    """The trainer box's values (the trainer and its other controls by their keys; a control left out has its
    table default) → a TrainerSetup TRL accepts and the setup, with notes for every fallback.
    Pure (no Streamlit): the options the trainer has no use for are left out, never an error. For GRPO the
    setup's max length becomes prompt + completion (the length it trains on; the max-length slider is off)."""
    notes: list[str] = []
    opt = TRAINERS.get(trainer, TRAINERS["sft"])
    # the controls' values as TrainerSetup's settings (estimator/job/settings.py); beta stays text until parsed here
    w = from_widgets({**TRAINER_DEFAULTS, **values})
    beta = None
    if opt.beta_default is not None and w["beta"] is not None:
        beta = parse_beta(w["beta"])
        if beta is None:
            notes.append(_("Beta must be a number ≥ 0; using {trainer}'s default ({default}).").format(
                trainer=_(opt.label), default=opt.beta_default))
    colocate = opt.generates and w["generation"] == "vllm-colocate"
    unused = [name for name, off in (
        ("beta", opt.beta_default is None and w["beta"] is not None),
        ("precompute_ref_log_probs", bool(w["precompute_ref"]) and not opt.can_precompute),
        ("num_generations", not opt.generates and int(w["num_generations"]) != GRPO_NUM_GENERATIONS),
        (_("the prompt length"), not opt.generates and int(w["prompt_len"]) != DEFAULT_PROMPT_LEN),
        ("max_completion_length", not opt.generates and int(w["completion_len"]) != GRPO_MAX_COMPLETION_LENGTH),
        (_("the generation mode"), not opt.generates and str(w["generation"]) != "hf"),
        ("vllm_gpu_memory_utilization", not colocate and round(float(w["vllm_gpu_util"]), 2)
         != VLLM_GPU_MEMORY_UTILIZATION),
        (_("vLLM sleep mode"), not colocate and bool(w["vllm_sleep"]))) if off]
    if unused:
        where = (_("{trainer} with {gen}").format(trainer=_(opt.label), gen=w["generation"]) if opt.generates
                 else _(opt.label))
        notes.append(_("{where} has no use for {unused}: not applied.").format(where=where, unused=", ".join(unused)))
    kwargs: dict[str, object] = {"beta": beta, "precompute_ref": bool(w["precompute_ref"]) and opt.can_precompute}
    if opt.generates:
        kwargs.update(num_generations=int(w["num_generations"]), prompt_len=int(w["prompt_len"]),
                      completion_len=int(w["completion_len"]), generation=str(w["generation"]))
        if colocate:
            kwargs.update(vllm_gpu_util=float(w["vllm_gpu_util"]), vllm_sleep=bool(w["vllm_sleep"]))
    try:
        tr = TrainerSetup(opt.id, **kwargs)  # type: ignore[arg-type]
    except ValueError as exc:
        notes.append(_("{error}; using {trainer}'s defaults.").format(error=localised_error(exc), trainer=_(opt.label)))
        tr = TrainerSetup(opt.id)
    if setup.batch < opt.min_batch:
        notes.append(_("{trainer} needs a per-device batch of at least {n} (TRL refuses batch 1); shown with "
                       "batch {n}.").format(trainer=_(opt.label), n=opt.min_batch))
        setup = replace(setup, batch=opt.min_batch)
    setup, tr, note = fix_generations(setup, tr)
    if note:
        notes.append(note)
    wanted = trainer_loss(setup, tr)
    if wanted != setup.loss:
        notes.append(_("TRL's {trainer_class} does not use the '{loss}' loss; shown with its own ('{own}').").format(
            trainer_class=opt.trainer_class, loss=setup.loss, own=wanted))
        setup = replace(setup, loss=wanted, from_stack=tuple(dict.fromkeys((*setup.from_stack, "loss"))))
    try:
        check(setup, tr)
    except ValueError as exc:  # nothing left to fix automatically: price SFT and say why
        notes.append(_("{error}; showing SFT.").format(error=localised_error(exc)))
        tr = TrainerSetup("sft")
    if tr.option.generates:
        setup = replace(setup, seq_len=tr.prompt_length + tr.completion_length)
    return TrainerInputs(tr, setup, tuple(notes))


def trainer_generates() -> bool:
    """Does the trainer in use (the control's value, else the link's) generate? For the max-length slider,
    drawn before the trainer controls: GRPO's length is prompt + completion."""
    chosen = st.session_state.get("trainer") or st.query_params.get("trainer", "sft")
    return chosen in TRAINERS and TRAINERS[chosen].generates


GENERATES_NOTE = N_("GRPO trains on prompt + completion: set both in the Trainer box (max length is not used).")


def trainer_summary(tr: TrainerSetup) -> str:
    """The trainer as a page's setup line names it: '' for SFT, else e.g. 'GRPO (TRL 1.16.0) · 8 generations ·
    prompt 512 + completion 512 tokens · transformers generate (in the training process)'."""
    opt = tr.option
    if opt.id == "sft":
        return ""
    parts = [f"{opt.label} ({TRL_VERSION})"]
    if opt.sequences == 2:
        parts.append(_("chosen + rejected"))
    if opt.generates:
        parts += [ngettext("{n} generation", "{n} generations", tr.gens).format(n=format_int(tr.gens)),
                  _("prompt {prompt} + completion {completion} tokens").format(
                      prompt=format_int(tr.prompt_length), completion=format_int(tr.completion_length)),
                  _(GENERATION_MODES[tr.generation_mode].label)]
        if tr.generation_mode == "vllm-colocate":
            parts.append(f"vllm_gpu_memory_utilization {tr.vllm_util:g}"
                         + (", " + _("sleep mode") if tr.vllm_sleep else ""))
    if opt.reference != "none":
        parts.append(_("reference model") if tr.uses_reference() else _("no reference model"))
    return " · ".join(parts)


def page_trainer(inputs: Inputs) -> TrainerInputs:
    """For the pages other than the calculator: the trainer controls in the sidebar, their notes shown, and the
    rule of thumb's note when a trainer other than SFT overrides it. One call per page."""
    result = resolve_box(inputs.setup, inputs.trainer_box)  # the box ui.inputs.live_page drew
    notes = result.notes
    if inputs.rule and result.trainer.trainer != "sft":
        notes += (_("The rule of thumb covers SFT only; this page shows the detailed estimate for {trainer}.").format(
            trainer=result.trainer.option.label),)
    warn_notes(notes)
    return result


def draw_trainer_box() -> TrainerBox:
    """Draw the trainer controls in the sidebar (an expander, open when a trainer other than SFT is chosen)."""
    notes = trainer_url_notes()
    chosen = st.session_state.get("trainer", st.query_params.get("trainer", "sft"))
    sb = st.sidebar
    values: dict[str, Any] = {}

    def draw(key: str, **overrides: Any) -> Any:
        values[key] = typed(key, widget(key, **overrides))
        return values[key]

    with sb.expander(_("Trainer: SFT, DPO, GRPO… ({version})").format(version=TRL_VERSION), expanded=chosen != "sft"):
        trainer = draw("trainer")
        opt = TRAINERS.get(str(trainer), TRAINERS["sft"])
        st.caption(_(opt.summary))
        draw("beta", disabled=opt.beta_default is None,
             help=_("auto = the trainer's default") + (f" ({opt.beta_default})" if opt.beta_default is not None else "")
             + _(". GRPO: beta > 0 loads a reference model."))
        draw("precompute_ref", disabled=not opt.can_precompute)
        grpo_off = not opt.generates
        for key in ("gens", "prompt_len", "completion_len"):
            draw(key, disabled=grpo_off)
        gen = draw("gen", disabled=grpo_off)
        draw("vllm_util", disabled=grpo_off or gen != "vllm-colocate")
        draw("vllm_sleep", disabled=grpo_off or gen != "vllm-colocate")
    _remember_trainer()
    return TrainerBox(values, tuple(notes))


def resolve_box(setup: TrainingSetup, box: TrainerBox) -> TrainerInputs:
    """The trainer the box describes, for this setup (TRL's checks: e.g. generations must divide the batch)."""
    result = resolve_trainer(setup, **box.values)
    return replace(result, notes=box.notes + result.notes)


def _remember_trainer() -> None:
    """The trainer controls' values, for the next page switch (ui.inputs puts them back into the address and the
    controls when the next page starts): remembered after the widgets, so a link's values count from its first
    run."""
    remember_values({key: st.session_state.get(key) for key in TRAINER_PARAMS})


def how_section_markdown() -> str:
    """The How page's "Preference & RL" section: each trainer's formula and source, the generation modes and
    the KV-cache formula, all read from estimator/memory/trainers.py (nothing restated)."""
    from estimator.options.trainers import GENERATION_MODES as modes

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    rows = ["| " + " | ".join((_("trainer"), _("each forward runs on"), _("reference model"), _("head"), _("memory"),
                               _("source"))) + " |", "|---|---|---|---|---|---|"]
    for o in TRAINERS.values():
        ref = {"always": _("full FT: a frozen copy; PEFT: adapter off (no copy); none when precomputed"),
               "beta": _("only when beta > 0 (full FT: a copy)"), "none": _("none")}[o.reference]
        head = {"fused": _("TRL's fused chunked head"), "logits": _("full-vocabulary logits"),
                "score": _("1-output score head")}[o.head]
        seqs = _("2 × batch (chosen + rejected)") if o.sequences == 2 else (
            _("batch completions × (prompt + completion)") if o.generates else _("batch"))
        rows.append(f"| {_(o.label)} | {seqs} | {ref} | {head} | {cell(_(o.formula))} | {cell(o.source)} |")
    gen = "\n".join(f"- **{_(m.label)}** (`{m.id}`): {_(m.summary)} " + _("Source: {source}.").format(source=m.source)
                    for m in modes.values())
    acc = trainer_traces()
    return (
        _("Modelled as in **{version}** (the newest release). A trainer changes what one training forward runs "
          "on, adds a reference model, and (GRPO) a generation phase; the SFT formulas above then apply to the "
          "training forward (docs/formulas.md §9). Every page prices the trainer chosen in the sidebar's Trainer "
          "box: the calculator, Compare's bars, What fits' cells, the Size table's detailed columns and Scale out's "
          "GPU counts.").format(version=TRL_VERSION)
        + "\n\n" + "\n".join(rows) + "\n\n"
        + _("**Reference copy** = bytes per weight as loaded × parameters (÷ GPUs under ZeRO-3). The DPO/KTO reference "
            "forward runs under `no_grad` *after* the policy forward, so its phase is the policy's saved activations "
            "plus one layer's no-grad working set T × (2·r·H + max(c·(H + 2q + 2kv), c·(H + 3I))) and one fused-head "
            "tile.") + "\n\n"
        + _("**GRPO generation** holds the weights and the optimizer state (no gradients: after `zero_grad`) plus "
            "the KV cache of batch × gradient accumulation sequences: **KV = 2 × layers × KV heads × head dim × c × "
            "sequences × (prompt + completion − 1)**, with the prefill's one-layer working set and the last-token "
            "logits on top. `num_generations` (default {gens}) must divide batch × GPUs × accumulation; it does not "
            "change the memory, because `per_device_train_batch_size` counts completions.").format(
            gens=GRPO_NUM_GENERATIONS) + "\n\n" + gen + "\n\n"
        + _("`peak_phase` names the winner: generation, reference forward, a backward phase or the optimizer step.")
        + "\n\n"
        + _("**Accuracy**: against {n} traced steps of these trainers (TRL {trl}'s own code, real widths, LoRA and "
            "full) the estimate's median error is {median} % and the worst {worst} %; the KV cache equals a real "
            "`generate`'s (calibration/README.md).").format(
            n=acc["n"], trl=TRL_RELEASE, median=format_number(100 * acc["median_abs"]),
            worst=format_number(100 * acc["worst_abs"]))
    )
