"""torchtune's compile and optimizer_in_bwd switches (estimator.job.setup.TrainingSetup.compile/optimizer_in_bwd):
the compiled cross-entropy keeps the 16-bit logits (inductor's min-cut partition saves the input and two fp32 row
statistics), and the optimizer step in backward frees every gradient as soon as it is applied."""

import pytest

from estimator import estimate, load_preset
from estimator.job.stack import resolve_setup
from estimator.memory.hf.activations.common import context
from estimator.memory.hf.activations.loss import loss_memory
from estimator.report.snippets import training_snippet

SPEC = load_preset("llama-3.2-3b")
T, V, H = 2 * 4096, SPEC.vocab_size, SPEC.hidden_size


def _loss(**kw):
    setup = resolve_setup("torchtune", method="full", batch=2, seq_len=4096, **kw)
    return loss_memory(SPEC, setup, context(SPEC, setup))


def test_compiled_chunked_loss_keeps_16bit_logits():
    plain, compiled = _loss(loss="chunked"), _loss(loss="chunked", compile=True)
    assert (plain.kept, compiled.kept) == (4 * T * V, 2 * T * V + 8 * T)
    assert compiled.transient == 2 * T * V / 8


def test_unchunked_loss_upcasts_in_the_model_and_compiles_to_one_gradient():
    plain, compiled = _loss(loss="standard"), _loss(loss="standard", compile=True)
    assert plain.impl == "torchtune_full" and (plain.kept, plain.transient) == (4 * T * V, 8 * T * V)
    assert (compiled.kept, compiled.transient) == (4 * T * V, 4 * T * V)


def test_optimizer_in_backward_holds_no_gradient_set():
    base = dict(method="full", batch=2, seq_len=4096, grad_ckpt=True, loss="chunked", compile=True)
    normal = estimate(SPEC, resolve_setup("torchtune", **base))
    in_bwd = estimate(SPEC, resolve_setup("torchtune", optimizer_in_bwd=True, **base))
    grads = {p.name: p.gradients for p in in_bwd.phases}
    # tied embedding: the head's gradient waits for the embedding's, plus the largest matrix being applied
    assert grads["backward, recomputing first layer"] == 2 * V * H + 2 * V * H
    assert grads["optimizer step"] == 0
    # end of backward: the head's part (waiting), the embedding's part and their sum, then the hook applies it
    assert grads["backward, tied embedding"] == 3 * 2 * V * H
    assert in_bwd.tensor_bytes < normal.tensor_bytes - 2e9


@pytest.mark.parametrize("kw", [{"compile": True}, {"optimizer_in_bwd": True, "method": "full"}])
def test_other_stacks_refuse_the_switches(kw):
    with pytest.raises(ValueError, match="torchtune stack only"):
        resolve_setup("trl", **kw)


def test_optimizer_in_backward_needs_full_finetuning_without_accumulation():
    with pytest.raises(ValueError, match="full fine-tuning without gradient accumulation"):
        resolve_setup("torchtune", method="lora", optimizer_in_bwd=True)
    with pytest.raises(ValueError, match="full fine-tuning without gradient accumulation"):
        resolve_setup("torchtune", method="full", grad_accum=2, optimizer_in_bwd=True)


def test_snippet_passes_the_switches():
    text = training_snippet(SPEC, resolve_setup("torchtune", method="full", compile=True, optimizer_in_bwd=True))
    assert "compile=True" in text and "optimizer_in_bwd=True" in text
    text = training_snippet(SPEC, resolve_setup("torchtune", method="lora"))
    assert "compile=False" in text and "optimizer_in_bwd" not in text
