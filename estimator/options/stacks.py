"""Training stacks as presets: what each framework does when the user does not say otherwise.

A stack fills every setting the user left open (checkpointing and its kind, the loss implementation, the
optimizer, adapter dtypes, QLoRA preparation, gradient clipping); the user can override each one, and the
resolved setup remembers which values came from the stack. Every value cites the framework's source file and
the version read. Pure data; the resolver is estimator/job/stack.py: no Streamlit, Plotly or torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..i18n import N_, Text
from .backends import MLX_NO_ROCM, PYTORCH_NO_CPU, UNSLOTH_NO_MPS
from .trainers import TRAINER_IDS, TRL_SERIES, TRL_VERSION


@dataclass(frozen=True)
class VersionDefault:
    """A stack default that an older release had otherwise: `field` is `value` when the run is on the old side of the
    version fork `fork` (options.versions.FORKS, whose source cites both releases), for these trainers (() = any)."""

    field: str  # a STACK_FIELDS name
    fork: str  # a FORKS id
    value: object
    trainers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stack:
    """One framework's defaults for a fine-tuning run, with the source of each."""

    id: str
    label: str
    version: str  # the release whose source was read
    summary: str
    grad_ckpt: bool
    offload_activations: bool
    loss: str  # default loss kind (a LOSSES id)
    loss_impls: dict[str, str]  # loss kind → implementation (a LOSS_IMPLS id): the kinds this stack offers
    optimizer: str
    adapter_dtype: str  # LoRA adapters
    qlora_adapter_dtype: str  # adapters on a 4-bit base
    qlora_prep: str  # a QLORA_PREPS id
    nf4_double_quant: bool
    load_16bit_first: bool
    max_grad_norm: float  # 0 = no clipping
    sources: dict[str, str]  # setting → "file (version): what it says"
    unavailable: dict[str, str]  # loss kind → why this stack cannot do it (shown instead of guessing)
    qlora_optimizer: str | None = None  # the optimizer on a 4-bit base when it differs (LitGPT --quantize)
    # Whose model code saves the activations: "hf" (transformers modules + PEFT), "litgpt" (LitGPT's own GPT and
    # LoRA layers, estimator.memory.litgpt.activations) or "unsloth" (Unsloth's fused kernels,
    # estimator.memory.unsloth.model). LitGPT's and Unsloth's own decoders only; other architectures use "hf".
    model_code: str = "hf"
    lora_dropout: float = 0.0  # LoRA dropout the stack's scripts use (HF snippets set 0.0: no masks to count)
    untied_head: bool = False  # the stack trains a separate output head even where the HF config ties it
    quantize_head: bool = False  # QLoRA quantises the output head too (not only the decoder linears)
    # The stack loads the model through transformers, whose attention dispatch falls back from SDPA to eager for a
    # class without SDPA (modeling_utils.py get_correct_attn_implementation, 5.24). Unsloth, torchtune and LitGPT
    # pick their own attention kernels.
    transformers_attention: bool = True
    # The run's size when the user does not give it (the framework's own defaults; the baseline for the PyTorch
    # stacks, whose trainers take the batch and length from the user's script): micro-batch, max length, LoRA rank,
    # how many of the last blocks carry adapters (0 = every block) and how a QLoRA base is quantised.
    batch: int = 1
    seq_len: int = 2048
    lora_rank: int = 16
    lora_layers: int = 0
    quant_mode: str = "nf4"
    lora_scale: float = 0.0  # the LoRA scale the stack fixes (mlx-lm: scale, not alpha); 0 = alpha/r from the user
    # How the stack puts the checkpoint on the GPU, for the host RAM it needs while loading (HOST_LOADS): "cpu"
    # (the whole model in CPU RAM first, then moved), "state_dict" (the checkpoint read into a CPU dict, then copied
    # into the model) or "direct" (each tensor read from the memory-mapped file straight to the GPU).
    host_load: str = "direct"
    # The PYTORCH_ALLOC_CONF the framework sets when it is imported, as the caching allocator reads it
    # (estimator/memory/allocator.py); "" = PyTorch's defaults (no expandable segments, no power-of-two rounding).
    allocator_conf: str = ""
    # --- What the stack can do (its capabilities): the estimator reads these, never the stack's id. ---------------
    # The array framework it trains with: "torch" (PyTorch: CUDA, ROCm, MPS) or "mlx" (MLX: Metal, CUDA, the CPU).
    framework: str = "torch"
    # The families its own model code runs (family → the source that says so); None: every family the transformers
    # path builds. Unsloth's and LitGPT's runtimes run their own code on these and transformers' modules on the others.
    families: dict[str, str] | None = None
    trainers: tuple[str, ...] = TRAINER_IDS  # the trainers it has (options.trainers ids)
    trainers_refusal: str = ""  # why it has no other trainer ({trainer}: the one asked for)
    # Its preference/RL trainers choose their loss head themselves (TRL: DPO/KTO/GRPO score through the fused chunked
    # head, ORPO/SimPO build the full logits): job.trainer.trainer_loss
    trainer_decides_loss: bool = False
    compile: bool = False  # a torch.compile switch modelled for it (torchtune's recipes' compile)
    optimizer_in_bwd: bool = False  # the optimizer step inside backward (torchtune's optimizer_in_bwd)
    dora: bool = False  # DoRA's per-layer weight-norm terms modelled for it (mlx-lm's fine_tune_type dora)
    no_layer_selection: str = ""  # why its LoRA cannot target the last N blocks ("" = it can)
    full_trains_last_layers: bool = False  # with --lora-layers N, full fine-tuning trains only the last N blocks
    quantizer: str = "bitsandbytes"  # who quantises a QLoRA base: bitsandbytes (NF4) or MLX (affine, mxfp4, …)
    # the training-config format its file is read and written in (estimator/job/configs: a format's ID); "trl" for the
    # stacks without a file of their own (TrainingArguments' and ModelConfig's names, read by HfArgumentParser)
    config_format: str = "trl"
    multi_gpu: bool = True  # data parallelism and ZeRO/FSDP sharding over several GPUs modelled for it
    mixed_precision: bool = True  # fp32 master weights under bf16 autocast (precision "mixed")
    backend: str = "cuda"  # the backend when no device names one (options.backends)
    backend_refusals: dict[str, str] = field(default_factory=dict)  # backend id → why it cannot run there
    # Defaults an older release of its packages had (issue 28): the first entry for a field whose fork the installed
    # versions are on the old side of wins (job.stack.resolve_setup).
    version_defaults: tuple[VersionDefault, ...] = ()

    def loss_impl(self, kind: str) -> str:
        """The implementation of a loss kind in this stack; ValueError when the stack does not offer it."""
        if kind not in self.loss_impls:
            why = self.unavailable.get(kind, N_("it has no such loss"))
            why = why if isinstance(why, Text) else Text(why)
            raise ValueError(Text(N_("the {stack} stack cannot use the '{loss}' loss: {why}"), stack=self.label,
                                  loss=kind, why=why))
        return self.loss_impls[kind]


_TRANSFORMERS_OPTIM = ("transformers 5.24 training_args.py: optim defaults to 'adamw_torch_fused' (torch ≥ 2.8); "
                       "max_grad_norm=1.0")
_PEFT_ADAPTERS = "peft 0.21 get_peft_model(autocast_adapter_dtype=True): LoRA weights in fp32"
# How a stack loads the model (Stack.host_load), for the host RAM the load needs (estimator/memory/host.py): what
# sits in CPU RAM at the load's peak, per training process.
HOST_LOADS: dict[str, str] = {
    "cpu": N_("the whole model in CPU RAM in its training dtype, then moved to the GPU (from_pretrained without a "
              "device_map)"),
    "state_dict": N_("the whole checkpoint read into a CPU state dict, then copied into the model on the GPU"),
    "direct": N_("one tensor at a time, read from the memory-mapped file straight to the GPU"),
}
# LLaMA-Factory: the release read (tag v0.9.5, 30 May 2026, commit 7af9095) and the transformers, PEFT and TRL
# versions its pyproject.toml allows (transformers>=4.55.0,<=5.6.0; peft>=0.18.0,<=0.18.1; trl>=0.18.0,<=0.24.0).
LLAMAFACTORY_RELEASE = "0.9.5"
LLAMAFACTORY_VERSION = f"llamafactory {LLAMAFACTORY_RELEASE} (transformers ≤ 5.6.0, PEFT 0.18.1, TRL ≤ 0.24.0)"
_LF = f"llamafactory {LLAMAFACTORY_RELEASE} src/llamafactory/"
# ms-swift: the release read (4.6.0, 14 October 2026: PyPI's sdist, whose swift/ tree the cited paths are in) and the
# transformers, PEFT and TRL versions its requirements/framework.txt allows (transformers>=4.33,<5.20.0; peft>=0.11,<0.21;
# trl>=0.15,<1.0).
SWIFT_RELEASE = "4.6.0"
SWIFT_VERSION = f"ms-swift {SWIFT_RELEASE} (transformers ≤ 5.19.0, PEFT ≤ 0.20.0, TRL < 1.0)"
_SW = f"ms-swift {SWIFT_RELEASE} swift/"
_HF_LOAD = ("transformers 5.24 modeling_utils.py:4557-4586 _load_pretrained_model: the safetensors shards are opened "
            "with safe_open(backend='mmap') and each tensor materialised on its device_map entry")

# model_type → the class FastLanguageModel dispatches to (unsloth/models/loader.py:1796-1858, 2026.10.9) whose decoder
# layer is LlamaDecoderLayer_fast_forward with the SwiGLU LoRA kernels (llama.py:5253-5258; mistral.py:467-473,
# qwen2.py:48-54). Other families go through FastModel (transformers' modules, compiled): the transformers estimate.
UNSLOTH_FAMILIES: dict[str, str] = {
    "llama": "unsloth/models/loader.py:1796-1811 → FastLlamaModel",
    "mistral": "unsloth/models/loader.py:1813-1814 → FastMistralModel (mistral.py:467-473)",
    "qwen2": "unsloth/models/loader.py:1848-1849 → FastQwen2Model (qwen2.py:48-54)",
}
# The families whose LitGPT 0.5.13 Block (litgpt/model.py: CausalSelfAttention, LLaMAMLP / GptNeoxMLP, RMSNorm or
# LayerNorm) saves the tensors memory/litgpt/activations.py counts: traced with calibration/litgpt_trace.py, or the
# same Block with another config.
LITGPT_FAMILIES: dict[str, str] = {
    "llama": "litgpt/config.py Llama 2/3 configs: LLaMAMLP block (traced: Llama-2-7B, Llama-3.1-8B, TinyLlama)",
    "mistral": "litgpt/config.py Mistral configs: LLaMAMLP block (traced: Mistral-7B-v0.1)",
    "qwen2": "litgpt/config.py Qwen2.5 configs: the LLaMAMLP block with a QKV bias",
    "gemma": "litgpt/config.py Gemma configs: GemmaMLP block (traced: gemma-2b)",
    "phi3": "litgpt/config.py Phi-3 configs: LLaMAMLP block (traced: Phi-3-mini)",
    "phi": "litgpt/config.py phi-2: GptNeoxMLP parallel block (traced: phi-2)",
    "gpt_neox": "litgpt/config.py Pythia / StableLM configs: GptNeoxMLP block",
}

STACKS: dict[str, Stack] = {s.id: s for s in (
    Stack(
        trainer_decides_loss=True, backend_refusals={"cpu": PYTORCH_NO_CPU},
        version_defaults=(
            VersionDefault("grad_ckpt", "trl_gradient_checkpointing_default", False),
            VersionDefault("loss", "trl_sft_chunked_nll_default", "standard"),
            VersionDefault("optimizer", "transformers_fused_adamw_default", "adamw_foreach"),
            VersionDefault("qlora_prep", "trl_kbit_prep_norms_only", "peft", ("sft", "grpo", "reward")),
            VersionDefault("qlora_prep", "trl_no_kbit_prep", "norms", ("sft", "grpo", "reward")),
            VersionDefault("qlora_prep", "trl_dpo_no_kbit_prep", "peft", ("dpo",)),
            VersionDefault("qlora_prep", "trl_kto_no_kbit_prep", "peft", ("kto",)),
        ),
        id="trl", label="TRL", version=f"{TRL_VERSION} (transformers 5.24, PEFT 0.21)",
        summary=N_("TRL's SFTTrainer: checkpointing on, the loss through a fused chunked LM head (no full logits), "
                "fused AdamW, fp32 LoRA adapters (bf16 on a 4-bit base), no fp32 upcast for QLoRA."),
        grad_ckpt=True, offload_activations=False, loss="chunked",
        loss_impls={"chunked": "trl", "standard": "hf"}, optimizer="adamw",
        adapter_dtype="fp32", qlora_adapter_dtype="bf16", qlora_prep="none", nf4_double_quant=False,
        load_16bit_first=False, max_grad_norm=1.0,
        host_load="cpu",
        sources={
            "nf4_double_quant": "trl/trainer/model_config.py:164-165 (1.16.0): use_bnb_nested_quant=False, passed "
                                "as BitsAndBytesConfig(bnb_4bit_use_double_quant=...) at trl/trainer/utils.py:267",
            "host_load": "the snippet (report/snippets/trl.py) loads with from_pretrained and no device_map, so " + _HF_LOAD
                         + " on the CPU, and Trainer moves the model to the GPU; trl/trainer/sft_trainer.py:691-693 "
                         "(1.16.0) sets device_map=None on several GPUs too; a 4-bit base is placed on the GPU by "
                         "bitsandbytes (quantizer_bnb_4bit.py:94-97 update_device_map)",
            "grad_ckpt": "trl/trainer/base_config.py (1.16.0): gradient_checkpointing=True (since 0.22)",
            "offload_activations": "trl/trainer/sft_config.py (1.16.0): activation_offloading=False",
            "loss": "trl/trainer/sft_trainer.py (1.16.0): add_fused_lm_head(...) for every SFT loss; "
                    "loss_type 'chunked_nll' is a deprecated alias of 'nll' (sft_config.py)",
            "optimizer": _TRANSFORMERS_OPTIM,
            "adapter_dtype": "trl/trainer/sft_trainer.py (1.16.0): get_peft_model with PEFT's default "
                             "autocast_adapter_dtype=True (fp32 adapters) except under ZeRO-3",
            "qlora_adapter_dtype": "trl/trainer/sft_trainer.py (1.16.0): on a quantised model the trainable "
                                   "adapter weights are cast to bf16 (QLoRA paper §3)",
            "qlora_prep": "TRL no longer calls prepare_model_for_kbit_training (trl PRs #4577, #4704)",
            "max_grad_norm": _TRANSFORMERS_OPTIM,
        },
        unavailable={"fused": Text(N_("{trl} raises on Liger's fused_linear_cross_entropy (sft_trainer.py: it "
                                      "replaces the forward that TRL patches with its own fused head); use "
                                      "'chunked'"), trl=TRL_SERIES)},
    ),
    Stack(
        backend_refusals={"cpu": PYTORCH_NO_CPU},
        version_defaults=(VersionDefault("optimizer", "transformers_fused_adamw_default", "adamw_foreach"),),
        id="trainer", label="HF Trainer", version="transformers 5.24.0 Trainer + PEFT 0.21",
        summary=N_("The plain transformers Trainer: no checkpointing, the standard loss on fp32-upcast logits "
                "(Liger's fused kernel with use_liger_kernel=True), fused AdamW, fp32 adapters, and PEFT's "
                "QLoRA recipe (prepare_model_for_kbit_training)."),
        grad_ckpt=False, offload_activations=False, loss="standard",
        loss_impls={"standard": "hf", "fused": "liger"}, optimizer="adamw",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="peft", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=1.0,
        host_load="cpu",
        sources={
            "host_load": "from_pretrained without a device_map (report/snippets/hf_trainer.py): " + _HF_LOAD
                         + " on the CPU; Trainer._move_model_to_device then copies it to the GPU",
            "grad_ckpt": "transformers 5.24 training_args.py: gradient_checkpointing defaults to None → off",
            "offload_activations": "transformers 5.24 modeling_utils.py: activation_checkpointing_enable("
                                   "offload=False) by default",
            "loss": "transformers 5.24 loss/loss_utils.py ForCausalLMLoss (logits.float()); "
                    "use_liger_kernel=False (training_args.py)",
            "optimizer": _TRANSFORMERS_OPTIM,
            "adapter_dtype": _PEFT_ADAPTERS,
            "qlora_adapter_dtype": _PEFT_ADAPTERS,
            "qlora_prep": "peft 0.21 QLoRA guide: prepare_model_for_kbit_training before get_peft_model",
            "max_grad_norm": _TRANSFORMERS_OPTIM,
        },
        unavailable={"chunked": N_("the Trainer has no chunked loss of its own; choose the TRL stack, or 'fused' "
                                   "(use_liger_kernel=True)")},
    ),
    Stack(
        families=UNSLOTH_FAMILIES, backend_refusals={"metal": UNSLOTH_NO_MPS, "cpu": PYTORCH_NO_CPU},
        id="unsloth", label="Unsloth", version="unsloth 2026.10.9 (unsloth_zoo 2026.10.9, transformers ≤ 5.17)",
        transformers_attention=False,
        summary=N_("Unsloth: its own fused LoRA kernels (MLP, QKV, O) that keep only what their backward needs, "
                "offloaded checkpointing ('unsloth': each layer's input in pinned CPU RAM), its fused linear "
                "cross-entropy (no logits), 8-bit AdamW, fp32 adapters on a bf16 or NF4 base."),
        grad_ckpt=True, offload_activations=True, loss="fused",
        loss_impls={"fused": "cce", "standard": "unsloth_ce"}, optimizer="adamw_8bit",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="none", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=1.0,
        host_load="direct", allocator_conf="expandable_segments:True",
        sources={
            "allocator_conf": "unsloth_zoo/__init__.py:321-324 (2026.10.9): importing Unsloth sets PYTORCH_ALLOC_CONF="
                              "expandable_segments:True on torch ≥ 2.10 (the estimate's 2.13) unless the user set it; "
                              "torch ≤ 2.9 gets roundup_power2_divisions:[32:256,64:128,256:64,>:32] too (:325-329); "
                              "Windows/WSL, ROCm and Tegra boards go without expandable segments (:389-411; "
                              "Windows/WSL get the divisions instead, :479-496)",
            "host_load": "unsloth/models/loader.py:1250, 1310 (2026.10.9): device_map defaults to 'sequential' "
                         "(loader_utils.py:416), each rank pinned to its own GPU: " + _HF_LOAD,
            "grad_ckpt": "unsloth/models/llama.py (2026.10.9): get_peft_model(use_gradient_checkpointing='unsloth') "
                         "(:4569-4582); _utils.py:502-511 turns it into plain checkpointing below max_seq_length 512",
            "offload_activations": "unsloth_zoo gradient_checkpointing.py (2026.10.9) UnslothCheckpointFunction "
                                   "(:1337-1717): each layer's input to pinned CPU RAM, all but the last layer and "
                                   "inputs ≤ 2 MiB (:1408)",
            "loss": "unsloth/models/llama.py:2087-2137 (2026.10.9): with labels the loss is unsloth_fused_ce_loss → "
                    "unsloth_zoo fused_losses/fused_linear.py fused_linear_cross_entropy (no [T, V] logits); "
                    "UNSLOTH_RETURN_LOGITS=1 builds the logits and runs kernels/cross_entropy_loss.py",
            "optimizer": "unsloth/models/rl.py:3318 (2026.10.9): Unsloth's SFTConfig defaults optim='adamw_8bit' "
                         "(also per_device_train_batch_size=4, gradient_accumulation_steps=2: set them here)",
            "adapter_dtype": "unsloth_zoo training_utils.py:404-466 (2026.10.9): LoRA weights upcast to fp32, "
                             "everything else frozen in its load dtype",
            "qlora_adapter_dtype": "unsloth_zoo training_utils.py:404-466 (2026.10.9): LoRA weights upcast to fp32",
            "qlora_prep": "unsloth_zoo training_utils.py:458-463 (2026.10.9): embeddings, head and norms stay bf16 "
                          "(no prepare_model_for_kbit_training upcast)",
            "max_grad_norm": _TRANSFORMERS_OPTIM,
            "model_code": "unsloth/models/llama.py (2026.10.9): LlamaDecoderLayer_fast_forward and "
                          "LlamaAttention_fast_forward with unsloth/kernels fast_lora.py (LoRA_MLP, LoRA_QKV, LoRA_W), "
                          "rms_layernorm.py, rope_embedding.py and the attention dispatch (docs/formulas.md §3.8); "
                          "Llama, Mistral and Qwen2 (FastLlamaModel), other families through FastModel",
            "lora_dropout": "unsloth/models/llama.py:4569-4582 (2026.10.9): get_peft_model(lora_dropout=0.0, "
                            "bias='none')",
        },
        unavailable={"chunked": N_("Unsloth's own loss is the fused one; choose 'fused' or 'standard'")},
        model_code="unsloth",
    ),
    Stack(
        config_format="axolotl",
        backend_refusals={"cpu": PYTORCH_NO_CPU},
        id="axolotl", label="Axolotl", version="axolotl 0.19.0 (transformers Trainer)",
        summary=N_("Axolotl: checkpointing off unless the YAML turns it on, the Trainer's standard loss (Liger "
                "plugin: fused), fused AdamW; for QLoRA the norms, embeddings and head end in the model dtype."),
        grad_ckpt=False, offload_activations=False, loss="standard",
        loss_impls={"standard": "hf", "fused": "liger"}, optimizer="adamw",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="none", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=1.0,
        host_load="direct",
        sources={
            "host_load": "axolotl/utils/config/__init__.py:147 (0.19.0): device_map 'auto'; loaders/model.py:705-714 "
                         "keep it except under FSDP or ZeRO-3: " + _HF_LOAD,
            "grad_ckpt": "axolotl/utils/schemas/config.py (0.19.0): gradient_checkpointing default False "
                         "(true, 'offload' or 'offload_disk' when set)",
            "offload_activations": "axolotl/utils/schemas/config.py (0.19.0): gradient_checkpointing: offload",
            "loss": "axolotl 0.19.0 uses the Trainer's loss; the Liger plugin (liger_fused_linear_cross_entropy) "
                    "swaps in the fused kernel",
            "optimizer": "axolotl/utils/schemas/training.py (0.19.0): optimizer default 'adamw_torch_fused'",
            "adapter_dtype": _PEFT_ADAPTERS,
            "qlora_adapter_dtype": _PEFT_ADAPTERS,
            "qlora_prep": "axolotl/loaders/model.py (0.19.0): after prepare_model_for_kbit_training, "
                          "_configure_embedding_dtypes casts norms, embed_tokens and lm_head back to the model "
                          "dtype (without FSDP); embeddings_skip_upcast gives the 'norms' preparation",
            "max_grad_norm": "axolotl/utils/schemas/training.py (0.19.0): max_grad_norm None → Trainer's 1.0",
        },
        unavailable={"chunked": N_("Axolotl's chunked_cross_entropy still builds the full logits; choose "
                                   "'standard' or 'fused' (Liger plugin)")},
    ),
    Stack(
        config_format="torchtune",
        compile=True, optimizer_in_bwd=True, backend_refusals={"cpu": PYTORCH_NO_CPU},
        no_layer_selection=N_("torchtune's LoRA builders (lora_llama3_1 and the others, torchtune 0.6.1) adapt every "
                              "layer; their configs have no per-layer switch"),
        id="torchtune", label="torchtune", version="torchtune 0.6.1 (lora/full single-device recipes)",
        transformers_attention=False,
        summary=N_("torchtune's recipes: activation checkpointing on, the whole model and adapters in bf16 (no "
                "autocast), chunked-output cross-entropy (8 chunks, each upcast to fp32), fused AdamW, no "
                "clipping; QLoRA through torchao NF4."),
        grad_ckpt=True, offload_activations=False, loss="chunked",
        loss_impls={"chunked": "torchtune", "standard": "torchtune_full"}, optimizer="adamw",
        adapter_dtype="bf16", qlora_adapter_dtype="bf16", qlora_prep="none", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=0.0,
        host_load="state_dict",
        sources={
            "host_load": "torchtune/training/checkpointing/_checkpointer.py:517 (0.6.1) load_checkpoint merges "
                         "every shard read by _utils.py:246-248 safe_torch_load (safe_open(device='cpu') and "
                         "get_tensor for every key: the whole checkpoint in CPU RAM) before the recipe's "
                         "model.load_state_dict",
            "grad_ckpt": "recipes/configs/llama3_1/8B_lora_single_device.yaml (0.6.1): "
                         "enable_activation_checkpointing: True",
            "offload_activations": "same config: enable_activation_offloading: False",
            "loss": "same config: loss _component_ torchtune.modules.loss.CEWithChunkedOutputLoss "
                    "(modules/loss/ce_chunked_output_loss.py: 8 chunks, logits.float() per chunk); "
                    "loss=torch.nn.CrossEntropyLoss gives the full-logits loss on fp32 logits (modules/transformer.py unembed: "
                    "self.output(h).float() when the output is not chunked)",
            "optimizer": "same config: torch.optim.AdamW with fused: True",
            "adapter_dtype": "same config: dtype: bf16 (the whole model, adapters included)",
            "qlora_adapter_dtype": "8B_qlora_single_device.yaml: dtype: bf16",
            "qlora_prep": "torchao NF4Tensor: block 64, scalers quantised per 256 blocks; norms stay bf16",
            "max_grad_norm": "same config: clip_grad_norm: null",
        },
        unavailable={"fused": N_("torchtune has no fused linear cross-entropy; choose 'chunked'")},
    ),
    Stack(
        config_format="litgpt",
        families=LITGPT_FAMILIES, backend_refusals={"cpu": PYTORCH_NO_CPU},
        no_layer_selection=N_("LitGPT's LoRA Config (litgpt/lora.py 0.5.13) has lora_query/key/value/projection/mlp/"
                              "head switches that apply to every block, no per-layer selection"),
        id="litgpt", label="LitGPT", version="litgpt 0.5.13 (finetune lora/full)",
        transformers_attention=False,
        summary=N_("LitGPT: bf16-true (weights and adapters in bf16, no autocast), cross-entropy on bf16 logits "
                "in chunks of 128, torch's default AdamW (foreach), bnb.nf4 without double quantisation, the "
                "16-bit checkpoint on the GPU before quantising."),
        grad_ckpt=False, offload_activations=False, loss="chunked",
        loss_impls={"chunked": "litgpt"}, optimizer="adamw_foreach",
        adapter_dtype="bf16", qlora_adapter_dtype="bf16", qlora_prep="none", nf4_double_quant=False,
        load_16bit_first=True, max_grad_norm=0.0,
        host_load="direct",
        sources={
            "host_load": "litgpt/finetune/lora.py:210, 236 (0.5.13): the model is built on the device and "
                         "utils.py:396-398 load_checkpoint copies lazy_load's tensors in one at a time",
            "grad_ckpt": "litgpt/finetune/lora.py (0.5.13): activation checkpointing only with FSDP on several "
                         "devices",
            "offload_activations": "litgpt 0.5.13 has no activation offloading in finetune",
            "loss": "litgpt/finetune/lora.py (0.5.13): model(input_ids, lm_head_chunk_size=128) then "
                    "chunked_cross_entropy (litgpt/utils.py) on bf16 logits",
            "optimizer": "litgpt/utils.py (0.5.13) instantiate_torch_optimizer('AdamW'): torch.optim.AdamW "
                         "without fused → foreach; with --quantize, instantiate_bnb_optimizer builds "
                         "bitsandbytes' PagedAdamW (32-bit)",
            "adapter_dtype": "precision bf16-true: adapters in bf16",
            "qlora_adapter_dtype": "precision bf16-true: adapters in bf16",
            "qlora_prep": "litgpt/plugins bnb precision: non-4-bit weights stay bf16",
            "max_grad_norm": "litgpt finetune: no gradient clipping by default",
            "model_code": "litgpt/model.py, litgpt/lora.py (0.5.13): LitGPT's own GPT, Block, CausalSelfAttention, "
                          "LLaMAMLP/GptNeoxMLP, RMSNorm and LoRAQKVLinear save other tensors than the "
                          "transformers modules (docs/formulas.md §3.6)",
            "lora_dropout": "litgpt/finetune/lora.py (0.5.13): setup(lora_dropout=0.05); every config_hub "
                            "lora.yaml uses 0.05 (gemma-2b 0.1, the same bytes): a bool mask and a copy per "
                            "LoRA input",
            "untied_head": "litgpt/finetune/lora.py, full.py (0.5.13): tie_embeddings is unsupported in finetune; "
                           "litgpt/scripts/convert_hf_checkpoint.py copies the embedding into lm_head.weight",
            "quantize_head": "litgpt/finetune/lora.py (0.5.13): BitsandbytesPrecision(quantize[4:], dtype) with no "
                             "ignore_modules; lightning/fabric/plugins/precision/bitsandbytes.py (2.6) "
                             "_convert_layers replaces every nn.Linear, lm_head included",
        },
        unavailable={"standard": N_("LitGPT always uses its chunked cross-entropy; choose 'chunked'"),
                     "fused": N_("LitGPT has no fused linear cross-entropy; choose 'chunked'")},
        qlora_optimizer="paged_adamw", model_code="litgpt", lora_dropout=0.05, untied_head=True,
        quantize_head=True,
    ),
    Stack(
        backend_refusals={"cpu": PYTORCH_NO_CPU},
        id="plain", label="Plain PyTorch loop", version="torch 2.x hand-written loop",
        summary=N_("A hand-written loop: model(input_ids, labels=labels).loss under bf16 autocast, loss.backward(), "
                "torch.optim.AdamW with its defaults (foreach), no checkpointing, the standard loss, the logits "
                "released before backward."),
        grad_ckpt=False, offload_activations=False, loss="standard",
        loss_impls={"standard": "hf"}, optimizer="adamw_foreach",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="none", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=0.0,
        host_load="direct",
        sources={
            "host_load": "the snippet (report/snippets/plain.py) loads with device_map='cuda': " + _HF_LOAD,
            "grad_ckpt": "nothing enables it in a plain loop",
            "offload_activations": "nothing enables it in a plain loop",
            "loss": "the model's own loss: transformers ForCausalLMLoss on fp32-upcast logits; the outputs "
                    "(logits) are not kept, so they are released before backward",
            "optimizer": "torch/optim/adamw.py: foreach is the CUDA default when fused is not requested",
            "adapter_dtype": _PEFT_ADAPTERS,
            "qlora_adapter_dtype": _PEFT_ADAPTERS,
            "qlora_prep": "nothing upcasts the non-4-bit weights in a plain loop",
            "max_grad_norm": "no clipping unless the loop calls clip_grad_norm_",
        },
        unavailable={"chunked": N_("a plain loop computes the model's own loss; choose 'standard'"),
                     "fused": N_("a plain loop computes the model's own loss; choose 'standard'")},
    ),
    Stack(
        config_format="llamafactory",
        trainers=("sft",), backend_refusals={"cpu": PYTORCH_NO_CPU},
        no_layer_selection=N_("LLaMA-Factory's lora_target names modules, which get adapters in every layer "
                              "(model/adapter.py:204-213, 0.9.5); its per-layer switch, freeze_trainable_layers, "
                              "trains whole layers without adapters (finetuning_type: freeze)"),
        trainers_refusal=N_("LLaMA-Factory runs its own {trainer} step, not TRL 1.16's: its DPO, ORPO, SimPO and KTO "
                            "trainers build the full-vocabulary logits, upcast them to fp32 and keep their log-softmax "
                            "(train/dpo/trainer.py:219-252, train/kto/trainer.py:179), its reward model is TRL's "
                            "value-head model, which upcasts the full logits too (train/rm/trainer.py:98), and it has "
                            "no GRPO stage; only stage sft (and pt, the same step) is modelled for this stack"),
        id="llamafactory", label="LLaMA-Factory", version=LLAMAFACTORY_VERSION,
        summary=N_("LLaMA-Factory's llamafactory-cli train (SFT): checkpointing on (reentrant), the Trainer's standard "
                "loss on fp32-upcast logits (enable_liger_kernel: fused), fused AdamW, LoRA rank 8 on every linear but "
                "the head, fp32 adapters; QLoRA quantises on load (NF4, double quantisation) with no fp32 upcast. Full "
                "fine-tuning casts the trained weights to fp32 under bf16 autocast unless pure_bf16 (choose "
                "'mixed' precision; 'bf16' is pure_bf16)."),
        grad_ckpt=True, offload_activations=False, loss="standard",
        loss_impls={"standard": "hf", "fused": "liger"}, optimizer="adamw",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="none", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=1.0,
        batch=1, seq_len=2048, lora_rank=8, lora_dropout=0.0, host_load="direct",
        sources={
            "host_load": f"{_LF}hparams/model_args.py:109-112 low_cpu_mem_usage=True and hparams/parser.py:517 "
                         "device_map={'': the current device}, kept by model/patcher.py:370-376 except under ZeRO-3 or "
                         "FSDP; model/loader.py:155 torch_dtype='auto' (the checkpoint's dtype): " + _HF_LOAD,
            "grad_ckpt": f"{_LF}hparams/model_args.py:145-152 disable_gradient_checkpointing=False, "
                         "use_reentrant_gc=True; model/patcher.py:413-420 and model/model_utils/checkpointing.py:164-178 "
                         "enable it on every trainable model (gradient_checkpointing_kwargs={'use_reentrant': True}); "
                         "checkpointing.py:80-103 checkpoints only the layers with trainable parameters",
            "offload_activations": f"{_LF}hparams/model_args.py:133-136 use_unsloth_gc=False; when true, "
                                   "model/model_utils/checkpointing.py:43-77 UnslothGradientCheckpointing moves each "
                                   "checkpointed layer's input to CPU RAM",
            "loss": f"{_LF}train/sft/trainer.py:150-162 CustomSeq2SeqTrainer.compute_loss = the Trainer's: the model's "
                    "ForCausalLMLoss (transformers 5.6 loss/loss_utils.py:45-67, logits.float()); "
                    "hparams/model_args.py:137-140 enable_liger_kernel=False, when true model/loader.py:142 and "
                    "model/model_utils/liger_kernel.py apply Liger with its fused linear cross-entropy for stage pt/sft",
            "optimizer": f"{_LF}train/trainer_utils.py:527-548 create_custom_optimizer builds none unless GaLore, "
                         "APOLLO, LoRA+, BAdam, Adam-mini or Muon is asked for, so transformers 5.6 training_args.py:"
                         "811-820 optim='adamw_torch_fused' (torch ≥ 2.8) applies",
            "adapter_dtype": f"{_LF}model/adapter.py:313-325 cast_trainable_params_to_fp32 (not under pure_bf16, BAdam "
                             "or ZeRO-3 without quantisation) and :286-288 cast the adapters to fp32; PEFT 0.18 "
                             "get_peft_model(autocast_adapter_dtype=True) keeps them fp32 in every case",
            "qlora_adapter_dtype": f"{_LF}model/adapter.py:313-325: a quantised model's trainable parameters are cast "
                                   "to fp32 (:286-288)",
            "qlora_prep": f"{_LF}: no prepare_model_for_kbit_training anywhere in src/llamafactory; embeddings, norms "
                          "and head stay in the checkpoint's dtype (model/loader.py:155 torch_dtype='auto'); "
                          "hparams/model_args.py:153-156 upcast_layernorm=False (true: the norms in fp32, "
                          "model/model_utils/checkpointing.py:151-155)",
            "nf4_double_quant": f"{_LF}hparams/model_args.py:287-294 quantization_type='nf4', double_quantization=True;"
                                " model/model_utils/quantization.py:171-179 BitsAndBytesConfig(load_in_4bit=True, "
                                "bnb_4bit_use_double_quant=..., bnb_4bit_quant_storage=compute dtype)",
            "load_16bit_first": f"{_LF}model/model_utils/quantization.py:166-192: quantization_config goes to "
                                "from_pretrained with device_map {'': current device}: quantised while loading",
            "max_grad_norm": "transformers 5.6 training_args.py:871-873 max_grad_norm=1.0 (LLaMA-Factory keeps it)",
            "batch": "transformers 5.6 training_args.py:782 per_device_train_batch_size=8 when a config leaves it out "
                     "(the importer's default); the stack's baseline is one example, like the other PyTorch stacks",
            "seq_len": f"{_LF}hparams/data_args.py:46-49 cutoff_len=2048 (:185-189: packing trains cutoff_len - 1)",
            "lora_rank": f"{_LF}hparams/finetuning_args.py:77-80 lora_rank=8; :81-90 lora_target='all': "
                         "model/adapter.py:205-206 find_all_linear_modules (model/model_utils/misc.py:28-52: every "
                         "Linear but lm_head, and not the vision tower while freeze_vision_tower)",
            "lora_dropout": f"{_LF}hparams/finetuning_args.py:73-76 lora_dropout=0.0",
            "quant_mode": f"{_LF}hparams/model_args.py:279-290 quantization_method='bnb', quantization_type='nf4'",
            "allocator_conf": f"{_LF}launcher.py:80-83: on several GPUs llamafactory-cli launches torchrun with "
                              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (OPTIM_TORCH, on by default); one GPU "
                              "runs in-process with PyTorch's defaults, which the estimate counts",
            "model_code": f"{_LF}model/loader.py:152-172: transformers' AutoModelForCausalLM (use_unsloth: Unsloth's "
                          "FastLanguageModel, model/model_utils/unsloth.py, which the unsloth stack prices)",
        },
        unavailable={"chunked": N_("LLaMA-Factory's SFT computes the Trainer's loss on the full logits (train/sft/"
                                   "trainer.py); choose 'standard' or 'fused' (enable_liger_kernel)")},
    ),
    Stack(
        config_format="swift",
        trainers=("sft",), backend_refusals={"cpu": PYTORCH_NO_CPU},
        no_layer_selection=N_("ms-swift's target_modules names modules, which get adapters in every layer "
                              "(swift/pipelines/train/tuner.py:92-112, 4.6.0); it picks layers only through a "
                              "target_regex, which the estimate does not read"),
        trainers_refusal=N_("ms-swift runs its own {trainer} step (swift rlhf), not TRL 1.16's: its DPO, KTO, ORPO, "
                            "SimPO, CPO, reward, PPO, GRPO and GKD trainers subclass TRL < 1.0 (requirements/"
                            "framework.txt) and build the full-vocabulary logits (swift/rlhf_trainers/dpo_trainer.py:"
                            "117-137, rlhf_mixin.py:169), where TRL 1.16 scores through its fused chunked head; only "
                            "swift sft is modelled for this stack"),
        id="swift", label="ms-swift", version=SWIFT_VERSION,
        summary=N_("ms-swift's swift sft: checkpointing on (reentrant unless plain DDP), the model's own loss on the "
                "logits of the labelled tokens (every token in the worst batch; use_liger_kernel: fused), fused AdamW, "
                "LoRA rank 8 on every linear but the head, fp32 adapters, the base in the checkpoint's dtype with "
                "autocast to it (no fp32 master weights); QLoRA (quant_method bnb, quant_bits 4) quantises on load "
                "with NF4 and double quantisation, no fp32 upcast. Unless set, gradient accumulation is ceil(16 / "
                "(batch × GPUs)) and LoRA dropout 0.05: set them here (the estimate counts accumulation as given and "
                "no dropout masks)."),
        grad_ckpt=True, offload_activations=False, loss="standard",
        loss_impls={"standard": "hf", "fused": "liger"}, optimizer="adamw",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="none", nf4_double_quant=True,
        load_16bit_first=False, max_grad_norm=1.0,
        batch=1, seq_len=2048, lora_rank=8, lora_dropout=0.05, host_load="direct",
        sources={
            "host_load": f"{_SW}model/register.py:635-637 device_map=None → model/utils.py:229-242 "
                         "get_default_device_map: 'cuda:<local rank>' when every process has one GPU (None under "
                         "ZeRO-3 or FSDP; 'auto', the model split over the GPUs, when a process sees several, "
                         "utils/env.py:64-73 is_mp): " + _HF_LOAD,
            "grad_ckpt": f"{_SW}trainers/arguments.py:135 gradient_checkpointing=True; trainers/mixin.py:970-980 "
                         "gradient_checkpointing_enable on the base model; :940-955 use_reentrant=False under plain "
                         "DDP, True otherwise (one GPU, DeepSpeed, FSDP): both keep each layer's input",
            "offload_activations": f"{_SW}: no activation offloading in swift sft (trainers/arguments.py:264-273 "
                                   "_init_callbacks: only FSDP's activation_cpu_offload, with an fsdp config)",
            "loss": f"{_SW}trainers/seq2seq_trainer.py:126-158 compute_loss → template/base.py:879-881 "
                    "model(**inputs): the model's ForCausalLMLoss (logits.float()); trainers/mixin.py:213-225 and "
                    ":1271-1293 keep only the labelled tokens' logits (logits_to_keep), every token when every token "
                    "is labelled (the worst batch the estimate prices); trainers/arguments.py:155 "
                    "use_liger_kernel=False (true: Liger's fused linear cross-entropy)",
            "optimizer": f"{_SW}trainers/arguments.py:170 optimizer=None → optimizers/base.py:51-53 the Trainer's "
                         "create_optimizer: transformers 5.19 training_args.py:804-811 optim='adamw_torch_fused' "
                         "(torch ≥ 2.8)",
            "adapter_dtype": f"{_SW}arguments/tuner_args.py:137 lora_dtype=None → tuners/peft.py:147-160 PEFT's "
                             "autocast_adapter_dtype=True: LoRA weights in fp32 (pipelines/train/tuner.py:404-407 "
                             "also casts fp16 trainable weights to fp32)",
            "qlora_adapter_dtype": f"{_SW}tuners/peft.py:147-160: fp32 adapters on a 4-bit base too",
            "qlora_prep": f"{_SW}: no prepare_model_for_kbit_training anywhere in swift/; the embeddings, norms and head "
                          "stay in the checkpoint's dtype (arguments/base_args/model_args.py:120-142)",
            "nf4_double_quant": f"{_SW}arguments/base_args/quant_args.py:41-42 bnb_4bit_quant_type='nf4', "
                                "bnb_4bit_use_double_quant=True (:61-68 BitsAndBytesConfig)",
            "load_16bit_first": f"{_SW}model/register.py:635-639: quantization_config goes to from_pretrained with "
                                "the device map: quantised while loading",
            "max_grad_norm": "transformers 5.19 training_args.py:864-866 max_grad_norm=1.0 (ms-swift keeps it)",
            "batch": f"{_SW}trainers/arguments.py:130 per_device_train_batch_size=1",
            "grad_accum": f"{_SW}trainers/arguments.py:132 gradient_accumulation_steps=None → :289-291 "
                          "max(1, ceil(16 / batch / world size)); the estimate takes the accumulation given (1 "
                          "unless set) and its snippet writes it",
            "seq_len": f"{_SW}arguments/base_args/template_args.py:130 max_length=None → base_args/base_args.py:"
                       "227-228 the model's max_model_len; batches are padded to their longest example, so the "
                       "stack's baseline is 2048 like the other PyTorch stacks'",
            "lora_rank": f"{_SW}arguments/tuner_args.py:133 lora_rank=8; :126 target_modules=['all-linear'] → "
                         "pipelines/train/tuner.py:92-107 find_all_linears (utils/transformers_utils.py:178-190: every "
                         "Linear but lm_head; a multimodal model's tower and aligner only when freeze_vit / "
                         "freeze_aligner are false, tuner_args.py:122-124)",
            "lora_dropout": f"{_SW}arguments/tuner_args.py:135 lora_dropout=0.05: PEFT's nn.Dropout keeps a bool mask "
                            "and hands lora_A a dropped copy of each adapted module's input (memory/hf/activations/"
                            "layers.py _linear_inputs)",
            "quant_mode": f"{_SW}arguments/base_args/quant_args.py:33-36 quant_method and quant_bits None (no "
                          "quantisation unless quant_method bnb, quant_bits 4), :41 nf4",
            "precision": f"{_SW}arguments/base_args/model_args.py:74 torch_dtype=None → model/model_meta.py:296 "
                         "the checkpoint's dtype (config.json), :130-142 bf16 (or fp16) autocast from it: a bf16 "
                         "checkpoint trains as 'bf16' (no fp32 master weights); torch_dtype float32 with bf16 is "
                         "'mixed'",
            "allocator_conf": f"{_SW}: swift sft sets no PYTORCH_CUDA_ALLOC_CONF (only rlhf_trainers/utils.py "
                              "toggles expandable segments the user set)",
            "model_code": f"{_SW}model/register.py: transformers' AutoModelForCausalLM through the model's loader "
                          "(tuner_backend unsloth: Unsloth's FastLanguageModel, which the unsloth stack prices)",
        },
        unavailable={"chunked": N_("ms-swift's SFT computes the model's own loss on the full logits of the labelled "
                                   "tokens (trainers/seq2seq_trainer.py); choose 'standard' or 'fused' "
                                   "(use_liger_kernel)")},
    ),
    Stack(
        config_format="mlx_lm",
        framework="mlx", trainers=("sft",), dora=True, full_trains_last_layers=True, quantizer="mlx", backend="metal",
        multi_gpu=False, mixed_precision=False,
        backend_refusals={"rocm": MLX_NO_ROCM},
        trainers_refusal=N_("mlx-lm trains supervised fine-tuning only (mlx_lm lora); the {trainer} trainer is TRL's: "
                            "choose a PyTorch stack for it"),
        id="mlx", label="MLX-LM", version="mlx 0.32.4, mlx-lm 0.32.2",
        transformers_attention=False, model_code="mlx",
        summary=N_("mlx_lm lora: LoRA on the last 16 blocks (rank 8, scale 20), batch 4, max length 2048, no "
                "checkpointing, Adam, fp32 adapters, one compiled step; training attention is unfused (s² scores "
                "per layer) and a QLoRA base is MLX-quantised (affine 4-bit, group 64)."),
        grad_ckpt=False, offload_activations=False, loss="standard",
        loss_impls={"standard": "mlx"}, optimizer="adam",
        adapter_dtype="fp32", qlora_adapter_dtype="fp32", qlora_prep="none", nf4_double_quant=False,
        load_16bit_first=False, max_grad_norm=0.0,
        batch=4, seq_len=2048, lora_rank=8, lora_layers=16, quant_mode="affine", lora_scale=20.0, lora_dropout=0.0,
        sources={
            "grad_ckpt": "mlx_lm/lora.py:73 (0.32.2): grad_checkpoint False; tuner/trainer.py:236-237 wraps the "
                         "block class's __call__ in mx.checkpoint when on",
            "offload_activations": "mlx-lm 0.32.2 has no activation offloading",
            "loss": "mlx_lm/tuner/trainer.py:88-101 default_loss: nn.losses.cross_entropy on the model-dtype logits "
                    "(mlx/nn/losses.py:98-108: mx.fast.cross_entropy on Metal/CUDA, the unfused path on the CPU)",
            "optimizer": "mlx_lm/lora.py:49 optimizer 'adam' (choices adam, adamw, muon, sgd, adafactor, :50-56), "
                         "built with no extra arguments (:288-303)",
            "adapter_dtype": "mlx_lm/tuner/lora.py:88-93: lora_a = mx.random.uniform, lora_b = mx.zeros in MLX's "
                             "default float32, whatever the base's dtype",
            "qlora_adapter_dtype": "mlx_lm/tuner/lora.py:88-93: fp32 adapters on a quantised base too",
            "qlora_prep": "mlx_lm/utils.py load(): the quantised checkpoint is rebuilt with nn.quantize from its "
                          "config; nothing is upcast",
            "max_grad_norm": "mlx_lm/tuner/trainer.py (0.32.2): no gradient clipping in the step (:239-261)",
            "batch": "mlx_lm/lora.py:60 batch_size 4",
            "seq_len": "mlx_lm/lora.py:71 max_seq_length 2048; tuner/trainer.py:158-161 pads each batch to "
                       "32·ceil(longest/32) ≤ max_seq_length",
            "lora_rank": "mlx_lm/lora.py:77 lora_parameters rank 8, dropout 0.0, scale 20.0",
            "lora_layers": "mlx_lm/lora.py:59 num_layers 16 (the last 16 blocks; more than the model has raises, "
                           ":234-238; -1 = all)",
            "quant_mode": "mlx/nn/layers/quantized.py:11-24 _defaults_for_mode: affine, group 64, 4 bits",
            "model_code": "mlx_lm/models/<family>.py and mlx_lm/tuner/{lora,dora,trainer}.py: MLX's lazy graph, "
                          "measured with calibration/mlx_trace.py (docs/formulas.md §12)",
            "lora_dropout": "mlx_lm/lora.py:77 dropout 0.0 (nn.Dropout(0) returns its input: no mask)",
        },
        unavailable={"chunked": N_("mlx-lm computes the full logits (tuner/trainer.py default_loss); choose "
                                   "'standard'"),
                     "fused": N_("mlx-lm has no fused linear cross-entropy; choose 'standard'")},
    ),
)}
DEFAULT_STACK = "trl"
STACK_IDS: tuple[str, ...] = tuple(STACKS)

# What a stack's own code does that is no user setting (shown on the How page with their sources).
STACK_FACTS: tuple[str, ...] = ("model_code", "lora_dropout", "untied_head", "quantize_head", "host_load",
                                "allocator_conf")
MLX_STACK = "mlx"  # the MLX-LM stack's id (the pages and tests that are about it name it)
UNIFIED_STACK = MLX_STACK  # the default on a unified-memory Apple device: mlx_lm lora is how people fine-tune on a Mac


def default_stack(unified: bool, trainer: str = "sft") -> str:
    """The stack a run gets when the user names none: MLX-LM (UNIFIED_STACK) for a trainer it has on a unified-memory
    Apple device, TRL otherwise (a preference/RL trainer is TRL's, priced as a PyTorch MPS run on a Mac)."""
    return UNIFIED_STACK if unified and trainer in STACKS[UNIFIED_STACK].trainers else DEFAULT_STACK

# TrainingSetup fields a stack fills when the user leaves them open.
STACK_FIELDS: tuple[str, ...] = ("grad_ckpt", "offload_activations", "loss", "optimizer", "adapter_dtype",
                                 "qlora_prep", "nf4_double_quant", "load_16bit_first", "max_grad_norm")
# The run's size a stack fills when the user leaves it open (the same mechanism; the trainer's own batch default wins
# for a preference/RL trainer: estimator.job.stack.default_batch).
STACK_SIZE_FIELDS: tuple[str, ...] = ("batch", "seq_len", "lora_rank", "lora_layers", "quant_mode")


def stacks_in_format(format_id: str) -> tuple[str, ...]:
    """The stacks whose config file is in this format (Stack.config_format), in the table's order: the first is the
    stack a file of that format is read for when nothing names another."""
    return tuple(s.id for s in STACKS.values() if s.config_format == format_id)


def get_stack(stack_id: str) -> Stack:
    """A stack by id; ValueError listing the choices otherwise."""
    if stack_id not in STACKS:
        raise ValueError(Text(N_("unknown stack '{stack}'; choose one of: {choices}"), stack=str(stack_id)[:40],
                              choices=", ".join(STACKS)))
    return STACKS[stack_id]


# Families whose transformers class cannot run SDPA (transformers 5.24): the default attention falls back to
# eager, and asking for "sdpa" explicitly raises. Family → the source line.
NO_SDPA_FAMILIES: dict[str, str] = {
    "gemma2": "modeling_gemma2.py Gemma2PreTrainedModel: _supports_sdpa = False (SDPA has no soft-capping)",
    "gpt_oss": "modeling_gpt_oss.py GptOssPreTrainedModel: _supports_sdpa = False (attention sinks)",
}
