"""How far the step model extrapolates from a few GPUs: fitted on each job
type's measurements of at most ``max_gpus`` GPUs (4: on one node or across nodes, as
Sia's ``placements-<type>.csv`` have them: ``1``, ``22``, ``1111``), asked for every
larger measurement (its placements and scalability rows, up to 64 GPUs).

Each (job type, GPU type) is fitted on its own few-GPU rows on one node
(:func:`~hetsched.speeds.step_fit.fit_step_model`), the network across nodes from a prior
calibrated on the *other* job types' few-GPU rows of the same GPU type, those across nodes
included (leave one job type out; nothing larger enters any fit). Fitting the job type's
own few rows across nodes too (``1111``, ``22`` on 4-GPU nodes) did worse: on Sia's
``aws`` a p90 of 24.2 % at 5-8 GPUs, 37.6 % at 9-16 and 108 % at 17-32, against 19.4,
19.9 and 24.6 % (benchmarks/results/sia/extrapolation.csv). A job type with no few-GPU
row on one node cannot be fitted: its larger rows are counted as unanswered. The errors
are reported by bands of GPU count (:data:`BANDS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import InputError
from hetsched.speeds.step_fit import calibrate_network, calibrates, fit_step_model, group_rows
from hetsched.speeds.steps import StepRow

__all__ = ["BANDS", "FewGpuExtrapolation", "extrapolate_from_few"]

#: The GPU-count bands the errors are reported in: (lowest, highest) GPUs.
BANDS = ((5, 8), (9, 16), (17, 32), (33, 64))


@dataclass(frozen=True)
class FewGpuExtrapolation:
    """Every larger row predicted (``rows`` and ``predicted`` step times, in order) from
    fits on rows of at most ``max_gpus`` GPUs, and the rows left unanswered (their job
    type had no few-GPU row of its GPU type)."""

    max_gpus: int
    rows: tuple[StepRow, ...]
    predicted: tuple[float, ...]
    unanswered: tuple[StepRow, ...]

    def apes(self) -> np.ndarray:
        """The absolute percentage error of each predicted row's step time (%)."""
        measured = np.array([row.step_time for row in self.rows])
        apes: np.ndarray = np.abs(np.array(self.predicted) - measured) / measured * 100.0
        return apes

    def bands(self, gpu_type: str | None = None) -> list[dict[str, object]]:
        """Per band of :data:`BANDS` (and GPU type, if given): rows predicted, rows left
        unanswered, median and p90 APE (%; None without a row)."""
        apes = self.apes()
        out: list[dict[str, object]] = []
        for low, high in BANDS:
            chosen = [ape for ape, row in zip(apes, self.rows, strict=True)
                      if low <= row.num_gpus <= high and gpu_type in (None, row.gpu_type)]
            missing = sum(1 for row in self.unanswered if low <= row.num_gpus <= high
                          and gpu_type in (None, row.gpu_type))
            out.append({"gpu_type": gpu_type or "all", "gpus": f"{low}-{high}",
                        "rows": len(chosen), "unanswered": missing,
                        "median_ape": float(np.median(chosen)) if chosen else None,
                        "p90_ape": float(np.percentile(chosen, 90)) if chosen else None})
        return out


def extrapolate_from_few(rows: Sequence[StepRow], max_gpus: int = 4, *,
                         own_cross: bool = False) -> FewGpuExtrapolation:
    """Fit every (job type, GPU type) of ``rows`` on its rows of at most ``max_gpus``
    GPUs and predict its larger ones (module notes); ``own_cross``: fit its own few rows
    across nodes too (the variant the module notes compare)."""
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise InputError("bad GPU count", path="max_gpus", value=max_gpus,
                         expected="an integer >= 1")
    groups = group_rows(rows)
    few = {key: [row for row in group if row.num_gpus <= max_gpus]
           for key, group in groups.items()}
    predicted_rows: list[StepRow] = []
    predicted: list[float] = []
    unanswered: list[StepRow] = []
    for (job_type, gpu_type), group in groups.items():
        larger = [row for row in group if row.num_gpus > max_gpus]
        if not larger:
            continue
        mine = [row for row in few[(job_type, gpu_type)] if own_cross or row.num_nodes == 1]
        if not mine:
            unanswered.extend(larger)
            continue
        others = [row for (job, gpu), small in few.items()
                  if gpu == gpu_type and job != job_type and calibrates(small)
                  for row in small]
        prior = calibrate_network(others) if others else None
        model = fit_step_model(mine, prior)
        predicted_rows.extend(larger)
        predicted.extend(float(t) for t in model.predict_rows(larger))
    if not predicted_rows and not unanswered:
        raise InputError("nothing to extrapolate", path="rows",
                         expected=f"a job type with rows on more than {max_gpus} GPUs")
    return FewGpuExtrapolation(max_gpus, tuple(predicted_rows), tuple(predicted),
                               tuple(unanswered))
