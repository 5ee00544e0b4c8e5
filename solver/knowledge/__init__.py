"""What a policy may know of the jobs' future work, and the estimates it gets instead
of the truth: :mod:`hetsched.knowledge.estimators` guesses durations from the
finished jobs' history, :mod:`hetsched.knowledge.view` shows the simulator's jobs to a
policy with those guesses."""

from hetsched.knowledge.estimators import (
    PRIOR_S,
    ConstantPrior,
    DurationEstimator,
    HistoryEstimator,
)
from hetsched.knowledge.view import KNOWLEDGE, KnowledgeView, knowledge_view

__all__ = ["KNOWLEDGE", "PRIOR_S", "ConstantPrior", "DurationEstimator", "HistoryEstimator",
           "KnowledgeView", "knowledge_view"]
