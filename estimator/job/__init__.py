"""The user's job, resolved once: the training setup validated on creation (setup.py), the stack's defaults filled
in (stack.py), the trainer's options, rules and fallbacks (trainer.py) and what the model allows (tower.py)."""
