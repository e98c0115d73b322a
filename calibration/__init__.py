"""Ground-truth memory calibration for the estimator (developer tool; needs .venv-cal)."""
