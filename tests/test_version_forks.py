"""The version forks priced (issue 28): for each fork of estimator/options/versions.py FORKS, the same job on both sides
of it, with the magnitudes docs/versions.md gives (a test fails when the fork is not modelled: both sides would price
the same). The installed versions reach the runtimes through TrainingSetup.versions (job.stack.resolve_setup)."""

from __future__ import annotations

from functools import cache

import pytest

from estimator.job.stack import resolve_setup, with_versions
from estimator.job.trainer import TrainerSetup
from estimator.job.versions import default_versions, resolve_versions
from estimator.memory.forks import FORK_NOTE_SHARE, other_side_estimate, version_notes
from estimator.memory.price import estimate
from estimator.memory.runtimes import runtime_for
from estimator.memory.unsloth.kernels import mlp_backward_tensors
from estimator.memory.unsloth.model import published_setup, published_tables_path, unsloth_path
from estimator.memory.unsloth.step import estimate_for_path
from estimator.models.presets import load_preset
from estimator.options.versions import FORKS, MOE_UNFUSED_IN_4, get_fork

# The forks that change what a training config implies (the precision of a config that names no dtype or bf16), not
# what a given setup keeps: the config readers' side (docs/versions.md), not the runtimes'.
CONFIG_ONLY = {"transformers_dtype_auto", "trl_bf16_default", "trl_model_dtype_auto", "trl_model_dtype_float32"}


@cache
def model(preset: str):
    return load_preset(preset)


def gb(preset: str, setup, **kw) -> float:
    """The estimate in GB, one decimal (what the CLI and the docs show)."""
    return round(estimate(model(preset), setup, **kw).total_bytes / 1e9, 1)


def setup(stack: str, *pins: str, trainer: str = "sft", **kw):
    return resolve_setup(stack, trainer, pins=pins, **kw) if pins else resolve_setup(stack, trainer, **kw)


# ---- the plumbing ----------------------------------------------------------------------------------------------------

def test_no_versions_is_the_newest_side_of_every_fork():
    s = resolve_setup("trl", method="qlora")
    assert s.versions is None and not any(s.older(f) for f in FORKS)
    at_newest = resolve_setup("trl", method="qlora", pins=("trl==1.16.0",))
    assert at_newest.versions is not None and not any(at_newest.older(f) for f in FORKS)
    assert estimate(model("llama-3.1-8b"), at_newest).total_bytes == estimate(model("llama-3.1-8b"), s).total_bytes


def test_a_fork_of_another_stack_never_applies():
    # the Trainer stack does not run TRL's SFTTrainer: TRL's forks are not its (Fork.stacks), whatever is installed
    s = resolve_setup("trainer", pins=("transformers==4.57.6",))
    assert not s.older("trl_sft_chunked_nll_default") and s.older("transformers_fused_moe_experts")
    assert not resolve_setup("litgpt", pins=("torch==2.5.1",)).older("transformers_fused_moe_experts")


def test_versions_survive_with_method_and_the_stack_defaults_follow_them():
    s = resolve_setup("trl", method="lora", pins=("trl==0.21.0",))
    assert (s.grad_ckpt, s.loss, "grad_ckpt" in s.from_stack) == (False, "standard", True)
    from estimator.job.stack import with_method

    q = with_method(s, "qlora")
    assert q.versions == s.versions and q.qlora_prep == "peft"  # TRL < 0.22 called PEFT's k-bit preparation
    assert with_versions(q, None).qlora_prep == "none"  # the newest: no preparation
    mine = resolve_setup("trl", method="lora", grad_ckpt=True, pins=("trl==0.21.0",))
    assert mine.grad_ckpt and "grad_ckpt" not in mine.from_stack  # the user's own choice is kept


def test_versions_of_another_stack_are_refused_with_one_line():
    with pytest.raises(ValueError) as exc:
        resolve_setup("unsloth", versions=default_versions("trl"))
    assert str(exc.value) == "the installed versions were read for the TRL stack; read them again for the Unsloth stack"
    with pytest.raises(TypeError):  # two inputs for one: a caller's mistake
        resolve_setup("trl", versions=default_versions("trl"), pins=("trl==1.16.0",))
    text = resolve_setup("trl", installed="trl==0.21.0\n")
    assert text.versions.found == ("trl",) and not text.grad_ckpt


def test_every_runtime_fork_has_a_pricing_test():
    tested = {name.removeprefix("test_fork_").split("__")[0] for name in globals() if name.startswith("test_fork_")}
    assert set(FORKS) - CONFIG_ONLY <= tested, sorted(set(FORKS) - CONFIG_ONLY - tested)
    assert CONFIG_ONLY <= set(FORKS)


# ---- transformers ----------------------------------------------------------------------------------------------------

def test_fork_transformers_fused_moe_experts():
    """Mixtral-8x7B QLoRA 1 × 2,048: 4.x quantises the per-expert nn.Linear experts (and wraps each with LoRA)."""
    assert gb("mixtral-8x7b", setup("trl", method="qlora")) == 103.5
    # −67 % (TRL leaves NF4 double quantisation off: use_bnb_nested_quant=False; LLaMA-Factory turns it on)
    assert gb("mixtral-8x7b", setup("trl", "transformers==4.57.6", method="qlora")) == 34.5
    assert gb("mixtral-8x7b", setup("trainer", method="qlora")) == 329.2  # PEFT's fp32 upcast of the experts
    assert gb("mixtral-8x7b", setup("trainer", "transformers==4.57.6", method="qlora")) == 162.5
    assert gb("mixtral-8x7b", setup("llamafactory", "transformers==4.57.6", method="qlora")) == 32.3
    assert gb("mixtral-8x7b", setup("trl", "transformers==5.0.0", method="qlora")) == 103.5  # 5.0 is the new side
    # gpt-oss had fused 3-D experts in 4.x already: nothing moves
    assert gb("gpt-oss-20b", setup("trl", "transformers==4.57.6", method="qlora")) == gb(
        "gpt-oss-20b", setup("trl", method="qlora")) == 46.2
    assert "gpt_oss" not in MOE_UNFUSED_IN_4


def test_fork_transformers_fused_moe_experts__lora_per_expert():
    """LoRA on 4.x: r·(in + out) per expert nn.Linear, instead of PEFT 0.21's fused gate_up wrap (rank 2r)."""
    q = model("qwen3-30b-a3b")
    new, old = setup("trl", method="lora"), setup("trl", "transformers==4.57.6", method="lora")
    r, i, e, layers = 16, q.moe_intermediate_size, q.num_experts, q.moe_layers
    fused_extra = r * i * 2 * e * layers  # the gate and up halves' dense B rows of the fused wrap
    assert runtime_for(new).lora_params(q, new) - runtime_for(old).lora_params(q, old) == fused_extra
    assert runtime_for(old).lora_params(q, old) == 845_512_704


def test_fork_transformers_loss_no_logits_copy():
    """Qwen2.5-0.5B LoRA on the Trainer, 8 × 1,024: the shifted fp32 copy of < 4.49 at the cross-entropy call."""
    new = estimate(model("qwen2.5-0.5b"), setup("trainer", method="lora", batch=8, seq_len=1024))
    old = estimate(model("qwen2.5-0.5b"), setup("trainer", "transformers==4.48.3", method="lora", batch=8,
                                                  seq_len=1024))
    tv = 8 * 1024 * model("qwen2.5-0.5b").vocab_size
    assert old.tensor_bytes - new.tensor_bytes == pytest.approx(2 * tv)  # 14·T·V at the call against 12·T·V
    assert (round(new.total_bytes / 1e9, 1), round(old.total_bytes / 1e9, 1)) == (30.0, 32.6)
    assert gb("qwen2.5-0.5b", setup("trainer", "transformers==4.49.0", method="lora", batch=8, seq_len=1024)) == 30.0
    fp32 = dict(method="full", precision="fp32", batch=2, seq_len=512)  # fp32 logits: .float() copies nothing
    assert gb("qwen2.5-0.5b", setup("trainer", "transformers==4.48.3", **fp32)) == gb(
        "qwen2.5-0.5b", setup("trainer", **fp32))


def test_fork_transformers_fused_adamw_default():
    """Llama-3.2-1B full fine-tuning on the Trainer, 1 × 1,024: foreach AdamW's parameter-sized temporary."""
    kw = dict(method="full", seq_len=1024)
    assert (setup("trainer", **kw).optimizer, gb("llama-3.2-1b", setup("trainer", **kw))) == ("adamw", 12.0)
    old = setup("trainer", "transformers==4.53.3", **kw)
    assert (old.optimizer, gb("llama-3.2-1b", old)) == ("adamw_foreach", 13.5)  # +12.4 %
    assert setup("trl", "transformers==4.53.3", **kw).optimizer == "adamw_foreach"
    # 4.54's fused default needs torch 2.8 too
    assert setup("trainer", "transformers==4.54.0", "torch==2.7.1", **kw).optimizer == "adamw_foreach"
    assert setup("trainer", "transformers==4.54.0", "torch==2.8.0", **kw).optimizer == "adamw"
    assert setup("trainer", "transformers==4.53.3", optimizer="adamw", **kw).optimizer == "adamw"  # given: kept


def test_fork_transformers_model_level_rope():
    """Unsloth on transformers < 4.48: a RoPE cache per attention layer (models/_utils.py patch_llama_rope_scaling)."""
    L8 = model("llama-3.1-8b")
    s = setup("unsloth", "transformers==4.47.1", method="qlora", seq_len=8192)
    assert unsloth_path(L8, s).layer_rope_caches and not unsloth_path(L8, with_versions(s, None)).layer_rope_caches
    caches = 32 * 2 * 32768 * 128 * 2  # 32 layers × cos and sin × 32,768 rows × head_dim 128 × bf16
    new, old = estimate(L8, with_versions(s, None)), estimate(L8, s)
    assert old.tensor_bytes - new.tensor_bytes == pytest.approx(caches + 2 * 32768 * 128 * 2 - 2 * 131072 * 128 * 2)


# ---- TRL -------------------------------------------------------------------------------------------------------------

def test_fork_trl_gradient_checkpointing_default():
    """Llama-3.1-8B LoRA on TRL, 1 × 2,048 (the loss held at TRL's chunked one): 19.2 GB on, 33.2 GB off."""
    assert gb("llama-3.1-8b", setup("trl", loss="chunked")) == 19.2
    old = setup("trl", "trl==0.21.0", loss="chunked")
    assert (old.grad_ckpt, gb("llama-3.1-8b", old)) == (False, 33.2)  # +72.7 %
    assert setup("trl", "trl==0.22.0").grad_ckpt


def test_fork_trl_kbit_prep_norms_only__and_no_kbit_prep():
    """Llama-3.1-8B QLoRA on TRL, 1 × 2,048: 'peft' 11.3 GB (< 0.22), 'norms' 9.1 GB (0.22–0.25), 'none' 8.3 GB."""
    kw = dict(method="qlora", loss="chunked", grad_ckpt=True)
    for pin, prep, total in (("trl==0.21.0", "peft", 11.3), ("trl==0.25.1", "norms", 9.1), ("trl==0.26.0", "none", 8.3)):
        s = setup("trl", pin, **kw)
        assert (s.qlora_prep, gb("llama-3.1-8b", s)) == (prep, total), pin
    assert setup("trl", "trl==0.21.0", trainer="grpo", **kw).qlora_prep == "peft"


def test_fork_trl_no_kbit_prep():
    assert setup("trl", "trl==0.25.1", method="qlora").qlora_prep == "norms"
    assert setup("trl", "trl==0.26.0", method="qlora").qlora_prep == "none"


def test_fork_trl_dpo_no_kbit_prep__and_kto():
    assert setup("trl", "trl==0.28.0", trainer="dpo", method="qlora").qlora_prep == "peft"
    assert setup("trl", "trl==0.29.0", trainer="dpo", method="qlora").qlora_prep == "none"
    assert setup("trl", "trl==0.25.1", trainer="dpo", method="qlora").qlora_prep == "peft"  # not TRL's norms-only


def test_fork_trl_kto_no_kbit_prep():
    assert setup("trl", "trl==1.3.0", trainer="kto", method="qlora").qlora_prep == "peft"
    assert setup("trl", "trl==1.4.0", trainer="kto", method="qlora").qlora_prep == "none"
    assert setup("trl", "trl==1.3.0", trainer="sft", method="qlora").qlora_prep == "none"


def _dpo(*pins: str, **kw) -> float:
    kw = {"method": "full", "precision": "fp32", "batch": 8, "seq_len": 1024, "grad_ckpt": False, **kw}
    return gb("qwen2.5-0.5b", setup("trl", *pins, trainer="dpo", **kw), trainer=TrainerSetup("dpo"))


def test_fork_trl_fused_logprob_head():
    """Qwen2.5-0.5B DPO, full fine-tuning in fp32, 8 × 1,024, no checkpointing (TRL 0.16's defaults): 55.2 GB with
    today's fused head; the 1.6–1.14 layout keeps the logits and their log-softmax."""
    assert _dpo() == _dpo("trl==1.15.0") == 55.2
    assert _dpo("trl==1.14.0") == _dpo("trl==1.6.0") == 86.0
    # bf16 with checkpointing (TRL's defaults today): 7.0 GB → 21.8 GB
    assert _dpo(precision="bf16", grad_ckpt=True) == 7.0 and _dpo("trl==1.14.0", precision="bf16", grad_ckpt=True) == 21.8
    # KTO and GRPO built their logits too (GRPO over the completion tokens only)
    for trainer, new, old in (("kto", 2.9, 12.8), ("grpo", 2.9, 7.3)):
        kw = dict(method="lora", batch=8, seq_len=None if trainer == "grpo" else 1024)
        assert gb("qwen2.5-0.5b", setup("trl", trainer=trainer, **kw), trainer=TrainerSetup(trainer)) == new
        assert gb("qwen2.5-0.5b", setup("trl", "trl==1.14.0", trainer=trainer, **kw),
                  trainer=TrainerSetup(trainer)) == old


def test_fork_trl_dpo_rewrite():
    """Before 0.29 the logits were freed after selective_log_softmax: fp32 keeps the logits (4·T·V) and its backward
    makes two fp32 gradients: out of memory on an 80 GB card (the real run of issue 28)."""
    assert _dpo("trl==0.16.0") == 85.3 and _dpo("trl==0.28.0") == 85.3
    e = estimate(model("qwen2.5-0.5b"), setup("trl", "trl==0.16.0", trainer="dpo", method="full", precision="fp32",
                                              batch=8, seq_len=1024, grad_ckpt=False), trainer=TrainerSetup("dpo"))
    assert e.total_bytes > 80e9 and e.peak_phase == "backward, logits gradient"


def test_fork_trl_dpo_no_contiguous():
    """0.29–1.5: the logits, a contiguous shifted copy and the log-softmax kept; the reference makes its copy too."""
    assert _dpo("trl==0.29.0") == _dpo("trl==1.5.1") == 106.9
    assert _dpo("trl==1.6.0") == 86.0  # 2 × 4·T·V less (2 × 9.96 GB at the reference forward)


def test_fork_trl_sft_chunked_nll_default():
    """Llama-3.1-8B LoRA on TRL, 1 × 4,096: 20.5 GB chunked, 25.7 GB on full logits (< 1.7)."""
    assert gb("llama-3.1-8b", setup("trl", seq_len=4096)) == 20.5
    old = setup("trl", "trl==1.6.0", seq_len=4096)
    assert (old.loss, gb("llama-3.1-8b", old)) == ("standard", 25.7)  # +25 %
    assert setup("trl", "trl==1.7.0").loss == "chunked"


# ---- Unsloth ---------------------------------------------------------------------------------------------------------

def _unsloth(*pins: str, seq_len: int = 8192):
    return setup("unsloth", *pins, method="qlora", lora_rank=32, seq_len=seq_len)


def test_fork_unsloth_dequant_scratch():
    L8 = model("llama-3.1-8b")
    assert unsloth_path(L8, _unsloth("unsloth==2024.12.12")).fresh_dequant
    assert not unsloth_path(L8, _unsloth("unsloth==2025.2.2")).fresh_dequant
    assert unsloth_path(L8, _unsloth("unsloth==2025.2.2")).lora_out_of_place  # the next piece came later
    assert gb("llama-3.1-8b", _unsloth("unsloth==2025.2.2")) == 8.9 and gb("llama-3.1-8b", _unsloth()) == 8.8


def test_fork_unsloth_lora_inplace():
    L8 = model("llama-3.1-8b")
    assert unsloth_path(L8, _unsloth("unsloth==2025.2.15")).lora_out_of_place
    assert not unsloth_path(L8, _unsloth("unsloth==2025.3.1")).lora_out_of_place
    old_path, new_path = (unsloth_path(L8, _unsloth(p)) for p in ("unsloth==2025.2.15", "unsloth==2025.3.1"))
    old_mlp, new_mlp = (mlp_backward_tensors(L8, p)[0][0] for p in (old_path, new_path))
    assert old_mlp == (2 * 14336, 2 * 14336, 2 * 32) and new_mlp == (2 * 14336, 2 * 32, 2 * 32)  # one c·T·i more
    old, new = (estimate(L8, _unsloth(p)) for p in ("unsloth==2025.2.15", "unsloth==2025.3.1"))
    assert old.tensor_bytes - new.tensor_bytes == 116_916_224  # the layer backward's peak, up to its attention's


def test_fork_unsloth_fused_ce():
    """The whole 2024 path against today's (Llama-3.1-8B QLoRA r16, batch 1): 8.16 vs 7.30 GB at 2,048 tokens
    (+11.8 %), 8.87 vs 8.41 GB at 8,192 (+5.5 %); Cut Cross-Entropy alone before 2025.8.5."""
    L8 = model("llama-3.1-8b")
    for seq, old, new in ((2048, 8.16, 7.30), (8192, 8.87, 8.41)):
        s = resolve_setup("unsloth", method="qlora", seq_len=seq)
        assert round(estimate(L8, published_setup(s)).total_bytes / 1e9, 2) == old
        assert round(estimate(L8, s).total_bytes / 1e9, 2) == new
    s = resolve_setup("unsloth", method="qlora", seq_len=2048, pins=("unsloth==2025.8.4",))
    assert unsloth_path(L8, s).cut_cross_entropy and not unsloth_path(L8, with_versions(s, None)).cut_cross_entropy
    loss = lambda e: next(p for p in e.phases if p.key in ("loss", "loss_backward"))  # noqa: E731
    assert loss(estimate(L8, s)).key == "loss_backward" and loss(estimate(L8, with_versions(s, None))).key == "loss"


def test_fork_unsloth_zoo_pinned_offload():
    L8 = model("llama-3.1-8b")
    old = _unsloth("unsloth-zoo==2024.12.7")
    assert unsloth_path(L8, old).checkpointing == "reload" and unsloth_path(L8, _unsloth()).checkpointing == "offload"
    assert gb("llama-3.1-8b", old) == 8.8 and estimate(L8, old).tensor_bytes < estimate(L8, _unsloth()).tensor_bytes


def test_fork_unsloth_offload_embedding_auto():
    """Llama-3.1-8B QLoRA 1 × 2,048 on an 8 GB card: from 2026.10.1 Unsloth's fast Llama path moves the frozen input
    embedding (1.05 GB) to CPU RAM when the card is tight; before it the embedding stayed on the GPU."""
    from estimator.options.devices import get_device

    card = get_device("rtx-4060").capacity_bytes
    job = dict(method="qlora", batch=1, seq_len=2048)
    assert gb("llama-3.1-8b", setup("unsloth", **job), device_capacity=card) == 6.3
    assert gb("llama-3.1-8b", setup("unsloth", "unsloth==2026.10.1", **job), device_capacity=card) == 6.3
    assert gb("llama-3.1-8b", setup("unsloth", "unsloth==2026.9.14", **job), device_capacity=card) == 7.3  # +16.8 %
    # a 24 GB card never offloads at this length: the fork does not move it
    big = get_device("rtx-4090").capacity_bytes
    assert gb("llama-3.1-8b", setup("unsloth", "unsloth==2026.9.14", **job), device_capacity=big) == gb(
        "llama-3.1-8b", setup("unsloth", **job), device_capacity=big) == 7.3


def test_fork_unsloth_zoo_moe_4bit_experts():
    """Qwen3-30B-A3B QLoRA on Unsloth, 1 × 2,048: 28.9 GB with the experts in NF4 (today's default), 71.9 GB before
    unsloth_zoo 2026.6.2 (and what the estimate said before issue 28)."""
    assert gb("qwen3-30b-a3b", setup("unsloth", method="qlora")) == 28.9
    assert gb("qwen3-30b-a3b", setup("unsloth", "unsloth-zoo==2026.6.1", method="qlora")) == 71.9
    assert gb("qwen3-30b-a3b", setup("unsloth", "transformers==4.57.6", "unsloth-zoo==2026.6.1",
                                     method="qlora")) == 27.4  # transformers 4: per-expert nn.Linear, quantised


def test_published_tables_at_the_release_they_ran():
    """`--installed unsloth==2024.12.4` (with the releases it ran with: unsloth_zoo 2024.12.1, transformers 4.46.3,
    torch 2.5.1) is the path validation/unsloth.py checks Unsloth's published tables on."""
    v = resolve_versions("unsloth", pins=("unsloth==2024.12.4",))
    assert {p: str(x) for p, x in v.items() if dict(v.sources)[p] != "default"} == {
        "unsloth": "2024.12.4", "unsloth-zoo": "2024.12.1", "transformers": "4.46.3", "torch": "2.5.1"}
    assert dict(v.sources)["transformers"] == "framework" and v.found == ("unsloth",)
    given = resolve_versions("unsloth", pins=("unsloth==2024.12.4", "transformers==4.47.1"))
    assert str(given["transformers"]) == "4.47.1"  # a release given wins over the companion
    assert str(resolve_versions("unsloth", pins=("unsloth==2025.1.1",))["transformers"]) == "5.17.0"
    L8 = model("llama-3.1-8b")
    s = resolve_setup("unsloth", method="qlora", lora_rank=32, seq_len=4096)
    installed = resolve_setup("unsloth", method="qlora", lora_rank=32, seq_len=4096, pins=("unsloth==2024.12.4",))
    assert unsloth_path(L8, installed) == published_tables_path(L8, s)
    assert estimate(L8, installed).total_bytes == estimate_for_path(L8, s, published_tables_path(L8, s)).total_bytes


# ---- LitGPT ----------------------------------------------------------------------------------------------------------

LIT_FSDP = dict(method="lora", gpus=2, sharding="zero3", batch=4, seq_len=512, grad_ckpt=True)


def test_fork_litgpt_lora_fsdp_linear_wrap():
    """Llama-3.1-8B LoRA on 2 GPUs, 4 × 512, accumulation 8: before 0.5.8 each Block was one FSDP1 unit with frozen
    weights and adapters, so every Block weight got a bf16 gradient, whole on each GPU under no_sync."""
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.8", grad_accum=8, **LIT_FSDP)) == 14.0
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.7", grad_accum=8, **LIT_FSDP)) == 27.6  # +97 %
    # without accumulation the Blocks' gradients are reduce-scattered: sharded over the 2 GPUs
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.7", grad_accum=1, **LIT_FSDP)) == 18.9
    # one GPU: no FSDP
    one = dict(LIT_FSDP, gpus=1, sharding="none")
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.7", grad_accum=8, **one)) == gb(
        "llama-3.1-8b", setup("litgpt", grad_accum=8, **one))


def test_fork_litgpt_lora_fsdp2():
    """0.5.11 moved LoRA to FSDP2 (only the adapters get gradients); 0.5.8-0.5.10's FSDP1 root unit gave the embedding
    a gradient too, whole under no_sync: +8.5 % in the same job."""
    assert gb("llama-3.1-8b", setup("litgpt", grad_accum=8, **LIT_FSDP)) == 12.9
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.11", grad_accum=8, **LIT_FSDP)) == 12.9
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.10", grad_accum=8, **LIT_FSDP)) == 14.0
    # full fine-tuning stays on FSDPStrategy in every release: the fork does not move it
    full = dict(LIT_FSDP, method="full")
    assert gb("llama-3.1-8b", setup("litgpt", "litgpt==0.5.10", grad_accum=8, **full)) == gb(
        "llama-3.1-8b", setup("litgpt", grad_accum=8, **full))


# ---- MLX -------------------------------------------------------------------------------------------------------------

def test_fork_mlx_no_sdpa_in_grad():
    """Llama-3.2-1B LoRA on the last 16 blocks, 4 × 2,048 on Metal: 48.5 GB today (17.2 GB of it the blocks'
    probabilities), about 31.3 GB on mlx 0.24.x (−35 %)."""
    assert gb("llama-3.2-1b", setup("mlx")) == 48.5
    assert gb("llama-3.2-1b", setup("mlx", "mlx==0.24.2")) == 31.3
    assert gb("llama-3.2-1b", setup("mlx", "mlx==0.25.0")) == 48.5
    assert gb("gemma-3-1b", setup("mlx", "mlx==0.24.2")) == gb("gemma-3-1b", setup("mlx"))  # head_dim 256: unfused
    assert gb("llama-3.2-1b", setup("mlx", "mlx==0.24.2", backend="cpu")) == gb(
        "llama-3.2-1b", setup("mlx", backend="cpu"))  # the CPU has no fused kernel


def test_fork_mlx_sdpa_fused_masked():
    assert gb("llama-3.2-1b", setup("mlx", "mlx==0.23.2")) == 48.5  # masked attention took the fallback
    assert gb("llama-3.2-1b", setup("mlx", "mlx==0.24.0")) == 31.3
    assert any("fused Metal kernel" in str(n) for n in estimate(model("llama-3.2-1b"), setup("mlx", "mlx==0.24.0")).notes)


def test_fork_mlx_cuda_cudnn_attention():
    """MLX on CUDA before 0.30 trained through the unfused fallback: 17.2 GB of probabilities in the same job."""
    new, old = setup("mlx", backend="cuda"), setup("mlx", "mlx==0.29.4", backend="cuda")
    assert (gb("llama-3.2-1b", new), gb("llama-3.2-1b", old)) == (31.8, 49.0)


# ---- the notes -------------------------------------------------------------------------------------------------------

def test_notes_name_the_forks_that_move_this_estimate():
    m = model("mixtral-8x7b")
    s = setup("trl", method="qlora")
    notes = [str(n) for n in version_notes(m, s, estimate(m, s))]
    moe = next(n for n in notes if n.startswith("transformers 5 stores"))
    assert moe.endswith("Before transformers 5.0.0 (e.g. 4.57.6), this estimate would be 34.5 GB.")
    assert not any("loss" in n and "4.49" in n for n in notes)  # the loss copy moves it by less than 5 %
    old = setup("trl", "trl==0.16.1", "transformers==4.51.3")
    L8 = model("llama-3.1-8b")
    notes = [str(n) for n in version_notes(L8, old, estimate(L8, old))]
    assert notes[0] == ("Priced for the releases given: trl 0.16.1, transformers 4.51.3; this stack's other packages "
                        "at their newest modelled release.")
    assert any(n.endswith("From trl 0.22.0 on, this estimate would be 21.8 GB.") for n in notes)
    assert any(n.endswith("From trl 1.7.0 on, this estimate would be 33.2 GB.") for n in notes)
    for n in notes[1:]:  # every fork note is ≥ 5 % away
        assert "would be" in n
    fork = get_fork("transformers_fused_adamw_default")  # foreach AdamW on a LoRA run: < 5 %, no note
    other = other_side_estimate(L8, old, fork)
    assert abs(other.total_bytes - estimate(L8, old).total_bytes) < FORK_NOTE_SHARE * estimate(L8, old).total_bytes
    assert not any(n.startswith("transformers 4.54") for n in notes)


def test_notes_are_translated():
    from estimator.i18n import _, language

    m = model("mixtral-8x7b")
    s = setup("trl", method="qlora")
    note = next(n for n in version_notes(m, s, estimate(m, s)) if "4.57.6" in n)
    with language("es"):
        spanish = _(note)
    assert spanish != str(note) and "Antes de transformers 5.0.0 (p. ej. 4.57.6), esta estimación sería de 34,5 GB" in spanish


def test_default_versions_resolve_for_every_stack_with_no_older_fork():
    for stack in ("trl", "trainer", "unsloth", "axolotl", "mlx", "llamafactory"):
        s = resolve_setup(stack, versions=default_versions(stack))
        assert not any(s.older(f) for f in FORKS)


def test_only_the_forks_that_can_move_the_job_are_priced():
    """memory/forks.py prices a fork's other side only where its Fork fields say it can move the job: the default
    TRL LoRA SFT run has three such forks (checkpointing, loss, optimizer defaults), a Mixtral QLoRA run also the MoE
    experts' and the QLoRA preparation's, and a fork that only decides a config's precision is never priced."""
    from estimator.memory.forks import may_matter
    from estimator.options.versions import stack_forks

    def priced(model, **kw):
        s = resolve_setup("trl", **kw)
        return sorted(f.id for f in stack_forks("trl") if may_matter(f, load_preset(model), s, None))

    assert priced("llama-3.1-8b") == ["transformers_fused_adamw_default", "trl_gradient_checkpointing_default",
                                      "trl_sft_chunked_nll_default"]
    moe = priced("mixtral-8x7b", method="qlora")
    assert {"transformers_fused_moe_experts", "trl_kbit_prep_norms_only", "trl_no_kbit_prep"} <= set(moe)
    assert not {"transformers_dtype_auto", "trl_bf16_default", "trl_dpo_rewrite"} & set(moe)
    assert "trl_gradient_checkpointing_default" not in priced("llama-3.1-8b", grad_ckpt=True)  # the user's own choice
