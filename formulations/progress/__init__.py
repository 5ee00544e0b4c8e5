"""The per-round allocation of the ``progress`` policy: options (job, GPU type, gang size)
with values, chosen by a MILP under GPU capacities (:mod:`.problem`, :mod:`.milp`)."""

from hetsched.formulations.progress.milp import RoundModel, RoundPlan, solve_round
from hetsched.formulations.progress.problem import RoundProblem, greedy

__all__ = ["RoundModel", "RoundPlan", "RoundProblem", "greedy", "solve_round"]
