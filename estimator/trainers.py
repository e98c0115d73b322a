"""Preference and RL fine-tuning: one description per trainer and the memory each adds to a training step.

TRL 1.16.0 is modelled (the newest release; sources under trl/trainer/ and trl/experimental/, cited per fact).
A trainer changes three things about the SFT step that memory.estimate prices (docs/formulas.md §9):
- what one forward runs on: chosen + rejected concatenated (2 × batch sequences) for DPO, ORPO, SimPO and
  reward models; prompt + completion for GRPO;
- a reference model: a second frozen copy of the weights for full fine-tuning (none with PEFT, whose
  reference is the base with the adapter switched off; none with precompute_ref_log_probs), and a no_grad
  reference forward while the policy's saved activations are alive;
- generation (GRPO): transformers' generate with the KV cache of every sequence in flight, or vLLM colocated
  (it reserves vllm_gpu_memory_utilization of the device), or a vLLM server on other GPUs.
Pure Python: no Streamlit, Plotly or torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from . import activations as act
from .i18n import N_, Text, _, format_int
from .memory import (
    ALLOCATOR_SLACK,
    CUDA_CONTEXT_BYTES,
    CUDA_CONTEXT_HIGH,
    CUDA_CONTEXT_LOW,
    MODEL_ERROR_HIGH,
    MODEL_ERROR_LOW,
    NCCL_BYTES,
    DetailItem,
    Estimate,
    Phase,
)
from .memory import estimate as sft_estimate
from .model import ModelSpec
from .precision import FP32, compute_bytes, trainable_bytes, weight_bytes
from .training import MAX_BATCH, MAX_SEQ_LEN, TrainingSetup

TRL_VERSION = "TRL 1.16.0"

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


TRAINERS: dict[str, TrainerOption] = {o.id: o for o in (
    TrainerOption(
        "sft", "SFT", "SFTConfig", "SFTTrainer", "trl", 1, "none", "fused", False, None, False, 1,
        N_("Supervised fine-tuning: one forward and backward on batch × max_length tokens."),
        N_("the SFT step (memory.estimate)"),
        "trl/trainer/sft_trainer.py (TRL 1.16.0)"),
    TrainerOption(
        "dpo", "DPO", "DPOConfig", "DPOTrainer", "trl", 2, "always", "fused", False, 0.1, True, 1,
        N_("Chosen and rejected are concatenated into one batch (2 × batch sequences per forward); after the policy "
        "forward a no_grad reference forward (checkpointing off) scores the same batch through the fused head. Full "
        "fine-tuning keeps a frozen copy of the model; with PEFT the reference is the base with the adapter "
        "switched off (no copy); precompute_ref_log_probs scores the dataset once before training (no reference "
        "during training)."),
        N_("SFT(2 × batch) + reference copy (full FT) + reference forward on top of the policy's saved activations"),
        "trl/trainer/dpo_trainer.py (TRL 1.16.0): collator torch.cat of chosen and rejected (l. 349); "
        "_compute_loss: model(..., fused_lm_head=True), then torch.no_grad() + disable_gradient_checkpointing "
        "reference forward, use_adapter(...) for PEFT (l. 1285–1339); ref_model = None for PEFT or "
        "precompute_ref_log_probs (l. 908–914); dpo_config.py beta=0.1, max_length=1024"),
    TrainerOption(
        "orpo", "ORPO", "ORPOConfig", "ORPOTrainer", "trl.experimental.orpo", 2, "none", "logits", False, 0.1,
        False, 1,
        N_("Reference-free: chosen and rejected concatenated; the loss builds the full-vocabulary logits of both and "
        "a log-softmax (no fused head)."),
        N_("SFT(2 × batch) with full logits"),
        "trl/experimental/orpo/orpo_trainer.py (TRL 1.16.0): concatenated_forward, outputs.logits and "
        "selective_log_softmax; orpo_config.py beta=0.1, max_length=1024"),
    TrainerOption(
        "simpo", "SimPO (CPO)", "CPOConfig", "CPOTrainer", "trl.experimental.cpo", 2, "none", "logits", False, 0.1,
        False, 1,
        N_("CPOTrainer with loss_type='simpo': reference-free, chosen and rejected concatenated, full-vocabulary "
        "logits (no fused head)."),
        N_("SFT(2 × batch) with full logits"),
        "trl/experimental/cpo/cpo_trainer.py (TRL 1.16.0): concatenated_forward, outputs.logits, "
        "selective_log_softmax; cpo_config.py beta=0.1, loss_type='simpo' for SimPO, "
        "simpo_gamma=0.5, cpo_alpha=1.0"),
    TrainerOption(
        "kto", "KTO", "KTOConfig", "KTOTrainer", "trl", 1, "always", "fused", False, 0.1, True, 2,
        N_("Unpaired examples: a no_grad forward of mismatched 'KL' completions on the policy, the policy forward "
        "with gradients, then no_grad KL and example forwards on the reference (adapter off with PEFT). TRL needs "
        "a per-device batch > 1 (the KL completions are the batch's own, shifted by one)."),
        N_("SFT(batch) + reference copy (full FT) + reference forwards on top of the policy's saved activations"),
        "trl/trainer/kto_trainer.py (TRL 1.16.0): _compute_loss (l. 1370–1445), 'Actual (not effective) batch "
        "size must be > 1' (l. 844); kto_config.py beta=0.1, max_length=1024, loss_type='kto'"),
    TrainerOption(
        "grpo", "GRPO", "GRPOConfig", "GRPOTrainer", "trl", 1, "beta", "fused", True, 0.0, False, 1,
        N_("Online RL: num_generations completions per prompt are generated (transformers generate, vLLM colocated "
        "or a vLLM server), then trained on; per_device_train_batch_size counts completions, each prompt + "
        "completion long. beta = 0 (the default) means no reference model; with beta > 0 full fine-tuning loads "
        "a reference copy (PEFT switches the adapter off instead)."),
        N_("max(generation: weights + optimizer + KV cache or vLLM's reservation; training: SFT(batch, prompt + "
        "completion)) + reference copy (beta > 0, full FT)"),
        "trl/trainer/grpo_trainer.py (TRL 1.16.0): reference model only when beta ≠ 0 and not PEFT (l. 983–1003), "
        "unwrapped_model.generate under no_grad (l. 1860–1875), fused_lm_head=True (l. 1498); grpo_config.py "
        "num_generations=8, max_completion_length=512, beta=0.0, use_vllm=False, vllm_mode='colocate', "
        "vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=False; generation_batch_size must be "
        "divisible by num_generations, num_generations ≥ 2 (l. 1129–1141)"),
    TrainerOption(
        "reward", N_("Reward model"), "RewardConfig", "RewardTrainer", "trl", 2, "none", "score", False, None, False,
        1,
        N_("AutoModelForSequenceClassification with one output: chosen and rejected padded into one batch (2 × batch "
        "sequences); the score head has hidden_size weights, so there are no vocabulary logits."),
        N_("SFT(2 × batch) without the vocabulary head and its loss"),
        "trl/trainer/reward_trainer.py (TRL 1.16.0): AutoModelForSequenceClassification(num_labels=1), "
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
                   "trl/trainer/grpo_trainer.py (TRL 1.16.0) _generate_single_turn: unwrapped_model.generate; "
                   "grpo_config.py steps_per_generation = gradient_accumulation_steps"),
    GenerationMode("vllm-colocate", N_("vLLM colocated (same GPU)"),
                   N_("vLLM runs inside the training process and reserves vllm_gpu_memory_utilization × the device's "
                   "memory for its weights and KV cache; with vllm_enable_sleep_mode it sleeps at level 2 after each "
                   "generation: its weights and KV cache (the sleep-mode pool) are discarded, not offloaded, "
                   "for the whole training step, and the training weights are pushed back before the next "
                   "generation. What vLLM allocates outside that pool (CUDA graphs, engine buffers) is not "
                   "counted."),
                   "trl/generation/vllm_generation.py (TRL 1.16.0): LLM(gpu_memory_utilization=..., "
                   "enable_sleep_mode=...), llm.sleep(level=2) after init and after each generate, "
                   "sync_weights: llm.wake_up(tags=['weights']) then load, wake_up(tags=['kv_cache']) before "
                   "generate; grpo_config.py vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=False"),
    GenerationMode("vllm-server", N_("vLLM server (other GPUs)"),
                   N_("Generation runs in a separate `trl vllm-serve` process on other GPUs: nothing on the training "
                   "device."),
                   "trl/generation/vllm_client.py (TRL 1.16.0); grpo_config.py vllm_mode='server'"),
)}
GENERATION_IDS = tuple(GENERATION_MODES)


@dataclass(frozen=True)
class TrainerSetup:
    """The trainer and its options. None means "not given": the trainer's default applies, and an option the
    trainer cannot use is an error only when it was given."""

    trainer: str = "sft"
    beta: float | None = None
    precompute_ref: bool = False
    num_generations: int | None = None
    prompt_len: int | None = None
    completion_len: int | None = None
    generation: str | None = None
    vllm_gpu_util: float | None = None
    vllm_sleep: bool = False

    def __post_init__(self) -> None:
        if self.trainer not in TRAINERS:
            raise ValueError(Text(N_("{name} must be one of {choices}; got {value}"), name="trainer",
                                  choices=", ".join(TRAINER_IDS), value=repr(str(self.trainer)[:40])))
        opt = TRAINERS[self.trainer]
        if self.beta is not None:
            if opt.beta_default is None:
                raise ValueError(Text(N_("the {trainer} trainer has no beta"), trainer=Text(opt.label)))
            if isinstance(self.beta, bool) or not isinstance(self.beta, (int, float)) or not (
                    0 <= self.beta < MAX_BETA):
                raise ValueError(Text(N_("{name} must be a number ≥ 0, got {value}"), name="beta",
                                      value=repr(str(self.beta)[:20])))
        if self.precompute_ref and not opt.can_precompute:
            raise ValueError(Text(N_("the {trainer} trainer has no reference log-probs to precompute "
                                     "(precompute_ref_log_probs is a DPO/KTO option)"), trainer=Text(opt.label)))
        grpo_only = {"num_generations": self.num_generations, "prompt_len": self.prompt_len,
                     "completion_len": self.completion_len, "generation": self.generation,
                     "vllm_gpu_util": self.vllm_gpu_util}
        if not opt.generates:
            given = [k for k, v in grpo_only.items() if v is not None] + (["vllm_sleep"] if self.vllm_sleep else [])
            if given:
                raise ValueError(Text(N_("{option} is a GRPO option; the {trainer} trainer does not generate"),
                                      option=given[0], trainer=Text(opt.label)))
            return
        for key, value, low, high in (("num_generations", self.num_generations, MIN_GENERATIONS, MAX_GENERATIONS),
                                      ("prompt_len", self.prompt_len, 1, MAX_SEQ_LEN),
                                      ("completion_len", self.completion_len, 1, MAX_SEQ_LEN)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(Text(N_("{name} must be a whole number, got {value}"), name=key,
                                      value=repr(str(value)[:20])))
            if not low <= value <= high:
                if key == "num_generations" and value < MIN_GENERATIONS:
                    raise ValueError(Text(N_("{name} must be between {low} and {high}, got {value} (GRPO needs at "
                                             "least 2 completions per prompt to compute advantages)"), name=key,
                                          low=low, high=high, value=value))
                raise ValueError(Text(N_("{name} must be between {low} and {high}, got {value}"), name=key, low=low,
                                      high=high, value=value))
        if self.prompt_length + self.completion_length > MAX_SEQ_LEN:
            raise ValueError(Text(N_("prompt + completion must be at most {limit} tokens"), limit=MAX_SEQ_LEN))
        if self.generation is not None and self.generation not in GENERATION_MODES:
            raise ValueError(Text(N_("{name} must be one of {choices}; got {value}"), name="generation",
                                  choices=", ".join(GENERATION_IDS), value=repr(str(self.generation)[:40])))
        if self.vllm_gpu_util is not None:
            if self.generation_mode != "vllm-colocate":
                raise ValueError(Text(N_("vllm_gpu_memory_utilization applies to vLLM colocate mode only "
                                         "(generation vllm-colocate)")))
            if isinstance(self.vllm_gpu_util, bool) or not isinstance(self.vllm_gpu_util, (int, float)) or not (
                    0 < self.vllm_gpu_util < 1):
                raise ValueError(Text(N_("vllm_gpu_memory_utilization must be between 0 and 1 (exclusive), got "
                                         "{value}"), value=repr(str(self.vllm_gpu_util)[:20])))
        if self.vllm_sleep and self.generation_mode != "vllm-colocate":
            raise ValueError(Text(N_("vLLM sleep mode applies to vLLM colocate mode only")))

    @property
    def option(self) -> TrainerOption:
        return TRAINERS[self.trainer]

    @property
    def beta_value(self) -> float | None:
        return self.beta if self.beta is not None else self.option.beta_default

    @property
    def gens(self) -> int:
        return self.num_generations if self.num_generations is not None else GRPO_NUM_GENERATIONS

    @property
    def prompt_length(self) -> int:
        return self.prompt_len if self.prompt_len is not None else DEFAULT_PROMPT_LEN

    @property
    def completion_length(self) -> int:
        return self.completion_len if self.completion_len is not None else GRPO_MAX_COMPLETION_LENGTH

    @property
    def generation_mode(self) -> str:
        return self.generation if self.generation is not None else "hf"

    @property
    def vllm_util(self) -> float:
        return self.vllm_gpu_util if self.vllm_gpu_util is not None else VLLM_GPU_MEMORY_UTILIZATION

    def uses_reference(self) -> bool:
        """Does a reference model run during training (a copy or the adapter-off base)?"""
        opt = self.option
        if opt.reference == "always":
            return not self.precompute_ref
        if opt.reference == "beta":
            return bool(self.beta_value)
        return False


def generation_batch(setup: TrainingSetup) -> int:
    """GRPO's global generation batch: per_device_train_batch_size × processes × steps_per_generation
    (= gradient_accumulation_steps by default; trl/trainer/grpo_config.py __post_init__, TRL 1.16.0)."""
    return setup.batch * setup.gpus * setup.grad_accum


def check(setup: TrainingSetup, tr: TrainerSetup, strict: bool = True) -> None:
    """The checks TRL makes that depend on the batch and the stack. ValueError with a clear message.
    strict=False skips the batch-shape rules the memory does not depend on (for the solvers)."""
    opt = tr.option
    if strict and setup.batch < opt.min_batch:
        raise ValueError(Text(N_("{trainer} needs a per-device batch of at least {batch} (TRL: 'Actual (not "
                                 "effective) batch size must be > 1', kto_trainer.py)"), trainer=Text(opt.label),
                              batch=str(opt.min_batch)))
    if setup.batch * opt.sequences > MAX_BATCH:
        raise ValueError(Text(N_("{trainer} runs {n} × batch sequences per forward; batch must be at most {limit}"),
                              trainer=Text(opt.label), n=str(opt.sequences), limit=MAX_BATCH // opt.sequences))
    if opt.generates and strict:
        gb = generation_batch(setup)
        if gb % tr.gens:
            raise ValueError(Text(N_("GRPO needs the generation batch (batch {batch} × GPUs {gpus} × gradient "
                                     "accumulation {accum} = {total}) to be divisible by num_generations ({gens}); "
                                     "TRL raises the same (grpo_config.py)"), batch=str(setup.batch),
                                  gpus=str(setup.gpus), accum=str(setup.grad_accum), total=str(gb),
                                  gens=str(tr.gens)))
    if setup.stack == "trl" and opt.id != "sft" and "loss" not in setup.from_stack:
        wanted = trainer_loss(setup, tr)
        if wanted != setup.loss:
            why = (Text(N_("it always scores through the fused chunked head (fused_lm_head=True)"))
                   if opt.head == "fused" else Text(N_("it builds the full logits itself")))
            raise ValueError(Text(N_("TRL's {trainer_class} cannot use the '{loss}' loss: {why}; use '{wanted}' or "
                                     "leave the loss to the stack"), trainer_class=opt.trainer_class,
                                  loss=setup.loss, why=why, wanted=wanted))


def trainer_loss(setup: TrainingSetup, tr: TrainerSetup) -> str:
    """The loss kind the trainer runs. Under the TRL stack the trainer decides it: DPO, KTO and GRPO score
    through the fused chunked head (loss 'chunked'), ORPO and SimPO build full logits ('standard'). Other
    stacks (Unsloth patches TRL's trainers with its own losses) keep the stack's loss."""
    opt = tr.option
    if setup.stack != "trl" or opt.head == "score" or opt.id == "sft":
        return setup.loss  # SFT: the stack's (or the user's) loss
    return "standard" if opt.head == "logits" else "chunked"


def policy_setup(setup: TrainingSetup, tr: TrainerSetup) -> TrainingSetup:
    """The SFT-equivalent setup of the trainer's training forward: batch × sequences per example, GRPO's
    prompt + completion length, the trainer's loss."""
    opt = tr.option
    seq = tr.prompt_length + tr.completion_length if opt.generates else setup.seq_len
    return replace(setup, batch=setup.batch * opt.sequences, seq_len=seq, loss=trainer_loss(setup, tr))


def reward_spec(spec: ModelSpec) -> ModelSpec:
    """The sequence-classification model (transformers GenericForSequenceClassification): the vocabulary head is
    replaced by a [1, hidden] score head, so the spec's output head has one row (vocab_size 1, untied). The input
    embedding keeps its V × H parameters (and, for full fine-tuning, its dense gradient); an untied model loses
    its V × H lm_head. Traced: calibration/trainer_trace.py (reward rows)."""
    head = spec.vocab_size * spec.hidden_size
    removed = 0 if spec.tie_embeddings else head
    return replace(spec, vocab_size=1, tie_embeddings=False,
                   params_total=spec.params_total - removed + spec.hidden_size,
                   params_embedding=spec.params_embedding - removed + spec.hidden_size,
                   notes=spec.notes + ("Reward model: the output head is a 1-output score layer.",))


# ORPO / CPO (trl/experimental, TRL 1.16.0) build the logits themselves instead of the fused head. Over
# T = 2 × batch × length tokens (traced: calibration/trainer_trace.py): the [T, V] logits in the compute dtype
# c stay alive (the returned chosen/rejected slices keep them); selective_log_softmax saves each row's
# log-softmax and ORPO's cross-entropy on the chosen half saves its log-softmax (CPO's NLL term is off with
# cpo_alpha=0, pure SimPO): in fp32 under autocast (log_softmax autocasts to fp32), else in c. In backward the
# logits gradient (c·T·V) meets the logits, the chosen-half log-softmax and, for full fine-tuning, the head's
# weight gradient.
ORPO_NLL_SHARE = {"orpo": 0.5, "simpo": 0.0}  # the chosen half's cross-entropy log-softmax, × T·V


def reference_bytes(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> float:
    """The reference model's weights on this GPU: a full copy in the policy's load dtype for full fine-tuning
    (create_model_from_path with the policy's dtype); none with PEFT (adapter switched off) or when
    precomputed. ZeRO-3 shards it like the policy (prepare_deepspeed / prepare_fsdp)."""
    if setup.method != "full" or not tr.uses_reference():
        return 0.0
    copy = float(spec.params_total * weight_bytes(setup))
    if setup.sharding == "zero3" and setup.gpus > 1:
        copy /= setup.gpus
    return copy


def nograd_layer_per_token(spec: ModelSpec, setup: TrainingSetup) -> float:
    """Peak working set of one decoder layer in a no_grad forward, bytes per token: the residual input and
    output plus the larger of the attention block (normed input, q, k, v, attention output) and the MLP block
    (normed input, gate, up and their product). Nothing is saved for backward."""
    c = compute_bytes(setup)
    resid = FP32 if setup.precision in ("mixed", "fp32") else c
    h = spec.hidden_size
    attn = c * (h + 2 * spec.q_dim + 2 * spec.kv_dim)
    if spec.moe_layers:
        inter = max(spec.intermediate_size if spec.num_layers > spec.moe_layers else 0,
                    spec.moe_intermediate_size * max(spec.experts_per_token, 1))
    else:
        inter = spec.intermediate_size
    mlp = c * (h + (3 if spec.gated_mlp else 2) * inter)
    return 2 * resid * h + max(attn, mlp)


def scoring_forward_bytes(spec: ModelSpec, setup: TrainingSetup, tokens: int, fused: bool) -> float:
    """A no_grad forward that scores `tokens` tokens (a reference or old-policy forward): one layer's working
    set, one autocast copy of a layer's weights under mixed precision, and the head: TRL's fused head keeps
    the gathered hidden states and one 4096 × 32768 tile (trl/kernels/chunked_logprob.py); full logits
    otherwise (c·T·V)."""
    c = compute_bytes(setup)
    out = tokens * nograd_layer_per_token(spec, setup)
    if setup.precision == "mixed" and setup.method != "qlora":
        out += 2 * spec.layer_linear_params  # autocast bf16 copy of the layer being run
    if fused:
        out += c * tokens * spec.hidden_size + c * min(tokens, act.TRL_TOKEN_TILE) * min(
            spec.vocab_size, act.TRL_VOCAB_TILE) + 3 * FP32 * tokens
    else:
        out += c * tokens * spec.vocab_size
    return float(out)


def kv_cache_bytes(spec: ModelSpec, setup: TrainingSetup, sequences: int, length: int) -> float:
    """transformers DynamicCache at the end of generation: keys and values for every layer, KV head, head
    dimension and position of every sequence in flight, in the compute dtype (2 × L × n_kv × d × c per token)."""
    return float(2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * compute_bytes(setup) * sequences * length)


@dataclass(frozen=True)
class TrainerPhase(Phase):
    """A phase with the trainer's two components on top of the SFT ones."""

    reference: float = 0.0
    generation: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.reference + self.generation


@dataclass(frozen=True)
class TrainerEstimate(Estimate):
    """An estimate of a preference/RL step: components_bytes may also hold 'reference' and 'generation'."""

    trainer: TrainerSetup | None = None
    policy_setup: TrainingSetup | None = None


@lru_cache(maxsize=1024)  # pure in frozen dataclasses, like memory.estimate
def estimate_trainer(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup,
                     device_capacity: float | None = None, strict: bool = True) -> Estimate:
    """Peak per-GPU memory of one step of the trainer (docs/formulas.md §9). `device_capacity` (bytes, the
    device's total memory) is needed for vLLM colocate mode, which reserves a fraction of it. strict=False
    prices batches TRL would refuse (KTO batch 1, num_generations not dividing the batch): the solvers' use."""
    check(setup, tr, strict)
    opt = tr.option
    if opt.id == "sft":
        return sft_estimate(spec, setup)
    ps = policy_setup(setup, tr)
    pspec = reward_spec(spec) if opt.head == "score" else spec
    base = sft_estimate(pspec, ps)
    mode = tr.generation_mode if opt.generates else None
    if mode == "vllm-colocate" and not device_capacity:
        raise ValueError(Text(N_("vLLM colocate mode reserves a fraction of the device's memory: choose a device")))

    def d(component: str, label: str, value: float, formula: str) -> DetailItem:
        return DetailItem(component, label, float(value), formula)

    ref = reference_bytes(spec, setup, tr)
    ref_item = d("reference", N_("Reference model (frozen copy)"), ref, "policy load dtype × params")
    vllm = float(tr.vllm_util * device_capacity) if mode == "vllm-colocate" and device_capacity else 0.0
    vllm_item = d("generation", N_("vLLM reservation"), vllm,
                  f"vllm_gpu_memory_utilization {tr.vllm_util:g} × device memory")
    vllm_always = vllm if not tr.vllm_sleep else 0.0  # sleep mode (level 2) frees it during training

    dropped = ("Logits and loss (saved)", "Loss backward buffers") if opt.head == "score" else ()
    swap: dict[str, DetailItem] = {}
    if opt.head == "logits":
        c = compute_bytes(ps)
        tv = ps.tokens * spec.vocab_size
        sm = FP32 if ps.autocast else c  # log_softmax autocasts to fp32
        nll = ORPO_NLL_SHARE[opt.id]
        swap = {"Logits and loss (saved)": d(
            "activations", N_("Logits and log-softmaxes (saved)"), (c + sm * (1 + nll)) * tv,
            f"c·T·V logits + {sm} B × T·V row log-softmax" + (f" + {sm} B × T·V / 2 chosen-half cross-entropy"
                                                                if nll else ""))}
        dropped = ("Loss backward buffers",)

    def lift(p: Phase, extra_acts: tuple[DetailItem, ...] = (), drop: tuple[str, ...] = dropped,
             gen: float = vllm_always, name: str | None = None) -> TrainerPhase:
        items = [swap.get(x.label, x) for x in p.details if x.label not in drop] + list(extra_acts)
        acts = sum(x.bytes for x in items if x.component == "activations")
        if ref:
            items.append(ref_item)
        if gen:
            items.append(vllm_item if vllm else d("generation", N_("Generation"), gen, ""))
        return TrainerPhase(name or p.name, p.weights, p.gradients, p.optimizer, acts, tuple(items),
                            reference=ref, generation=gen)

    phases: list[TrainerPhase] = [lift(p) for p in base.phases]
    if opt.head == "score" and setup.method == "full" and setup.grad_accum == 1:
        # The reward model's input embedding (V × H, dense) gets its gradient last, after the first layer's
        # backward (reward_spec gives the spec a 1-row head, so memory.estimate cannot tell): take it out there.
        embed_grad = spec.vocab_size * spec.hidden_size * trainable_bytes(ps) / (
            setup.gpus if setup.sharding in ("zero2", "zero3") else 1)
        phases = [replace(p, gradients=p.gradients - embed_grad) if p.name.endswith("first layer") else p
                  for p in phases]
    if opt.head == "score" and setup.sharding == "zero3" and setup.gpus > 1:
        # ZeRO-3 gathers one FSDP unit at a time; memory._shard sizes the largest as max(layer, V × H) from the
        # spec's head, but reward_spec's head is 1 × H while the input embedding keeps its V × H: gather that.
        layer = spec.layer_linear_params
        gathered = (max(layer, spec.vocab_size * spec.hidden_size) - max(layer, spec.hidden_size)) * weight_bytes(ps)
        if gathered > 0:
            item = d("weights", "Input embedding gathered (ZeRO-3)", gathered,
                     "max(layer, V × H) − max(layer, H) unit, as memory._shard gathers for SFT")
            phases = [replace(p, weights=p.weights + gathered, details=p.details + (item,)) for p in phases]
    loss_bwd = base.phases[0]  # "loss backward": the policy's saved activations + the loss's backward buffers
    opt_step = next(p for p in base.phases if p.name == "optimizer step")
    training_tokens = ps.tokens
    fused = opt.head == "fused"

    if opt.head == "logits":
        c = compute_bytes(ps)
        tv = ps.tokens * spec.vocab_size
        head_grad = 0.0
        if setup.method == "full":
            head_grad = spec.vocab_size * spec.hidden_size * trainable_bytes(ps) / (
                setup.gpus if setup.sharding in ("zero2", "zero3") else 1)
        grad_phase = lift(loss_bwd, (d("activations", N_("Logits, their gradient, chosen-half log-softmax"),
                                       (2 + ORPO_NLL_SHARE[opt.id]) * c * tv,
                                       f"{2 + ORPO_NLL_SHARE[opt.id]:g} × c·T·V"),),
                          drop=("Loss backward buffers", "Logits and loss (saved)"), name=N_("backward, logits gradient"))
        phases.append(replace(grad_phase, gradients=grad_phase.gradients + head_grad, details=grad_phase.details + (
            (d("gradients", N_("Head weight gradient"), head_grad, "V × H"),) if head_grad else ())))
    if opt.reference == "always" and tr.uses_reference():
        # DPO/KTO: the reference forward runs after the policy forward, while the policy's saved activations
        # (checkpointed inputs, head input, the fused head's saved tensors) are alive (dpo_trainer.py l. 1299 →
        # 1327; kto_trainer.py KL + reference forwards). Its own working set is one layer and one head tile.
        ref_fwd = scoring_forward_bytes(spec, setup, training_tokens, fused)
        phases.append(lift(loss_bwd, (d("activations", N_("Reference forward (no_grad)"), ref_fwd,
                                         "T × one layer's no_grad working set + one head tile"),),
                           drop=dropped + ("Loss backward buffers",), name=N_("reference forward")))
    if opt.generates:
        # Generation happens at the start of a generation cycle, after the optimizer step and zero_grad
        # (set_to_none): weights and optimizer state are alive, gradients are not.
        step_temp = sum(x.bytes for x in opt_step.details if x.label == "Optimizer step temporaries")
        keep = tuple(x for x in opt_step.details if x.component in ("weights", "optimizer")
                     and x.label != "Optimizer step temporaries")
        weights = opt_step.weights
        if setup.sharding == "zero3" and setup.gpus > 1 and mode == "hf":
            # ds3_gather_for_generation=True (grpo_config.py): the whole model is gathered for generate.
            weights = float(sum(x.bytes for x in keep if x.component == "weights")) * setup.gpus
            keep = tuple(x for x in keep if x.component != "weights") + (
                d("weights", N_("Weights gathered for generation (ZeRO-3)"), weights, "all shards gathered"),)
        sequences = setup.batch * setup.grad_accum  # local generation batch (steps_per_generation = grad accum)
        length = tr.prompt_length + tr.completion_length
        items: list[DetailItem] = list(keep)
        gen = 0.0
        acts = 0.0
        if mode == "hf":
            # The cache holds every token fed to the model: the prompt and all completion tokens but the last
            # sampled one (real CPU generate: calibration/trainer_trace.py kv_check, exact).
            cached = max(length - 1, 1)
            kv = kv_cache_bytes(spec, setup, sequences, cached)
            gen = kv
            items.append(d("generation", f"KV cache ({sequences} sequences × {cached:,} tokens)", kv,
                           "2 × layers × KV heads × head dim × c × sequences × (prompt + completion − 1)"))
            # Prefill: a no_grad forward over every prompt token (one layer's working set), the cache's
            # torch.cat growth (one layer's K and V copied at a time), and last-position logits in c and fp32
            # plus the fp32 sampling probabilities (generate keeps only the last position's logits).
            prefill = sequences * tr.prompt_length * nograd_layer_per_token(spec, setup)
            grow = kv / spec.num_layers
            logits = sequences * spec.vocab_size * (compute_bytes(setup) + 2 * FP32)
            acts = prefill + grow + logits
            items.append(d("activations", N_("Prefill / decode working set"), acts,
                           "n × prompt × one no_grad layer + one layer's cache growth + last-token logits"))
        elif mode == "vllm-colocate":
            gen = vllm
            items.append(vllm_item)
        if ref:
            items.append(ref_item)
        gen_phase = TrainerPhase("generation", weights, 0.0, opt_step.optimizer - step_temp, acts, tuple(items),
                                 reference=ref, generation=gen)
        phases.append(gen_phase)
        if tr.uses_reference() or mode in ("vllm-colocate", "vllm-server"):
            # The reference forward (beta > 0) and, with vLLM, the old-policy log-prob forward (importance
            # sampling correction, default on) run under no_grad before the training forward, chunked by
            # per_device_train_batch_size: only their working set is on top of the model states.
            score = scoring_forward_bytes(spec, setup, training_tokens, fused)
            s_items = list(keep) + [d("activations", N_("Scoring forward (no_grad)"), score,
                                      "T × one layer's no_grad working set + one head tile")]
            if ref:
                s_items.append(ref_item)
            if vllm_always:
                s_items.append(vllm_item)
            phases.append(TrainerPhase("reference forward" if tr.uses_reference() else "old log-prob forward",
                                       weights if mode == "hf" else opt_step.weights, 0.0,
                                       opt_step.optimizer - step_temp, score, tuple(s_items),
                                       reference=ref, generation=vllm_always))

    peak = max(phases, key=lambda p: p.total)
    fixed = peak.generation if mode == "vllm-colocate" else 0.0  # vLLM's pool: no allocator slack on it
    tensor_peak = peak.total - fixed
    nccl = NCCL_BYTES if setup.gpus > 1 else 0
    ctx_bytes = CUDA_CONTEXT_BYTES + nccl
    slack = ALLOCATOR_SLACK * tensor_peak
    components = {"weights": peak.weights}
    if peak.reference:
        components["reference"] = peak.reference
    components.update(gradients=peak.gradients, optimizer=peak.optimizer, activations=peak.activations)
    if peak.generation:
        components["generation"] = peak.generation
    components["overhead"] = ctx_bytes + slack
    details = tuple(x for x in peak.details if x.bytes > 0) + (
        DetailItem("overhead", "CUDA context and workspaces", ctx_bytes, "0.3–1.0 GB (lazy module loading)"),
        DetailItem("overhead", "Allocator slack", slack, f"{ALLOCATOR_SLACK:.0%} of allocated (5–15 %)"),
    )
    low = tensor_peak * (1 - MODEL_ERROR_LOW) + CUDA_CONTEXT_LOW + nccl + fixed
    high = tensor_peak * (1 + MODEL_ERROR_HIGH) * (1 + ALLOCATOR_SLACK) + CUDA_CONTEXT_HIGH + nccl + fixed
    notes = [n for n in base.notes if not n.startswith("Reward model")] + list(trainer_notes(spec, setup, tr))
    return TrainerEstimate(
        model=spec, setup=setup, mode="detailed", params_total=pspec.params_total,
        params_trainable=base.params_trainable, components_bytes=components, details=details,
        total_bytes=peak.total + components["overhead"], low_bytes=low, high_bytes=high, peak_phase=peak.name,
        phases=tuple(phases), cpu_offload_bytes=base.cpu_offload_bytes, notes=tuple(notes),
        trainer=tr, policy_setup=ps,
    )


def trainer_notes(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> tuple[str, ...]:
    """What the user should know about this trainer's estimate, in plain words."""
    opt = tr.option
    out = [_("{trainer} as in {version} ({trainer_class}).").format(
        trainer=_(opt.label), version=TRL_VERSION, trainer_class=opt.trainer_class)]
    if opt.sequences == 2:
        out.append(_("Chosen and rejected run together: each forward sees {n} sequences.").format(n=2 * setup.batch))
    if opt.reference != "none":
        if not tr.uses_reference():
            out.append(_("No reference model during training (reference log-probs precomputed).") if tr.precompute_ref
                       else _("No reference model during training (beta = 0)."))
        elif setup.method == "full":
            out.append(_("Full fine-tuning keeps a frozen reference copy of the model."))
        else:
            out.append(_("The reference is the base model with the adapter switched off: no copy."))
    if opt.generates:
        mode = tr.generation_mode
        out.append(_("GRPO: {gens} generations per prompt, prompts of {prompt} + completions of {completion} tokens; "
                     "generation with {mode}.").format(
            gens=tr.gens, prompt=format_int(tr.prompt_length), completion=format_int(tr.completion_length),
            mode=_(GENERATION_MODES[mode].label)))
        if tr.prompt_len is None:
            out.append(_("Prompt length assumed {n} tokens (GRPOConfig has no prompt limit).").format(
                n=DEFAULT_PROMPT_LEN))
        if mode == "vllm-colocate":
            out.append((_("vLLM reserves {share} of the device while generating; sleep mode (level 2) discards its "
                          "weights and KV cache during training (vLLM's CUDA graphs and buffers outside its pool are "
                          "not counted).") if tr.vllm_sleep
                        else _("vLLM reserves {share} of the device for the whole run.")).format(
                share=f"{tr.vllm_util:g}"))
        if mode == "vllm-server":
            out.append(_("The vLLM server needs its own GPUs (not counted here)."))
    if opt.head == "score":
        out.append(_("Reward model: a 1-output score head, no vocabulary logits."))
    return tuple(out)


def fix_generations(setup: TrainingSetup, tr: TrainerSetup) -> tuple[TrainingSetup, TrainerSetup, str]:
    """For the app: when num_generations does not divide the generation batch, the closest setting TRL accepts
    (the largest divisor ≥ 2 of the generation batch, else a batch of num_generations) and a note saying so."""
    if not tr.option.generates:
        return setup, tr, ""
    gb = generation_batch(setup)
    if gb % tr.gens == 0:
        return setup, tr, ""
    divisors = [k for k in range(2, min(gb, tr.gens) + 1) if gb % k == 0]
    if divisors:
        fixed = replace(tr, num_generations=max(divisors))
        return setup, fixed, _("TRL needs the generation batch ({gb}) divisible by num_generations ({gens}); shown "
                               "with {fixed} generations.").format(gb=gb, gens=tr.gens, fixed=fixed.gens)
    batch = tr.gens * math.ceil(setup.batch / tr.gens)
    return replace(setup, batch=batch), tr, _(
        "TRL needs the generation batch ({gb}) divisible by num_generations ({gens}); shown with batch {batch}."
    ).format(gb=gb, gens=tr.gens, batch=batch)


def trainer_json(tr: TrainerSetup) -> dict[str, object]:
    """The effective trainer settings for the JSON echo."""
    opt = tr.option
    doc: dict[str, object] = {"trainer": opt.id, "trainer_version": TRL_VERSION, "config_class": opt.config_class,
                              "sequences_per_example": opt.sequences, "reference_model": tr.uses_reference()}
    if opt.beta_default is not None:
        doc["beta"] = tr.beta_value
    if opt.can_precompute:
        doc["precompute_ref_log_probs"] = tr.precompute_ref
    if opt.generates:
        doc.update(num_generations=tr.gens, prompt_len=tr.prompt_length, completion_len=tr.completion_length,
                   generation=tr.generation_mode)
        if tr.generation_mode == "vllm-colocate":
            doc.update(vllm_gpu_memory_utilization=tr.vllm_util, vllm_enable_sleep_mode=tr.vllm_sleep)
    return doc



def solver_estimate_fn(tr: TrainerSetup, device_capacity: float | None = None):
    """An estimate function for the solvers and remedies (advice.EstimateFn): the trainer's estimate without the
    batch-divisibility checks, since the memory does not depend on them (the solvers try every batch)."""

    def fn(spec: ModelSpec, setup: TrainingSetup) -> Estimate:
        return estimate_trainer(spec, setup, tr, device_capacity, strict=False)

    return fn


def all_remedies(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, device_capacity: float | None = None
                 ) -> tuple:
    """The seed's remedies priced for this trainer, then the trainer's own. GRPO's length is prompt +
    completion, so the seed's 'lower the max length' gives way to 'shorter completions'."""
    from .advice import remedies

    opt = tr.option
    out = []
    for r in remedies(spec, setup, solver_estimate_fn(tr, device_capacity)):
        if r.order == 1 and opt.generates:
            continue  # GRPO's length is prompt + completion: see "Shorter completions"
        if r.order == 2 and setup.batch // 2 < opt.min_batch:
            r = replace(r, change=_("{trainer} needs a batch of at least {n}").format(trainer=_(opt.label),
                                                                                       n=opt.min_batch),
                        saves_bytes=0.0,
                        new_total_bytes=r.new_total_bytes + r.saves_bytes, applicable=False)
        if r.order == 5 and setup.method == "full" and reference_bytes(spec, setup, tr):
            r = replace(r, title=_("Use LoRA: the reference becomes the adapter-off base (no copy)"))
        out.append(r)
    return tuple(out) + trainer_remedies(spec, setup, tr, device_capacity)


def max_completion_len(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, usable_bytes: float,
                       device_capacity: float | None = None) -> int | None:
    """GRPO: the longest max_completion_length that fits (memory never falls as it grows)."""
    from .advice import bisect_last

    limit = MAX_SEQ_LEN - tr.prompt_length
    if limit < 1:
        return None

    def total(c: int) -> float:
        return estimate_trainer(spec, setup, replace(tr, completion_len=c), device_capacity, strict=False).total_bytes

    return bisect_last(1, limit, total, usable_bytes, hints=(tr.completion_length,))


def trainer_remedies(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup,
                     device_capacity: float | None = None) -> tuple:
    """The remedies that apply to this trainer, each priced for this setup (advice.Remedy, orders 6–12):
    precomputed reference log-probs, fewer generations, shorter completions, vLLM sleep or
    server mode, a lower vllm_gpu_memory_utilization."""
    from .advice import Remedy

    fn = solver_estimate_fn(tr, device_capacity)
    base = fn(spec, setup).total_bytes
    out: list[Remedy] = []
    opt = tr.option

    def add(order: int, title: str, change: str, new_setup: TrainingSetup, new_tr: TrainerSetup, caveat: str) -> None:
        total = solver_estimate_fn(new_tr, device_capacity)(spec, new_setup).total_bytes
        out.append(Remedy(order, title, change, base - total, total, True, caveat))

    if opt.can_precompute and tr.uses_reference():
        add(6, _("Precompute the reference log-probs"), "precompute_ref_log_probs False → True", setup,
            replace(tr, precompute_ref=True),
            _("The reference scores the dataset once before training; it cannot follow sync_ref_model."))
    if opt.generates:
        if tr.gens >= 4 and setup.batch % 2 == 0:
            add(8, _("Fewer generations per prompt"),
                _("num_generations {before} → {after}, batch {batch} → {half} (same prompts per step)").format(
                    before=tr.gens, after=tr.gens // 2, batch=setup.batch, half=setup.batch // 2),
                replace(setup, batch=setup.batch // 2), replace(tr, num_generations=tr.gens // 2),
                _("Fewer completions per prompt give noisier advantages."))
        if tr.completion_length > 1:
            half = max(1, tr.completion_length // 2)
            add(9, _("Shorter completions"),
                f"max_completion_length {format_int(tr.completion_length)} → {format_int(half)}", setup,
                replace(tr, completion_len=half), _("Truncated completions get no reward for what they cut off."))
        mode = tr.generation_mode
        if mode == "vllm-colocate" and not tr.vllm_sleep:
            add(10, _("vLLM sleep mode"), "vllm_enable_sleep_mode False → True", setup, replace(tr, vllm_sleep=True),
                _("vLLM discards its weights and KV cache after each generation (sleep level 2); TRL pushes the "
                  "training weights back before the next one (slower steps)."))
        if mode == "vllm-colocate" and tr.vllm_util > 0.1:
            lower = round(max(0.1, tr.vllm_util - 0.1), 2)
            add(11, _("Lower vllm_gpu_memory_utilization"), f"vllm_gpu_memory_utilization {tr.vllm_util:g} → "
                f"{lower:g}", setup, replace(tr, vllm_gpu_util=lower),
                _("vLLM must still hold its weights and a KV cache for the generation batch."))
        if mode != "vllm-server":
            add(12, _("Generate on a vLLM server"),
                _("{mode} → vllm-server (trl vllm-serve on other GPUs)").format(mode=mode), setup,
                replace(tr, generation="vllm-server", vllm_gpu_util=None, vllm_sleep=False),
                _("Needs one or more extra GPUs for the server."))
    return tuple(out)
