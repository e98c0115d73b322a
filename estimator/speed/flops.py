"""FLOPs of one training micro-step, from the architecture (ModelSpec) and what trains (TrainingSetup).

A matmul of an [n, in] input with an [in, out] weight costs 2·n·in·out FLOPs (one multiply and one add per term;
Kaplan et al. 2020, arXiv 2001.08361 §2.1, "C_forward ≈ 2N"). Per token the forward pass costs:

- the decoder linears: 2 × in × out for every nn.Linear a token goes through; a mixture of experts counts the
  experts_per_token routed experts a token reaches, not all of them (Fedus et al. 2021, arXiv 2101.03961 §2: each
  token is processed by its top-k experts only);
- the output head: 2 × hidden × vocabulary (the input embedding is a table lookup: no FLOPs);
- attention's sequence-dependent term: per layer, QKᵀ and AV are 2·s·(q width) each, 4·s·(q width) per token over a
  context of s tokens (Kaplan §2.1: 2·n_layer·n_ctx·d_attn per token forward, counting both). A causal kernel that
  skips the fully masked tiles (FlashAttention-2 with causal=True, Dao 2023 arXiv 2307.08691 §3.1.1: "we skip the
  computation of ... blocks where all elements are masked", about half) does s/2 on average; an eager (materialised)
  attention computes the whole s × s score matrix and masks it afterwards, so it pays the full s. Sliding-window
  layers attend to at most the window, chunked layers within their chunk, linear-attention layers have no s-term.

Backward:
- full fine-tuning: 2 × forward for every linear (the input gradient and the weight gradient are one matmul each,
  the same size as the forward one; Kaplan §2.1 "backward ≈ 2 × forward");
- frozen linears (LoRA, QLoRA, a frozen prefix): only the input gradient, 1 × forward, and only in the layers the
  gradient has to cross (above the first trained layer: with adapters on the last N layers nothing below them runs
  backward);
- LoRA adapters: forward 2·r·(in + out) per token per adapted module, backward twice that (input and weight grads);
- attention: FlashAttention's backward recomputes the scores, 5 matmuls against the forward's 2 (Dao 2023 §3.1.2):
  2.5 × forward; an eager attention keeps its probabilities and needs 4 matmuls, 2 × forward.
Gradient checkpointing runs each checkpointed layer's forward once more inside the backward (Chen et al. 2016,
arXiv 1604.06174 §3: "one additional forward pass"); the head is not checkpointed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..job.setup import ALL_LINEAR
from ..models.spec import LM_HEAD

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec

# FlashAttention-2 backward / forward FLOPs: 5 matmuls (recompute S = QKᵀ, dV, dP, dQ, dK) against 2 (Dao 2023,
# arXiv 2307.08691 §3.1.2 Algorithm 2); an eager attention keeps P and runs 4 (dV, dP, dQ, dK).
FLASH_BACKWARD = 2.5
EAGER_BACKWARD = 2.0


def adapted_names(spec: ModelSpec, setup: TrainingSetup) -> frozenset[str]:
    """The linears that carry LoRA adapters: every decoder linear for 'all-linear' (PEFT's all-linear, mlx-lm's
    default keys), else the named ones (the output head only when named). The memory estimate checks the names;
    here an unknown name simply adapts nothing."""
    if setup.method == "full":
        return frozenset()
    names = set(spec.linear_names())
    if setup.lora_targets == (ALL_LINEAR,):
        return frozenset(names)
    return frozenset(t for t in setup.lora_targets if t in names or t == LM_HEAD)


def _copies(spec: ModelSpec, role: str, count: int) -> float:
    """Copies of a linear one token goes through: a routed expert's top-k of its `count` copies, else all of them."""
    if role.startswith("expert") and spec.experts_per_token:
        return min(spec.experts_per_token, count)
    return count


def _layers(spec: ModelSpec, layers: int) -> int:
    return layers or spec.num_layers


def linear_flops_per_token(spec: ModelSpec) -> float:
    """Forward FLOPs per token of every decoder linear (2 × in × out per matmul a token goes through)."""
    return sum(2.0 * m.in_features * m.out_features * _copies(spec, m.role, m.count) * _layers(spec, m.layers)
               for m in spec.linears)


def head_flops_per_token(spec: ModelSpec, score_head: bool = False) -> float:
    """The output head: 2 × hidden × vocabulary (a reward model's score head has one output)."""
    return 2.0 * spec.hidden_size * (1 if score_head else spec.vocab_size)


def adapter_flops_per_token(spec: ModelSpec, setup: TrainingSetup) -> float:
    """Forward FLOPs per token of the LoRA adapters: A (r × in) then B (out × r), 2·r·(in + out) per adapted module
    in every layer that carries it (the last N with lora_layers; LoRA paper, Hu et al. 2021 arXiv 2106.09685 §4.1)."""
    names = adapted_names(spec, setup)
    if not names:
        return 0.0
    r = setup.lora_rank
    total = 2.0 * r * (spec.hidden_size + spec.vocab_size) if LM_HEAD in names else 0.0
    share = trained_layer_share(spec, setup)
    for m in spec.linears:
        if m.name in names:
            total += 2.0 * r * (m.in_features + m.out_features) * _copies(spec, m.role, m.count) * _layers(
                spec, m.layers) * share
    return total


def trained_layer_share(spec: ModelSpec, setup: TrainingSetup) -> float:
    """The share of decoder layers that train (and that the backward crosses): setup.lora_layers = N trains the
    last N (PEFT layers_to_transform, mlx-lm --num-layers; on MLX full fine-tuning trains those N too), 0 = all."""
    if setup.lora_layers and setup.lora_layers < spec.num_layers:
        return setup.lora_layers / spec.num_layers
    return 1.0


def _layer_kinds(spec: ModelSpec) -> list[str]:
    """Each decoder layer's attention kind: full, sliding, chunked or linear (layer_pattern where the family states
    it, else sliding_layers of the layers use the window)."""
    if spec.layer_pattern:
        return [entry.split(":")[0] for entry in spec.layer_pattern]
    return ["sliding"] * spec.sliding_layers + ["full"] * (spec.num_layers - spec.sliding_layers)


def _context(kind: str, seq_len: int, spec: ModelSpec, causal_skip: bool) -> float:
    """Average number of keys a query is scored against in one layer."""
    if kind.startswith("linear"):
        return 0.0  # Gated DeltaNet and the like: a recurrent state, no s × s scores
    span = seq_len
    if kind.startswith("sliding") and spec.sliding_window:
        span = min(seq_len, spec.sliding_window)
    elif kind.startswith("chunked") and spec.attention_chunk:
        span = min(seq_len, spec.attention_chunk)
    if not causal_skip:
        # an eager kernel scores every key of the sequence (or of the chunk) and masks the rest afterwards
        return float(min(seq_len, spec.attention_chunk) if kind.startswith("chunked") and spec.attention_chunk
                     else seq_len)
    if span == seq_len:
        return seq_len / 2.0  # causal: query i sees i keys, (s + 1)/2 on average; the kernel skips the rest
    return span - span * span / (2.0 * seq_len)  # a band of `span` keys, shorter at the start of the sequence


def attention_widths(spec: ModelSpec) -> tuple[int, int]:
    """(QKᵀ width, AV width) summed over heads: heads × head_dim each, or MLA's heads × (nope + rope) and
    heads × v_head_dim (DeepSeek-V2 arXiv 2405.04434 §2.1.2)."""
    if spec.mla_kv_rank:
        return (spec.num_heads * (spec.mla_nope_dim + spec.mla_rope_dim), spec.num_heads * spec.mla_v_dim)
    return spec.q_dim, spec.q_dim


def attention_flops_per_token(spec: ModelSpec, seq_len: int, causal_skip: bool) -> float:
    """Forward FLOPs per token of QKᵀ and AV over all layers: 2 × context × (qk width + v width) per layer."""
    qk, v = attention_widths(spec)
    return sum(2.0 * _context(kind, seq_len, spec, causal_skip) * (qk + v) for kind in _layer_kinds(spec))


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one micro-step on one GPU, by pass. tokens: the positions the micro-step runs (batch × length)."""

    tokens: int
    forward: float  # the training forward (linears, attention, head, adapters)
    backward: float
    recompute: float  # gradient checkpointing's second forward of the checkpointed layers
    model_params: float  # matmul parameters a token goes through (decoder linears + head), for 6·N comparisons

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute


def step_flops(spec: ModelSpec, setup: TrainingSetup, causal_skip: bool, score_head: bool = False,
               ckpt_share: float = 1.0) -> StepFlops:
    """FLOPs of one training micro-step of `setup` (batch × lm_seq_len positions). causal_skip: the attention kernel
    skips masked tiles (SDPA/FlashAttention on a PyTorch stack). ckpt_share: the share of the trained layers that
    gradient checkpointing recomputes (1 = every layer, the HF/torchtune/Unsloth default)."""
    tokens = setup.batch * setup.lm_seq_len
    lin = linear_flops_per_token(spec)
    head = head_flops_per_token(spec, score_head)
    attn = attention_flops_per_token(spec, setup.lm_seq_len, causal_skip)
    adapters = adapter_flops_per_token(spec, setup)
    share = trained_layer_share(spec, setup)
    attn_back = FLASH_BACKWARD if causal_skip else EAGER_BACKWARD
    forward = lin + head + attn + adapters
    if setup.method == "full":
        # every trained linear: input grad + weight grad; the frozen prefix below the last N: nothing
        backward = 2.0 * lin * share + 2.0 * head + attn_back * attn * share
    else:
        # frozen linears: the input gradient only, in the layers above the first adapter; adapters: input + weight
        backward = lin * share + head + attn_back * attn * share + 2.0 * adapters
    recompute = ((lin + attn) * share * ckpt_share + adapters) if setup.grad_ckpt else 0.0
    n = (lin + head) / 2.0
    return StepFlops(tokens, forward * tokens, backward * tokens, recompute * tokens, n)


def forward_flops(spec: ModelSpec, setup: TrainingSetup, causal_skip: bool, score_head: bool = False) -> float:
    """FLOPs of one forward over the micro-batch without gradients (a reference model's, a no-grad KL forward)."""
    tokens = setup.batch * setup.lm_seq_len
    return tokens * (linear_flops_per_token(spec) + head_flops_per_token(spec, score_head)
                     + attention_flops_per_token(spec, setup.lm_seq_len, causal_skip))
