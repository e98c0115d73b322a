"""What to change when it does not fit: one search (search.py), the solvers built on it (solvers.py), the
remedies in the seed's order (remedies.py) and the calculator's whole answer (advise.py)."""
