"""Pollux's applications as hetsched job types: how long a job at a fixed total batch size
and GPU count takes in Pollux's simulator, as steps to its goal and seconds per step.

Pollux (Qiao et al., OSDI'21) evaluated six applications on nodes of 4 NVIDIA T4s; its
artifact (adaptdl, branch osdi21-artifact, ``simulator/``; Apache-2.0) holds, per
application, the validation runs (:mod:`hetsched.speeds.efficiency`) and the measured
step times (:mod:`hetsched.speeds.measured_steps`), and its simulator fixes each
application's completion epoch (:data:`COMPLETION_EPOCHS`). A job at total batch ``B`` on
``n`` GPUs runs, in that simulator (``Job.update_local_bsz`` and ``Job.step``; this is
this project's own code after them):

* per-GPU batch ``ceil(B / n)``, split into ``accum + 1`` passes of at most the largest
  per-GPU batch (gradient accumulation); on one GPU a batch above the base batch takes two
  passes at least (Pollux estimates its gradient statistics from them); the per-pass
  ("atomic") batch ``ceil(local / (accum + 1))``, at most ``max batch / (n (accum + 1))``;
  the batch really used is ``n x atomic x (accum + 1)``;
* one step takes the measured ``step_time`` at the atomic batch plus ``accum`` times its
  compute part (``step_time - sync_time``);
* the job completes after ``steps_to_goal`` steps at the batch really used (the
  efficiency-weighted progress of :class:`~hetsched.speeds.efficiency.Convergence`).

So a job's ``work`` is its steps to the goal and its throughput ``1 / step time`` steps/s:
a replay then takes, for the job alone on its GPUs, the time Pollux's simulator computes
(less its rounding of each epoch to a whole second). :class:`PolluxThroughput` answers
hetsched's (job type, GPU type, GPU count, placement) for job types named
``"<application> (batch size <B>)"`` (the project's naming of job types with a batch
size: :func:`hetsched.speeds.profiles.family_of`), on GPU type ``t4``: packed is one node
(``(n,)``, up to 4 GPUs), spread is the first node as full as it can be while the gang
spans two nodes at least, then the next (``(4, 4, 2)`` for 10 GPUs, ``(3, 1)`` for 4):
what a gang gets on free nodes taken in order.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.speeds.efficiency import Convergence, read_convergence
from hetsched.speeds.measured_steps import MeasuredSteps, read_measured_steps
from hetsched.speeds.profiles import batch_size_of, family_of

#: Pollux's completion epoch per application (its simulator's ``max_epochs``).
COMPLETION_EPOCHS: Mapping[str, int] = MappingProxyType(
    {"bert": 2, "cifar10": 100, "deepspeech2": 80, "imagenet": 90, "ncf": 10, "yolov3": 50})
#: Per-GPU batch limits Pollux's simulator sets below the largest measured one.
MAX_LOCAL_BSZ: Mapping[str, int] = MappingProxyType({"yolov3": 8})
#: The GPU type and node size Pollux measured on.
GPU_TYPE = "t4"
GPUS_PER_NODE = 4
#: The most GPUs a job of these applications is answered on (Pollux's cluster).
MAX_GPUS = 64
_EPS = 1e-8  # (Pollux's tolerance in its ceilings)


#: The suffix of an elastic job's type: the scheduler chooses its GPUs, the job its batch.
ELASTIC_SUFFIX = " (elastic)"
#: Total batch sizes tried per GPU count for an elastic job (geometric between the
#: application's base and largest batch, with the validated ones and the batch at each
#: end of the per-GPU range added).
BATCH_GRID = 25


def job_type_name(application: str, batch_size: int) -> str:
    """The job type of ``application`` at total batch ``batch_size`` (samples)."""
    return f"{application} (batch size {batch_size})"


def elastic_job_type_name(application: str) -> str:
    """The job type of an elastic job of ``application`` (:class:`PolluxThroughput`)."""
    return application + ELASTIC_SUFFIX


def node_layout(num_gpus: int, placement: Placement,
                gpus_per_node: int = GPUS_PER_NODE) -> tuple[int, ...] | None:
    """The GPUs per node a gang of ``num_gpus`` runs on (module notes); ``None`` for a
    packed gang larger than a node or a spread gang of one GPU."""
    if Placement(placement) is Placement.PACKED:
        return (num_gpus,) if 1 <= num_gpus <= gpus_per_node else None
    if num_gpus < 2:
        return None
    layout = [min(gpus_per_node, num_gpus - 1)]
    while sum(layout) < num_gpus:
        layout.append(min(gpus_per_node, num_gpus - sum(layout)))
    return tuple(layout)


@dataclass(frozen=True)
class BatchPlan:
    """How a total batch runs on its GPUs: ``atomic_bsz`` samples per GPU per pass,
    ``accum_steps`` extra passes per step, ``batch_size`` the total batch really used."""

    atomic_bsz: int
    accum_steps: int
    batch_size: int


@dataclass(frozen=True, eq=False)
class PolluxApplication:
    """One application: its validation runs and completion (``convergence``), its
    measured step times (``steps``) and its per-GPU batch range (samples)."""

    convergence: Convergence
    steps: MeasuredSteps
    min_local_bsz: int
    max_local_bsz: int

    def __post_init__(self) -> None:
        if not 1 <= self.min_local_bsz <= self.max_local_bsz:
            raise InputError("bad per-GPU batch range", path=self.name,
                             value=(self.min_local_bsz, self.max_local_bsz),
                             expected="1 <= smallest <= largest")

    @property
    def name(self) -> str:
        """The application's name (its folder's)."""
        return self.convergence.name

    def batch_plan(self, batch_size: int, num_gpus: int) -> BatchPlan:
        """How ``batch_size`` samples run on ``num_gpus`` GPUs (module notes)."""
        local = math.ceil(batch_size / num_gpus - _EPS)
        accum = math.ceil(local / self.max_local_bsz - _EPS) - 1
        if num_gpus == 1 and batch_size > self.convergence.base_batch:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - _EPS)
        atomic = min(atomic, int(self.convergence.max_batch / (num_gpus * (accum + 1))))
        return BatchPlan(atomic, accum, num_gpus * atomic * (accum + 1))

    def step_time(self, layout: tuple[int, ...], batch_size: int) -> float:
        """Seconds per step at total batch ``batch_size`` on ``layout`` (GPUs per node);
        an InputError where the measurements do not reach."""
        plan = self.batch_plan(batch_size, sum(layout))
        step, sync = self.steps.times(layout, plan.atomic_bsz)
        return step + plan.accum_steps * (step - sync)

    @property
    def goal_base_steps(self) -> float:
        """The job's goal in base-batch steps (the unit of an elastic job's work): the
        base-batch steps to its completion epoch."""
        return self.convergence.goal_progress(self.convergence.epochs)

    def batch_choices(self, num_gpus: int) -> tuple[int, ...]:
        """The total batch sizes an elastic job on ``num_gpus`` GPUs may run at (module
        constant :data:`BATCH_GRID`), each as :meth:`batch_plan` really uses it, within
        the validated range and per-GPU batch range."""
        low, high = self.convergence.base_batch, self.convergence.max_batch
        grid = {round(low * (high / low) ** (k / (BATCH_GRID - 1))) for k in range(BATCH_GRID)}
        grid.update(run.batch_size for run in self.convergence.runs)
        grid.update((num_gpus * self.min_local_bsz, num_gpus * self.max_local_bsz))
        found = set()
        for batch in grid:
            if low <= batch <= high:
                plan = self.batch_plan(batch, num_gpus)
                if self.min_local_bsz <= plan.atomic_bsz and low <= plan.batch_size <= high:
                    found.add(plan.batch_size)
        return tuple(sorted(found))

    def epoch_costs(self, layout: tuple[int, ...]) -> tuple[float, ...]:
        """Seconds per base-batch step of an elastic job on ``layout`` (GPUs per node) in
        each epoch, at the batch of :meth:`batch_choices` with the most base-batch steps
        per second there (Pollux's goodput, throughput times statistical efficiency,
        maximised over the batch as its agent does, with each epoch's gradient
        statistics); empty where no batch runs."""
        times = []
        for batch in self.batch_choices(sum(layout)):
            try:
                times.append((batch, self.step_time(layout, batch)))
            except InputError:
                continue
        if not times:
            return ()
        convergence = self.convergence
        return tuple(min(step / convergence.gain(batch, epoch) for batch, step in times)
                     for epoch in range(convergence.epochs))

    def elastic_rate(self, layout: tuple[int, ...], costs: tuple[float, ...] | None = None
                     ) -> float:
        """An elastic job's goodput on ``layout`` in base-batch steps/s over its whole
        life: its goal over the time it takes there, each epoch at its best batch
        (:meth:`epoch_costs`, or ``costs`` given); 0.0 where no batch runs. The job runs
        each epoch at that epoch's rate (:meth:`epoch_of`). What the policies plan with,
        but ``progress`` with ``plan_ahead``: its rate over the next stretch of its life
        (:meth:`rate_ahead`)."""
        costs = self.epoch_costs(layout) if costs is None else costs
        if not costs:
            return 0.0
        convergence = self.convergence
        seconds = math.fsum((convergence.goal_progress(epoch + 1)
                             - convergence.goal_progress(epoch)) * cost
                            for epoch, cost in enumerate(costs))
        return self.goal_base_steps / seconds if seconds > 0 else 0.0

    def rate_ahead(self, done: float, costs: tuple[float, ...], horizon_s: float) -> float:
        """An elastic job's goodput in base-batch steps/s over the next ``horizon_s``
        seconds of its life once it has made ``done`` base-batch steps: the steps it makes
        in them, each epoch at its own cost (``costs``: :meth:`epoch_costs`), over the
        time it runs in them (``horizon_s``, or less where it reaches its goal sooner: then
        its rate over the work it has left); at or past its goal, or with no horizon, the
        rate of the epoch it is in; 0.0 where no batch runs."""
        if not costs:
            return 0.0
        bounds = self._epoch_starts_and_goal
        here = self.epoch_of(done)
        at, left_s = done, horizon_s
        for epoch in range(here, len(costs)):
            if left_s <= 0:
                break
            steps = bounds[epoch + 1] - at
            if steps <= 0:
                continue
            if steps * costs[epoch] >= left_s:
                at += left_s / costs[epoch]
                left_s = 0.0
                break
            at = bounds[epoch + 1]
            left_s -= steps * costs[epoch]
        spent = horizon_s - left_s
        return (at - done) / spent if spent > 0 and at > done else 1.0 / costs[here]

    @cached_property
    def _epoch_starts_and_goal(self) -> tuple[float, ...]:
        return (*self._epoch_starts, self.goal_base_steps)

    def epoch_of(self, done: float) -> int:
        """The epoch a job that has made ``done`` base-batch steps is in (the last one at
        or past its goal); a step count within a billionth of the goal of an epoch's
        start counts as there (the simulator's progress is computed in floats)."""
        goals = self._epoch_starts
        tolerance = 1e-9 * max(1.0, self.goal_base_steps)
        return max(0, min(len(goals) - 1, bisect.bisect_right(goals, done + tolerance) - 1))

    @cached_property
    def _epoch_starts(self) -> tuple[float, ...]:
        return tuple(self.convergence.goal_progress(epoch)
                     for epoch in range(self.convergence.epochs))

    def steps_to_goal(self, batch_size: int, num_gpus: int) -> float:
        """Steps to complete the job at total batch ``batch_size`` on ``num_gpus`` GPUs
        (at the batch really used)."""
        return self.convergence.steps_to_goal(self.batch_plan(batch_size, num_gpus).batch_size)


@dataclass(frozen=True, eq=False)
class PolluxThroughput:
    """steps/s of Pollux's job types (``"cifar10 (batch size 2048)"``) on ``gpu_type``
    GPUs in nodes of ``gpus_per_node`` (by default Pollux's: ``t4``, 4; module notes),
    each step ``slowdown`` times as long as measured (Sia's calibration; none by
    default): one step is one step at the job type's total batch; for an elastic job
    (``"cifar10 (elastic)"``) one step is a base-batch step and the answer its goodput at
    its best batches there (:meth:`PolluxApplication.elastic_rate`); 0.0 where the job
    cannot run (another GPU type, a per-GPU batch outside the measurements, more than
    ``max_gpus`` GPUs, a name it does not know)."""

    applications: Mapping[str, PolluxApplication]
    #: the GPU type measured, its GPUs per node and the most GPUs a job is answered on
    gpu_type: str = GPU_TYPE
    gpus_per_node: int = GPUS_PER_NODE
    max_gpus: int = MAX_GPUS
    #: per application, how much slower than measured a step runs (Sia's calibration of
    #: its simulator to its real runs, hetsched.speeds.sia; 1 where absent)
    slowdown: Mapping[str, float] = field(default_factory=dict)
    _answers: dict[tuple[str, str, int, Placement], float] = field(
        default_factory=dict, init=False, repr=False)
    _costs: dict[tuple[str, tuple[int, ...]], tuple[float, ...]] = field(
        default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "applications", MappingProxyType(dict(self.applications)))
        object.__setattr__(self, "slowdown", MappingProxyType(dict(self.slowdown)))

    def __reduce__(self) -> tuple[type[PolluxThroughput], tuple[Any, ...]]:
        """Pickled as its fields (for worker processes and Ray's object store)."""
        return type(self), (dict(self.applications), self.gpu_type, self.gpus_per_node,
                            self.max_gpus, dict(self.slowdown))

    @property
    def gpu_types(self) -> frozenset[str]:
        """The one GPU type measured."""
        return frozenset({self.gpu_type})

    @property
    def job_types(self) -> frozenset[str]:
        """The job types at the batch sizes validated (any batch in range is answered),
        and each application's elastic job type."""
        return frozenset([*(job_type_name(name, run.batch_size)
                            for name, app in self.applications.items()
                            for run in app.convergence.runs),
                          *map(elastic_job_type_name, self.applications)])

    def application(self, job_type: str) -> tuple[PolluxApplication, int] | None:
        """The application and total batch of ``job_type`` (0 for an elastic job), or
        ``None``."""
        if job_type.endswith(ELASTIC_SUFFIX):
            app = self.applications.get(job_type[:-len(ELASTIC_SUFFIX)])
            return None if app is None else (app, 0)
        batch = batch_size_of(job_type)
        app = self.applications.get(family_of(job_type))
        return None if app is None or batch is None else (app, batch)

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        """steps/s, 0.0 where the job cannot run (class notes)."""
        key = (job_type, gpu_type, num_gpus, placement)
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = self._throughput(*key)
        return found

    def throughput_after(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float) -> float:
        """steps/s once the job has done ``done`` of its work: for an elastic job its
        goodput in the epoch it is in (at that epoch's best batch:
        :meth:`PolluxApplication.epoch_costs`), else :meth:`throughput` (a fixed batch's
        steps take the same time all along)."""
        known = self.application(job_type)
        if known is None or known[1] != 0:
            return self.throughput(job_type, gpu_type, num_gpus, placement)
        costs = self._epoch_costs(known[0], gpu_type, num_gpus, placement)
        return 1.0 / costs[known[0].epoch_of(done)] if costs else 0.0

    def throughput_ahead(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float, horizon_s: float) -> float:
        """steps/s over the next ``horizon_s`` seconds of a job that has done ``done`` of
        its work: for an elastic job its goodput there, each epoch at its own rate
        (:meth:`PolluxApplication.rate_ahead`; what the policies plan with), else
        :meth:`throughput` (a fixed batch's steps take the same time all along)."""
        known = self.application(job_type)
        if known is None or known[1] != 0:
            return self.throughput(job_type, gpu_type, num_gpus, placement)
        app = known[0]
        costs = self._epoch_costs(app, gpu_type, num_gpus, placement)
        return app.rate_ahead(done, costs, horizon_s)

    def speed_change_after(self, job_type: str, done: float) -> float | None:
        """The work at which the speed of a job of ``job_type`` that has done ``done``
        changes next: the start of an elastic job's next epoch; ``None`` if it never does
        (a fixed batch, the last epoch)."""
        known = self.application(job_type)
        if known is None or known[1] != 0:
            return None
        app = known[0]
        epoch = app.epoch_of(done) + 1
        return app.convergence.goal_progress(epoch) if epoch < app.convergence.epochs \
            else None

    def _epoch_costs(self, app: PolluxApplication, gpu_type: str, num_gpus: int,
                     placement: Placement) -> tuple[float, ...]:
        """``app``'s seconds per base-batch step in each epoch on (GPU type, count,
        placement), kept per layout; empty where it cannot run there."""
        layout = self.layout(gpu_type, num_gpus, placement)
        if layout is None:
            return ()
        key = (app.name, layout)
        found = self._costs.get(key)
        if found is None:
            slower = self.slowdown.get(app.name, 1.0)
            found = self._costs[key] = tuple(cost * slower for cost in app.epoch_costs(layout))
        return found

    def layout(self, gpu_type: str, num_gpus: int, placement: Placement
               ) -> tuple[int, ...] | None:
        """The GPUs per node of a gang of ``num_gpus`` on ``gpu_type`` (:func:`node_layout`
        with this model's node size); ``None`` where this model answers 0."""
        if gpu_type != self.gpu_type or num_gpus > self.max_gpus:
            return None
        return node_layout(num_gpus, placement, self.gpus_per_node)

    def _throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                    placement: Placement) -> float:
        known = self.application(job_type)
        layout = self.layout(gpu_type, num_gpus, placement)
        if known is None or layout is None:
            return 0.0
        app, batch = known
        if batch == 0:  # elastic: base-batch steps/s at its best batches there
            return app.elastic_rate(layout, self._epoch_costs(app, gpu_type, num_gpus,
                                                              placement))
        plan = app.batch_plan(batch, num_gpus)
        if not (app.convergence.base_batch <= batch <= app.convergence.max_batch
                and app.min_local_bsz <= plan.atomic_bsz):
            return 0.0
        try:
            return 1.0 / (app.step_time(layout, batch) * self.slowdown.get(app.name, 1.0))
        except InputError:
            return 0.0


def read_application(folder: str | Path) -> PolluxApplication:
    """One application's folder of Pollux's ``traces/`` (``validation-*.csv``,
    ``placements.csv``, ``scalability.csv``), with Pollux's completion epoch and
    per-GPU batch limit for the applications it names."""
    folder = Path(folder)
    epochs = COMPLETION_EPOCHS.get(folder.name)
    steps = read_measured_steps(folder)
    low, high = steps.local_bsz_range
    return PolluxApplication(read_convergence(folder, epochs), steps, low,
                             MAX_LOCAL_BSZ.get(folder.name, high))


def read_pollux(folder: str | Path) -> PolluxThroughput:
    """Every application of Pollux's ``traces/`` folder (each sub-folder with a
    ``placements.csv``) as a :class:`PolluxThroughput`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder of Pollux's measurements", file=str(folder),
                         expected="Pollux's traces/ (one folder per application)")
    apps = {path.parent.name: read_application(path.parent)
            for path in sorted(folder.glob("*/placements.csv"))}
    if not apps:
        raise InputError("no application folders", file=str(folder),
                         expected="folders with placements.csv and validation-*.csv "
                         "(Pollux's traces/)")
    return PolluxThroughput(apps)
