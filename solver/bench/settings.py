"""What a bench runs, and what it records of it: one trace on one cluster, every policy x
seed x load (:class:`BenchSettings`, from flat values: :func:`bench_settings`), policies
with settings of their own under labels (:class:`PolicyVariant`), each combination
(:class:`RunSpec`; all of them in order: :func:`plan`), and ``bench.json``, the settings
that shape the results, which a rerun into the same folder must match
(:func:`record_settings`). The bench itself is :mod:`hetsched.bench.runner`."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsched.bench.engine import default_workers
from hetsched.core.errors import InputError
from hetsched.core.outputs import write_text
from hetsched.core.settings import MAX_LOAD, MIN_LOAD, ReplaySettings
from hetsched.formulations.options import MAX_SEED

if TYPE_CHECKING:
    from hetsched.bench.references import Reference

__all__ = ["LABEL", "REPLAY_FIELDS", "SETTING_DEFAULTS", "SETTING_FIELDS", "BenchSettings",
           "PolicyVariant", "RunSpec", "bench_settings", "load_label", "plan",
           "record_settings"]


#: The settings recorded in ``bench.json`` (the bench's own, then those of its replay
#: settings); a rerun into the same folder must match them.
SETTING_FIELDS = ("trace", "trace_format", "cluster", "limit_jobs", "time_limit_s",
                  "deterministic", "throughput", "backend", "interval_s", "batch_s",
                  "deadline_fraction",
                  "restart_penalty_s", "on_bad_row", "reference_gpu", "gpu_aliases",
                  "unknown_gpus", "gpu_sharing", "colocation_factor", "start_latency_s",
                  "prices", "spread_speed", "tenants", "pairs", "jct_window", "elastic",
                  "knowledge", "learn")
#: The replay settings a bench runs with; each run sets its own ``seed`` and ``load``.
REPLAY_FIELDS = frozenset(f.name for f in fields(ReplaySettings)) - {"seed", "load"}
#: Settings added after benches were first recorded, and their value in a bench.json
#: written before (so that such a bench resumes).
SETTING_DEFAULTS: dict[str, Any] = {
    name: getattr(ReplaySettings(), name) for name in ("reference_gpu", "gpu_aliases",
                                                       "unknown_gpus", "gpu_sharing",
                                                       "colocation_factor",
                                                       "start_latency_s", "prices",
                                                       "spread_speed", "jct_window",
                                                       "elastic", "knowledge", "batch_s",
                                                       "learn")}
SETTING_DEFAULTS.update(tenants=None, pairs=None)
#: A policy label: what results.csv's ``policy`` column and the run folders carry.
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def load_label(load: float) -> str:
    """How a load is written in results.csv and run folder names: ``0.5``, ``1``, ``2``."""
    return f"{load:g}"


@dataclass(frozen=True)
class PolicyVariant:
    """A registered policy with settings of its own (constructor arguments such as
    ``partitions`` or ``round_s``), under a label of its own: results.csv's ``policy``
    column and the run folders carry the label, ``summary.json`` the policy's name and
    its ``policy_params``. A sweep spec's policy tables make them."""

    label: str
    policy: str
    params: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        if not LABEL.fullmatch(self.label):
            raise InputError("bad policy label", path="label", value=self.label,
                             expected="1-64 letters, digits, '.', '_', '+' or '-', starting "
                             "with a letter or digit (it names run folders)")


@dataclass(frozen=True)
class BenchSettings:
    """What to run: one trace on one cluster, every policy x seed x load.

    ``seeds`` seed the trace reader (drawn job types, synthetic deadlines) and the
    policies; ``loads`` multiply the arrival rate (2 halves the inter-arrival times);
    ``replay`` are the settings every run shares (:class:`ReplaySettings`, the replay
    command's defaults: a solver limit per decision in deterministic work units, so every
    run repeats exactly), each run with its own seed and load (:meth:`run_settings`).
    :func:`bench_settings` makes one from flat values.
    """

    trace: Path
    trace_format: str
    cluster: str
    policies: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    loads: tuple[float, ...] = (1.0,)
    workers: int = field(default_factory=default_workers)
    throughput: Path | None = None
    replay: ReplaySettings = field(default_factory=ReplaySettings)
    #: add the LP bound on the average JCT to every row (hetsched.bench.lp_bounds)
    lp_bound: bool = True
    #: the policies of ``policies`` that are labels of a policy with settings
    variants: tuple[PolicyVariant, ...] = ()
    #: the tenants' weights and quotas (docs/fairness.md), kept around every policy
    tenants: Path | None = None
    #: co-location pairs measured on their own (hetsched.speeds.pairs)
    pairs: Path | None = None
    #: figures of other works to show beside the bench's (hetsched.bench.references)
    references: tuple[Reference, ...] = ()

    def __post_init__(self) -> None:
        if not self.policies:
            raise InputError("no policies", path="policies", value="",
                             expected="at least one policy name")
        labels = [variant.label for variant in self.variants]
        stray = [label for label in labels if label not in self.policies]
        if stray or len(set(labels)) < len(labels):
            raise InputError("policy labels must be listed once each in policies",
                             path="policies", value=stray or labels,
                             expected="every label in policies, none twice")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int)
                                 or not 0 <= s <= MAX_SEED for s in self.seeds):
            raise InputError("bad seeds", path="seeds", value=self.seeds,
                             expected=f"one or more integers from 0 to {MAX_SEED:,}")
        if not self.loads or any(isinstance(v, bool) or not isinstance(v, int | float)
                                 or not MIN_LOAD <= v <= MAX_LOAD for v in self.loads):
            raise InputError("bad load", path="load", value=self.loads,
                             expected=f"one or more numbers from {MIN_LOAD:g} to "
                             f"{MAX_LOAD:g}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or \
                self.workers < 1:
            raise InputError("bad worker count", path="workers", value=self.workers,
                             expected="an integer >= 1")
        if not self.trace.is_file():
            raise InputError("no such trace file", file=str(self.trace), path="trace")
        for name, path in (("throughput_path", self.throughput), ("tenants", self.tenants),
                           ("pairs", self.pairs)):
            if path is not None and not path.is_file():
                raise InputError(f"no such {name.split('_')[0]} file", file=str(path),
                                 path=name)

    def identity(self) -> dict[str, Any]:
        """The settings that shape every run's result (``bench.json``): the fields of
        :data:`SETTING_FIELDS`, and each labelled policy's name and settings."""
        identity = {name: getattr(self.replay if name in REPLAY_FIELDS else self, name)
                    for name in SETTING_FIELDS}
        identity["gpu_aliases"] = dict(self.replay.gpu_aliases)
        window = self.replay.jct_window
        identity["jct_window"] = None if window is None else list(window)
        identity["trace"] = str(self.trace.resolve())
        for name in ("throughput", "tenants", "pairs"):
            path = getattr(self, name)
            identity[name] = None if path is None else str(path.resolve())
        if self.variants:
            identity["policy_params"] = {v.label: {"policy": v.policy, **dict(v.params)}
                                         for v in self.variants}
        return identity

    def policy_of(self, label: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """The registered policy and its settings behind a label of ``policies``."""
        for variant in self.variants:
            if variant.label == label:
                return variant.policy, variant.params
        return label, ()

    def run_settings(self, seed: int, load: float) -> ReplaySettings:
        """The settings of the run with ``seed`` at ``load``."""
        return self.replay.replace(seed=seed, load=load)


def bench_settings(**values: Any) -> BenchSettings:
    """:class:`BenchSettings` from flat values: those named like a field of
    :class:`ReplaySettings` (``limit_jobs``, ``time_limit_s``, ...) make its replay
    settings (those of ``replay``, if given, changed), the others are the bench's own."""
    flat = {name: value for name, value in values.items() if name in REPLAY_FIELDS}
    own = {name: value for name, value in values.items() if name not in REPLAY_FIELDS}
    replay = own.pop("replay", None) or ReplaySettings()
    return BenchSettings(**own, replay=replay.replace(**flat) if flat else replay)


@dataclass(frozen=True)
class RunSpec:
    """One combination: a policy, a seed, a load."""

    policy: str
    seed: int
    load: float

    @property
    def name(self) -> str:
        """``<policy>-s<seed>-l<load>``: the run's folder under ``runs/`` (a policy class
        of yours by its :func:`hetsched.plugins.label`, ``my_policy.MyPolicy``)."""
        from hetsched.plugins import label

        return f"{label(self.policy)}-s{self.seed}-l{load_label(self.load)}"

    @property
    def key(self) -> tuple[str, str, str]:
        """The run's key in ``results.csv``."""
        return (self.policy, str(self.seed), load_label(self.load))


def plan(settings: BenchSettings) -> list[RunSpec]:
    """Every combination, loads outermost, then policies, then seeds."""
    return [RunSpec(policy, seed, load) for load in settings.loads
            for policy in settings.policies for seed in settings.seeds]


def record_settings(settings: BenchSettings, out: Path) -> None:
    """Refuse an output folder that holds a bench of other settings; else record ours."""
    recorded = out / "bench.json"
    identity = settings.identity()
    if recorded.is_file():
        try:
            before = json.loads(recorded.read_text(encoding="utf-8"))
        except ValueError:
            before = None
        if not isinstance(before, dict):
            raise InputError("unreadable bench.json in the output folder", file=str(recorded),
                             path="out", expected="a JSON object (or a fresh --out)")
        changed = [name for name in SETTING_FIELDS
                   if before.get(name, SETTING_DEFAULTS.get(name)) != identity[name]]
        recorded_params = before.get("policy_params") or {}
        changed += [f"policy_params.{label}" for label, params in
                    identity.get("policy_params", {}).items()
                    if label in recorded_params and recorded_params[label] != params]
        if changed:
            name = changed[0]
            now, then = _setting(identity, name), _setting(before, name)
            raise InputError("the output folder holds a bench with other settings",
                             file=str(recorded), path=name, value=now,
                             expected=f"{then!r} as before (rerunning resumes a "
                             "bench), or another --out")
    from hetsched.formulations.versions import solver_versions

    if before_params := _recorded_params(recorded):  # labels of earlier runs stay recorded
        identity["policy_params"] = {**before_params, **identity.get("policy_params", {})}
    write_text(recorded, json.dumps({**identity, "solver_versions": solver_versions()},
                                    indent=1) + "\n", "out", "bench.json")


def _setting(identity: Mapping[str, Any], name: str) -> Any:
    """A setting of ``bench.json`` by name (``policy_params.LABEL``: a label's settings)."""
    if name.startswith("policy_params."):
        return (identity.get("policy_params") or {}).get(name.split(".", 1)[1])
    return identity.get(name)


def _recorded_params(recorded: Path) -> dict[str, Any]:
    """The labelled policies recorded in ``bench.json`` (none if absent or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        before = json.loads(recorded.read_text(encoding="utf-8"))
        found = before.get("policy_params") if isinstance(before, dict) else None
        return dict(found) if isinstance(found, dict) else {}
    return {}
