"""A lower bound on total weighted completion time (and so on average JCT) from a
time-indexed LP relaxation over a common grid (:mod:`.problem` the data, :mod:`.highs`
the LP and HiGHS; docs/formulations.md, "Time-indexed LP relaxation (lower bound)")."""

from hetsched.formulations.completion.highs import CompletionBound, completion_bound
from hetsched.formulations.completion.problem import (
    CompletionBoundSettings,
    CompletionProblem,
    completion_problem,
)
from hetsched.formulations.completion.safe import dual_bound

__all__ = ["CompletionBound", "CompletionBoundSettings", "CompletionProblem",
           "completion_bound", "completion_problem", "dual_bound"]
