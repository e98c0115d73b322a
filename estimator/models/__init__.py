"""Models: a `ModelSpec` (spec.py) from a Hugging Face config.json (config.py, towers.py, one module per family
group: gemma.py, moe.py), a preset (presets/: real config.json files beside their loader) or the Hub (hub.py)."""
