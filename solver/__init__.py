"""hetsched: optimization-based scheduling of deep-learning training jobs on
heterogeneous GPU clusters."""

import time

#: When this package was first imported (``time.monotonic``): the start of a ``hetsched``
#: command, from which ``hetsched solve --time-limit`` counts.
STARTED_AT = time.monotonic()

from typing import TYPE_CHECKING, Any  # noqa: E402

# The public names are loaded when first used (PEP 562), so that a program importing one
# module of the package (the Slurm training emulator, started at every run of every job)
# does not load the solvers, the simulator and numpy's users with it.
_PUBLIC = {
    "Violation": "hetsched.core.check", "check": "hetsched.core.check",
    "InputError": "hetsched.core.errors",
    **dict.fromkeys(("Cluster", "Configuration", "Gpu", "GpuType", "Instance", "Job",
                     "Node"), "hetsched.core.records"),
    **dict.fromkeys(("Assignment", "Metrics", "Result", "Schedule", "Status",
                     "compute_metrics"), "hetsched.core.result"),
    "ReplaySettings": "hetsched.core.settings",
    **dict.fromkeys(("Placement", "ThroughputModel", "ThroughputTable"),
                    "hetsched.core.throughput"),
    "load_instance": "hetsched.files.instance", "save_instance": "hetsched.files.instance",
    "names": "hetsched.registry",
    **dict.fromkeys(("ReplayResult", "replay", "replay_trace"), "hetsched.replaying"),
    "Replay": "hetsched.simulate.record",
    "ReplaySummary": "hetsched.simulate.summary",
    "SolveOptions": "hetsched.solving", "solve": "hetsched.solving",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'hetsched' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from hetsched.core.check import Violation, check
    from hetsched.core.errors import InputError
    from hetsched.core.records import Cluster, Configuration, Gpu, GpuType, Instance, Job, Node
    from hetsched.core.result import Assignment, Metrics, Result, Schedule, Status, compute_metrics
    from hetsched.core.settings import ReplaySettings
    from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable
    from hetsched.files.instance import load_instance, save_instance
    from hetsched.registry import names
    from hetsched.replaying import ReplayResult, replay, replay_trace
    from hetsched.simulate.record import Replay
    from hetsched.simulate.summary import ReplaySummary
    from hetsched.solving import SolveOptions, solve

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
    "ReplayResult",
    "ReplaySettings",
    "ReplaySummary",
    "Result",
    "Schedule",
    "SolveOptions",
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


def __dir__() -> list[str]:
    """The module's names, the public ones not loaded yet included."""
    return sorted({*globals(), *_PUBLIC})
