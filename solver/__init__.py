"""hetsched: optimization-based scheduling of deep-learning training jobs on
heterogeneous GPU clusters."""

import time

#: When this package was first imported (``time.monotonic``): the start of a ``hetsched``
#: command, from which ``hetsched solve --time-limit`` counts.
STARTED_AT = time.monotonic()

from hetsched.core.check import Violation, check  # noqa: E402 (after STARTED_AT)
from hetsched.core.errors import InputError  # noqa: E402
from hetsched.core.records import Cluster, Configuration, Gpu, GpuType, Instance, Job, Node  # noqa: E402
from hetsched.core.result import Assignment, Metrics, Result, Schedule, Status, compute_metrics  # noqa: E402
from hetsched.core.settings import ReplaySettings  # noqa: E402
from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable  # noqa: E402
from hetsched.files.instance import load_instance, save_instance  # noqa: E402
from hetsched.registry import names  # noqa: E402
from hetsched.replaying import replay, replay_trace  # noqa: E402
from hetsched.simulate.record import Replay  # noqa: E402
from hetsched.simulate.summary import ReplaySummary  # noqa: E402
from hetsched.solving import solve  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Assignment",
    "Cluster",
    "Configuration",
    "Gpu",
    "GpuType",
    "InputError",
    "Instance",
    "Job",
    "Metrics",
    "Node",
    "Placement",
    "Replay",
    "ReplaySettings",
    "ReplaySummary",
    "Result",
    "Schedule",
    "Status",
    "ThroughputModel",
    "ThroughputTable",
    "Violation",
    "check",
    "compute_metrics",
    "load_instance",
    "names",
    "replay",
    "replay_trace",
    "save_instance",
    "solve",
]
