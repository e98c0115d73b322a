"""Unsloth's runtime: its fused LoRA kernels, offloaded checkpointing and fused loss on the dense Llama-like
families it runs itself (FastLlamaModel); other models go through transformers' modules (the hf runtime)."""
