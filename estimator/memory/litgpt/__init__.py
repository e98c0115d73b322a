"""LitGPT's runtime: its own GPT, Block and LoRA layers (litgpt/model.py, litgpt/lora.py) on the families whose
blocks were traced; other models keep the transformers-module estimate (the hf runtime)."""
