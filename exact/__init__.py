"""The "exact" trace as a user feature: PyTorch's own count of one training step for the user's model and setup.

Runs only in an interpreter that has the optional install (requirements-exact.txt: CPU torch, transformers,
peft, trl). The estimator never imports this package: estimator/exact/__init__.py starts it in a separate worker
process (a spawn-context process pool) and talks to it with plain dicts.
"""
