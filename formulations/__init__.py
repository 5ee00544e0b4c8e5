"""The mathematics: MILP (PuLP: CBC, HiGHS) and CP-SAT (OR-Tools) models.

This package is the only place that imports pulp or ortools. Each model lives in
its own subpackage with one module per back-end.
"""
