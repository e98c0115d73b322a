"""The "exact" trace as a user feature: PyTorch's own count of one training step for the user's model and setup.
The tracer is trace.py (with its loss heads and activation offloading in losses.py); worker.py runs it for one job.
calibration/ (a developer tool) traces its fixtures with the same tracer.

Runs only in an interpreter that has the optional install (requirements-exact.txt: CPU torch, transformers,
peft, trl). The estimator never imports this package: estimator/exact/__init__.py starts it in a separate worker
process (a spawn-context process pool) and talks to it with plain dicts.
"""
