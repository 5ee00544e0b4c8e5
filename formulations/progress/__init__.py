"""The per-round allocation of the ``progress`` policy: options (job, GPU type, gang size)
with values, chosen by a MILP under GPU capacities (:mod:`.problem`, :mod:`.milp`)."""

from hetsched.formulations.progress.milp import RoundModel, RoundPlan, solve_round
from hetsched.formulations.progress.problem import RoundProblem, best_each, greedy

__all__ = ["RoundModel", "RoundPlan", "RoundProblem", "best_each", "greedy", "solve_round"]
