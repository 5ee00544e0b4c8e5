"""How a replay runs: one frozen, validated record, :class:`ReplaySettings`, built once
(by the ``replay`` and ``bench`` commands from their options, by a bench for each of its
runs, by a Python caller) and carried through every layer: the registry's rolling
policies, the trace reader, the simulator and the files a replay writes. Every default
of a replay is a field's default here, defined once: the commands' options, the sweep
spec files, :func:`hetsched.replay`, :func:`hetsched.replaying.run_replay`, the registry
and the bench read them from this module.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.prices import parse_prices
from hetsched.core.ranges import (
    MAX_TIME_S,
    Range,
    check_seed,
    is_int,
    name_value_items,
)
from hetsched.core.sharing import COLOCATION_FACTOR_RANGE, DEFAULT_COLOCATION_FACTOR

__all__ = [
    "COUNT_RANGE",
    "DECISION_LIMIT",
    "DECISION_TIMEOUT_S",
    "FRACTION_RANGE",
    "IDLE_SECONDS_RANGE",
    "KNOWLEDGE",
    "LOAD_RANGE",
    "MAX_LOAD",
    "MAX_RESTART_PENALTY_S",
    "MIN_LOAD",
    "MIN_PERIOD_S",
    "ON_BAD_ROW",
    "PERIOD_RANGE",
    "RESTART_PENALTY_S",
    "SPREAD_SPEEDS",
    "START_LATENCY_S",
    "TIME_LIMIT_RANGE",
    "UNKNOWN_GPUS",
    "ReplaySettings",
    "check_interval",
    "check_load",
    "check_period",
    "check_restart_penalty",
    "check_start_latency",
    "check_time_limit",
    "parse_gpu_aliases",
]

#: The solver limit of one decision of a replay: deterministic work units (about seconds
#: of one core) unless ``deterministic`` is off, then wall seconds.
DECISION_LIMIT = 0.1
#: The wall-clock limit of one call of a policy (its ``decide``, its hooks): a policy
#: that runs longer (a loop, a sleep) ends the replay as failed (exit 3). Generous: a
#: decision of a built-in policy takes milliseconds to seconds.
DECISION_TIMEOUT_S = 600.0
#: Seconds a preempted job makes no progress when it starts again (checkpoint, reload),
#: and the most a replay accepts (one day).
RESTART_PENALTY_S = 30.0
MAX_RESTART_PENALTY_S = 86_400.0
#: Seconds from a decision to start a job to the job running, its GPUs held without
#: progress, at every start (first or restart; a restart pays the restart penalty after
#: it): the time a real scheduler takes to dispatch a job (Slurm's scheduling pass, a
#: pod's start). A replay charges none by default; docs/slurm.md measures Slurm's.
START_LATENCY_S = 0.0
#: The shortest decision interval (``--interval``) and policy round (s): shorter ones
#: make a replay of jobs that run for days take millions of decisions.
MIN_PERIOD_S = 1.0
#: The range of ``--load`` (arrival-rate multipliers): 1/1000 stretches a year of
#: arrivals to a millennium; beyond, times leave the range the validation allows
#: (``hetsched.core.ranges.MAX_TIME_S``) and the clock's resolution eats the job durations.
MIN_LOAD = 1e-3
MAX_LOAD = 1e3
#: What to do with a trace row that cannot be read: stop (exit 2 naming it) or skip it.
ON_BAD_ROW = ("fatal", "skip")
#: What to do with a cluster's GPU type the throughput model does not know: ``error``
#: (the default: exit 2 naming it) or ``drop`` (its nodes are left out, with a warning,
#: and counted in summary.json's ``dropped_gpus``).
UNKNOWN_GPUS = ("error", "drop")
#: The speed of a gang spread over servers: ``measured`` (the profile's spread figure, or
#: the model's; the physics: it synchronises over the network) or ``packed`` (its packed
#: figure wherever its GPUs are: Gavel's simulator's assumption, to reproduce its figures).
SPREAD_SPEEDS = ("measured", "packed")
#: What a policy may know of the jobs' work (hetsched.knowledge): the ``truth``
#: (the trace's work), an ``estimate`` from the finished jobs' history, or ``none`` (one
#: guess for every job: only attained service tells them apart).
KNOWLEDGE = ("truth", "estimate", "none")
#: The priors a learned throughput table starts from (hetsched.speeds.learned): the
#: throughput ``source``, the built-in ``catalogue``, or nothing (``none``);
#: ``hetsched slurm run --learn`` takes these names.
LEARN_TABLE = ("off", "source", "catalogue", "none")
#: What the replay's policy plans with (hetsched.simulate.learning): ``off`` (the
#: throughput model, fixed), a table learned from the runs as they go from one of
#: :data:`LEARN_TABLE`'s priors (rigid jobs), or, for elastic jobs, ``bootstrap``: what
#: Sia knows of them (each profiled on one GPU of each type, its scaling learned as it
#: runs; hetsched.speeds.bootstrap).
LEARN = (*LEARN_TABLE, "bootstrap")

#: The range of each number of the settings, written one way in every message (the
#: command's options read them with these: hetsched.cli.options.FloatIn).
TIME_LIMIT_RANGE = Range(0.0, MAX_TIME_S, low_open=True, noun="seconds")
PERIOD_RANGE = Range(MIN_PERIOD_S, None, noun="seconds")
IDLE_SECONDS_RANGE = Range(0.0, MAX_RESTART_PENALTY_S, noun="seconds")
LOAD_RANGE = Range(MIN_LOAD, MAX_LOAD)
FRACTION_RANGE = Range(0.0, 1.0)
COUNT_RANGE = Range(1, None, integer=True)

_ALIAS = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)=([A-Za-z0-9][A-Za-z0-9_. ()-]*)$")


@dataclass(frozen=True)
class ReplaySettings:
    """Everything that shapes a replay besides its inputs (trace, format, cluster,
    throughput file, policy), checked when made: an :class:`InputError` names the field.

    The solver of each decision: ``backend`` (``None``: the policy's default),
    ``time_limit_s`` per decision (``None``: none), in deterministic work units unless
    ``deterministic`` is off, ``seed`` (also the trace reader's: drawn job types,
    synthetic deadlines), ``partitions`` (POP's sub-problems of an allocation LP).
    The simulator: ``interval_s`` (also decide every so many seconds), ``batch_s`` (an
    arrival or completion within so many seconds of the last decision waits for one
    decision at that time plus ``batch_s``; :class:`~hetsched.simulate.simulator.Simulator`),
    the restart penalty, the start latency (:data:`START_LATENCY_S`), ``load`` (the arrival
    rate's multiplier).
    Reading the trace: ``limit_jobs`` (the earliest N), ``on_bad_row``, ``deadline_fraction``
    (synthetic deadlines),
    ``reference_gpu``, ``gpu_aliases`` (a cluster GPU type answered by one the model
    knows), ``unknown_gpus``, ``gpu_sharing`` (jobs may ask for a share of a GPU) and
    ``colocation_factor`` (the speed of a job beside co-runners without a measured pair).
    ``spread_speed``: a spread gang's speed, measured or its packed one
    (:data:`SPREAD_SPEEDS`). ``prices``: USD per GPU-hour by GPU type, set on the
    cluster's types (the cost policy's prices and summary.json's cost).
    ``decision_timeout_s``: the wall-clock limit of one call of the policy (``None``:
    none), past which the replay ends as the policy's failure. ``jct_window``: ``(a, b)``,
    also the average JCT of the jobs of arrival rank ``a`` to ``b - 1`` (0 the first;
    Gavel's steady-state measure, jobs 4,000 to 5,000 of a continuous trace):
    ``avg_jct_window_s``.
    """

    backend: str | None = None
    time_limit_s: float | None = DECISION_LIMIT
    deterministic: bool = True
    seed: int = 0
    partitions: int = 1
    interval_s: float | None = None
    batch_s: float | None = None
    restart_penalty_s: float = RESTART_PENALTY_S
    start_latency_s: float = START_LATENCY_S
    load: float = 1.0
    limit_jobs: int | None = None
    on_bad_row: str = "fatal"
    deadline_fraction: float | None = None
    reference_gpu: str | None = None
    #: (left out of the hash: a bench's cells, which carry their settings, are dict keys)
    gpu_aliases: Mapping[str, str] = field(default_factory=dict, hash=False)
    unknown_gpus: str = "error"
    gpu_sharing: bool = True
    colocation_factor: float = DEFAULT_COLOCATION_FACTOR
    spread_speed: str = "measured"
    decision_timeout_s: float | None = DECISION_TIMEOUT_S
    #: USD per GPU-hour by GPU type, over the cluster's own (hetsched.core.prices; left
    #: out of the hash as ``gpu_aliases``)
    prices: Mapping[str, float] = field(default_factory=dict, hash=False)
    jct_window: tuple[int, int] | None = None
    #: the trace's jobs are elastic (``--elastic``): the scheduler chooses each one's GPU
    #: count and the job its batch size (formats with batch sizes: pollux, sia; docs/elastic.md)
    elastic: bool = False
    #: what the policy may know of the jobs' work (:data:`KNOWLEDGE`); the simulator, the
    #: checker and the figures keep the truth
    knowledge: str = "truth"
    #: what the policy plans with: the throughput model, or one learned from the runs
    #: (:data:`LEARN`); the simulator advances the jobs at the true speeds
    learn: str = "off"

    def __post_init__(self) -> None:
        if self.backend is not None and not (isinstance(self.backend, str) and self.backend):
            raise InputError("bad back-end", path="backend", value=self.backend,
                             expected="a back-end's name")
        check_time_limit(self.time_limit_s)
        check_time_limit(self.decision_timeout_s, "decision_timeout_s", "bad decision timeout")
        for name in ("deterministic", "gpu_sharing", "elastic"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"bad {name}", path=name, value=getattr(self, name),
                                 expected="true or false")
        check_seed(self.seed)
        COUNT_RANGE.check(self.partitions, "partitions", "bad partition count")
        check_interval(self.interval_s)
        check_period(self.batch_s, "batch_s")
        object.__setattr__(self, "restart_penalty_s",
                           check_restart_penalty(self.restart_penalty_s))
        object.__setattr__(self, "start_latency_s", check_start_latency(self.start_latency_s))
        object.__setattr__(self, "load", check_load(self.load))
        if self.limit_jobs is not None:
            COUNT_RANGE.check(self.limit_jobs, "limit_jobs", "bad job limit")
        _choice(self.on_bad_row, "on_bad_row", ON_BAD_ROW)
        _choice(self.unknown_gpus, "unknown_gpus", UNKNOWN_GPUS)
        _choice(self.spread_speed, "spread_speed", SPREAD_SPEEDS)
        _choice(self.knowledge, "knowledge", KNOWLEDGE)
        _choice(self.learn, "learn", LEARN)
        if self.learn not in ("off", "bootstrap") and self.elastic:
            raise InputError("a learned throughput table does not apply to elastic jobs",
                             path="learn", value=self.learn,
                             expected="off or bootstrap with elastic jobs (their speed "
                             "depends on the batch size, which a learned table does not "
                             "have)")
        if self.learn == "bootstrap" and not self.elastic:
            raise InputError("the bootstrap is for elastic jobs", path="learn",
                             value=self.learn, expected="elastic jobs (--elastic), or one "
                             "of " + ", ".join(LEARN_TABLE) + " for rigid jobs")
        if self.deadline_fraction is not None:
            FRACTION_RANGE.check(self.deadline_fraction, "deadline_fraction",
                                 "bad deadline fraction")
        if self.reference_gpu is not None and not (
                isinstance(self.reference_gpu, str) and self.reference_gpu):
            raise InputError("bad reference GPU", path="reference_gpu",
                             value=self.reference_gpu, expected="a GPU type's name")
        object.__setattr__(self, "gpu_aliases", parse_gpu_aliases(self.gpu_aliases))
        object.__setattr__(self, "prices", parse_prices(self.prices))
        object.__setattr__(self, "jct_window", parse_jct_window(self.jct_window))
        COLOCATION_FACTOR_RANGE.check(self.colocation_factor, "colocation_factor",
                                      "bad co-location factor")

    def replace(self, **changes: Any) -> ReplaySettings:
        """A copy with ``changes`` (checked again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = sorted(set(changes) - set(values))
        if unknown:
            raise InputError("no such replay setting", path=unknown[0],
                             value=changes[unknown[0]],
                             expected="one of " + ", ".join(values))
        return ReplaySettings(**{**values, **changes})

    def policy_arguments(self) -> dict[str, Any]:
        """What a rolling policy's constructor takes of these settings (the registry's
        ``rolling``)."""
        return {"backend": self.backend, "time_limit_s": self.time_limit_s,
                "seed": self.seed, "deterministic": self.deterministic}


def parse_jct_window(value: Any) -> tuple[int, int] | None:
    """A JCT window: ``None``, ``(a, b)`` (a list or tuple) or ``"a:b"``, integers with
    ``0 <= a < b``."""
    if value is None:
        return None
    parts: Any = value.split(":") if isinstance(value, str) else value
    bounds: list[Any] = []
    with contextlib.suppress(TypeError, ValueError):
        bounds = [int(part.strip()) if isinstance(part, str) else part for part in parts]
    if len(bounds) != 2 or not all(is_int(b) for b in bounds) or \
            not 0 <= bounds[0] < bounds[1]:
        raise InputError("bad JCT window", path="jct_window", value=value,
                         expected="A:B, job ranks by arrival with 0 <= A < B (4000:5000: "
                         "the 4,001st to the 5,000th)")
    return int(bounds[0]), int(bounds[1])


def _choice(value: Any, name: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(f"bad {name}", path=name, value=value,
                         expected="one of " + ", ".join(allowed))


def check_time_limit(value: float | None, path: str = "time_limit_s",
                     problem: str = "bad time limit") -> float | None:
    """A solver limit per decision: ``None`` (none), or seconds in
    :data:`TIME_LIMIT_RANGE`."""
    if value is not None:
        TIME_LIMIT_RANGE.check(value, path, problem)
    return value


def check_period(value: float | None, what: str) -> float | None:
    """A round or interval (s): ``None``, or finite and at least :data:`MIN_PERIOD_S`."""
    if value is None:
        return None
    return float(PERIOD_RANGE.check(value, what, "bad decision interval"))


def check_interval(value: float | None) -> float | None:
    """``--interval`` (s): ``None``, or finite and at least :data:`MIN_PERIOD_S`."""
    return check_period(value, "interval_s")


def check_restart_penalty(value: float) -> float:
    """The restart penalty (s): finite, from 0 to :data:`MAX_RESTART_PENALTY_S`."""
    return _idle_seconds(value, "restart_penalty_s", "restart penalty")


def check_start_latency(value: float) -> float:
    """The start latency (s): finite, from 0 to :data:`MAX_RESTART_PENALTY_S`."""
    return _idle_seconds(value, "start_latency_s", "start latency")


def _idle_seconds(value: float, path: str, what: str) -> float:
    return float(IDLE_SECONDS_RANGE.check(value, path, f"bad {what}"))


def check_load(load: float) -> float:
    """A ``--load`` value: a number from :data:`MIN_LOAD` to :data:`MAX_LOAD`."""
    return float(LOAD_RANGE.check(load, "load", "bad load"))


def parse_gpu_aliases(text: str | Mapping[str, str] | None) -> dict[str, str]:
    """``g3=a100,g2=v100`` -> ``{"g3": "a100", "g2": "v100"}``: each cluster GPU type
    (left) takes the throughput of a type the model knows (right). Names are compared as
    written (openb's models are lower-cased: ``g3``). Blank text is an
    :class:`InputError` (an empty list is not "no aliases": give none for those);
    ``None`` or ``{}``: none."""
    if isinstance(text, str) and not text.strip():
        raise InputError("empty GPU alias list", path="gpu_aliases", value=text,
                         expected="CLUSTER_TYPE=MODEL_TYPE[,...], e.g. g3=a100")
    aliases: dict[str, str] = {}
    for item in name_value_items(text, "bad GPU aliases", "gpu_aliases",
                                 "CLUSTER_TYPE=MODEL_TYPE[,...], e.g. g3=a100"):
        match = _ALIAS.match(item)
        if match is None:
            raise InputError("bad GPU alias", path="gpu_aliases", value=item,
                             expected="CLUSTER_TYPE=MODEL_TYPE[,...], e.g. g3=a100")
        name, target = match.group(1), match.group(2).strip()
        if name in aliases:
            raise InputError("GPU type aliased twice", path="gpu_aliases", value=name,
                             expected="each cluster GPU type once")
        if name == target:
            raise InputError("GPU type aliased to itself", path="gpu_aliases", value=item,
                             expected="another GPU type, one the throughput model knows")
        aliases[name] = target
    return aliases
