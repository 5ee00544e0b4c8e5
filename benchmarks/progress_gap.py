"""``progress`` with a MILP gap of 1e-4 (instead of its 1e-6) as a policy class, for
``hetsched replay --policy benchmarks/progress_gap.py:ProgressGap`` (docs/scale.md:
the whole Philly trace with ``--batch``; the replay sets the solver's budget), and
``progress-elastic`` with it (``ProgressElasticGap``)."""

from __future__ import annotations

import dataclasses

from hetsched.core.settings import DECISION_LIMIT
from hetsched.policies.progress import Progress
from hetsched.policies.progress_params import ELASTIC, ProgressParams

#: The MILP's relative gap.
GAP = 1e-4


class ProgressGap(Progress):
    """``progress`` whose round MILP may stop within :data:`GAP` of its bound."""

    def __init__(self, time_limit_s: float | None = DECISION_LIMIT,
                 deterministic: bool = True) -> None:
        super().__init__(ProgressParams(time_limit_s=time_limit_s,
                                        deterministic=deterministic, gap=GAP))
        self.name = "progress-gap1e-4"


class ProgressElasticGap(Progress):
    """``progress-elastic`` whose round MILP may stop within :data:`GAP` of its bound
    (docs/scale.md: 2,048 GPUs of Sia's cluster)."""

    def __init__(self, time_limit_s: float | None = DECISION_LIMIT,
                 deterministic: bool = True) -> None:
        super().__init__(dataclasses.replace(ELASTIC, time_limit_s=time_limit_s,
                                             deterministic=deterministic, gap=GAP))
        self.name = "progress-elastic-gap1e-4"
