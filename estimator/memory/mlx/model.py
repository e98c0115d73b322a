"""mlx-lm's model as the MLX-LM stack's estimate sees it (mlx 0.32.4, mlx-lm 0.32.2): which models and setups
`mlx_lm lora` trains and this estimate models, the block's widths and the positions it runs on, the linears that
carry adapters, the base's quantisation, and the resident part of a step, the weights, adapters and optimizer state
(docs/formulas.md §12.1). memory/mlx/step.py prices the step on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_, Text
from ...job.setup import ALL_LINEAR
from ...models.spec import LM_HEAD
from ...options.optimizers import OPTIMIZERS
from ...options.quantization import mlx_bytes_per_weight
from ..precision import FP32
from ..result import detail as d

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..result import DetailItem


SUPPORTED_NOTE = N_("The MLX model is measured for dense decoders with a gated MLP (Llama, Mistral, Qwen 2/2.5/3, "
                    "Gemma 1/2/3 text, Phi-3, Granite, SmolLM3); {family} {why}, which it does not model")


class Dims(NamedTuple):
    """The block's widths as mlx-lm builds it."""

    h: int
    q: int  # query width (heads × head_dim)
    kv: int  # key/value width
    inter: int  # MLP intermediate size
    heads: int
    layers: int  # decoder blocks in the model
    trained: int  # blocks that train (the last `trained` ones)


def positions(setup: TrainingSetup) -> int:
    """The positions the model runs on when every example is as long as max_seq_length (the estimate's worst batch):
    iterate_batches pads to min(1 + 32·⌈longest/32⌉, max_seq_length) tokens (tuner/trainer.py:158-161) and
    default_loss feeds batch[:, :-1] (:89), so max_seq_length − 1."""
    return max(1, setup.seq_len - 1)


def check_mlx_model(spec: ModelSpec, setup: TrainingSetup) -> None:
    """ValueError with the reason when mlx-lm cannot train this model this way, or the model is not modelled."""
    why = ""
    if spec.moe_layers:
        why = N_("has mixture-of-experts layers (mlx-lm's SwitchGLU gathers experts per token)")
    elif spec.mla_kv_rank:
        why = N_("uses multi-head latent attention")
    elif any(k.split(":")[0] not in ("full", "sliding") or not k.endswith(":dense") for k in spec.layer_pattern):
        why = N_("has linear-attention, shared-KV or per-layer-embedding layers")
    elif not spec.gated_mlp or spec.parallel_block:
        why = N_("has a non-gated MLP or a parallel block")
    elif spec.family.startswith(("gemma4", "gemma3n")):
        why = N_("has per-layer-kind head sizes, shared KV or per-layer embeddings (mlx_lm/models/gemma4_text.py, "
                 "gemma3n.py)")
    if why:
        raise ValueError(Text(SUPPORTED_NOTE, family=spec.family, why=Text(why)))
    if setup.method != "full" and set(setup.lora_targets) == {LM_HEAD}:
        raise ValueError(Text(N_("mlx-lm adds adapters to the linears inside the trained blocks only "
                                 "(tuner/utils.py:95-111, lora_parameters keys); '{head}' is not one, so nothing "
                                 "would train: name a block's linears or all-linear"), head=LM_HEAD))
    if setup.lora_layers > spec.num_layers and "lora_layers" not in setup.from_stack:
        raise ValueError(Text(N_("--lora-layers {n} is more than {model}'s {layers} decoder layers (mlx-lm raises: "
                                 "'Requested to train {n} layers but the model only has {layers} layers', "
                                 "mlx_lm/lora.py:234-238)"), n=setup.lora_layers, model=spec.name,
                              layers=spec.num_layers))
    if spec.quantization and setup.method == "full":
        raise ValueError(Text(N_("{model} is quantised ({quant}); MLX's quantised layers are frozen "
                                 "(mlx/nn/layers/quantized.py QuantizedLinear freezes itself), so a quantised base "
                                 "trains adapters only: choose lora or qlora"), model=spec.name,
                              quant=quant_label(*spec.quantization)))


def quant_label(mode: str, bits: int, group: int) -> str:
    """'affine 4-bit, group 64'."""
    return f"{mode} {bits}-bit, group {group}"


def dims(spec: ModelSpec, setup: TrainingSetup) -> Dims:
    trained = setup.lora_layers or spec.num_layers  # 0 = every block (mlx-lm's -1)
    return Dims(spec.hidden_size, spec.q_dim, spec.kv_dim, spec.intermediate_size, spec.num_heads,
                 spec.num_layers, min(trained, spec.num_layers))


def adapted_roles(spec: ModelSpec, setup: TrainingSetup) -> frozenset[str]:
    """The roles of the linears that carry adapters in a trained block: mlx-lm wraps every linear of the block
    (tuner/utils.py:95-111) unless the config names keys; a PEFT-style name list maps to those linears."""
    if setup.method == "full":
        return frozenset()
    if setup.lora_targets == (ALL_LINEAR,):
        return frozenset(m.role for m in spec.linears)
    names = set(setup.lora_targets) - {LM_HEAD}  # outside the blocks: mlx-lm never adapts it (check_mlx_model)
    unknown = names - set(spec.linear_names())
    if unknown:
        raise ValueError(Text(N_("LoRA target {target} is not a linear module of {family}; its modules are: "
                                 "{names}"), target=repr(sorted(unknown)[0]), family=spec.family,
                              names=", ".join(spec.linear_names())))
    return frozenset(m.role for m in spec.linears if m.name in names)


def base_quant(spec: ModelSpec, setup: TrainingSetup) -> tuple[str, int, int] | None:
    """The base's MLX quantisation: a pre-quantised checkpoint's own (config.json 'quantization'), else the
    setup's for QLoRA; None for a float base."""
    if spec.quantization:
        return spec.quantization
    if setup.method == "qlora":
        return setup.quant_mode, setup.quant_bits, setup.quant_group
    return None


def float_bytes(setup: TrainingSetup) -> int:
    """The checkpoint's float dtype, which mlx-lm trains in (no cast in mlx_lm/utils.py load): fp32 or 16-bit."""
    return FP32 if setup.precision == "fp32" else 2


class Resident(NamedTuple):
    """The resident part: weights, adapters, optimizer state, and the trainable bytes of one trained block."""

    weights: float
    adapters: float
    opt: float
    grad_accum: float
    trainable_params: int
    block_trainable_bytes: float  # one trained block's trainable bytes (full: its weights; LoRA: its adapters)
    trained_linear_params: int  # weights of the trained blocks' adapted linears (DoRA's copies)
    items: tuple[DetailItem, ...]


def _lora_block_params(spec: ModelSpec, roles: frozenset[str], r: int, dora: bool) -> int:
    """Adapter parameters of one block: lora_a (in × r) and lora_b (r × out) per adapted linear (tuner/lora.py:88-93),
    plus DoRA's magnitude m (out, tuner/dora.py:90)."""
    total = 0
    for m in spec.linears:
        if m.role in roles:
            total += (r * (m.in_features + m.out_features) + (m.out_features if dora else 0)) * m.count
    return total


def _adafactor_state(spec: ModelSpec, roles: frozenset[str], setup: TrainingSetup, trained: int, b: int) -> float:
    """mlx Adafactor (beta_1 None): a row (shape[:-1]) and a column (shape[:-2] + shape[-1:]) vector per matrix in the
    parameter's dtype, a full second moment for 1-D parameters (mlx/optimizers/optimizers.py:785-796)."""
    r = setup.lora_rank
    if setup.method != "full":
        per = sum(((m.in_features + r) + (r + m.out_features)) * m.count for m in spec.linears if m.role in roles)
        if setup.dora:
            per += sum(m.out_features * m.count for m in spec.linears if m.role in roles)
        return FP32 * per * trained
    per = sum((m.in_features + m.out_features + (m.out_features if m.bias else 0)) * m.count for m in spec.linears)
    per += spec.norms_per_layer * spec.hidden_size  # the blocks' norm weights (1-D: a full second moment)
    return float(b * per * trained)


def resident(spec: ModelSpec, setup: TrainingSetup, dm: Dims, roles: frozenset[str]) -> Resident:
    b = float_bytes(setup)
    text_params = spec.params_total - spec.params_tower  # mlx-lm drops a wrapper's vision tower (gemma3.py sanitize)
    quant = base_quant(spec, setup)
    if quant is None:
        weights = float(text_params * b)
        w_formula = f"{b} B × {text_params:,} params"
    else:
        mode, bits, group = quant
        bpw = mlx_bytes_per_weight(mode, bits, group, b)
        # mlx_lm/utils.py quantize_model:1057-1060: every Linear and Embedding whose input is a multiple of the
        # group (the decoder linears, the embedding, an untied head); norms stay in the float dtype.
        quantised = spec.params_quantizable + spec.params_embedding
        weights = quantised * bpw + (text_params - quantised) * b
        w_formula = f"{bpw:.4f} B × {quantised:,} quantised + {b} B × {text_params - quantised:,} float"
    per_block_linear = sum(m.params_per_copy * m.count for m in spec.linears)
    if setup.method == "full":
        block_params = per_block_linear + spec.norms_per_layer * spec.hidden_size  # mlx_lm/lora.py:240-244
        trainable = block_params * dm.trained
        adapters = 0.0
        block_bytes = float(block_params * b)
        t_formula = f"{b} B × {trainable:,} params of the last {dm.trained} blocks"
    else:
        block_params = _lora_block_params(spec, roles, setup.lora_rank, setup.dora)
        trainable = block_params * dm.trained
        adapters = float(FP32 * trainable)  # fp32 adapters (tuner/lora.py:88-93)
        block_bytes = float(FP32 * block_params)
        t_formula = f"4 B × {trainable:,} adapter params on the last {dm.trained} blocks"
    tb = b if setup.method == "full" else FP32
    opt_id = setup.optimizer
    if OPTIMIZERS[opt_id].state_dtype == "factored":
        opt = _adafactor_state(spec, roles, setup, dm.trained, b)
    else:
        opt = float(trainable * tb * OPTIMIZERS[opt_id].states)  # zeros_like(parameter): the parameter's dtype
    accum = float(trainable * tb) if setup.grad_accum > 1 else 0.0  # the summed gradient tree (trainer.py:251-252)
    adapted_linear = sum(m.in_features * m.out_features * m.count for m in spec.linears if m.role in roles)
    items = (
        d("weights.base", N_("Frozen base weights"), weights - (trainable * b if setup.method == "full" else 0),
          w_formula),
        d("weights.trainable", N_("Trainable weights"), adapters if setup.method != "full" else trainable * b,
          t_formula),
        d("optimizer.state", N_("Optimizer state"), opt, f"{opt_id} state × {trainable:,} trainable params "
                                                          f"(the parameter's dtype)"),
    )
    if accum:
        items += (d("gradients.accumulated", N_("Gradients (accumulated)"), accum,
                    "the summed gradient tree kept between micro-steps (trainer.py:251-252)"),)
    return Resident(weights + adapters, adapters, opt, accum, trainable, block_bytes, adapted_linear * dm.trained,
                  items)



def fused_mlp(spec: ModelSpec) -> bool:
    """Is gate/up one fused 2I-wide linear (Phi-3's gate_up_proj)?"""
    return any(m.role == "mlp_in" and m.out_features == 2 * spec.intermediate_size for m in spec.linears)

