"""Every policy by name, for ``solve``, ``replay`` and ``bench`` alike.

A name is a static model (a :class:`~hetsched.policies.planner.Planner`: instance in, result out),
a rolling policy (a :class:`~hetsched.policies.rolling.RollingPolicy`: cluster state in, decision
out), or both (``fifo``). Every name works both ways: :func:`planner` runs a rolling
policy through the simulator on a static instance
(:class:`~hetsched.simulate.simulated.Simulated`), and :func:`rolling` re-solves a static model at
every decision point (:class:`~hetsched.policies.replanning.Replanning`). ``NAME-agnostic`` is
any of them shown every GPU type alike (:mod:`hetsched.policies.baselines.agnostic`).

An :class:`Entry` declares what the callers need without importing the policy: its
parameters (a light frozen record of its settings and their defaults, which names it and
gives its back-ends), its back-ends and whether it is an exact model. Classes are
imported when first asked for, so a solver that is not used is never loaded.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from hetsched import plugins
from hetsched.core.errors import InputError
from hetsched.core.records import Instance
from hetsched.core.settings import DECISION_LIMIT, RESTART_PENALTY_S
from hetsched.policies.backends import BACKENDS, CPSAT_OR_MIP, MATCHING_OR_MIP
from hetsched.policies.baselines.agnostic import AGNOSTIC_SUFFIX, HeterogeneityAgnostic
from hetsched.policies.baselines.gavel_params import (
    CostParams,
    DurationParams,
    FifoFastestParams,
    FinishTimeParams,
    GavelParams,
    IsolatedParams,
    PackedParams,
)
from hetsched.policies.params import PolicyParams, settings_of, with_settings
from hetsched.policies.planner import Planner, SolveOptions
from hetsched.policies.progress_params import ELASTIC, ProgressParams
from hetsched.policies.replanning import Replanning
from hetsched.policies.rolling import RollingPolicy
from hetsched.simulate.simulated import Simulated

__all__ = ["AGNOSTIC_SUFFIX", "BACKENDS", "ENTRIES", "Entry", "entry", "is_exact", "model_warnings",
           "names", "planner", "policy_settings", "rolling", "takes"]



#: The classes of Gavel's family and of ``progress``: each entry gives its parameters.
_GAVEL = "hetsched.policies.baselines.gavel:Gavel"
_GAVEL_PACKED = "hetsched.policies.baselines.gavel_packed:GavelPacked"
_PROGRESS = "hetsched.policies.progress:Progress"


@dataclass(frozen=True)
class Entry:
    """One registered name: where its static model (``planner``) and its rolling policy
    (``policy``) are defined (``"module:Class"``; at least one), the rolling policy's
    parameters (``params``: the frozen record of its settings, with their defaults and
    checks, that its class takes first; none for a class that takes its settings as
    keywords), the back-ends of its model (the default first; none for a heuristic that
    solves nothing; with ``params``, theirs), and whether it solves an optimization model
    of its own at each decision, exactly (an exact model: bench reports set it against the
    heuristics)."""

    name: str
    summary: str
    planner: str | None = None
    policy: str | None = None
    params: PolicyParams | None = None
    backends: tuple[str, ...] = ()
    exact: bool = False
    #: a user's class (a ``module:Class`` or ``file.py:Class`` reference, or an installed
    #: package's entry point, :mod:`hetsched.plugins`): checked against the protocol
    plugin: bool = False
    #: what a static solve's objective (and bound) measure, with the unit
    objective: str = "total weighted completion time, s"
    #: what the bound and gap prove, where that is less than the whole schedule
    proven: str = ""
    #: it chooses an elastic job's GPU count among its allowed ones
    #: (``Job.allowed_gpu_counts``; ``--elastic``); without, each runs on the count it asked
    #: for, and a replay with elastic jobs says so
    elastic: bool = False
    #: made for elastic jobs (its settings tuned on them): a replay without any says so
    for_elastic: bool = False
    #: it may pack two whole one-GPU jobs on one GPU at their measured co-location speeds
    #: (so measured pairs, ``--pairs``, reach it)
    packs: bool = False

    def __post_init__(self) -> None:
        if self.params is None:
            return
        if self.params.name != self.name or self.backends:
            raise ValueError(f"entry {self.name}: its parameters make {self.params.name} and "
                             "give its back-ends")
        object.__setattr__(self, "backends", self.params.backends)

    @classmethod
    def of(cls, params: PolicyParams, policy: str, summary: str, **flags: Any) -> Entry:
        """The entry of the rolling policy ``policy`` made with ``params``: its name and
        back-ends are theirs."""
        return cls(params.name, summary, policy=policy, params=params, **flags)


ENTRIES: dict[str, Entry] = {e.name: e for e in (
    Entry("fifo", "first in, first out; first fit, no backfilling",
          planner="hetsched.policies.fifo:FifoPlanner",
          policy="hetsched.policies.rolling:RollingFifo"),
    Entry("deadline", "deadline-aware heterogeneous assignment (Hydra), exact",
          planner="hetsched.policies.deadline.planner:DeadlinePlanner",
          backends=CPSAT_OR_MIP,
          exact=True, objective="total weighted completion time, s, once missed deadlines "
          "(or tardiness) are least", elastic=True),
    Entry("allox", "AlloX min-cost matching of jobs to GPU slots, exact",
          planner="hetsched.policies.allox:AlloxPlanner", backends=MATCHING_OR_MIP,
          exact=True, elastic=True),
    Entry("topology", "FIFO admission, exact topology-aware placement",
          planner="hetsched.simulate.topology_planner:TopologyPlanner",
          backends=CPSAT_OR_MIP,
          exact=True, objective="communication cost of the placements, s per GB weighted by "
          "sensitivity", proven="each admitted batch's placement; the FIFO admission order "
          "is not optimised"),
    Entry("sjf", "shortest (predicted) job first",
          policy="hetsched.policies.baselines.duration:ShortestJobFirst"),
    Entry("qssf", "quasi-shortest service first: least predicted GPU time first "
          "(Helios, SC'21), non-preemptive",
          policy="hetsched.policies.baselines.duration:QuasiShortestServiceFirst"),
    Entry("srtf", "shortest remaining time first, preemptive",
          policy="hetsched.policies.baselines.duration:ShortestRemainingTimeFirst"),
    Entry("edf", "earliest deadline first",
          policy="hetsched.policies.baselines.deadline_first:EarliestDeadlineFirst"),
    Entry("tiresias", "Tiresias: least attained service, discretised (NSDI 2019)",
          policy="hetsched.policies.baselines.tiresias:Tiresias"),
    Entry("gandiva", "Gandiva: time slicing, packing of one-GPU jobs at measured pair "
          "speeds, migration of spread gangs onto one node (OSDI 2018)",
          policy="hetsched.policies.baselines.gandiva:Gandiva", packs=True),
    # The entries below read their names from their parameters (``params.name``).
    Entry.of(GavelParams(), _GAVEL, "Gavel: max-min fairness LP in rounds (OSDI 2020)"),
    Entry.of(GavelParams(water_filling=True), _GAVEL,
             "Gavel: weighted max-min fairness by water-filling in rounds (its "
             "max_min_fairness_water_filling)"),
    Entry.of(GavelParams(water_filling="gpus"), _GAVEL,
             "weighted max-min fairness of GPUs held (every type alike, as quotas count them) "
             "by water-filling, in Gavel's rounds; the rest by normalised throughput"),
    Entry.of(GavelParams(objective="max-sum"), _GAVEL,
             "Gavel: max-sum throughput LP in rounds"),
    Entry.of(GavelParams(objective="max-sum-raw"), _GAVEL,
             "Gavel's max_sum_throughput_perf as its code has it: LP allocation of most raw "
             "steps/s summed over jobs, in rounds"),
    Entry.of(FinishTimeParams(), _GAVEL,
             "finish-time fairness: Gavel's heterogeneity-aware LP in rounds (Themis's rho, "
             "NSDI 2020)"),
    Entry.of(FifoFastestParams(), _GAVEL,
             "Gavel's fifo_perf: arrival order, each job onto the fastest GPU type with room "
             "for its gang (re-dealt, in rounds, when jobs come and go); no backfilling"),
    Entry.of(DurationParams(), _GAVEL,
             "Gavel's min_total_duration: LP allocation of least makespan of the active jobs, "
             "in rounds"),
    Entry.of(CostParams(), _GAVEL,
             "Gavel's max_sum_throughput_normalized_by_cost: LP allocation of most throughput "
             "per dollar (meet_deadlines: Gavel's SLOs), in rounds"),
    Entry.of(CostParams(normalized=False), _GAVEL,
             "Gavel's cost policy as its code has it: raw steps/s per dollar summed over "
             "jobs, in rounds"),
    Entry.of(PackedParams(), _GAVEL_PACKED,
             "Gavel's max_min_fairness_packed: max-min LP over jobs alone and pairs of one-GPU "
             "jobs packed on one GPU at measured speeds, in Gavel's rounds", packs=True),
    Entry.of(PackedParams(objective="fifo"), _GAVEL_PACKED,
             "Gavel's fifo_packed: FIFO onto the fastest type, then waiting one-GPU jobs "
             "packed beside placed ones at measured speeds, in Gavel's rounds", packs=True),
    Entry.of(PackedParams(objective="finish-time"), _GAVEL_PACKED,
             "Gavel's finish_time_fairness_packed: least worst finish-time ratio over jobs "
             "alone and pairs of one-GPU jobs packed on one GPU at measured speeds, in "
             "Gavel's rounds", packs=True),
    Entry.of(PackedParams(objective="min-total-duration"), _GAVEL_PACKED,
             "Gavel's min_total_duration_packed: least makespan of the active jobs over jobs "
             "alone and pairs of one-GPU jobs packed on one GPU at measured speeds, in "
             "Gavel's rounds", packs=True),
    Entry.of(PackedParams(objective="cost"), _GAVEL_PACKED,
             "Gavel's max_sum_throughput_normalized_by_cost_packed_SLOs: most throughput per "
             "dollar over jobs alone and pairs of one-GPU jobs packed on one GPU at measured "
             "speeds (meet_deadlines: its SLOs), in Gavel's rounds", packs=True),
    Entry.of(PackedParams(objective="water-filling"), _GAVEL_PACKED,
             "Gavel's max_min_fairness_water_filling_packed: weighted max-min fairness by "
             "water-filling over jobs alone and pairs of one-GPU jobs packed on one GPU at "
             "measured speeds, in Gavel's rounds", packs=True),
    Entry.of(IsolatedParams(), _GAVEL,
             "Gavel's isolated: each active job an equal 1/n share of every GPU type, in "
             "rounds"),
    Entry.of(ProgressParams(), _PROGRESS,
             "allocation MILP over every active job each round: weighted progress on "
             "remaining work, urgent deadlines first, restart-aware (preemptive)",
             exact=True, elastic=True),
    Entry.of(ProgressParams(pairing=True), _PROGRESS,
             "progress that may also pack two whole 1-GPU jobs on one GPU at their measured "
             "co-location speeds when the MILP finds the pair worth more",
             exact=True, elastic=True, packs=True),
    Entry.of(ELASTIC, _PROGRESS,
             "progress for elastic jobs (docs/elastic.md): 120 s rounds and horizon, each job "
             "planned with its rate over the horizon, GPU time priced by the jobs it delays, "
             "heSRPT's shares while nobody waits",
             exact=True, elastic=True, for_elastic=True),
    Entry("optimus", "Optimus: marginal-gain GPU allocation (EuroSys 2018)",
          policy="hetsched.policies.baselines.optimus:Optimus", elastic=True),
)}


def names() -> list[str]:
    """Every registered name, the built-in ones and those installed packages register
    (:func:`hetsched.plugins.installed_policies`); each also works with ``-agnostic``."""
    return sorted({*ENTRIES, *plugins.installed_policies()})


def _split(name: str) -> tuple[str, bool]:
    """``(base name, agnostic)``."""
    if name.endswith(AGNOSTIC_SUFFIX) and len(name) > len(AGNOSTIC_SUFFIX):
        return name[: -len(AGNOSTIC_SUFFIX)], True
    return name, False


def entry(name: str, parameter: str = "policy") -> Entry:
    """The entry of ``name`` (``-agnostic`` stripped); an unknown name lists the known
    ones, naming ``parameter``."""
    base, _ = _split(name)
    if base in ENTRIES:
        return ENTRIES[base]
    if plugins.is_reference(base):  # the class is loaded now: a typo is found at once
        plugins.load_class(base, parameter)
        return Entry(base, "a rolling policy of yours", policy=base, plugin=True)
    installed = plugins.installed_policies()
    if base in installed:
        return Entry(base, f"installed: {installed[base]}", policy=installed[base],
                     plugin=True)
    raise InputError(f"unknown {'model' if parameter.lstrip('-') == 'model' else 'policy'}",
                     path=parameter, value=name,
                     expected="one of " + ", ".join(names())
                     + f" (any of them with {AGNOSTIC_SUFFIX}), or a class of yours: "
                     "module.path:Class or path/to/file.py:Class")


def is_exact(name: str) -> bool:
    """Whether ``name`` (or its ``-agnostic`` variant) is an exact model; an unknown name
    is not."""
    base, _ = _split(name)
    return base in ENTRIES and ENTRIES[base].exact


def _load(target: str) -> Any:
    return plugins.load_class(target)


def rolling(name: str, *, backend: str | None = None,
            time_limit_s: float | None = DECISION_LIMIT, seed: int = 0,
            deterministic: bool = True, **params: Any) -> RollingPolicy:
    """A fresh rolling policy called ``name``: its own, or its static model re-solved at
    every decision point. ``backend``, ``time_limit_s`` (per decision; deterministic work
    units with ``deterministic``; the defaults are a replay's,
    :class:`~hetsched.core.settings.ReplaySettings`) and ``seed`` reach the policies that
    solve a model;
    ``params`` override the policy's settings (e.g. ``round_s``: fields of its parameters
    record, checked by it, or its constructor's other arguments)."""
    base, agnostic = _split(name)
    found = entry(name)
    if agnostic:
        return HeterogeneityAgnostic(rolling(base, backend=backend, time_limit_s=time_limit_s,
                                             seed=seed, deterministic=deterministic,
                                             **params))
    if found.plugin and found.policy is not None:
        return _plugin(found.policy, name, {"backend": backend, "time_limit_s": time_limit_s,
                                            "seed": seed, "deterministic": deterministic},
                       params)
    if found.policy is not None and found.params is None:
        made: RollingPolicy = _load(found.policy)(**params)
        return made
    if found.policy is not None and found.params is not None:
        fields = settings_of(found.params)
        own = {key: value for key, value in params.items() if key in fields}
        if found.backends:
            own.setdefault("backend", backend if backend in found.backends
                           else found.backends[0])
            own.setdefault("time_limit_s", time_limit_s)
            own.setdefault("deterministic", deterministic)
        made = _load(found.policy)(with_settings(found.params, own),
                                   **{k: v for k, v in params.items() if k not in fields})
        return made
    # A back-end the model lacks is its first, as for the rolling policies above (a replay
    # says so: hetsched.setting_notices), not a failure at every decision.
    return Replanning(planner(base), backend=backend if backend in found.backends else (
        found.backends[0] if found.backends else None), time_limit_s=time_limit_s, seed=seed,
                       deterministic=deterministic, **params)


def _plugin(target: str, name: str, settings: Mapping[str, Any],
            params: Mapping[str, Any]) -> RollingPolicy:
    """A user's policy class made and checked against the protocol: given ``params`` and
    those of the solver ``settings`` (back-end, time limit, seed, deterministic) that its
    constructor takes."""
    cls = _load(target)
    accepted = inspect.signature(cls).parameters
    kwargs = {**{key: value for key, value in settings.items() if key in accepted},
              **params}
    try:
        made = plugins.guarded(partial(cls, **kwargs))
    except InputError as exc:
        raise InputError(f"cannot make the policy: {exc.problem}", path="policy", value=name,
                         expected="a class whose constructor needs no argument (it may take "
                         "backend, time_limit_s, seed, deterministic) and returns") from None
    plugins.check_policy(made, name)
    policy: RollingPolicy = made
    return policy


def takes(name: str, parameter: str) -> bool:
    """Whether the rolling policy called ``name`` has a constructor argument ``parameter``
    (a model re-solved by replanning has its own, not the rolling policy's)."""
    return parameter in policy_settings(name)


def policy_settings(name: str) -> tuple[str, ...]:
    """The settings of the rolling policy called ``name``: its constructor's arguments, the
    fields of its parameters record for the first (none for a model re-solved by
    replanning)."""
    found = entry(name)
    if found.policy is None:
        return ()
    arguments = tuple(inspect.signature(_load(found.policy)).parameters)
    if found.params is None:
        return arguments
    return (*settings_of(found.params), *arguments[1:])


def planner(name: str, *, restart_penalty_s: float = RESTART_PENALTY_S, **own: Any
            ) -> Planner:
    """A static planner called ``name``: its own model, or its rolling policy run by the
    simulator on the instance (preempted jobs lose ``restart_penalty_s`` per restart).
    ``own`` (the model's own settings) go to its constructor (or the rolling policy's);
    one it does not take is an :class:`InputError` naming it."""
    _, agnostic = _split(name)
    found = entry(name, "model")
    if found.planner is not None and not agnostic:
        cls = _load(found.planner)
        _check_settings(name, own, _keywords(cls))
        made: Planner = cls(**own)
        return made
    if own and found.policy is not None:
        _check_settings(name, own, _keywords(_load(found.policy)) if found.params is None
                        else policy_settings(name))

    def make(options: SolveOptions) -> RollingPolicy:
        return rolling(name, backend=options.backend, time_limit_s=None, seed=options.seed,
                       deterministic=options.deterministic, **own)

    return Simulated(name, make, backends=found.backends, restart_penalty_s=restart_penalty_s)


def _keywords(cls: Any) -> tuple[str, ...]:
    """The arguments ``cls``'s constructor takes by keyword."""
    return tuple(p.name for p in inspect.signature(cls).parameters.values()
                 if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def _check_settings(name: str, own: Mapping[str, Any], accepted: tuple[str, ...]) -> None:
    """Every setting is one of ``accepted``."""
    for setting in own:
        if setting not in accepted:
            raise InputError(f"model {name} has no setting {setting}", path=setting,
                             expected="one of " + (", ".join(sorted(accepted)) or "none"))


def model_warnings(instance: Instance, model: str) -> list[str]:
    """One line per job of ``instance`` that the model ``model`` cannot run, naming the
    job and why (the planner's ``unrunnable``); empty if it runs them all."""
    stuck = planner(model).unrunnable(instance)
    return [f"$.jobs[{index}]: the {model} model cannot run job {job.id}: {stuck[job.id]}"
            for index, job in enumerate(instance.jobs) if job.id in stuck]
