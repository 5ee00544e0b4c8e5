"""Sia's measurements as hetsched's throughput model: Pollux's applications measured on
six GPU types, each answered as :class:`~hetsched.speeds.pollux.PolluxThroughput` answers
Pollux's one.

Sia (Jayaram Subramanya et al., SOSP'23; artifact ``siasosp23/artifacts``, folder
``sia-simulator/``, Apache-2.0) keeps Pollux's application folders (``traces/<app>/``:
``validation-<B>.csv``, one set for every GPU type) and adds, per GPU type ``T``, the step
times measured there: ``placements-<T>.csv`` and ``scalability-<T>.csv``. Its simulator
(``applications.py``, ``job.py``, ``simulator_config.py``; this is this project's own code
after them) runs a job on type ``T``:

* with ``T``'s step times and per-GPU batch range (the smallest and largest ``local_bsz``
  of ``placements-<T>.csv``: a job's steps take the largest measured at its placement,
  ``Job.update_local_bsz``; the lower limit Sia's ``Application`` sets for ``deepspeech2``
  on ``rtx``, 57, only steers its policy's batch choices, not how a job runs), on nodes
  of :data:`GPUS_PER_NODE` GPUs, gangs filling nodes in order;
* its goodput divided by the application's calibration :data:`SLOWDOWNS` (Sia's fit of
  its simulator to its real runs): every step takes that many times as long;
* to the completion epoch Pollux's simulator uses (``max_epochs``: the same as
  :data:`hetsched.speeds.pollux.COMPLETION_EPOCHS`);
* after every change of placement, the first start included, ``rescale_time`` seconds
  without progress: :data:`RESCALE_S` (the replay's start latency and restart penalty,
  :func:`start_seconds`).

``gpt_pmp`` (Sia's pipeline-model-parallel GPT, 8 stages on ``rtx`` and 2 on ``dgx-ext``)
is not read: hetsched models data-parallel gangs, and its step times are per pipeline
replica (:data:`REFUSED`).

A rigid job's work is its steps to the goal at its batch on the reference GPU type
(:data:`REFERENCE_TYPE`, the type Sia calibrates on); on another type, where the per-GPU
batch range differs and so the batch really used may, its throughput is scaled so that
the job takes there exactly the steps to the goal at the batch used there times the step
time there. An elastic job's work is its goal in base-batch steps, the same on every type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.speeds.efficiency import read_convergence
from hetsched.speeds.measured_steps import read_measured_steps
from hetsched.speeds.pollux import (
    COMPLETION_EPOCHS,
    ELASTIC_SUFFIX,
    PolluxApplication,
    PolluxThroughput,
)

#: GPUs per node of each of Sia's GPU types (its ``simulator_config.py``): ``aws`` an AWS
#: g4dn.12xlarge (4 T4), ``azure`` ND40rs_v2 (8 V100), ``dgx`` and ``dgx-ext`` a DGX-A100
#: (8 A100; ``dgx-ext`` with more batch sizes profiled), ``quad`` 4 Quadro RTX 6000,
#: ``rtx`` 8 RTX 2080Ti.
GPUS_PER_NODE: Mapping[str, int] = MappingProxyType(
    {"aws": 4, "azure": 8, "dgx": 8, "dgx-ext": 8, "quad": 4, "rtx": 8})
#: Sia's default cluster (6 nodes of 4 ``aws``, 3 of 8 ``rtx``, 2 of 8 ``dgx-ext``) as a
#: ``--cluster`` spec; its ``--cluster_scale k`` multiplies each type's nodes by k
#: (:func:`cluster_spec`).
CLUSTER_NODES: Mapping[str, int] = MappingProxyType({"aws": 6, "rtx": 3, "dgx-ext": 2})
#: How many times as long as measured a step takes in Sia's simulator (``SLOWDOWNS``).
SLOWDOWNS: Mapping[str, float] = MappingProxyType(
    {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2,
     "ncf": 1.5})
#: Seconds without progress after each change of placement (``rescale_time``), and for an
#: application not named.
RESCALE_S: Mapping[str, float] = MappingProxyType(
    {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0, "imagenet": 250.0,
     "ncf": 15.0})
DEFAULT_RESCALE_S = 30.0
#: The GPU type Sia calibrates on (``calibrate_cluster``): rigid work is counted there.
REFERENCE_TYPE = "rtx"
#: The most GPUs a job is answered on: Sia's cluster at ``--cluster_scale`` 32.
MAX_GPUS = 64 * 32
#: Applications of Sia's ``traces/`` that hetsched does not read, and why.
REFUSED: Mapping[str, str] = MappingProxyType({
    "gpt_pmp": "pipeline-model-parallel (Sia's PMPApplication: one replica spans 8 rtx or "
               "2 dgx-ext GPUs, its step times are per pipeline replica); hetsched models "
               "data-parallel gangs only"})


def cluster_spec(scale: int = 1, nodes: Mapping[str, int] = CLUSTER_NODES) -> str:
    """Sia's cluster as a ``--cluster`` spec (``aws=24x4,rtx=24x8,dgx-ext=16x8`` at scale
    1), each type's nodes times ``scale`` (its ``--cluster_scale``)."""
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise InputError("bad cluster scale", path="cluster_scale", value=scale,
                         expected="an integer >= 1")
    return ",".join(f"{gpu}={count * scale * GPUS_PER_NODE[gpu]}x{GPUS_PER_NODE[gpu]}"
                    for gpu, count in nodes.items())


def start_seconds(application: str) -> float:
    """Seconds a job of ``application`` makes no progress after each start (Sia's
    ``rescale_time``)."""
    return RESCALE_S.get(application, DEFAULT_RESCALE_S)


@dataclass(frozen=True, eq=False)
class SiaThroughput:
    """steps/s of Sia's job types on its GPU types (module notes): one
    :class:`PolluxThroughput` per GPU type (``by_type``); ``refused`` the applications
    found but not read, and why."""

    by_type: Mapping[str, PolluxThroughput]
    refused: Mapping[str, str] = field(default_factory=dict)
    _ratios: dict[tuple[str, str, int], float] = field(default_factory=dict, init=False,
                                                        repr=False)

    def __post_init__(self) -> None:
        if not self.by_type:
            raise InputError("no GPU types", path="by_type", value={},
                             expected="Sia's measurements on one GPU type or more")
        object.__setattr__(self, "by_type", MappingProxyType(dict(self.by_type)))
        object.__setattr__(self, "refused", MappingProxyType(dict(self.refused)))

    def __reduce__(self) -> tuple[type[SiaThroughput], tuple[Any, ...]]:
        """Pickled as its fields (for worker processes and Ray's object store)."""
        return type(self), (dict(self.by_type), dict(self.refused))

    @property
    def gpu_types(self) -> frozenset[str]:
        """The GPU types measured."""
        return frozenset(self.by_type)

    @property
    def job_types(self) -> frozenset[str]:
        """Every type's job types."""
        return frozenset().union(*(model.job_types for model in self.by_type.values()))

    @property
    def reference(self) -> PolluxThroughput:
        """The model of :data:`REFERENCE_TYPE`, else of the first type by name."""
        return self.by_type.get(REFERENCE_TYPE) or self.by_type[min(self.by_type)]

    @cached_property
    def applications(self) -> Mapping[str, PolluxApplication]:
        """Each application, as measured on the reference type where it is, else on the
        first type by name that has it (what a workload's rows are checked against)."""
        found: dict[str, PolluxApplication] = {}
        for model in self._by_preference:
            for name, app in model.applications.items():
                found.setdefault(name, app)
        return MappingProxyType(found)

    def application(self, job_type: str) -> tuple[PolluxApplication, int] | None:
        """The application and total batch of ``job_type`` (0 for an elastic job), as
        :meth:`applications` has it, or ``None``."""
        for model in self._by_preference:
            found = model.application(job_type)
            if found is not None:
                return found
        return None

    @cached_property
    def _by_preference(self) -> tuple[PolluxThroughput, ...]:
        """The per-type models, the reference type's first, then by name."""
        reference = self.reference.gpu_type
        return tuple(self.by_type[gpu] for gpu in sorted(
            self.by_type, key=lambda name: (name != reference, name)))

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        """steps/s, 0.0 where the job cannot run (class notes)."""
        return self._scaled(job_type, gpu_type, num_gpus, lambda model: model.throughput(
            job_type, gpu_type, num_gpus, placement))

    def throughput_after(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float) -> float:
        """steps/s once the job has done ``done`` of its work (an elastic job's goodput
        in the epoch it is in on ``gpu_type``)."""
        return self._scaled(job_type, gpu_type, num_gpus, lambda model: model.throughput_after(
            job_type, gpu_type, num_gpus, placement, done))

    def throughput_ahead(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float, horizon_s: float) -> float:
        """steps/s over the next ``horizon_s`` seconds of a job that has done ``done``."""
        return self._scaled(job_type, gpu_type, num_gpus, lambda model: model.throughput_ahead(
            job_type, gpu_type, num_gpus, placement, done, horizon_s))

    def _scaled(self, job_type: str, gpu_type: str, num_gpus: int,
                speed_of: Callable[[PolluxThroughput], float]) -> float:
        """``speed_of`` the model of ``gpu_type`` (0.0 without one), in the work's units
        (:meth:`_work_ratio`)."""
        model = self.by_type.get(gpu_type)
        speed = speed_of(model) if model is not None else 0.0
        return speed * self._work_ratio(job_type, gpu_type, num_gpus) if speed else 0.0

    def speed_change_after(self, job_type: str, done: float) -> float | None:
        """The work at which an elastic job's speed changes next: its next epoch's start,
        the same on every type (the validation runs are shared)."""
        for model in self.by_type.values():
            if model.application(job_type) is not None:
                return model.speed_change_after(job_type, done)
        return None

    def _work_ratio(self, job_type: str, gpu_type: str, num_gpus: int) -> float:
        """A rigid job's steps to the goal on the reference type over those on
        ``gpu_type`` at ``num_gpus`` (module notes); 1 for an elastic job."""
        if job_type.endswith(ELASTIC_SUFFIX):
            return 1.0
        key = (job_type, gpu_type, num_gpus)
        found = self._ratios.get(key)
        if found is None:
            found = self._ratios[key] = self._ratio(job_type, gpu_type, num_gpus)
        return found

    def _ratio(self, job_type: str, gpu_type: str, num_gpus: int) -> float:
        here = self.by_type[gpu_type].application(job_type)
        there = self.reference.application(job_type)
        if here is None or there is None or here[1] == 0:
            return 1.0
        (app, batch), (reference, _) = here, there
        steps = app.steps_to_goal(batch, num_gpus)
        return reference.steps_to_goal(batch, num_gpus) / steps if steps > 0 else 1.0


def read_sia_application(folder: Path, gpu_type: str) -> PolluxApplication:
    """One application's measurements on ``gpu_type`` (module notes)."""
    steps = read_measured_steps(folder, gpu_type)
    low, high = steps.local_bsz_range
    convergence = read_convergence(folder, COMPLETION_EPOCHS.get(folder.name))
    return PolluxApplication(convergence, steps, low, high)


def is_sia_folder(folder: Path) -> bool:
    """Whether ``folder`` holds Sia's measurements (an application folder with
    ``placements-<type>.csv``) rather than Pollux's."""
    return folder.is_dir() and any(folder.glob("*/placements-*.csv"))


def read_sia(folder: str | Path, gpu_types: tuple[str, ...] = ()) -> SiaThroughput:
    """Sia's ``traces/`` folder (one folder per application, each with
    ``placements-<type>.csv``) as a :class:`SiaThroughput` on each GPU type measured (or
    only ``gpu_types``); the applications of :data:`REFUSED` are left out and named."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder of Sia's measurements", file=str(folder),
                         expected="Sia's traces/ (one folder per application)")
    found: dict[str, dict[str, PolluxApplication]] = {}
    refused: dict[str, str] = {}
    for path in sorted(folder.glob("*/placements-*.csv")):
        app_folder, gpu = path.parent, path.stem.removeprefix("placements-")
        if app_folder.name in REFUSED:
            refused[app_folder.name] = REFUSED[app_folder.name]
            continue
        if gpu_types and gpu not in gpu_types:
            continue
        if gpu not in GPUS_PER_NODE:
            raise InputError("unknown GPU type of Sia's", file=str(path), value=gpu,
                             expected="one of " + ", ".join(GPUS_PER_NODE))
        found.setdefault(gpu, {})[app_folder.name] = read_sia_application(app_folder, gpu)
    if not found:
        raise InputError("no Sia measurements", file=str(folder),
                         expected="folders with placements-<type>.csv and validation-*.csv "
                         "(Sia's traces/)" + (f" on {', '.join(gpu_types)}" if gpu_types
                                              else ""))
    slowdown = {name: SLOWDOWNS[name] for apps in found.values() for name in apps
                if name in SLOWDOWNS}
    return SiaThroughput({gpu: PolluxThroughput(apps, gpu_type=gpu,
                                                gpus_per_node=GPUS_PER_NODE[gpu],
                                                max_gpus=MAX_GPUS, slowdown=slowdown)
                          for gpu, apps in found.items()}, refused)
