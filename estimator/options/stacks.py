"""Training stacks as presets: what each framework does when the user does not say otherwise.

A stack fills every setting the user left open (checkpointing and its kind, the loss implementation, the
optimizer, adapter dtypes, QLoRA preparation, gradient clipping); the user can override each one, and the
resolved setup remembers which values came from the stack. Every value cites the framework's source file and
the version read. Pure data; the resolver is estimator/job/stack.py: no Streamlit, Plotly or torch."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_, Text
from .trainers import TRL_SERIES, TRL_VERSION


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
    # LoRA layers, estimator.memory.activations.litgpt) or "unsloth" (Unsloth's fused kernels,
    # estimator.memory.unsloth_model). LitGPT's and Unsloth's own decoders only; other architectures use "hf".
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
_HF_LOAD = ("transformers 5.24 modeling_utils.py:4557-4586 _load_pretrained_model: the safetensors shards are opened "
            "with safe_open(backend='mmap') and each tensor materialised on its device_map entry")

STACKS: dict[str, Stack] = {s.id: s for s in (
    Stack(
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
MLX_STACK = "mlx"


def default_stack(unified: bool, trainer: str = "sft") -> str:
    """The stack a run gets when the user names none: MLX-LM for supervised fine-tuning on a unified-memory Apple
    device (mlx_lm lora is how people fine-tune on a Mac), TRL otherwise (a preference/RL trainer is TRL's, priced
    as a PyTorch MPS run on a Mac)."""
    return MLX_STACK if unified and trainer == "sft" else DEFAULT_STACK

# TrainingSetup fields a stack fills when the user leaves them open.
STACK_FIELDS: tuple[str, ...] = ("grad_ckpt", "offload_activations", "loss", "optimizer", "adapter_dtype",
                                 "qlora_prep", "nf4_double_quant", "load_16bit_first", "max_grad_norm")
# The run's size a stack fills when the user leaves it open (the same mechanism; the trainer's own batch default wins
# for a preference/RL trainer: estimator.job.stack.default_batch).
STACK_SIZE_FIELDS: tuple[str, ...] = ("batch", "seq_len", "lora_rank", "lora_layers", "quant_mode")


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
