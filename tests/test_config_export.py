"""Exporting the setup as its stack's config file (estimator/report/configs) and reading it back: the round trip
gives the same setup, trainer and estimate for every stack × method × trainer, and for random settings wherever
the file can express them (its notes are empty). Every file is YAML the tool's own schema accepts."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator import estimate, load_preset
from estimator.job.configs import fit_targets, import_config
from estimator.job.configs._fields import load_keys
from estimator.job.stack import attention_impl, resolve_setup
from estimator.job.trainer import TrainerSetup, check, trainer_json, trainer_loss
from estimator.options.optimizers import OPTIMIZER_IDS
from estimator.options.stacks import MLX_STACK, STACK_IDS, STACKS
from estimator.options.trainers import TRAINER_IDS, TRAINERS
from estimator.report.configs import export_config

MODELS = ("llama-3.1-8b", "gemma-2-2b")  # gemma-2-2b: torchtune ships no full config for it (a template + marker)


def same_setup(a, b, family: str = "llama", tr: TrainerSetup | None = None) -> dict:
    """The fields that differ (which ones the stack filled is not part of the setup's meaning; the attention is
    the one that runs: a family without SDPA runs eager, and the file says eager; a reward model has no vocabulary
    head, so no loss kind)."""
    if tr is not None and tr.option.head == "score":
        b = replace(b, loss=a.loss)
    elif tr is not None:  # TRL's preference trainers choose their own loss (job/trainer.py trainer_loss)
        a, b = replace(a, loss=trainer_loss(a, tr)), replace(b, loss=trainer_loss(b, tr))
    if tr is not None and tr.option.generates:  # GRPO trains on prompt + completion: no max length of its own
        b = replace(b, seq_len=a.seq_len)
    a = replace(a, attention=attention_impl(a, family))
    b = replace(b, attention=attention_impl(b, family))
    if a.method == "full":  # no adapters: a rank or targets given for them mean nothing
        b = replace(b, lora_rank=a.lora_rank, lora_targets=a.lora_targets)
    return {f.name: (getattr(a, f.name), getattr(b, f.name)) for f in fields(a)
            if f.name != "from_stack" and getattr(a, f.name) != getattr(b, f.name)}


def round_trip(spec, setup, tr):
    exported = export_config(spec, setup, tr)
    imported = import_config(exported.text, name=exported.filename)
    back = imported.setup()
    back = replace(back, lora_targets=fit_targets(spec, back.lora_targets)[0])
    return exported, imported, back, imported.trainer_setup()


# The stacks priced for SFT only, and the words of their refusal (job/trainer.py check).
SFT_ONLY = {MLX_STACK: "mlx-lm trains supervised fine-tuning only", "llamafactory": "LLaMA-Factory runs its own",
            "swift": "ms-swift runs its own"}


def trainer_batch(trainer: str) -> int:
    return max(TRAINERS[trainer].default_batch, TRAINERS[trainer].min_batch)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stack", STACK_IDS)
def test_round_trip_every_stack_method_trainer(model, stack):
    """Every stack × method × trainer: exported, imported back, the same setup, trainer and estimate. mlx-lm trains
    SFT only (mlx_lm lora), and LLaMA-Factory's other stages are its own trainers: there the other trainers are the
    stack's own refusal, in the check, the estimate and the export alike (counted, never skipped)."""
    spec = load_preset(model)
    refused = 0
    for method in ("full", "lora", "qlora"):
        for trainer in TRAINER_IDS:
            setup = resolve_setup(stack, method=method, batch=trainer_batch(trainer))
            tr = TrainerSetup(trainer)
            if stack in SFT_ONLY and trainer != "sft":
                for call, args, kw in ((check, (setup, tr), {}), (estimate, (spec, setup), {"trainer": tr}),
                                       (export_config, (spec, setup, tr), {})):
                    with pytest.raises(ValueError, match=SFT_ONLY[stack]):
                        call(*args, **kw)
                refused += 1
                continue
            exported, imported, back, tr_back = round_trip(spec, setup, tr)
            case = (stack, method, trainer)
            assert imported.stack == stack, case
            assert imported.model.preset == model, case
            assert same_setup(setup, back, spec.family) == {}, case
            assert trainer_json(tr_back) == trainer_json(tr), case
            assert estimate(spec, back, trainer=tr_back).total_bytes == estimate(spec, setup, trainer=tr).total_bytes
    assert refused == (3 * (len(TRAINER_IDS) - 1) if stack in SFT_ONLY else 0)


@st.composite
def setups(draw):
    stack = draw(st.sampled_from(STACK_IDS))
    method = draw(st.sampled_from(("full", "lora", "qlora")))
    trainer = draw(st.sampled_from(TRAINER_IDS))
    loss = draw(st.sampled_from((None, *STACKS[stack].loss_impls)))
    ckpt = draw(st.sampled_from(("on", "off", "offload")))
    gpus = draw(st.sampled_from((1, 2, 8)))
    sharding = draw(st.sampled_from(("none", "zero1", "zero2", "zero3"))) if gpus > 1 else "none"
    offload = draw(st.booleans()) and (gpus == 1 or sharding != "none")
    if gpus == 1 and draw(st.booleans()):
        sharding = "zero3"  # ZeRO-3 on one GPU: only with parameter offload does it change anything
    params = sharding == "zero3" and draw(st.booleans())
    accum = draw(st.sampled_from((1, 2, 4)))
    kwargs = dict(method=method, precision=draw(st.sampled_from(("bf16", "fp16", "mixed", "fp32"))),
                  optimizer=draw(st.sampled_from((None, *OPTIMIZER_IDS))),
                  batch=draw(st.sampled_from((2, 4, 8))), seq_len=draw(st.sampled_from((256, 1000, 2048, 8192))),
                  grad_ckpt=ckpt != "off", offload_activations=ckpt == "offload", loss=loss,
                  lora_rank=draw(st.sampled_from((4, 8, 64))),
                  lora_targets=draw(st.sampled_from((("all-linear",), ("q_proj", "v_proj"),
                                                     ("q_proj", "k_proj", "v_proj", "o_proj")))),
                  gpus=gpus, sharding=sharding, offload_optimizer=offload, offload_params=params, grad_accum=accum,
                  attention=draw(st.sampled_from(("sdpa", "eager"))))
    if stack == "torchtune":
        kwargs["compile"] = draw(st.booleans())
        kwargs["optimizer_in_bwd"] = method == "full" and accum == 1 and draw(st.booleans())
    tr_kwargs: dict = {}
    opt = TRAINERS[trainer]
    if opt.beta_default is not None:
        tr_kwargs["beta"] = draw(st.sampled_from((0.0, 0.1, 0.5)))
    if opt.can_precompute:
        tr_kwargs["precompute_ref"] = draw(st.booleans())
    if opt.generates:
        tr_kwargs |= {"num_generations": 2, "prompt_len": draw(st.sampled_from((128, 512))),
                      "completion_len": draw(st.sampled_from((256, 1024))),
                      "generation": draw(st.sampled_from(("hf", "vllm-colocate", "vllm-server")))}
        if tr_kwargs["generation"] == "vllm-colocate":
            tr_kwargs |= {"vllm_gpu_util": 0.4, "vllm_sleep": draw(st.booleans())}
    return stack, kwargs, TrainerSetup(trainer, **tr_kwargs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=setups())
def test_round_trip_is_exact_where_the_file_can_say_it(case):
    """Any setup exports and reads back without error; where the file expresses every setting (no notes), the
    setup, the trainer and the estimate come back equal."""
    stack, kwargs, tr = case
    try:
        setup = resolve_setup(stack, **kwargs)
        check(setup, tr)
    except ValueError:
        return  # a combination the setup or TRL's trainer refuses
    spec = load_preset("llama-3.1-8b")
    exported, imported, back, tr_back = round_trip(spec, setup, tr)
    assert imported.stack == stack and exported.text.startswith("# will-it-fit: ")
    if exported.notes:
        return
    assert same_setup(setup, back, tr=tr) == {}, (stack, exported.notes)
    assert trainer_json(tr_back) == trainer_json(tr)


SCHEMAS = {"axolotl": load_keys("axolotl"), "trl": load_keys("trl"), "torchtune": load_keys("torchtune"),
           "litgpt": load_keys("litgpt"), "mlx_lm": load_keys("mlx_lm"), "llamafactory": load_keys("llamafactory"),
           "swift": load_keys("swift")}
_FORMAT = {"axolotl": "axolotl", "torchtune": "torchtune", "litgpt": "litgpt", "trl": "trl", "trainer": "trl",
           "unsloth": "trl", "plain": "trl", "mlx": "mlx_lm", "llamafactory": "llamafactory", "swift": "swift"}


@pytest.mark.parametrize("stack", STACK_IDS)
@pytest.mark.parametrize("trainer", ("sft", "dpo", "grpo"))
def test_every_export_is_yaml_the_tools_schema_knows(stack, trainer):
    spec = load_preset("llama-3.1-8b")
    if stack == MLX_STACK:  # one device (mlx-lm shards nothing), SFT only
        setup = resolve_setup(stack, method="qlora", batch=8, lora_targets=("q_proj", "down_proj"))
        if trainer != "sft":
            with pytest.raises(ValueError, match="mlx-lm trains supervised fine-tuning only"):
                export_config(spec, setup, TrainerSetup(trainer))
            return
    else:
        setup = resolve_setup(stack, method="qlora", batch=8, gpus=4, sharding="zero3")
    if stack in ("llamafactory", "swift") and trainer != "sft":  # their own DPO/KTO/RM steps: refused (SFT_ONLY)
        with pytest.raises(ValueError, match=SFT_ONLY[stack]):
            export_config(spec, setup, TrainerSetup(trainer))
        return
    exported = export_config(spec, setup, TrainerSetup(trainer))
    doc = yaml.safe_load(exported.text)
    assert isinstance(doc, dict)
    schema = SCHEMAS[_FORMAT[stack]] | {"use_gradient_checkpointing"}
    unknown = sorted(k for k in doc if k not in schema)
    assert unknown == [], unknown
    if stack == "litgpt":
        assert all(f"train.{k}" in schema for k in doc["train"])
    if stack == MLX_STACK:
        assert all(f"lora_parameters.{k}" in schema for k in doc["lora_parameters"])
        assert doc["lora_parameters"]["keys"] == ["self_attn.q_proj", "mlp.down_proj"]  # tuner/utils.py block paths
        assert exported.text.splitlines()[0] == ("# will-it-fit: stack=mlx trainer=sft gpus=1 "
                                                 "model=meta-llama/Llama-3.1-8B dtype=bfloat16 q_mode=affine q_bits=4 "
                                                 "q_group=64")
        assert "#   mlx_lm.convert --hf-path meta-llama/Llama-3.1-8B --mlx-path ./mlx_model --dtype bfloat16 -q " \
               "--q-bits 4 --q-group-size 64" in exported.text and doc["model"] == "./mlx_model"
        return
    assert exported.text.splitlines()[0] == f"# will-it-fit: stack={stack} trainer={trainer} gpus=4" + (
        "" if stack in ("axolotl", "llamafactory", "swift") or (stack in ("trl", "trainer", "unsloth", "plain") and
                                                     trainer != "grpo") else
        exported.text.splitlines()[0].split("gpus=4", 1)[1])


def test_torchtune_export_is_the_shipped_config_with_the_estimates_values():
    spec = load_preset("llama-3.1-8b")
    setup = resolve_setup("torchtune", method="lora", batch=4, seq_len=4096, lora_rank=32)
    doc = yaml.safe_load(export_config(spec, setup).text)
    shipped = yaml.safe_load((__import__("pathlib").Path(__file__).parent / "data" / "configs" / "torchtune" /
                              "llama3_1" / "8B_lora_single_device.yaml").read_text())
    assert doc["model"]["_component_"] == shipped["model"]["_component_"]
    assert doc["checkpointer"] == shipped["checkpointer"] and doc["dataset"] == shipped["dataset"]
    assert (doc["batch_size"], doc["tokenizer"]["max_seq_len"], doc["model"]["lora_rank"]) == (4, 4096, 32)
    assert doc["optimizer"]["lr"] == 3e-4 and isinstance(doc["optimizer"]["lr"], float)  # a number, as OmegaConf


def test_what_a_file_cannot_say_is_in_its_notes_and_header():
    spec = load_preset("llama-3.1-8b")
    setup = resolve_setup("trl", loss="standard")  # the full-logits loss needs a compute_loss_func
    exported = export_config(spec, setup)
    assert exported.notes and "full-logits loss" in exported.notes[0]
    assert "Not expressible in TRL" in exported.text
    back = import_config(exported.text, name=exported.filename).setup()
    assert back.loss == "chunked"  # what `trl sft --config` really runs


# ---- MLX-LM: every setting its file and marker carry, and the CLI's --from-config ---------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(method="lora"), dict(method="lora", dora=True, lora_layers=0), dict(method="full", lora_layers=8),
    dict(method="qlora", quant_mode="mxfp4"), dict(method="qlora", quant_mode="affine", quant_bits=8, quant_group=32),
    dict(method="qlora", dora=True, quant_mode="nvfp4", grad_ckpt=True, grad_accum=4),
    dict(method="lora", precision="fp16", optimizer="sgd", lora_rank=64, lora_targets=("q_proj", "v_proj")),
    dict(method="lora", precision="fp32", optimizer="adafactor", batch=1, seq_len=8192),
    dict(method="full", precision="fp16", optimizer="muon", lora_layers=0, grad_ckpt=True),
    dict(method="lora", optimizer="adamw", lora_targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                         "down_proj")),
])
def test_mlx_round_trip_carries_every_setting(kwargs):
    spec = load_preset("qwen2.5-0.5b")
    setup = resolve_setup(MLX_STACK, **kwargs)
    exported, imported, back, tr_back = round_trip(spec, setup, TrainerSetup())
    assert not exported.notes and imported.not_honoured == ()
    assert same_setup(setup, back, spec.family) == {}
    assert estimate(spec, back).total_bytes == estimate(spec, setup).total_bytes
    converted = setup.method == "qlora" or setup.precision != "bf16"
    assert (yaml.safe_load(exported.text)["model"] == "./mlx_model") is converted
    assert ("\n#   mlx_lm.convert --hf-path Qwen/Qwen2.5-0.5B" in exported.text) is converted


def test_mlx_export_of_a_pre_quantised_checkpoint_names_it():
    """An MLX-quantised Hub checkpoint (config.json 'quantization') trains as it is: no conversion; its name says the
    base, so it reads back as QLoRA on it, priced the same."""
    from estimator.models.config import spec_from_config

    cfg = {**(__import__("json").loads((__import__("pathlib").Path(__file__).parents[1] / "estimator" / "models" /
                                        "presets" / "qwen2.5-0.5b.json").read_text())),
           "quantization": {"group_size": 64, "bits": 4}}
    spec = replace(spec_from_config(cfg, name="mlx-community/Qwen2.5-0.5B-Instruct-4bit"), source="hub")
    setup = resolve_setup(MLX_STACK, method="lora")
    exported = export_config(spec, setup)
    doc = yaml.safe_load(exported.text)
    assert doc["model"] == "mlx-community/Qwen2.5-0.5B-Instruct-4bit" and "mlx_lm.convert --hf" not in exported.text
    back = import_config(exported.text).setup()
    assert (back.method, back.quant_mode, back.quant_bits) == ("qlora", "affine", 4)
    assert estimate(spec, back).total_bytes == estimate(spec, setup).total_bytes


def test_cli_reads_an_mlx_config_and_its_flags_win(tmp_path):
    from tests.test_config_bad_input import run_cli

    path = tmp_path / "lora_config.yaml"
    path.write_text("model: Qwen/Qwen2.5-0.5B\nfine_tune_type: dora\nnum_layers: 8\nbatch_size: 2\n"
                    "lora_parameters: {rank: 16, scale: 20.0, dropout: 0.0, keys: [self_attn.q_proj]}\n")
    rc, out, err = run_cli(["--from-config", str(path), "--json"])
    assert rc == 0, err
    s = __import__("json").loads(out)["setup"]
    assert (s["stack"], s["backend"], s["dora"], s["lora_layers"], s["batch"], s["lora_rank"], s["lora_targets"]) == (
        "mlx", "metal", True, 8, 2, 16, ["q_proj"])
    rc, out, err = run_cli(["--from-config", str(path), "--lora-layers", "4", "--method", "qlora", "--quant", "mxfp4",
                            "--device", "rtx-4090", "--json"])
    assert rc == 0, err
    s = __import__("json").loads(out)["setup"]
    assert (s["lora_layers"], s["method"], s["quant_mode"], s["backend"]) == (4, "qlora", "mxfp4", "cuda")
    rc, out, err = run_cli(["--from-config", str(path), "--method", "qlora", "--export-config", "-"])
    assert rc == 0, err
    assert out.startswith("# will-it-fit: stack=mlx trainer=sft gpus=1 model=Qwen/Qwen2.5-0.5B dtype=bfloat16 "
                          "q_mode=affine q_bits=4 q_group=64\n")
    assert import_config(out).setup() == resolve_setup(MLX_STACK, method="qlora", dora=True, lora_layers=8, batch=2,
                                                       lora_rank=16, lora_targets=("q_proj",), precision="bf16",
                                                       optimizer="adam", seq_len=2048, grad_ckpt=False, grad_accum=1,
                                                       quant_mode="affine", quant_bits=4, quant_group=64)


# ---- LLaMA-Factory: its YAML, its command, and what it cannot say ---------------------------------------------------

def test_llamafactory_export_is_its_yaml_and_command():
    spec = load_preset("llama-3.1-8b")
    setup = resolve_setup("llamafactory", method="qlora", batch=4, seq_len=4096, lora_rank=16,
                          lora_targets=("q_proj", "v_proj"), grad_ckpt=True, offload_activations=True, loss="fused",
                          nf4_double_quant=False, qlora_prep="norms", gpus=2, sharding="zero3")
    exported = export_config(spec, setup)
    doc = yaml.safe_load(exported.text)
    assert exported.text.splitlines()[0] == "# will-it-fit: stack=llamafactory trainer=sft gpus=2"
    assert exported.command == "NPROC_PER_NODE=2 llamafactory-cli train llamafactory_config.yaml"
    assert {k: doc[k] for k in ("model_name_or_path", "stage", "finetuning_type", "lora_rank", "lora_target",
                                "quantization_bit", "quantization_method", "double_quantization", "upcast_layernorm",
                                "disable_gradient_checkpointing", "use_unsloth_gc", "enable_liger_kernel",
                                "cutoff_len", "per_device_train_batch_size", "bf16", "optim", "flash_attn")} == {
        "model_name_or_path": "meta-llama/Llama-3.1-8B", "stage": "sft", "finetuning_type": "lora", "lora_rank": 16,
        "lora_target": "q_proj,v_proj", "quantization_bit": 4, "quantization_method": "bnb",
        "double_quantization": False, "upcast_layernorm": True, "disable_gradient_checkpointing": False,
        "use_unsloth_gc": True, "enable_liger_kernel": True, "cutoff_len": 4096, "per_device_train_batch_size": 4,
        "bf16": True, "optim": "adamw_torch_fused", "flash_attn": "sdpa"}
    assert doc["deepspeed"]["zero_optimization"] == {"stage": 3}
    assert not exported.notes
    back = import_config(exported.text, name=exported.filename)
    assert not back.not_honoured and same_setup(setup, back.setup()) == {}
    one = export_config(spec, resolve_setup("llamafactory", method="full", sharding="zero2"))
    assert one.command == "FORCE_TORCHRUN=1 llamafactory-cli train llamafactory_config.yaml"


@pytest.mark.parametrize(("kwargs", "note", "back"), [
    (dict(method="full", precision="bf16"), None, "bf16"),  # pure_bf16: true
    (dict(method="full", precision="mixed"), None, "mixed"),  # bf16: true, fp32 trained weights
    (dict(method="full", precision="fp32"), None, "fp32"),
    (dict(method="full", precision="fp16"), "no pure fp16", "mixed"),
    (dict(method="full", precision="bf16", gpus=2, sharding="zero3"), "refuses pure_bf16", "mixed"),
    (dict(method="lora", precision="mixed"), "checkpoint's dtype", "bf16"),
    (dict(method="lora", adapter_dtype="bf16"), "keeps them fp32", "bf16"),
    (dict(method="qlora", qlora_prep="peft"), "never calls prepare_model_for_kbit_training", "bf16"),
])
def test_llamafactory_precision_export(kwargs, note, back):
    spec = load_preset("llama-3.1-8b")
    setup = resolve_setup("llamafactory", **kwargs)
    exported = export_config(spec, setup)
    assert (note is None) == (not exported.notes)
    if note:
        assert note in " ".join(exported.notes) and "Not expressible in LLaMA-Factory" in exported.text
    assert import_config(exported.text).setup().precision == back


# ---- ms-swift: its YAML, its ENV block, and what it cannot say ------------------------------------------------------

def test_swift_export_is_its_yaml_and_env():
    """swift sft FILE: the arguments as keys, the GPUs in ENV (NPROC_PER_NODE processes on as many visible GPUs:
    swift/cli/main.py sets them before torchrun), a shipped DeepSpeed config by name; read back to the same setup."""
    spec = load_preset("llama-3.1-8b")
    setup = resolve_setup("swift", method="qlora", batch=4, seq_len=4096, lora_rank=16, lora_targets=("q_proj", "v_proj"),
                          loss="fused", nf4_double_quant=False, adapter_dtype="bf16", gpus=2, sharding="zero3",
                          grad_accum=2)
    exported = export_config(spec, setup)
    doc = yaml.safe_load(exported.text)
    assert exported.text.splitlines()[0] == "# will-it-fit: stack=swift trainer=sft gpus=2"
    assert exported.command == "swift sft swift_config.yaml" and exported.filename == "swift_config.yaml"
    assert doc["ENV"] == {"CUDA_VISIBLE_DEVICES": "0,1", "NPROC_PER_NODE": "2"}
    assert {k: doc[k] for k in ("model", "torch_dtype", "bf16", "tuner_type", "lora_rank", "lora_dropout",
                                "target_modules", "lora_dtype", "quant_method", "quant_bits",
                                "bnb_4bit_use_double_quant", "gradient_checkpointing", "use_liger_kernel",
                                "max_length", "per_device_train_batch_size", "gradient_accumulation_steps", "optim",
                                "deepspeed", "attn_impl")} == {
        "model": "meta-llama/Llama-3.1-8B", "torch_dtype": "bfloat16", "bf16": True, "tuner_type": "lora",
        "lora_rank": 16, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"], "lora_dtype": "bfloat16",
        "quant_method": "bnb", "quant_bits": 4, "bnb_4bit_use_double_quant": False, "gradient_checkpointing": True,
        "use_liger_kernel": True, "max_length": 4096, "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2, "optim": "adamw_torch_fused", "deepspeed": "zero3", "attn_impl": "sdpa"}
    assert not exported.notes
    back = import_config(exported.text, name=exported.filename)
    assert not back.not_honoured and same_setup(setup, back.setup()) == {}
    assert dict(back.settings)["gpus"] == 2 and next(e for e in back.read if e.key == "ENV.NPROC_PER_NODE")
    # without the marker line the ENV block still says the GPU count
    unmarked = import_config(exported.text.split("\n", 1)[1])
    assert unmarked.stack == "swift" and dict(unmarked.settings)["gpus"] == 2


@pytest.mark.parametrize(("kwargs", "note", "back"), [
    (dict(method="full", precision="bf16"), None, "bf16"),
    (dict(method="full", precision="mixed"), None, "mixed"),  # torch_dtype float32 + bf16: true
    (dict(method="full", precision="fp32"), None, "fp32"),  # float32 with bf16 and fp16 false (else fp16 autocast)
    (dict(method="full", precision="fp16"), "refuses to unscale fp16 gradients", "fp16"),
    (dict(method="lora", precision="fp16"), None, "fp16"),
    (dict(method="qlora", qlora_prep="peft"), "never calls prepare_model_for_kbit_training", "bf16"),
    (dict(method="lora", grad_ckpt=True, offload_activations=True), "activation_cpu_offload", "bf16"),
])
def test_swift_precision_and_notes(kwargs, note, back):
    spec = load_preset("llama-3.1-8b")
    exported = export_config(spec, resolve_setup("swift", **kwargs))
    assert (note is None) == (not exported.notes)
    if note:
        assert note in " ".join(exported.notes) and "Not expressible in ms-swift" in exported.text
    assert import_config(exported.text).setup().precision == back
