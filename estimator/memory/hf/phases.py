"""The phases of one training step and its peak (docs/formulas.md §0): each moment where the high-water mark can
occur priced as the model states (memory/hf/states.py), the autocast copies, the gradients alive and the activations
alive; the moments of a backward with and without checkpointing, the ones that close the step, and the peak phase
with the overhead beside the tensors and the low/high band (§5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...i18n import N_
from ..result import DetailItem, Phase
from ..result import detail as d
from .activations.depth import recompute_extra_per_token

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from .activations.common import ActivationContext
    from .states import States
    from .step_activations import Casts, Items, Sizes


def phase(st: States, key: str, name: str, casts: float, grad: float, grad_key: str, grad_label: str,
           acts: list[DetailItem], temp: float = 0.0) -> Phase:
    """One moment of the step: the model states, the autocast copies, the gradients alive and `acts`."""
    items = list(st.weight_items)
    if casts:
        items.append(d("weights.autocast_copies", N_("Autocast bf16 weight copies"), casts, "2 B × weights used under autocast"))
    items.append(d(grad_key, grad_label, grad, f"{st.gb} B × trainable params"))
    items.extend(st.opt_items)
    if temp:
        items.append(d("optimizer.step_temporaries", N_("Optimizer step temporaries"), temp, "foreach/Adafactor step buffers"))
    items.extend(acts)
    return Phase(key, name, st.weights + casts, grad, st.opt + temp, sum(a.bytes for a in acts), tuple(items))


def stored_phases(st: States, casts: Casts, sz: Sizes, it: Items, g_loss: float) -> list[Phase]:
    """Backward without checkpointing: every layer's saved tensors are alive until its backward."""
    g = st.grads
    act_layers = d("activations.layers", N_("Layer activations"), sz.layers, "T × Σ layers' saved tensors")
    return [
        phase(st, "loss_backward", N_("loss backward"), casts.all, g.persist + g_loss, "gradients.accumulated",
               N_("Gradients (accumulated)"),
               [act_layers, it.final, it.loss_kept, it.loss_tr, *it.deq_tower[1:]]),
        phase(st, "backward.output_layer", N_("backward, output layer"), casts.all, g.persist + g.head,
               "gradients.head", N_("Gradients (head)"),
               [act_layers, it.ids, it.temp, *it.deq_tower]),
        phase(st, "backward.first_layer", N_("backward, first layer"), casts.layer, g.first, "gradients.all",
               N_("Gradients"), [d("activations.first_layer", N_("First layer's activations"), sz.one_layer, "T × one layer"), it.temp,
                                 *it.deq_tower]),
    ]


def checkpointed_phases(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, st: States, casts: Casts,
                         sz: Sizes, it: Items, g_loss: float) -> list[Phase]:
    """Backward with checkpointing: the layer inputs are kept and each layer is recomputed in its backward."""
    g = st.grads
    act_ckpt = d("activations.checkpoints", N_("Checkpointed layer inputs"), sz.ckpt,
                 "2 × T × h (layer inputs back from CPU)" if sz.offloaded else "T × L × h (layer inputs)")
    recompute = d("activations.recompute", N_("Recompute transients (LoRA)"),
                  ctx.tokens * recompute_extra_per_token(spec, ctx, sz.bwd_temp / ctx.tokens),
                  "T × (c·I + 4·I + 5·c·h) − backward temporaries")
    return [
        phase(st, "loss_backward", N_("loss backward"), casts.head, g.persist + g_loss, "gradients.accumulated",
               N_("Gradients (accumulated)"),
               [act_ckpt, it.final, it.loss_kept, it.loss_tr, *it.deq_tower[1:]]),
        phase(st, "backward.last_layer", N_("backward, recomputing last layer"), casts.head + casts.layer,
               g.persist + g.head, "gradients.head", N_("Gradients (head)"),
               [act_ckpt, it.ids, it.one, it.temp, recompute, *it.deq_tower]),
        phase(st, "backward.first_layer", N_("backward, recomputing first layer"), casts.layer, g.first,
               "gradients.all", N_("Gradients"), [it.one, it.temp, recompute, *it.deq_tower]),
    ]


def closing_phases(spec: ModelSpec, setup: TrainingSetup, st: States) -> list[Phase]:
    """The tied embedding's end of backward, the optimizer step and LitGPT's 16-bit model load."""
    phases: list[Phase] = []
    if setup.method == "full" and spec.tie_embeddings:
        # Tied embeddings: at the end of backward autograd holds the head's gradient of the shared weight (in
        # its input buffer), the embedding's dense gradient and their sum at once (real-width traces:
        # calibration/README.md), each V × H in the gradient dtype.
        head_params = spec.vocab_size * spec.hidden_size
        tied = 2 * head_params * st.gb / (setup.gpus if setup.sharding in ("zero2", "zero3") else 1)
        phases.append(phase(st, "backward.tied_embedding", N_("backward, tied embedding"), 0.0, st.grads.end + tied,
                             "gradients.tied", N_("Gradients (+ embedding gradient and the tied sum)"), []))
    phases.append(phase(st, "optimizer_step", N_("optimizer step"), 0.0, st.grads.step, "gradients.all",
                         N_("Gradients"), [], st.opt_temp))
    if setup.method == "qlora" and setup.load_16bit_first:
        # LitGPT's bnb precision plugin loads the bf16 state dict onto the GPU before quantising: the
        # load-time high-water mark is the 16-bit model (measured ≈ 2 B × params in its QLoRA tables).
        load = float(2 * spec.params_total)
        phases.append(Phase("model_load", N_("model load (16-bit before quantising)"), load, 0.0, 0.0, 0.0, (
            d("weights.load_16bit", N_("16-bit checkpoint before quantisation"), load, "2 B × params"),)))
    return phases
