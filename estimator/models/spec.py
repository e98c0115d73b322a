"""The model as the estimate sees it: `ModelSpec` with exact parameter counts and every linear (`LinearModule`)
of a decoder layer, so LoRA targeting, quantisation and activations derive from one list."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

LM_HEAD = "lm_head"

# Limits that keep absurd configs (1e12 layers) from producing nonsense or overflowing the UI.
# Module names of a multimodal wrapper's towers and projectors (transformers 5.24: Gemma 3/4 vision_tower and
# embed_vision/embed_audio, Mistral 3 vision_tower + multi_modal_projector, Qwen3.5 visual, Gemma 3n audio_tower):
# the estimate's default leaves them frozen and without LoRA adapters; the tracer, the counts and the snippets
# exclude them with this pattern (PEFT's all-linear would wrap them: tuners_utils._maybe_include_all_linear_layers).
TOWER_MODULES = r".*(vision_tower|vision_model|multi_modal_projector|audio_tower|embed_vision|embed_audio|visual).*"
MAX_PARAMS = 10**13  # 10 trillion parameters: far above any released model
MAX_DIM = 1 << 20  # hidden/intermediate/vocab sizes above ~1M are not real configs
MAX_LAYERS = 1000


@dataclass(frozen=True)
class LinearModule:
    """One nn.Linear (or a group of identical ones) inside a decoder layer."""

    name: str  # the module name PEFT matches in target_modules (q_proj, gate_up_proj, w1, ...)
    in_features: int
    out_features: int
    bias: bool
    role: str  # attn_in | attn_out | mlp_in | mlp_out | router | expert_in | expert_out
    count: int = 1  # identical copies per layer (MoE experts)
    layers: int = 0  # how many decoder layers carry it (0 = all layers)
    kinds: tuple[str, ...] = ()  # the layer_pattern entries whose layers carry it (() = not kind-specific)

    @property
    def params_per_copy(self) -> int:
        return self.in_features * self.out_features + (self.out_features if self.bias else 0)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only language model: shapes plus exact parameter counts (unique, tied counted once)."""

    name: str
    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    tie_embeddings: bool
    gated_mlp: bool  # SwiGLU/GeGLU (3 matrices) vs a plain 2-matrix MLP
    norm_kind: str  # "rms" (weight only) or "layer" (weight and bias)
    norms_per_layer: int  # 2 for Llama, 4 for Gemma-2/3, 1 for Phi-2 (parallel block)
    qk_norm: bool  # per-head RMSNorm on q and k (Qwen3, Gemma-3)
    parallel_block: bool  # attention and MLP read the same normed input (Phi-2, GPT-NeoX)
    lm_head_bias: bool
    linears: tuple[LinearModule, ...]  # every linear of one decoder layer
    hidden_act: str = "silu"  # MLP activation; Phi-2's python "gelu_new" saves four tensors instead of one
    attn_softcap: bool = False  # Gemma-2: tanh soft-capping of attention scores (eager keeps the tanh output)
    final_softcap: bool = False  # Gemma-2: tanh soft-capping of the logits (keeps a 16-bit tanh output)
    sliding_window: int = 0  # local attention window in tokens (0 = none)
    sliding_layers: int = 0  # decoder layers that attend within sliding_window
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    moe_layers: int = 0  # decoder layers whose MLP is a mixture of experts
    params_total: int = 0  # unique parameters (what transformers builds for this config)
    params_embedding: int = 0  # input embedding + untied output head
    params_quantizable: int = 0  # nn.Linear weights inside decoder layers (what bitsandbytes quantises)
    params_active: int = 0  # parameters used per token (differs from total for MoE)
    source: str = ""  # preset id, "config.json", or "generic"
    notes: tuple[str, ...] = field(default_factory=tuple)
    # --- issue 11 (dense families and multimodal wrappers); new fields stay at the end ---
    params_tower: int = 0  # vision/audio towers + projectors of a multimodal wrapper (in params_total, frozen)
    tower_kind: str = ""  # "vision", "vision and audio", ... ("" for a text-only model)
    norm_after: bool = False  # OLMo 2/3: the norms read the attention/MLP outputs (no norm on the layer input)
    qk_norm_full_width: bool = False  # OLMo 2/3: q_norm/k_norm span all heads (q_dim, kv_dim), not head_dim
    logit_scale: bool = False  # Cohere2 logit_scale / Granite logits_scaling: one more [T, V] tensor in forward
    # MoE / MLA / hybrid / attention-sink families (estimator/models/moe.py):
    extra_layer_params: int = 0  # layer parameters that are neither linears nor the standard norms (all layers)
    layer_pattern: tuple[str, ...] = ()  # per layer "<attention kind>:<dense|moe>", e.g. "linear:moe", "sliding:moe"
    all_linear_targets: tuple[str, ...] = ()  # what PEFT's all-linear wraps, when not every listed linear
    attention_sinks: bool = False  # gpt-oss: a learned sink logit per head (eager attention)
    attention_chunk: int = 0  # tokens per attention chunk in "chunked" layers (Llama 4)
    mla_q_rank: int = 0  # DeepSeek MLA: q_lora_rank (0: a plain q_proj)
    mla_kv_rank: int = 0  # kv_lora_rank
    mla_rope_dim: int = 0  # qk_rope_head_dim
    mla_nope_dim: int = 0  # qk_nope_head_dim
    mla_v_dim: int = 0  # v_head_dim
    linear_key_heads: int = 0  # Gated DeltaNet: linear_num_key_heads
    linear_value_heads: int = 0  # linear_num_value_heads
    linear_key_dim: int = 0  # linear_key_head_dim
    linear_value_dim: int = 0  # linear_value_head_dim
    linear_conv_kernel: int = 0  # linear_conv_kernel_dim
    params_frozen: int = 0  # parameters the model creates with requires_grad=False (in params_total; never trained)
    # Gemma 4 / Gemma 3n (estimator/models/gemma.py):
    params_extra_embedding: int = 0  # per-layer input embedding table (PLE), counted with the embeddings
    # Training the tower (TrainingSetup.train_tower; docs/formulas.md §3.7), from the wrapper's vision_config:
    tower_linears: tuple[tuple[int, int, int], ...] = ()  # (in, out, count) of every nn.Linear in tower + projector
    tower_encoder: tuple[int, int, int] = ()  # ViT encoder (hidden, intermediate, layers); () = not modelled
    tower_gated_mlp: bool = False  # Pixtral's gate/up/down MLP (SigLIP and Qwen3.5's vision MLP: fc1/fc2)
    tower_patches_per_token: int = 0  # encoder patches per image placeholder token in the language model
    # A checkpoint already quantised by MLX (an mlx-community config.json's "quantization": mode, bits, group size;
    # models/config.py reads it): () for a float checkpoint.
    quantization: tuple[str, int, int] | tuple[()] = ()
    # config max_position_embeddings (0 = not stated): Unsloth sizes its RoPE cos/sin cache from it
    # (estimator/memory/unsloth/kernels.py rope_cache_bytes)
    max_position_embeddings: int = 0

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def params_billions(self) -> float:
        return self.params_total / 1e9

    @property
    def largest_linear_params(self) -> int:
        """Largest single decoder matrix: the QLoRA dequantisation buffer holds one of these."""
        return max((m.in_features * m.out_features for m in self.linears), default=0)

    @cached_property
    def _names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.name for m in self.linears))

    def linear_names(self) -> tuple[str, ...]:
        return self._names

    @cached_property
    def params_routed_experts(self) -> int:
        """Routed-expert weights. transformers 5.24 stores them as fused 3-D nn.Parameters in every MoE family
        (modeling_<family>.py Experts classes), not nn.Linear modules, so bitsandbytes 4-bit leaves them in 16-bit
        (quantizers/quantizer_bnb_4bit.py param_needs_quantization: bnb.nn.Linear4bit weights only)."""
        return sum(m.params_per_copy * m.count * (m.layers or self.num_layers)
                   for m in self.linears if m.role.startswith("expert"))

    @cached_property
    def largest_dense_linear_params(self) -> int:
        """Largest decoder matrix that is an nn.Linear (routed experts excluded): what a 4-bit matmul dequantises."""
        return max((m.in_features * m.out_features for m in self.linears if not m.role.startswith("expert")),
                   default=0)

    @cached_property
    def layer_linear_params(self) -> float:
        """Linear parameters of an average decoder layer, from the module shapes (for the generic decoder these
        grow with the size even where the layer count steps up)."""
        total = sum(m.params_per_copy * m.count * (m.layers or self.num_layers) for m in self.linears)
        return total / self.num_layers

    @cached_property
    def by_role(self) -> dict[str, tuple[LinearModule, ...]]:
        """Linears grouped by role, computed once per spec (estimates run in a hot loop)."""
        groups: dict[str, list[LinearModule]] = {}
        for m in self.linears:
            groups.setdefault(m.role, []).append(m)
        return {role: tuple(mods) for role, mods in groups.items()}
