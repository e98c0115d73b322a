"""The PyTorch / transformers runtime: a step on transformers' modules with PEFT's adapters, priced by phases (the
model states, the activations autograd saves, the phases and the peak). Unsloth's and LitGPT's runtimes build on it."""
