"""GPU sharing as data: how fast a job runs when it shares its GPU with others
(:class:`CoLocationModel`). The simulator advances jobs with it and the checker
verifies with it (docs/traces.md, "GPU shares, CPUs and memory"); what a job needs of
each node is :meth:`hetsched.core.records.Job.node_demand`.

**Interference.** Jobs that ask for a share of a GPU (``Job.gpu_share``) may run on one
GPU at once when their shares add up to at most 1. A job alone on its GPU runs at its
throughput (the throughput model's, one GPU, packed). A job with co-runners runs at
that throughput times a factor:

* with exactly one co-runner, Gavel's measured pair ratio where the profile has it
  (``throughput of the job beside the other / throughput alone``, same GPU type, one
  GPU each: space sharing, median 0.58 over Gavel's 1,881 measured pairs);
* otherwise (no measurement, a pair measured at 0, or two or more co-runners)
  ``default_factor`` (:data:`DEFAULT_COLOCATION_FACTOR`, 0.9 unless set): openb's
  durations were logged while pods ran on their share, so the share's slice is already
  in them; the factor is the slowdown co-runners add beyond it (memory bandwidth,
  context switches), an assumption to state with results.

**Packed whole jobs.** A whole job of one GPU may also be started *packed*
(``Start.packed``, Gavel's space sharing): it then holds half of its GPU
(:data:`PACKED_SHARE`), so at most two packed jobs share one, each at the factor above.
The policies that pack (``progress-packed``, ``gandiva``, Gavel's ``-packed`` family) pack
only pairs measured both ways on that GPU type (:meth:`CoLocationModel.combined`), so the
default factor never prices a packed pair; ``progress-packed`` and ``gandiva`` only those
whose combined rate is above 1, ``fifo-packed`` above Gavel's 1.5, the LP policies
(``gavel-packed`` and the others) as their LP finds.

The factor changes when co-runners start or stop; the simulator then ends the job's run
segment and continues it at the new speed (``Assignment.continued``: no restart
penalty).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from hetsched.core.ranges import Range

#: The speed factor of a job beside co-runners without a measured pair (module docstring).
DEFAULT_COLOCATION_FACTOR = 0.9
#: The range of a co-location speed factor (``--colocation-factor``, a measured pair):
#: more than 0 (a job beside others still runs), at most 1 (sharing never speeds it up).
COLOCATION_FACTOR_RANGE = Range(0.0, 1.0, low_open=True)

#: The share of its GPU a packed whole job holds: two packed jobs fill one GPU.
PACKED_SHARE = 0.5

PairKey = tuple[str, str, str]  # (GPU type, job type, co-runner's job type)


@dataclass(frozen=True)
class CoLocationModel:
    """Speed factors of jobs sharing a GPU (module docstring): measured pairs
    ``{(gpu_type, job_type, other_job_type): factor}`` and the default factor."""

    pairs: Mapping[PairKey, float] = field(default_factory=dict)
    default_factor: float = DEFAULT_COLOCATION_FACTOR

    def __post_init__(self) -> None:
        COLOCATION_FACTOR_RANGE.check(self.default_factor, "colocation_factor",
                                      "bad co-location factor")
        object.__setattr__(self, "pairs", MappingProxyType(dict(self.pairs)))

    def __reduce__(self) -> tuple[type[CoLocationModel], tuple[dict[PairKey, float], float]]:
        """Pickled as its pairs and default factor (for worker processes and Ray's object
        store)."""
        return type(self), (dict(self.pairs), self.default_factor)

    def factor(self, job_type: str, gpu_type: str, others: Sequence[str]) -> float:
        """The speed factor of ``job_type`` on a GPU of ``gpu_type`` it shares with jobs
        of the types ``others`` (1 alone)."""
        if not others:
            return 1.0
        if len(others) == 1:
            measured = self.pairs.get((gpu_type, job_type, others[0]))
            if measured is not None:
                return measured
        return self.default_factor

    def combined(self, gpu_type: str, job_type: str, other_job_type: str) -> float | None:
        """The measured rate of a pair on one GPU of ``gpu_type``, each job's factor beside
        the other added (2: both at full speed; below 1 they are better run one after the
        other); ``None`` unless both directions are measured."""
        one = self.pairs.get((gpu_type, job_type, other_job_type))
        two = self.pairs.get((gpu_type, other_job_type, job_type))
        if one is None or two is None or one <= 0 or two <= 0:
            return None
        return one + two
