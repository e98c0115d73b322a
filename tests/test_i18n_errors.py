"""Errors and device names in the reader's language (estimator/i18n.py: a user-facing exception carries a Text).

str(exc) stays the English text the CLI prints and the other tests read; localised_error(exc) is the same message
translated, with the same values (numbers in the language's format). Device names and captions carry their MiB/GB
figures in the language's format. The app shows both in Spanish at lang=es."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import exact
from estimator.i18n import Text, error_message, language, localised_error
from estimator.job.stack import resolve_setup
from estimator.job.trainer import TrainerSetup
from estimator.memory.price import detailed_estimate as estimate
from estimator.models.config import parse_config_text
from estimator.models.hub import HubError, fetch_model, parse_model_id
from estimator.models.presets import load_preset
from estimator.options.devices import custom_device, device_label, get_device
from tests.test_hub import _never_the_internet, hub  # noqa: F401 - the local Hub stand-in's fixtures

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
LLAMA = json.loads((ROOT / "estimator" / "models" / "presets" / "llama-3.1-8b.json").read_text())


def _raised(call) -> Exception:
    with pytest.raises(ValueError) as info:
        call()
    return info.value


def _config(**changes) -> str:
    return json.dumps(LLAMA | changes)


# (what raises, its English text as today, its Spanish text)
CASES = [
    (lambda: parse_config_text(_config(hidden_size=-3)),
     "config.json field 'hidden_size' must be a positive integer, got -3",
     "el campo 'hidden_size' de config.json debe ser un entero positivo, no -3"),
    (lambda: parse_config_text(_config(vocab_size=10**9)),
     "config.json field 'vocab_size' = 1000000000 is beyond any real model (limit 1,048,576)",
     "el campo 'vocab_size' de config.json = 1000000000 supera cualquier modelo real (límite 1.048.576)"),
    (lambda: parse_config_text(json.dumps({"model_type": "llava", "text_config": {"model_type": "llama"}})),
     "multimodal config (llava), in its text_config: config.json is missing the field 'hidden_size'",
     "config multimodal (llava), en su text_config: a config.json le falta el campo 'hidden_size'"),
    (lambda: parse_config_text(_config(model_type="bert")),
     "model_type 'bert' is not supported: it is an encoder or encoder-decoder model, and this calculator estimates "
     "decoder language models",
     "model_type 'bert' no está soportado: es un modelo codificador o codificador-decodificador, y esta calculadora "
     "estima modelos de lenguaje decodificadores"),
    (lambda: parse_config_text(b"\xff\xfe{"),
     "the file is not UTF-8 text; upload a Hugging Face config.json",
     "el archivo no es texto UTF-8; sube un config.json de Hugging Face"),
    (lambda: resolve_setup("torchtune", loss="fused"),
     "the torchtune stack cannot use the 'fused' loss: torchtune has no fused linear cross-entropy; choose 'chunked'",
     "el stack torchtune no puede usar la pérdida 'fused': torchtune no tiene entropía cruzada lineal fusionada; "
     "elige 'chunked'"),
    (lambda: resolve_setup("trl", seq_len=10**9),
     "seq_len must be between 1 and 2,097,152, got 1,000,000,000",
     "seq_len debe estar entre 1 y 2.097.152, no 1.000.000.000"),
    (lambda: resolve_setup("trl", offload_optimizer=True, gpus=2),
     "optimizer offload needs ZeRO or FSDP sharding (choose zero1, zero2 or zero3)",
     "el offload del optimizador necesita sharding ZeRO o FSDP (elige zero1, zero2 o zero3)"),
    (lambda: TrainerSetup("reward", precompute_ref=True),
     "the Reward model trainer has no reference log-probs to precompute (precompute_ref_log_probs is a DPO/KTO "
     "option)",
     "el entrenador Modelo de recompensa no tiene log-probs de referencia que precalcular (precompute_ref_log_probs "
     "es una opción de DPO/KTO)"),
    (lambda: estimate(load_preset("llama-3.1-8b"), resolve_setup("trl", train_tower=True)),
     "training the vision tower needs a multimodal model; Llama-3.1-8B has no vision tower",
     "entrenar la torre de visión necesita un modelo multimodal; Llama-3.1-8B no tiene torre de visión"),
    (lambda: custom_device(0.1),
     "capacity must be between 0.5 and 100,000 GB, got 0.1",
     "la capacidad debe estar entre 0,5 y 100.000 GB, no 0,1"),
    (lambda: exact.check_config(LLAMA | {"num_hidden_layers": 12345}),
     "12,345 layers are more than the exact trace takes (160): tracing costs ~10 s per layer, so this would run for "
     "hours",
     "12.345 capas son más de las que admite la traza exacta (160): trazar cuesta ~10 s por capa, así que tardaría "
     "horas"),
    (lambda: exact.tracer_setup(resolve_setup("trl", grad_accum=4)),
     "gradient accumulation is not traced (the tracer frees gradients every step); set it to 1",
     "la acumulación de gradientes no se traza (el trazador libera los gradientes en cada paso); ponla a 1"),
    (lambda: parse_model_id("not a model id"),
     "'not a model id' is not a Hugging Face model id: use ORG/NAME or ORG/NAME@REVISION",
     "'not a model id' no es un id de modelo de Hugging Face: usa ORG/NOMBRE u ORG/NOMBRE@REVISIÓN"),
]


@pytest.mark.parametrize(("call", "english", "spanish"), CASES, ids=[c[1][:40] for c in CASES])
def test_an_error_is_english_as_str_and_spanish_when_shown(call, english, spanish):
    with language("es"):  # raised while the page is Spanish: the exception's own text is still English
        exc = _raised(call)
    assert str(exc) == english
    assert isinstance(error_message(exc), Text)
    with language("es"):
        assert localised_error(exc) == spanish
    with language("en"):
        assert localised_error(exc) == english


def test_exact_refusals_are_exact_refused_and_hub_errors_hub_errors():
    """Carrying a Text changes no exception type: callers still catch ExactRefused and HubError."""
    assert isinstance(_raised(lambda: exact.tracer_setup(resolve_setup("trl", gpus=2))), exact.ExactRefused)
    assert isinstance(_raised(lambda: parse_model_id("x")), HubError)


def test_a_library_message_stays_as_it_is():
    """An exception raised without a Text (a library's) shows its own text in every language."""
    exc = ValueError("Expecting value: line 1 column 1 (char 0)")
    with language("es"):
        assert localised_error(exc) == str(exc)
        assert error_message(exc) == str(exc)


# The errors of the estimator that still raise plain English: the command line's own (estimator/report/cli.py and
# cli_args.py, English by design) and arguments only code passes (never a link, upload or widget value).
ENGLISH_ONLY = {
    ("estimator/memory/price.py", "rule must be 'seed' or omitted"),
    ("estimator/exact/__init__.py", "{INSTALL_HINT}; {found}"),  # ExactUnavailable: the page says it in its own words
    ("estimator/models/hub.py", "no answer within"),  # TimeoutError, explained by _explain before anyone sees it
    ("estimator/models/presets/__init__.py", "give exactly one of a preset"),
    ("estimator/memory/precision.py", "unknown optimizer"),
    ("estimator/memory/rule.py", "method must be full, lora or qlora"),
    ("estimator/job/stack.py", "unknown setting"),
    ("estimator/job/stack.py", "give resolve_setup the versions"),  # a TypeError: two inputs for one, from code
    ("estimator/memory/allocator.py", "unknown parser"),  # a PYTORCH_ALLOC_CONF parser name: set in code only
}


def test_every_user_facing_error_of_the_estimator_carries_a_text():
    """A new `raise ValueError(f"…")` in the estimator would show English on a Spanish page: mark it with
    Text(N_(…)) (or list it above when only code can reach it)."""
    plain = re.compile(r"raise \w+\(f?\"([^\"]{0,40})")
    found = set()
    for path in sorted((ROOT / "estimator").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("estimator/report/cli.py", "estimator/report/cli_args.py",  # the CLI: English by design
                   "estimator/report/cli_config.py", "estimator/report/cli_time.py"):
            continue
        for match in plain.finditer(path.read_text()):
            found.add((rel, match.group(1)))
    unexpected = {f for f in found if not any(f[0] == k[0] and f[1].startswith(k[1]) for k in ENGLISH_ONLY)}
    assert not unexpected, sorted(unexpected)
    assert len(found) == len(ENGLISH_ONLY)  # the list has no stale entries


# ---- the local Hub stand-in (tests/test_hub.py) -------------------------------------------------------------

def test_hub_errors_in_both_languages_also_when_remembered(hub):  # noqa: F811
    for _ in range(2):  # the second answer comes from fetch_model's memory of the failure
        with pytest.raises(HubError) as info:
            fetch_model("nobody/nothing")
        exc = info.value
        assert str(exc) == ("'nobody/nothing' was not found on the Hub at 127.0.0.1; if it is private, the server "
                            "needs a Hugging Face token with access (HF_TOKEN)")
        with language("es"):
            assert localised_error(exc) == ("'nobody/nothing' no se encontró en el Hub de 127.0.0.1; si es privado, "
                                            "el servidor necesita un token de Hugging Face con acceso (HF_TOKEN)")


def test_a_hub_config_that_cannot_be_used_nests_the_parser_s_reason(hub):  # noqa: F811
    hub.add("acme/bad", {"config.json": _config(num_key_value_heads=7).encode()})
    with pytest.raises(HubError) as info:
        fetch_model("acme/bad")
    assert str(info.value) == ("the config.json of 'acme/bad' could not be used: num_attention_heads (32) must be a "
                               "multiple of num_key_value_heads (7)")
    with language("es"):
        assert localised_error(info.value) == ("no se pudo usar el config.json de 'acme/bad': num_attention_heads "
                                               "(32) debe ser múltiplo de num_key_value_heads (7)")


# ---- device names and captions --------------------------------------------------------------------------------

def test_device_names_and_captions_follow_the_language():
    rtx, mac = get_device("rtx-4090"), get_device("laptop-36gb")
    with language("en"):
        assert rtx.name == "NVIDIA GeForce RTX 4090 (24,564 MiB)"
        assert device_label(rtx) == "NVIDIA GeForce RTX 4090 · 24,564 MiB (25.8 GB / 24.0 GiB)"
        assert mac.name == "36 GB laptop (unified, 36 GiB)"
        assert get_device("mac-32gb").name == "Apple silicon 32 GB unified (32 GiB)"
        assert custom_device(0.5, "unified").name == "Custom 0.5 GB (unified)"
        assert custom_device(24).name == "Custom 24 GB (GPU)"
        assert custom_device(24).reported == "24.0 GB"
    with language("es"):
        assert rtx.name == "NVIDIA GeForce RTX 4090 (24.564 MiB)"
        assert device_label(rtx) == "NVIDIA GeForce RTX 4090 · 24.564 MiB (25,8 GB / 24,0 GiB)"
        assert mac.name == "Portátil de 36 GB (unificada, 36 GiB)"
        assert get_device("mac-32gb").name == "Apple silicon 32 GB unificada (32 GiB)"
        assert get_device("gpu-16gb").name == "GPU NVIDIA de 16 GB, clase RTX 4080 / 4060 Ti 16 GB (16.376 MiB)"
        assert custom_device(0.5, "unified").name == "Personalizado 0,5 GB (unificada)"
        assert custom_device(24).reported == "24,0 GB"
    assert str(rtx.title) == "NVIDIA GeForce RTX 4090 (24,564 MiB)"  # the stored title is English


# ---- the app at lang=es ---------------------------------------------------------------------------------------

def _run(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _shown(at: AppTest) -> str:
    texts = [e.value for kind in ("warning", "caption", "header", "info", "markdown") for e in at.get(kind)]
    return "\n".join(re.sub(r"\\(.)", r"\1", str(t)) for t in texts)


def test_spanish_page_shows_a_setup_error_in_spanish():
    """A link whose loss the stack cannot do: the note and the estimator's reason inside it are both Spanish."""
    shown = _shown(_run({"lang": "es", "stack": "unsloth", "loss": "chunked"}))
    assert ("el stack Unsloth no puede usar la pérdida 'chunked': la pérdida propia de Unsloth es la fusionada; "
            "elige 'fused' o 'standard'") in shown, shown
    assert "cannot use" not in shown
    english = _shown(_run({"lang": "en", "stack": "unsloth", "loss": "chunked"}))
    assert "the Unsloth stack cannot use the 'chunked' loss: Unsloth's own loss is the fused one" in english


def test_spanish_page_shows_bad_lora_targets_in_spanish():
    shown = _shown(_run({"lang": "es", "method": "lora", "targets": "zz_proj"}))
    assert "el módulo de LoRA 'zz_proj' no es un módulo lineal de llama; sus módulos son: down_proj" in shown, shown


def test_spanish_page_shows_device_figures_in_spanish():
    shown = _shown(_run({"lang": "es", "device": "h100-80gb"}))
    assert "NVIDIA H100 80GB HBM3 (81.559 MiB)" in shown, shown
    assert "81,559" not in shown


def test_spanish_page_shows_a_hub_failure_in_spanish(hub):  # noqa: F811
    hub.add("acme/bad", {"config.json": _config(hidden_size=-3).encode()})
    shown = _shown(_run({"lang": "es", "model": "acme/bad"}))
    assert ("no se pudo usar el config.json de 'acme/bad': el campo 'hidden_size' de config.json debe ser un entero "
            "positivo, no -3") in shown, shown
    assert "must be" not in shown


def test_spanish_page_shows_a_bad_typed_hub_id_in_spanish():
    at = _run({"lang": "es"})
    at.sidebar.text_input(key="hub_id").set_value("not a model id").run()
    assert not at.exception
    shown = _shown(at)
    assert "'not a model id' no es un id de modelo de Hugging Face" in shown, shown


def test_exact_trace_notes_and_added_items_follow_the_language():
    """What the exact trace says about itself (tracer_setup's notes, combine's added items, the versions line)
    is English in the result (the CLI's JSON) and Spanish where the page shows it with _()."""
    from estimator.i18n import _
    from estimator.job.setup import TrainingSetup
    from tests.test_exact import RAW

    setup = TrainingSetup(method="qlora", optimizer="adamw_8bit", precision="fp16")
    est = estimate(load_preset("llama-3.2-1b"), setup)
    _tsetup, notes = exact.tracer_setup(setup)
    res = exact.combine(RAW, setup, est, notes)
    shown = [*res.notes, *(a.label for a in res.added), res.versions_label]
    english = [str(t) for t in shown]
    assert "fp16 is traced as bf16 (the same bytes per value; CPU autocast only has bf16)." in english
    assert "AdamW state at the peak (traced, replaced by adamw_8bit)" in english
    assert res.versions_label == "traced with torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2"
    assert res.as_json()["added"][0]["label"] == english[len(res.notes)]  # the JSON keeps the English
    with language("es"):
        spanish = [_(t) for t in shown]
    assert "fp16 se traza como bf16 (los mismos bytes por valor; el autocast de CPU solo tiene bf16)." in spanish
    assert "Estado de AdamW en el pico (trazado, sustituido por adamw_8bit)" in spanish
    assert spanish[-1] == "trazado con torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2"
    assert all(s != e for s, e in zip(spanish, english, strict=True))  # every one of them translated
