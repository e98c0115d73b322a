"""Memory: the bytes of one training step. `price.estimate` chooses the estimate (detailed SFT step, a trainer's
step, or the rule of thumb); `step` prices an SFT step by phases, `trainers` a trainer's; `activations/` holds what
autograd saves per model code; `result` and `verdict` are the result types."""
