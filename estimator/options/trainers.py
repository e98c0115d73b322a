"""Preference and RL trainers (TRL 1.16.0): one description per trainer, GRPO's generation modes and TRL's
defaults (trl/trainer/*_config.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_

# The TRL release modelled (the newest; every trainer fact below cites its files). Code and messages read these
# names, never the number: TRL_VERSION in full ("TRL 1.16.0"), TRL_SERIES where a message names the release line.
TRL_RELEASE = "1.16.0"
TRL_VERSION = f"TRL {TRL_RELEASE}"
TRL_SERIES = "TRL " + ".".join(TRL_RELEASE.split(".")[:2])  # "TRL 1.16"

# GRPOConfig defaults (trl/trainer/grpo_config.py, TRL 1.16.0).
GRPO_NUM_GENERATIONS = 8  # num_generations=8
GRPO_MAX_COMPLETION_LENGTH = 512  # max_completion_length=512
VLLM_GPU_MEMORY_UTILIZATION = 0.3  # vllm_gpu_memory_utilization=0.3 (colocate mode)
# GRPOConfig 1.16 has no max_prompt_length: prompts are as long as the dataset makes them. The estimate's
# default prompt length is an assumption, shown to the user and changeable.
DEFAULT_PROMPT_LEN = 512
MIN_GENERATIONS = 2  # GRPO computes advantages within a group: grpo_trainer.py refuses num_generations < 2
MAX_GENERATIONS = 1024
MAX_BETA = 1e6  # beta: any finite number ≥ 0 below this (a bound against typos, not a TRL limit)
# The per-device batch (per_device_train_batch_size) a run gets when none is given. GRPO: 8, TRL's default
# (transformers TrainingArguments per_device_train_batch_size=8, which grpo_config.py keeps, TRL 1.16.0); it counts
# completions, and a smaller one could not hold num_generations=8 of them (the generation batch must be divisible
# by num_generations). The other trainers: 1, the calculator's and the CLI's smallest run (their configs inherit
# the same 8 from TrainingArguments, but an estimate starts from one example).
DEFAULT_BATCH = 1
GRPO_DEFAULT_BATCH = 8  # per_device_train_batch_size=8 (transformers training_args.py, kept by GRPOConfig)


@dataclass(frozen=True)
class TrainerOption:
    """One trainer as the estimate counts it, with the config class and the source of each fact."""

    id: str
    label: str
    config_class: str  # the TRL config class of the snippet
    trainer_class: str
    import_path: str  # where the classes are imported from
    sequences: int  # sequences per example in each training forward (2 = chosen + rejected concatenated)
    reference: str  # "always", "beta" (only when beta ≠ 0) or "none"
    head: str  # "fused" (TRL's chunked log-prob head), "logits" (full vocabulary logits) or "score" (1 output)
    generates: bool
    beta_default: float | None  # None: the trainer has no beta
    can_precompute: bool  # precompute_ref_log_probs exists
    min_batch: int
    summary: str
    formula: str  # the memory it adds, as the How page shows it
    source: str
    default_batch: int = DEFAULT_BATCH  # per_device_train_batch_size when none is given (DEFAULT_BATCH above)


TRAINERS: dict[str, TrainerOption] = {o.id: o for o in (
    TrainerOption(
        "sft", "SFT", "SFTConfig", "SFTTrainer", "trl", 1, "none", "fused", False, None, False, 1,
        N_("Supervised fine-tuning: one forward and backward on batch × max_length tokens."),
        N_("the SFT step (memory.estimate)"),
        f"trl/trainer/sft_trainer.py ({TRL_VERSION})"),
    TrainerOption(
        "dpo", "DPO", "DPOConfig", "DPOTrainer", "trl", 2, "always", "fused", False, 0.1, True, 1,
        N_("Chosen and rejected are concatenated into one batch (2 × batch sequences per forward); after the policy "
        "forward a no_grad reference forward (checkpointing off) scores the same batch through the fused head. Full "
        "fine-tuning keeps a frozen copy of the model; with PEFT the reference is the base with the adapter "
        "switched off (no copy); precompute_ref_log_probs scores the dataset once before training (no reference "
        "during training)."),
        N_("SFT(2 × batch) + reference copy (full FT) + reference forward on top of the policy's saved activations"),
        f"trl/trainer/dpo_trainer.py ({TRL_VERSION}): collator torch.cat of chosen and rejected (l. 349); "
        "_compute_loss: model(..., fused_lm_head=True), then torch.no_grad() + disable_gradient_checkpointing "
        "reference forward, use_adapter(...) for PEFT (l. 1285–1339); ref_model = None for PEFT or "
        "precompute_ref_log_probs (l. 908–914); dpo_config.py beta=0.1, max_length=1024"),
    TrainerOption(
        "orpo", "ORPO", "ORPOConfig", "ORPOTrainer", "trl.experimental.orpo", 2, "none", "logits", False, 0.1,
        False, 1,
        N_("Reference-free: chosen and rejected concatenated; the loss builds the full-vocabulary logits of both and "
        "a log-softmax (no fused head)."),
        N_("SFT(2 × batch) with full logits"),
        f"trl/experimental/orpo/orpo_trainer.py ({TRL_VERSION}): concatenated_forward, outputs.logits and "
        "selective_log_softmax; orpo_config.py beta=0.1, max_length=1024"),
    TrainerOption(
        "simpo", "SimPO (CPO)", "CPOConfig", "CPOTrainer", "trl.experimental.cpo", 2, "none", "logits", False, 0.1,
        False, 1,
        N_("CPOTrainer with loss_type='simpo': reference-free, chosen and rejected concatenated, full-vocabulary "
        "logits (no fused head)."),
        N_("SFT(2 × batch) with full logits"),
        f"trl/experimental/cpo/cpo_trainer.py ({TRL_VERSION}): concatenated_forward, outputs.logits, "
        "selective_log_softmax; cpo_config.py beta=0.1, loss_type='simpo' for SimPO, "
        "simpo_gamma=0.5, cpo_alpha=1.0"),
    TrainerOption(
        "kto", "KTO", "KTOConfig", "KTOTrainer", "trl", 1, "always", "fused", False, 0.1, True, 2,
        N_("Unpaired examples: a no_grad forward of mismatched 'KL' completions on the policy, the policy forward "
        "with gradients, then no_grad KL and example forwards on the reference (adapter off with PEFT). TRL needs "
        "a per-device batch > 1 (the KL completions are the batch's own, shifted by one)."),
        N_("SFT(batch) + reference copy (full FT) + reference forwards on top of the policy's saved activations"),
        f"trl/trainer/kto_trainer.py ({TRL_VERSION}): _compute_loss (l. 1370–1445), 'Actual (not effective) batch "
        "size must be > 1' (l. 844); kto_config.py beta=0.1, max_length=1024, loss_type='kto'"),
    TrainerOption(
        "grpo", "GRPO", "GRPOConfig", "GRPOTrainer", "trl", 1, "beta", "fused", True, 0.0, False, 1,
        N_("Online RL: num_generations completions per prompt are generated (transformers generate, vLLM colocated "
        "or a vLLM server), then trained on; per_device_train_batch_size counts completions, each prompt + "
        "completion long. beta = 0 (the default) means no reference model; with beta > 0 full fine-tuning loads "
        "a reference copy (PEFT switches the adapter off instead)."),
        N_("max(generation: weights + optimizer + KV cache or vLLM's reservation; training: SFT(batch, prompt + "
        "completion)) + reference copy (beta > 0, full FT)"),
        f"trl/trainer/grpo_trainer.py ({TRL_VERSION}): reference model only when beta ≠ 0 and not PEFT (l. 983–1003), "
        "unwrapped_model.generate under no_grad (l. 1860–1875), fused_lm_head=True (l. 1498); grpo_config.py "
        "num_generations=8, max_completion_length=512, beta=0.0, use_vllm=False, vllm_mode='colocate', "
        "vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=False; generation_batch_size must be "
        "divisible by num_generations, num_generations ≥ 2 (l. 1129–1141)", default_batch=GRPO_DEFAULT_BATCH),
    TrainerOption(
        "reward", N_("Reward model"), "RewardConfig", "RewardTrainer", "trl", 2, "none", "score", False, None, False,
        1,
        N_("AutoModelForSequenceClassification with one output: chosen and rejected padded into one batch (2 × batch "
        "sequences); the score head has hidden_size weights, so there are no vocabulary logits."),
        N_("SFT(2 × batch) without the vocabulary head and its loss"),
        f"trl/trainer/reward_trainer.py ({TRL_VERSION}): AutoModelForSequenceClassification(num_labels=1), "
        "compute_loss: torch.chunk(outputs.logits, 2) into chosen and rejected (l. 778–792); reward_config.py "
        "max_length=1024"),
)}
TRAINER_IDS = tuple(TRAINERS)


@dataclass(frozen=True)
class GenerationMode:
    """Where GRPO's completions are generated."""

    id: str
    label: str
    summary: str
    source: str


GENERATION_MODES: dict[str, GenerationMode] = {m.id: m for m in (
    GenerationMode("hf", N_("transformers generate (in the training process)"),
                   N_("The policy generates with a KV cache for every sequence of the local generation batch "
                   "(per_device_train_batch_size × steps_per_generation, = gradient accumulation by default)."),
                   f"trl/trainer/grpo_trainer.py ({TRL_VERSION}) _generate_single_turn: unwrapped_model.generate; "
                   "grpo_config.py steps_per_generation = gradient_accumulation_steps"),
    GenerationMode("vllm-colocate", N_("vLLM colocated (same GPU)"),
                   N_("vLLM runs inside the training process and reserves vllm_gpu_memory_utilization × the device's "
                   "memory for its weights and KV cache; with vllm_enable_sleep_mode it sleeps at level 2 after each "
                   "generation: its weights and KV cache (the sleep-mode pool) are discarded, not offloaded, "
                   "for the whole training step, and the training weights are pushed back before the next "
                   "generation. What vLLM allocates outside that pool (CUDA graphs, engine buffers) is not "
                   "counted."),
                   f"trl/generation/vllm_generation.py ({TRL_VERSION}): LLM(gpu_memory_utilization=..., "
                   "enable_sleep_mode=...), llm.sleep(level=2) after init and after each generate, "
                   "sync_weights: llm.wake_up(tags=['weights']) then load, wake_up(tags=['kv_cache']) before "
                   "generate; grpo_config.py vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=False"),
    GenerationMode("vllm-server", N_("vLLM server (other GPUs)"),
                   N_("Generation runs in a separate `trl vllm-serve` process on other GPUs: nothing on the training "
                   "device."),
                   f"trl/generation/vllm_client.py ({TRL_VERSION}); grpo_config.py vllm_mode='server'"),
)}
GENERATION_IDS = tuple(GENERATION_MODES)
