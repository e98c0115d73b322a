"""Property tests over the input space: memory never falls when batch, length, size or rank grows; QLoRA ≤
LoRA ≤ full for weights; no exception but a documented ValueError; no negative or NaN component."""

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from estimator import COMPONENT_KEYS, TrainingSetup, estimate, generic_spec, list_presets, load_preset, spec_from_config
from estimator.job.stack import check_stack_setup
from estimator.memory.mlx.model import check_mlx_model
from estimator.options.losses import LOSS_IDS
from estimator.options.methods import ATTENTIONS, METHODS, SHARDINGS
from estimator.options.optimizers import OPTIMIZER_IDS
from estimator.options.precisions import PRECISION_IDS, QLORA_PREP_IDS
from estimator.options.stacks import STACK_IDS, STACKS


def _stack_offers_loss(setup) -> bool:
    """Setups a stack can run: its loss kinds only (the others raise in resolve_setup and loss_impl_id), and
    nothing else the stack refuses (check_stack_setup: MLX-LM's optimizers, precisions, one device…)."""
    if setup.stack is not None and setup.loss not in STACKS[setup.stack].loss_impls:
        return False
    try:
        check_stack_setup(setup)
    except ValueError:
        return False
    return True

PRESETS = [p.id for p in list_presets()]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

setups = st.builds(
    TrainingSetup,
    method=st.sampled_from(METHODS), precision=st.sampled_from(PRECISION_IDS),
    optimizer=st.sampled_from(OPTIMIZER_IDS), batch=st.integers(1, 64), seq_len=st.integers(1, 65536),
    grad_ckpt=st.booleans(), attention=st.sampled_from(ATTENTIONS), loss=st.sampled_from(LOSS_IDS),
    lora_rank=st.sampled_from([1, 4, 8, 16, 64, 256]), gpus=st.integers(1, 64),
    sharding=st.sampled_from(SHARDINGS), qlora_prep=st.sampled_from(QLORA_PREP_IDS),
    adapter_dtype=st.sampled_from(["fp32", "bf16"]), stack=st.sampled_from((None, *STACK_IDS)),
).filter(_stack_offers_loss)
models = st.one_of(st.sampled_from(PRESETS).map(load_preset),
                   st.floats(0.1, 400, allow_nan=False).map(generic_spec))


def _modelled(spec, setup) -> bool:
    """MLX-LM models dense gated decoders only; for other models it raises with the reason (check_mlx_model)."""
    if setup.stack != "mlx":
        return True
    try:
        check_mlx_model(spec, setup)
    except ValueError:
        return False
    return True


def _sane(est):
    for key in COMPONENT_KEYS:
        value = est.components_bytes[key]
        assert math.isfinite(value) and value >= 0, key
    assert math.isfinite(est.total_bytes) and est.total_bytes > 0
    assert est.low_bytes <= est.total_bytes <= est.high_bytes


@SETTINGS
@given(models, setups)
def test_any_valid_input_gives_finite_non_negative_components(spec, setup):
    assume(_modelled(spec, setup))
    _sane(estimate(spec, setup))
    _sane(estimate(spec, setup, rule="seed"))


@SETTINGS
@given(models, setups, st.integers(1, 64))
def test_memory_never_falls_as_batch_grows(spec, setup, extra):
    assume(_modelled(spec, setup))
    small = estimate(spec, setup).total_bytes
    big = estimate(spec, replace(setup, batch=min(setup.batch + extra, 4096))).total_bytes
    assert big >= small


@SETTINGS
@given(models, setups, st.integers(1, 65536))
def test_memory_never_falls_as_length_grows(spec, setup, extra):
    # MLX-CUDA's attention VJP is cuDNN's only at lengths that are multiples of 128 (mlx cuda
    # ScaledDotProductAttentionVJP::use_fallback): one block's probabilities come and go with the length there.
    assume(_modelled(spec, setup) and not (setup.stack == "mlx" and setup.backend == "cuda"))
    small = estimate(spec, setup).total_bytes
    assert estimate(spec, replace(setup, seq_len=setup.seq_len + extra)).total_bytes >= small


@SETTINGS
@given(setups, st.floats(0.1, 399, allow_nan=False), st.floats(0.001, 1.0))
def test_memory_never_falls_as_size_grows(setup, size, grow):
    bigger = min(400.0, size * (1 + grow))
    assert estimate(generic_spec(bigger), setup).total_bytes >= estimate(generic_spec(size), setup).total_bytes


@SETTINGS
@given(models, setups, st.sampled_from([2, 4, 8]))
def test_memory_never_falls_as_rank_grows(spec, setup, factor):
    assume(_modelled(spec, setup))
    small = estimate(spec, setup).total_bytes
    big = estimate(spec, replace(setup, lora_rank=min(4096, setup.lora_rank * factor))).total_bytes
    assert big >= small


def _weights(spec, method, precision="bf16"):
    """The base model's weight storage (frozen for LoRA/QLoRA, trainable for full), at the optimizer step."""
    est = estimate(spec, TrainingSetup(method=method, precision=precision, seq_len=64))
    step = next(p for p in est.phases if p.key == "optimizer_step")
    key = "weights.trainable" if method == "full" else "weights.base"
    return next(x.bytes for x in step.details if x.key == key)


@pytest.mark.parametrize("preset", PRESETS)
def test_qlora_le_lora_le_full_weights_presets(preset):
    spec = load_preset(preset)
    assert _weights(spec, "qlora") <= _weights(spec, "lora") <= _weights(spec, "full")


@SETTINGS
@given(st.floats(0.5, 400, allow_nan=False), st.sampled_from(["bf16", "mixed"]))
def test_qlora_le_lora_le_full_weights_generic(size, precision):
    spec = generic_spec(size)
    assert _weights(spec, "qlora", precision) <= _weights(spec, "lora", precision) <= _weights(spec, "full", precision)


def test_tiny_large_vocab_qlora_can_exceed_lora_with_fp32_upcast():
    """A real effect, not a bug (bitsandbytes #1569): prepare_model_for_kbit_training upcasts the embedding
    to fp32, and a 0.1B model with a 128k vocabulary is mostly embedding."""
    spec = generic_spec(0.1)

    def frozen(upcast):
        est = estimate(spec, TrainingSetup(method="qlora", qlora_prep="peft" if upcast else "none", seq_len=64))
        return next(x.bytes for x in est.details if x.key == "weights.base")

    assert frozen(True) > _weights(spec, "lora") > frozen(False)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                        "num_key_value_heads", "intermediate_size", "vocab_size", "head_dim",
                                        "tie_word_embeddings", "num_local_experts", "num_experts_per_tok"]),
                       st.one_of(st.integers(-10, 10**13), st.floats(allow_nan=True), st.text(max_size=8),
                                 st.booleans(), st.none(), st.sampled_from(["llama", "qwen2", "mixtral", "phi"]))))
def test_arbitrary_configs_raise_only_value_error(cfg):
    try:
        spec = spec_from_config(cfg)
    except ValueError as exc:
        assert str(exc)
        return
    _sane(estimate(spec, TrainingSetup(seq_len=128)))


@SETTINGS
@given(st.dictionaries(st.sampled_from(["method", "precision", "optimizer", "batch", "seq_len", "lora_rank",
                                        "gpus", "sharding", "attention", "loss", "lora_targets"]),
                       st.one_of(st.integers(-5, 10**9), st.floats(allow_nan=True), st.text(max_size=12),
                                 st.booleans(), st.none(), st.tuples(st.text(max_size=5)))))
def test_arbitrary_setups_raise_only_value_error(kwargs):
    try:
        setup = TrainingSetup(**kwargs)
        est = estimate(load_preset("qwen2.5-0.5b"), setup)
    except ValueError as exc:
        assert str(exc)
        return
    _sane(est)
