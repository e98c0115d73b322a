"""LitGPT on several GPUs: the gradients its FSDP strategy keeps per GPU.

LitGPT's finetune scripts shard a multi-GPU run with Lightning's FSDPStrategy, i.e. torch FSDP1 with
use_orig_params=True (lightning/fabric/strategies/fsdp.py:174, 2.4.0), and run every micro-batch but the last of an
accumulation cycle under `fabric.no_backward_sync(model, enabled=is_accumulating)` (litgpt/finetune/full.py:280-281,
0.5.13), which Lightning turns into FSDP's `no_sync()` (lightning/fabric/strategies/fsdp.py:748-762, 2.4.0). Two
consequences the generic ZeRO-3 sharding (memory/hf/states.py _shard) does not have:

- **no_sync keeps whole gradients.** Without a sync, FSDP1's post-backward hook skips the reduce-scatter and leaves
  each FlatParameter's unsharded gradient in place (torch/distributed/fsdp/_runtime_utils.py:743-746, 2.13.0; the
  no_sync docstring: "FSDP will accumulate the full model gradients (instead of gradient shards) until the eventual
  sync", fully_sharded_data_parallel.py:1043-1045). With gradient accumulation every GPU holds the unsharded gradient
  of every flat parameter from the first micro-batch's backward to the last one's.
- **A flat parameter gets one gradient.** With use_orig_params=True a FlatParameter that holds frozen and trainable
  parameters gets a gradient for all of them ("the gradient memory usage will be higher than expected (… numel
  instead of … numel before sharding via reduce-scatter)", torch/distributed/fsdp/_wrap_utils.py:158-167, 2.13.0).
  Which parameters share a LoRA run's flat parameters depends on the release (lora.py's auto_wrap_policy):
  - before 0.5.8 each Block is a unit (litgpt/finetune/lora.py:149-156, 0.5.4: auto_wrap_policy={Block}): every
    Block weight gets a gradient (litgpt PR #1538 quotes the warning);
  - 0.5.8 to 0.5.10 wrap each nn.Linear (commit 281510ab, "Do not wrap LoRA layers with FSDP (#1538)";
    lora.py:155-161, 0.5.10: auto_wrap_policy={torch.nn.Linear}): the frozen linears are units without gradients and
    the root unit keeps the embedding, the norms and the adapters, so those get one;
  - from 0.5.11 LoRA runs on FSDP2 (commit 5ac69b06, "finetune_lora upgrades (#2086)"; lora.py:157-161 and
    parallelize_fn :522-536, 0.5.13: ModelParallelStrategy, fully_shard per module): per-parameter sharding, only the
    adapters get gradients, and no_backward_sync is FSDP2's set_requires_gradient_sync(False), which accumulates
    those alone. Nothing here applies.
  Full fine-tuning (full.py) stays on FSDPStrategy in every modelled release (full.py:108-114, 0.5.13)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...i18n import N_

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..hf.states import States

FSDP_NO_SYNC_NOTE = N_("LitGPT on several GPUs (FSDPStrategy): two FSDP units gathered at a time, and while gradients "
                       "accumulate, FSDP's no_sync keeps every gradient unsharded on each GPU until the last "
                       "micro-batch (torch FSDP no_sync: the full model's gradients, not shards)")


def fsdp1(setup: TrainingSetup) -> bool:
    """The run shards with LitGPT's FSDPStrategy (torch FSDP1): several GPUs, FULL_SHARD (zero3), and not a LoRA run of
    litgpt 0.5.11 or later (FSDP2, fork litgpt_lora_fsdp2)."""
    if setup.gpus <= 1 or setup.sharding != "zero3" or setup.method == "qlora":
        return False  # one GPU; or LitGPT refuses --quantize on several devices (lora.py:152-157, 0.5.13)
    return setup.method == "full" or setup.older("litgpt_lora_fsdp2")


def flat_gradient_params(spec: ModelSpec, setup: TrainingSetup, trainable: int) -> int:
    """Parameters whose gradient FSDP1 materialises (unsharded, before any reduce-scatter): every parameter of a
    flat parameter that holds a trainable one (the module docstring)."""
    if setup.method == "full":
        return trainable
    if setup.older("litgpt_lora_fsdp_linear_wrap"):
        # Block units: every parameter but the root's (embedding, head, final norm: frozen, no gradient)
        return spec.params_total - spec.params_embedding - spec.hidden_size + trainable
    # nn.Linear units: the root holds the input embedding, the norms and the adapters (every parameter that is not a
    # decoder linear's weight or the head; the few biases, in their linears' units, are counted with them)
    head = spec.vocab_size * spec.hidden_size
    return spec.params_total - spec.params_quantizable - head + trainable


def fsdp1_states(spec: ModelSpec, setup: TrainingSetup, st: States) -> States:
    """The model states with FSDP1's gradients: the flat parameters' gradient, sharded after each sync (persisting
    until zero_grad), and whole on every GPU through gradient accumulation (no_sync)."""
    flat = flat_gradient_params(spec, setup, st.trainable) * st.gb
    sharded = flat / setup.gpus
    g = st.grads
    if setup.grad_accum > 1:
        # no_sync: the unsharded gradients live from the first micro-batch's backward to the last one's; a new
        # micro-batch's gradients accumulate into them (the head's included), so nothing is added on top
        grads = g._replace(head=0.0, persist=flat, first=max(g.first, sharded, flat), end=max(g.end, flat),
                           step=max(g.step, sharded))
    else:
        grads = g._replace(first=max(g.first, sharded), end=max(g.end, sharded), step=max(g.step, sharded))
    return st._replace(grads=grads, shard_note=FSDP_NO_SYNC_NOTE)
