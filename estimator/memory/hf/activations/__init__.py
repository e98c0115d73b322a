"""Activations: the tensors autograd saves for backward, per token and per layer, from the architecture.

Closed forms follow docs/formulas.md §3.3 (measured with saved-tensor hooks) and are re-checked against the
FakeTensor tracer (validation/, checked by tests/test_accuracy.py). All figures are bytes per token unless named otherwise."""
