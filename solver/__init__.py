"""hetsched: optimization-based scheduling of deep-learning training jobs on
heterogeneous GPU clusters."""

from solver.check import Violation, check
from solver.data import Cluster, Configuration, Gpu, GpuType, Instance, Job, Node
from solver.errors import InputError
from solver.instance_file import load_instance, save_instance
from solver.result import Assignment, Metrics, Result, Schedule, Status, compute_metrics
from solver.solve import solve
from solver.throughput import Placement, ThroughputModel, ThroughputTable

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
    "Result",
    "Schedule",
    "Status",
    "ThroughputModel",
    "ThroughputTable",
    "Violation",
    "check",
    "compute_metrics",
    "load_instance",
    "save_instance",
    "solve",
]
