"""Bad training configs: each gives a clear one-line message (or a partial import with the bad keys listed), never
a traceback; the safe loader builds no object; the CLI exits 2 with one line. A fuzz of more than 300 malformed
configs (a hand-made corpus, mutations of the shipped examples, and hypothesis-generated documents) goes through
the importer and the CLI; tests/test_config_app.py sends a sample through the app."""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator.job.configs import ConfigError, ImportedConfig, import_config
from estimator.report.cli import main
from tests.config_corpus import DATA, INJECT, SCRIPT, nasty

CORPUS = nasty()
REAL = sorted(p for p in (*DATA.rglob("*.y*ml"), *DATA.rglob("*.json")))


def attempt(data: bytes | str, **kw) -> ImportedConfig | ConfigError:
    """The importer's whole contract: a result whose setup and trainer resolve, or a ConfigError with one line."""
    try:
        imported = import_config(data, **kw)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 600, message
        assert SCRIPT not in message
        return exc
    imported.setup()
    imported.trainer_setup()
    json.dumps(imported.as_json())
    for entry in imported.read + imported.ignored + imported.not_honoured:
        assert "\n" not in entry.key + entry.value and len(entry.value) <= 80
    return imported


@pytest.mark.parametrize(("name", "data"), CORPUS, ids=[n for n, _ in CORPUS])
def test_the_nasty_corpus(name, data):
    attempt(data, name=f"{name}.yaml")


@pytest.mark.parametrize(("name", "expected"), [
    ("empty", "empty"), ("list", "mapping"), ("yaml-unclosed", "not valid YAML"),
    ("json-trailing", "not valid JSON"), ("json-nan", "NaN"), ("json-deep", "nested"), ("yaml-deep-flow", "nested"),
    ("python-object", "tag"), ("python-object-key", "python/object/apply"), ("python-name", "python/name"),
    ("custom-tag", "!include"), ("alias-bomb", "more than"), ("huge-int", "number too long"),
    ("many-keys", "more than"), ("long-key", "longer than"), ("complex-key", "unhashable key"),
    ("binary-png", "binary"), ("latin1", "UTF-8"), ("binary-utf16", "binary"), ("oversize", "1 MB"),
    ("oversize-one-line", "1 MB"), ("other-deepspeed", "DeepSpeed config"), ("other-accelerate", "accelerate"),
    ("other-hf-config", "config.json"),
    ("unknown-format", "not a training config"), ("ambiguous", "fit both"),
])
def test_each_refusal_says_why(name, expected):
    data = dict(CORPUS)[name]
    result = attempt(data)
    assert isinstance(result, ConfigError), name
    assert expected in str(result), (name, str(result))


def test_the_safe_loader_builds_no_object(tmp_path, monkeypatch):
    """!!python/object/apply would run os.system under yaml.load's full loader; here it is refused and nothing runs."""
    marker = tmp_path / "ran"
    text = f"!!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(ConfigError, match="tag"):
        import_config(text)
    assert not marker.exists()
    with pytest.raises(yaml.constructor.ConstructorError):  # the loader the importer uses: SafeLoader
        yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506


def test_bad_mlx_lm_values_are_listed_and_the_rest_applies():
    bad = attempt(dict(CORPUS)["mlx-bad"])
    assert isinstance(bad, ImportedConfig) and bad.stack == "mlx"
    assert {"fine_tune_type", "num_layers", "batch_size", "max_seq_length", "grad_checkpoint",
            "grad_accumulation_steps", "optimizer", "optimizer_config", "lora_parameters.rank",
            "lora_parameters.scale", "lora_parameters.dropout", "lora_parameters.keys", "train"} <= {
        e.key for e in bad.not_honoured}
    assert bad.setup_kwargs == {"method": "lora", "precision": "bf16", "lora_targets": ("all-linear",),
                                "optimizer": "adam"}
    old = attempt(dict(CORPUS)["mlx-old-keys"])
    assert {"lora_layers", "use_dora", "lora_parameters.dropout", "model"} <= {e.key for e in old.not_honoured}
    assert old.setup_kwargs["lora_layers"] == 16 and "dora" not in old.setup_kwargs
    marker = attempt(dict(CORPUS)["mlx-bad-marker"])
    assert marker.trainer_kwargs == {} and marker.setup_kwargs["method"] == "lora"


def test_bad_llamafactory_values_are_listed_and_the_rest_applies():
    bad = attempt(dict(CORPUS)["llamafactory-bad"])
    assert isinstance(bad, ImportedConfig) and bad.stack == "llamafactory"
    assert {"model_name_or_path", "stage", "finetuning_type", "cutoff_len", "lora_rank", "lora_target",
            "quantization_bit", "pure_bf16", "bf16", "flash_attn", "disable_gradient_checkpointing", "use_unsloth_gc",
            "optim", "deepspeed", "per_device_train_batch_size", "freeze_vision_tower"} <= {
        e.key for e in bad.not_honoured}
    assert bad.setup_kwargs["method"] == "lora" and bad.trainer_kwargs == {}
    none = attempt(dict(CORPUS)["llamafactory-no-model"])
    assert none.model.kind == "none" and none.setup_kwargs["seq_len"] == 1024
    missing = attempt(dict(CORPUS)["llamafactory-deepspeed-missing"])
    assert "sharding" not in missing.setup_kwargs
    assert any(e.key == "deepspeed" and "was not given" in e.detail for e in missing.not_honoured)


def test_bad_swift_values_are_listed_and_the_rest_applies():
    bad = attempt(dict(CORPUS)["swift-bad"])
    assert isinstance(bad, ImportedConfig) and bad.stack == "swift"
    assert {"model", "tuner_type", "rlhf_type", "lora_rank", "target_modules", "quant_bits", "torch_dtype", "bf16",
            "gradient_checkpointing", "use_liger_kernel", "optim", "deepspeed", "fsdp", "per_device_train_batch_size",
            "gradient_accumulation_steps", "max_length", "attn_impl", "lora_dtype", "freeze_vit", "ENV"} <= {
        e.key for e in bad.not_honoured}
    assert bad.setup_kwargs["method"] == "lora" and bad.trainer_kwargs == {}
    env = attempt(dict(CORPUS)["swift-bad-env"])
    assert {"ENV.NPROC_PER_NODE", "ENV.NNODES", "deepspeed"} <= {e.key for e in env.not_honoured}
    assert "gpus" not in env.setup_kwargs and env.setup_kwargs["method"] == "full"
    none = attempt(dict(CORPUS)["swift-no-model"])
    assert none.model.kind == "none" and none.setup_kwargs["seq_len"] == 1024


def test_bad_values_are_listed_and_the_rest_applies():
    imp = attempt(dict(CORPUS)["wrong-types"])
    assert isinstance(imp, ImportedConfig)
    refused = {e.key for e in imp.not_honoured}
    assert {"micro_batch_size", "sequence_len", "gradient_checkpointing", "lora_target_modules"} <= refused
    bad = attempt(dict(CORPUS)["torchtune-bad"])
    assert isinstance(bad, ImportedConfig) and bad.setup_kwargs["method"] == "lora"
    assert {"batch_size", "model.lora_rank", "dtype", "optimizer._component_", "loss._component_",
            "tokenizer.max_seq_len"} <= {e.key for e in bad.not_honoured}


# ---- the fuzz: mutations of the shipped configs and generated documents --------------------------------------------

def mutations(seed: int, count: int) -> list[tuple[str, str]]:
    """Shipped configs with lines deleted, values swapped for nasty ones, junk inserted, indentation broken."""
    rng = random.Random(seed)
    junk = ["-1", "0", "1e999", "9" * 400, "null", "[]", "{}", "true", "'x'", "{a: [1, {b: 2}]}", "*undefined",
            "&a [1]", "!!python/object:os.system", *[f"'{s}'" for s in INJECT], "\x00", "\ufeff", "\t\t"]
    out = []
    for i in range(count):
        path = rng.choice(REAL)
        lines = path.read_text().splitlines()
        for _ in range(rng.randint(1, 6)):
            op, at = rng.random(), rng.randrange(len(lines))
            if op < 0.3:
                del lines[at]
            elif op < 0.7 and ":" in lines[at]:
                key = lines[at].split(":", 1)[0]
                lines[at] = f"{key}: {rng.choice(junk)}"
            elif op < 0.85:
                lines.insert(at, rng.choice(junk) + ": " + rng.choice(junk))
            else:
                lines[at] = " " * rng.randint(0, 5) + lines[at].lstrip()
            if not lines:
                lines = ["x"]
        out.append((f"{path.name}-{i}", "\n".join(lines)))
    return out


MUTATIONS = mutations(20260722, 160)


@pytest.mark.parametrize(("name", "text"), MUTATIONS, ids=[n for n, _ in MUTATIONS])
def test_mutated_shipped_configs(name, text):
    attempt(text, name=name)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**30, max_value=10**30),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
                     st.sampled_from(INJECT))
_keys = st.one_of(st.sampled_from(["base_model", "adapter", "micro_batch_size", "sequence_len", "lora_r", "optimizer",
                                   "model_name_or_path", "use_peft", "per_device_train_batch_size", "max_length",
                                   "deepspeed", "model", "batch_size", "dtype", "checkpoint_dir", "train",
                                   "precision", "quantize", "devices", "lora_target_modules", "rl", "trl", "fsdp",
                                   "lora_rank", "lora_attn_modules", "apply_lora_to_mlp", "_component_",
                                   "num_generations", "max_completion_length", "use_vllm", "gpu_memory_utilization",
                                   "zero_optimization", "stage", "offload_optimizer", "device", "max_seq_len",
                                   "micro_batch_size", "global_batch_size", "max_seq_length", "tokenizer",
                                   "fsdp_config", "bnb_config_kwargs", "bnb_4bit_use_double_quant", "vllm",
                                   "fine_tune_type", "lora_parameters", "num_layers", "grad_checkpoint", "keys",
                                   "scale", "rank", "dropout", "optimizer_config", "grad_accumulation_steps",
                                   "accelerate_config", "num_processes", "load_in_4bit", "gradient_checkpointing",
                                   "activation_offloading", "gradient_checkpointing_kwargs", "plugins"]),
                  st.text(max_size=20))
_docs = st.recursive(_scalars, lambda children: st.one_of(st.lists(children, max_size=4),
                                                          st.dictionaries(_keys, children, max_size=6)),
                     max_leaves=30)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.dictionaries(_keys, _docs, min_size=1, max_size=12), as_json=st.booleans())
def test_generated_documents(doc, as_json):
    try:
        text = json.dumps(doc, allow_nan=True) if as_json else yaml.safe_dump(doc, allow_unicode=True)
    except (ValueError, yaml.YAMLError):
        return
    attempt(text)


def _flat_keys(doc: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in doc.items():
        out.append(prefix + str(key))
        if isinstance(value, dict):
            out += _flat_keys(value, f"{prefix}{key}.")
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_shipped_configs_with_random_values(data):
    """Every key of a shipped config (nested ones too) may get any value: the reader of each format meets every
    type where it expects a number, a switch, a name or a block."""
    path = data.draw(st.sampled_from(REAL))
    doc = yaml.safe_load(path.read_text())
    for key in data.draw(st.lists(st.sampled_from(_flat_keys(doc)), max_size=6, unique=True)):
        node, parts = doc, key.split(".")
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[parts[-1]] = data.draw(_docs)
    attempt(yaml.safe_dump(doc, allow_unicode=True), name=path.name)


def test_the_fuzz_is_over_300_cases():
    assert len(CORPUS) + len(MUTATIONS) + 200 + 200 >= 300


# ---- the CLI: exit 2 with one line, or a report ------------------------------------------------------------------

def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


CLI_SAMPLE = CORPUS + MUTATIONS[:60]


@pytest.mark.parametrize(("name", "data"), CLI_SAMPLE, ids=[n for n, _ in CLI_SAMPLE])
def test_cli_exits_2_with_one_line_or_reports(tmp_path, name, data):
    path = tmp_path / "config.yaml"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    rc, out, err = run_cli(["--from-config", str(path), "--model", "llama-3.2-1b", "--json"])
    assert rc in (0, 2), (rc, err)
    assert "Traceback" not in err + out
    if rc == 2:
        assert err.startswith("estimator: error: ") and err.count("\n") == 1, err
        assert SCRIPT not in err
    else:
        json.loads(out)


def test_cli_file_problems(tmp_path):
    rc, _, err = run_cli(["--from-config", str(tmp_path / "missing.yaml")])
    assert rc == 2 and "cannot read config" in err and err.count("\n") == 1
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * 1_000_001)
    rc, _, err = run_cli(["--from-config", str(big)])
    assert rc == 2 and "larger than 1 MB" in err
    rc, _, err = run_cli(["--override", "batch_size=4"])
    assert rc == 2 and "--from-config" in err
    good = Path(DATA / "trl" / "sft_config.yaml")
    rc, _, err = run_cli(["--from-config", str(good), "--override", "batch_size=4"])
    assert rc == 2 and "overrides are torchtune's" in err


def test_cli_llamafactory_config(tmp_path):
    """A LLaMA-Factory file through the CLI: its shipped DeepSpeed name read, its settings, the export's command; a
    config that trains the vision tower on a text model changes nothing there (LLaMA-Factory unfreezes towers of
    multimodal models only), as the note says."""
    path = tmp_path / "qwen3_full_sft.yaml"
    path.write_bytes((DATA / "llamafactory" / "train_full" / "qwen3_full_sft.yaml").read_bytes())
    rc, out, err = run_cli(["--from-config", str(path), "--model", "qwen3-4b", "--gpus", "4", "--json"])
    assert rc == 0, err
    s = json.loads(out)["setup"]
    assert (s["stack"], s["method"], s["precision"], s["sharding"], s["gpus"], s["grad_ckpt"]) == (
        "llamafactory", "full", "mixed", "zero3", 4, True)
    rc, out, err = run_cli(["--from-config", str(path), "--model", "qwen3-4b", "--gpus", "4", "--export-config", "-"])
    assert rc == 0 and out.startswith("# will-it-fit: stack=llamafactory trainer=sft gpus=4\n")
    assert "# Run with: NPROC_PER_NODE=4 llamafactory-cli train llamafactory_config.yaml" in out
    tower = tmp_path / "tower.yaml"
    tower.write_text(dict(CORPUS)["llamafactory-tower"].decode())
    rc, out, err = run_cli(["--from-config", str(tower), "--model", "llama-3.2-1b", "--json"])
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["setup"]["train_tower"] is False and "no vision tower" in doc["config_import"]["notes"][0]
    rc, out, err = run_cli(["--from-config", str(tower), "--model", "gemma-3-4b", "--json"])
    assert rc == 0 and json.loads(out)["setup"]["train_tower"] is True
    rc, out, err = run_cli(["--from-config", str(path), "--model", "qwen3-4b", "--trainer", "dpo"])
    assert rc == 2 and "LLaMA-Factory runs its own DPO step" in err and err.count("\n") == 1
