"""Replaying jobs under a policy: in memory (:func:`replay`, Python objects in;
:func:`replay_trace`, a trace file) or from a trace file into an output folder
(:func:`run_replay`, the ``hetsched replay`` command; what it reads is
:mod:`hetsched.files.replay_inputs`'s; :func:`replay_rendered`, a bench's cell), progress on
a terminal or in Jupyter. Every one returns a :class:`ReplayResult`, and every replay's run
segments are verified by the independent checker."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hetsched.core.errors import InputError, InvalidScheduleError
from hetsched.core.outputs import check_output_folder, writing
from hetsched.core.records import Cluster, Job
from hetsched.core.settings import ReplaySettings
from hetsched.core.sharing import DEFAULT_COLOCATION_FACTOR, CoLocationModel
from hetsched.core.tenants import TenantTable
from hetsched.core.throughput import ThroughputModel
from hetsched.files.replay_inputs import ReplayInputs, read_jobs, replay_inputs, scale_arrivals
from hetsched.policies.backends import check_installed
from hetsched.policies.quotas import with_tenants
from hetsched.policies.rolling import RollingPolicy
from hetsched.simulate.record import Replay
from hetsched.simulate.summary import ReplaySummary

if TYPE_CHECKING:
    from hetsched.core.check import Violation
    from hetsched.files.traces import Trace

__all__ = ["ReplayBar", "ReplayResult", "check_replay", "replay", "replay_rendered",
           "replay_trace", "rolling_policy", "run_replay"]

log = logging.getLogger(__name__)

#: A rolling policy's constructor arguments that the replay itself sets (not a policy's
#: own setting in a sweep spec).
REPLAY_ARGUMENTS = frozenset({"backend", "time_limit_s", "deterministic", "seed", "executor"})


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """What every replay returns (:func:`replay`, :func:`replay_trace`,
    :func:`run_replay`, :func:`replay_rendered`): what ran (``replay``: the per-job
    records, the decisions, :meth:`~hetsched.simulate.record.Replay.schedule`,
    :meth:`~hetsched.simulate.record.Replay.jobs_frame`), its metrics as a typed record
    (``summary``), and every figure by name (``figures``: the metrics, then, where the
    replay was rendered, the rest of ``summary.json``'s keys: the trace, the settings, the
    lower bounds; then ``timing.json``'s wall-clock figures and ``cpu_time_s``, the CPU
    seconds the replay took in its process). A rendered replay has its outputs as text by
    file name (``files``: :meth:`~hetsched.simulate.record.Replay.files`, empty in memory),
    which a bench worker hands back for the bench to write, and ``out``, the folder they
    were written into (``None`` if none)."""

    replay: Replay
    summary: ReplaySummary
    figures: Mapping[str, object]
    files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    out: Path | None = None

    @property
    def interrupted(self) -> bool:
        """Whether the replay was stopped before every job finished (Ctrl-C, SIGTERM, a
        policy's failure)."""
        return self.summary.interrupted


def rolling_policy(name: str, settings: ReplaySettings | None = None, *,
                   params: Mapping[str, object] | None = None,
                   executor: Executor | None = None) -> RollingPolicy:
    """The rolling policy called ``name`` (:func:`hetsched.registry.rolling`) with the
    solver settings of ``settings`` (default :class:`ReplaySettings`): its back-end, its
    limit per decision (deterministic work units unless ``deterministic`` is off: see
    :mod:`hetsched.formulations.budget`), its seed. ``partitions`` > 1 splits an
    allocation LP into POP's sub-problems (policies that take it: gavel, gavel-max-sum;
    others raise an :class:`InputError` naming it), which ``executor`` (a process pool,
    Ray's) then solves side by side. ``params`` are the policy's own constructor
    arguments (``round_s``, ``partitions``, ...: a sweep spec's policy settings); one it
    does not take is an :class:`InputError` naming it."""
    from hetsched.registry import policy_settings, rolling, takes

    settings = settings or ReplaySettings()
    check_installed(settings.backend)
    own: dict[str, Any] = dict(params or {})
    if settings.partitions != 1:
        if not takes(name, "partitions"):
            raise InputError(f"policy {name} has no partitions", path="partitions",
                             value=settings.partitions, expected="1 (partitions split an "
                             "allocation LP: gavel, gavel-max-sum)")
        own["partitions"] = settings.partitions
    for key, value in own.items():
        if key in REPLAY_ARGUMENTS or not takes(name, key):
            allowed = [s for s in policy_settings(name) if s not in REPLAY_ARGUMENTS]
            raise InputError(f"policy {name} has no setting {key}", path=key, value=value,
                             expected=("one of " + ", ".join(allowed) if allowed else
                                       f"none: {name} has no settings of its own") + (
                                 " (the replay sets it)" if key in REPLAY_ARGUMENTS else ""))
    if executor is not None and own.get("partitions", 1) != 1:
        own["executor"] = executor
    return rolling(name, **settings.policy_arguments(), **own)


def replay(jobs: Sequence[Job], cluster: Cluster, policy: str | RollingPolicy = "fifo", *,
           throughput: ThroughputModel, model: ThroughputModel | None = None,
           settings: ReplaySettings | None = None, progress: bool = False,
           colocation: CoLocationModel | None = None,
           tenants: TenantTable | None = None, keep_tenants: bool = True,
           **changes: Any) -> ReplayResult:
    """Replay ``jobs`` on ``cluster`` under ``policy`` (a registered name or a rolling
    policy object), in memory, the same way ``hetsched replay`` does; what ran and its
    metrics (:class:`ReplayResult`, nothing rendered).

    ``throughput`` advances the jobs (measured); ``model`` is what the policy sees (the
    fitted one; default ``throughput``). ``settings`` (default :class:`ReplaySettings`,
    the command's defaults) set the solver of each decision, the decision interval, the
    restart penalty, the start latency, ``load`` (the arrival rate's multiplier), the
    prices (set on ``cluster``'s types) and the spread speed (``packed``: ``throughput``
    and ``model`` read packed everywhere); their trace-reading fields do not apply to
    jobs given as objects. ``progress`` shows a bar (jobs done,
    ETA) on a terminal or in Jupyter (:mod:`hetsched.core.bars`); ``colocation`` how fast
    jobs sharing a GPU run (hetsched.core.sharing; default factors); ``tenants`` the
    tenants' weights and quotas, for the fairness figures and, with ``keep_tenants``, kept
    by the policy (:mod:`hetsched.policies.quotas`; docs/fairness.md). What ran
    (:meth:`~hetsched.simulate.record.Replay.schedule`) is verified by
    :func:`hetsched.core.check.check` against ``throughput``;
    :class:`~hetsched.core.errors.InvalidScheduleError` if it fails, and a policy's failure
    is raised (its ``replay``: what ran until then). ``changes`` are fields
    of :class:`ReplaySettings` over those of ``settings`` (``load=2.0``). A setting that
    cannot change the replay (:mod:`hetsched.setting_notices`: a trace-reading field, a
    back-end the policy lacks) is logged and listed first in its ``warnings``."""
    from hetsched.setting_notices import object_notices

    settings = _settings_with(settings, changes, "replay")
    notices = object_notices(settings)
    if colocation is None:
        colocation = CoLocationModel(default_factor=settings.colocation_factor)
    elif settings.colocation_factor not in (DEFAULT_COLOCATION_FACTOR,
                                            colocation.default_factor):
        notices.append(f"colocation_factor (--colocation-factor) {settings.colocation_factor}"
                       " does not apply: the colocation model given has its own default "
                       f"factor, {colocation.default_factor}")
    return _replay_jobs(jobs, cluster, policy, throughput=throughput, model=model,
                        settings=settings, progress=progress, colocation=colocation,
                        tenants=tenants, keep_tenants=keep_tenants, notices=notices)


def _replay_jobs(jobs: Sequence[Job], cluster: Cluster, policy: str | RollingPolicy, *,
                 throughput: ThroughputModel, model: ThroughputModel | None,
                 settings: ReplaySettings, progress: bool, colocation: CoLocationModel,
                 tenants: TenantTable | None, keep_tenants: bool,
                 notices: Sequence[str]) -> ReplayResult:
    """:func:`replay` of ``settings`` with the notices of the settings that did not apply
    (``notices``, and those of the policy and the jobs, :mod:`hetsched.setting_notices`)."""
    from hetsched.core.prices import with_prices
    from hetsched.core.records import configurations
    from hetsched.core.throughput import PackedEverywhere
    from hetsched.setting_notices import job_notices, policy_notices, round_notices, say

    cpu_began = time.process_time()
    name = policy if isinstance(policy, str) else None
    made = policy if not isinstance(policy, str) else rolling_policy(policy, settings)
    said = say([*notices, *(policy_notices(settings, name) if name is not None else []),
                *round_notices(settings, name or made.name, made.round_s),
                *job_notices(settings, name, jobs)])
    cluster = with_prices(cluster, settings.prices)
    if settings.spread_speed == "packed":
        throughput = PackedEverywhere(throughput)
        model = None if model is None else PackedEverywhere(model)
    made = with_tenants(made, tenants if keep_tenants else None)
    for index, job in enumerate(jobs):
        if not configurations(cluster, throughput, job):
            raise InputError("job cannot run on this cluster", path=f"jobs[{index}]",
                             value=f"{job.num_gpus} x {job.job_type}",
                             expected="a GPU type of the cluster with throughput > 0")
    scaled = scale_arrivals(jobs, settings.load)
    bar = ReplayBar(len(scaled), enabled=None if progress else False)
    outcome = _simulate(cluster, scaled, made, settings, truth=throughput, model=model,
                        colocation=colocation, bar=bar if bar.enabled else None)
    outcome.tenants = tenants
    outcome.setting_warnings = said
    if outcome.failure is not None:
        outcome.failure.replay = outcome  # what ran until the policy failed
        raise outcome.failure
    violations = check_replay(outcome, scaled, throughput)
    if violations:
        raise InvalidScheduleError("the replay", violations)
    summary = outcome.metrics()
    return ReplayResult(outcome, summary, {
        **summary.to_dict(), **outcome.timing(), "cpu_time_s": time.process_time() - cpu_began,
        **({"estimates": outcome.estimates} if outcome.estimates is not None else {})})


def _settings_with(settings: ReplaySettings | None, changes: Mapping[str, Any],
                 function: str) -> ReplaySettings:
    """``settings`` (default :class:`ReplaySettings`) with ``changes``, fields of it given
    as keyword arguments of ``function``; another keyword is a :class:`TypeError` naming
    it and the fields, as Python names an unexpected keyword argument."""
    settings = settings or ReplaySettings()
    known = [f.name for f in dataclasses.fields(ReplaySettings)]
    unknown = [name for name in changes if name not in known]
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r} "
                        "(the replay settings it takes as keywords, or as "
                        "settings=ReplaySettings(...): " + ", ".join(known) + ")")
    return settings.replace(**changes) if changes else settings


def _simulate(cluster: Cluster, jobs: Sequence[Job], policy: RollingPolicy,
              settings: ReplaySettings, *, truth: ThroughputModel,
              model: ThroughputModel | None, colocation: CoLocationModel | None,
              bar: ReplayBar | None) -> Replay:
    """The one way every replay runs: the simulator on ``jobs`` (arrivals already scaled)
    under ``policy`` with the settings' decision interval, restart penalty and start
    latency, the bar (if any) updated and closed."""
    from hetsched.knowledge.view import knowledge_view
    from hetsched.simulate.learning import learner_of
    from hetsched.simulate.simulator import Simulator

    knowledge = knowledge_view(settings.knowledge, cluster, model or truth)
    learner = learner_of(settings.learn, cluster, jobs, truth, model or truth)
    simulator = Simulator(cluster, jobs, policy, truth=truth, model=model, knowledge=knowledge,
                          learner=learner,
                          interval_s=settings.interval_s, batch_s=settings.batch_s,
                          restart_penalty_s=settings.restart_penalty_s,
                          start_latency_s=settings.start_latency_s, progress=bar,
                          colocation=colocation,
                          decision_timeout_s=settings.decision_timeout_s)
    try:
        replay = simulator.run()
        if bar is not None:
            bar.finish(replay)
    finally:
        if bar is not None:
            bar.close()
    return replay


def replay_trace(trace: str | Path, trace_format: str, cluster: str,
                 policy: str | RollingPolicy = "fifo", *,
                 settings: ReplaySettings | None = None,
                 throughput_path: str | Path | None = None,
                 progress: bool = False, **changes: Any) -> ReplayResult:
    """Replay a trace file in memory, as ``hetsched replay`` does, and return what ran and
    its metrics (:class:`ReplayResult`, nothing rendered):
    ``trace`` of ``trace_format`` (gavel, philly, helios, openb, native) on the cluster
    spec ``cluster`` (``v100=36,p100=36,k80=36``, a cluster JSON, ``openb:NODES.csv``,
    ``pai:MACHINES.csv``) under ``policy`` (a name, ``file.py:Class``, or a rolling policy
    object), read with the settings' seed, job limit and trace options, the throughput of
    ``throughput_path`` (default: Gavel's table beside a Gavel trace, else the built-in
    catalogue). The same jobs, and the same ``jobs.csv``, as the command (a test checks
    it); nothing is written. ``progress`` shows a bar on a terminal or in Jupyter.
    ``changes`` are fields of :class:`ReplaySettings` (``limit_jobs=200``, ``load=2.0``)
    over those of ``settings``: ``replay_trace(..., limit_jobs=200)`` is
    ``replay_trace(..., settings=ReplaySettings(limit_jobs=200))``."""
    from hetsched.setting_notices import seed_notices, trace_notices

    settings = _settings_with(settings, changes, "replay_trace")
    inputs = replay_inputs(Path(trace), trace_format, cluster,
                           throughput_path=None if throughput_path is None
                           else Path(throughput_path), settings=settings)
    read = read_jobs(inputs, settings)
    notices = trace_notices(settings, inputs, read)
    if isinstance(policy, str):
        notices += seed_notices(settings, policy, trace_format)
    if settings.jct_window is not None:
        notices.append(f"jct_window (--jct-window) {settings.jct_window[0]}:"
                       f"{settings.jct_window[1]} does not apply to a replay in memory: "
                       "avg_jct_window_s is a figure of the files run_replay writes "
                       "(hetsched.replaying.window_figures computes it from a Replay)")
    return _replay_jobs(read.jobs, inputs.cluster, policy, throughput=inputs.truth,
                        model=inputs.model, settings=settings, progress=progress,
                        colocation=inputs.colocation, tenants=None, keep_tenants=True,
                        notices=notices)


class ReplayBar:
    """The bar of a replay (:class:`hetsched.core.bars.ProgressBar`): jobs done of the
    total with rate and ETA, then the simulated time and the decisions so far; shown on a
    terminal or in Jupyter, silent elsewhere (``stream``: another stream, e.g. a test's)."""

    def __init__(self, total: int, stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        from hetsched.core.bars import ProgressBar

        self.bar = ProgressBar(total, desc="replay", unit="job", stream=stream,
                               enabled=enabled)
        self.enabled = self.bar.enabled

    def __call__(self, done: int, total: int, now: float, decisions: int) -> None:
        """Report progress (called by the simulator after each decision; the bar is
        redrawn at most every :data:`hetsched.core.bars.REFRESH_S`)."""
        self.bar.update_to(done, f"t = {now / 3600:,.1f} h, {decisions:,} decisions")

    def finish(self, replay: Replay) -> None:
        """Show the end of ``replay`` (its last completions come after its last decision)
        and close the bar."""
        done = sum(1 for record in replay.records.values() if record.finish is not None)
        self.bar.update_to(done, f"{len(replay.decisions):,} decisions", force=True)
        self.close()

    def close(self) -> None:
        """Leave the bar as it is (idempotent)."""
        self.bar.close()


def replay_rendered(inputs: ReplayInputs, trace: Trace, policy: RollingPolicy, *,
                 policy_name: str, settings: ReplaySettings | None = None,
                 params: Mapping[str, object] | None = None,
                 progress: ReplayBar | None = None, out: Path | None = None,
                 files: Mapping[str, str] | None = None,
                 pairs: Path | None = None) -> ReplayResult:
    """Replay the jobs of ``trace`` (arrivals scaled by the settings' ``load``) under
    ``policy`` and render its outputs (:func:`run_replay`'s; ``params``, the policy's own
    settings, are recorded in the summary as ``policy_params``). With ``out``, the files
    (and ``files``: ``run.toml``) are written there as one set before a Ctrl-C that came
    meanwhile takes effect; the result's ``files`` are the replay's own. The settings that
    could not change the replay (:mod:`hetsched.setting_notices`; ``pairs``, the
    co-location pairs file, if one was given) are logged and listed first in its
    warnings."""
    from hetsched.core.interrupts import deferred_interrupts
    from hetsched.formulations.versions import solver_versions
    from hetsched.setting_notices import (
        job_notices,
        policy_notices,
        round_notices,
        say,
        seed_notices,
        trace_notices,
    )
    from hetsched.simulate.record import write_folder

    settings = settings or ReplaySettings()
    cpu_began = time.process_time()
    cluster = inputs.cluster
    said = say([*trace_notices(settings, inputs, trace),
                *policy_notices(settings, policy_name),
                *round_notices(settings, policy_name, policy.round_s),
                *seed_notices(settings, policy_name, inputs.trace_format),
                *job_notices(settings, policy_name, trace.jobs, pairs=pairs)])
    jobs = scale_arrivals(trace.jobs, settings.load)
    replay = _simulate(cluster, jobs, policy, settings, truth=inputs.truth,
                       model=inputs.model, colocation=inputs.colocation, bar=progress)
    replay.tenants = inputs.tenants
    replay.setting_warnings = said
    extra: dict[str, object] = {
        "trace": str(inputs.trace_path), "format": inputs.trace_format,
        "cluster": inputs.cluster_spec, "gpus": len(cluster.gpus), "policy": policy_name,
        **({"policy_params": dict(params)} if params else {}), "seed": settings.seed,
        **policy.figures(),
        "throughput": str(inputs.source) if inputs.source else "built-in catalogue",
        "skipped_rows": trace.skipped_rows, "excluded": dict(trace.excluded),
        "notes": list(trace.notes), "load": settings.load, **inputs.settings(trace, jobs),
        "elastic": settings.elastic, "spread_speed": settings.spread_speed,
        "knowledge": settings.knowledge, "learn": settings.learn,
        **({"learned_keys": len(replay.learned.rows())} if replay.learned is not None else {}),
        **({"estimates": replay.estimates} if replay.estimates is not None else {}),
        "solver_limit": {"per_decision": settings.time_limit_s,
                         "unit": "work units" if settings.deterministic else "s wall"},
        "solver_versions": solver_versions(),
        **({"policy_failure": str(replay.failure)} if replay.failure is not None else {}),
        **(window_figures(replay, jobs, settings.jct_window)
           if settings.jct_window is not None else {})}
    # A Ctrl-C from here on stops after the files are rendered (and written); a write that
    # fails (a full disk) leaves the folder as it was and ends in one line naming it.
    with deferred_interrupts():
        output = _render(replay, jobs, inputs, extra)
        if out is not None:
            with writing(out, "out", "the output folder"):
                write_folder(out, {**output.files, **(files or {})})
                if output.violations:
                    raise InvalidScheduleError(f"the replay written to {out}",
                                               output.violations)
    if output.violations:
        raise InvalidScheduleError("the replay", output.violations)
    if replay.failure is not None:  # after the files of what ran are written
        raise replay.failure
    # The CPU time of this process (a bench worker's), which other users' jobs on a shared
    # machine do not inflate as they do the wall time: in results.csv, not in the files.
    cpu_s = time.process_time() - cpu_began
    return ReplayResult(replay, output.summary, {**output.figures, "cpu_time_s": cpu_s},
                        output.files, out)


def run_replay(trace_path: Path, trace_format: str, cluster_spec: str, policy_name: str, *,
               out: Path, settings: ReplaySettings | None = None,
               throughput_path: Path | None = None, show_progress: bool = True,
               executor: Executor | None = None,
               files: Mapping[str, str] | None = None,
               tenants_path: Path | None = None,
               pairs_path: Path | None = None) -> ReplayResult:
    """Read the trace, replay it under the policy, write the outputs into the folder
    ``out`` (new, or one a replay wrote: it is replaced as a whole); returns what ran,
    its figures (``summary.json``'s and ``timing.json``'s) and the files written
    (:class:`ReplayResult`). ``settings`` (default
    :class:`ReplaySettings`: the ``hetsched replay`` command's defaults) say how: the
    policy is called at every boundary of its own round (``round_s``), and every
    ``interval_s`` if given, while any job runs or waits; ``load`` scales the arrival rate
    (:func:`scale_arrivals`); with ``deterministic`` (the default) every solver limit is
    a deterministic work limit, so the same call gives byte-identical ``summary.json``,
    ``jobs.csv`` and ``decisions.csv``. The summary carries the lower bounds of
    :func:`hetsched.core.bounds.lower_bounds` (``bound_*``, measured throughput) and
    records how the trace was read. ``executor`` solves POP's ``partitions`` side by side
    (the same results). ``files`` (name -> text) join the outputs: the command writes its
    settings, ``run.toml`` (:mod:`hetsched.cli.run_config`). ``tenants_path``: the tenants'
    weights and quotas for the fairness figures (docs/fairness.md); ``pairs_path``:
    co-location pairs measured on their own (:mod:`hetsched.speeds.pairs`)."""
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.simulate.record import FOLDER_FILES

    settings = settings or ReplaySettings()
    # Options first, so that a typo is reported before a trace of 80,000 rows is read.
    policy = rolling_policy(policy_name, settings, executor=executor)
    cluster = parse_cluster(cluster_spec)
    # Before the work: a run must not end in a write error.
    check_output_folder(out, holds=FOLDER_FILES)
    inputs = replay_inputs(trace_path, trace_format, cluster_spec,
                           throughput_path=throughput_path, cluster=cluster,
                           settings=settings, tenants_path=tenants_path,
                           pairs_path=pairs_path)
    trace = read_jobs(inputs, settings)
    progress = ReplayBar(len(trace.jobs)) if show_progress else None
    return replay_rendered(inputs, trace, with_tenants(policy, inputs.tenants),
                           policy_name=policy_name, settings=settings,
                           progress=progress, out=out, files=files, pairs=pairs_path)


@dataclasses.dataclass(frozen=True)
class _Rendered:
    summary: ReplaySummary
    figures: dict[str, object]
    files: dict[str, str]
    violations: list[Violation]


def _render(replay: Replay, jobs: Sequence[Job], inputs: ReplayInputs,
            extra: dict[str, object]) -> _Rendered:
    """Add the lower bounds to ``extra``, check the replay, render its files.

    The bounds are of the jobs the metrics cover: every job, or, in an interrupted replay
    (whose metrics cover the finished jobs only), the finished jobs (``bounds_cover``).
    Bounds of every job would not bound a partial average JCT: the short jobs finish
    first, and their mean is below the mean over all jobs."""
    from hetsched.core.bounds import lower_bounds

    covered = jobs
    if replay.interrupted:
        finished = {r.job.id for r in replay.records.values() if r.finish is not None}
        covered = [job for job in jobs if job.id in finished]
    cluster, truth = inputs.cluster, inputs.truth
    extra = {**extra, **(lower_bounds(covered, cluster, truth).as_dict() if covered else {}),
             "bounds_cover": "finished jobs" if replay.interrupted else "all jobs"}
    violations = check_replay(replay, jobs, truth)
    summary = replay.metrics()  # (once: on a long replay it takes seconds)
    metrics = summary.to_dict()
    return _Rendered(summary, {**metrics, **extra, **replay.timing()},
                     replay.files(extra, metrics=metrics), violations)


def window_figures(replay: Replay, jobs: Sequence[Job], window: tuple[int, int]
                   ) -> dict[str, object]:
    """The average JCT of the jobs of arrival rank ``window[0]`` to ``window[1] - 1``
    (``jobs`` in arrival order), over those that finished (``avg_jct_window_s``; NaN if
    none did), how many did (``jct_window_jobs``) and the window (``jct_window``)."""
    low, high = window
    finished = [record.finish - record.job.arrival for job in jobs[low:high]
                if (record := replay.records.get(job.id)) is not None
                and record.finish is not None]
    return {"jct_window": f"{low}:{high}",
            "avg_jct_window_s": sum(finished) / len(finished) if finished else math.nan,
            "jct_window_jobs": len(finished)}


def check_replay(replay: Replay, jobs: Sequence[Job], truth: ThroughputModel) -> list[Violation]:
    """The independent checker's verdict on what the replay ran (:meth:`Replay.schedule`:
    every run segment, preemptions and restart penalties included) against the measured
    throughput; an interrupted replay is checked for the segments that ended. Only the
    segments of ``jobs`` are checked."""
    import dataclasses

    from hetsched.core.check import check
    from hetsched.core.records import Instance

    ids = {job.id for job in jobs}
    schedule = replay.schedule()
    schedule = dataclasses.replace(schedule, assignments=tuple(
        a for a in schedule.assignments if a.job in ids))
    instance = Instance(replay.cluster, tuple(jobs), truth, now=min(
        (job.arrival for job in jobs), default=0.0), colocation=replay.colocation)
    violations = check(instance, schedule, complete=not replay.interrupted)
    log.info("checker: %d run segments of %d jobs, %d violations", len(schedule),
             len(jobs), len(violations))
    return violations
