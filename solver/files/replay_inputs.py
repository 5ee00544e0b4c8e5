"""What a replay reads before it runs: the throughput source (measured truth and the
policies' fitted view), GPU aliases (``--gpu-alias g3=a100``), the cluster's GPU types
the throughput model does not know (an error, or their nodes left out with
``--unknown-gpus drop``), and the trace's jobs (:func:`trace_jobs`), the same for
``hetsched replay``, ``hetsched bench`` and its LP bounds (docs/traces.md)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hetsched.core.errors import InputError
from hetsched.core.records import MAX_TIME_S, Cluster, Job
from hetsched.core.settings import (
    UNKNOWN_GPUS,
    ReplaySettings,
    check_load,
)
from hetsched.core.sharing import DEFAULT_COLOCATION_FACTOR, CoLocationModel, PairKey
from hetsched.core.tenants import TenantTable
from hetsched.core.throughput import (
    AliasedThroughput,
    PackedEverywhere,
    PolicyView,
    ThroughputModel,
)
from hetsched.files.generate import GPU_TYPES, catalogue_table

if TYPE_CHECKING:
    from hetsched.files.traces import Trace

log = logging.getLogger(__name__)

def model_gpu_types(model: ThroughputModel) -> tuple[str, ...]:
    """The GPU types ``model`` lists, sorted; () when it lists none (then every type is
    taken as known)."""
    names = getattr(model, "gpu_types", ()) or ()
    return tuple(sorted(names))


def throughput_pair(path: Path) -> tuple[ThroughputModel, ThroughputModel]:
    """``(measured, fitted)`` from a profile (Gavel JSON or tidy CSV) or a fitted model
    file: the simulator's ground truth and the policies' view."""
    measured, fitted, _ = _read_source(path)
    return measured, fitted


def measured_throughput(path: Path) -> ThroughputModel:
    """:func:`throughput_pair`'s measured model alone, without fitting the other (and
    without importing the fitter's solver): what the Slurm training emulator runs at."""
    return _read_source(path, fit=False)[0]


def _read_source(path: Path, colocation_factor: float = DEFAULT_COLOCATION_FACTOR, *,
                 fit: bool = True
                 ) -> tuple[ThroughputModel, ThroughputModel, CoLocationModel]:
    """:func:`throughput_pair` and the co-location speed factors the profile measured
    (Gavel's pairs; none in a tidy CSV or a fitted model file); without ``fit``, the
    measured model stands in for the fitted one."""
    from hetsched.speeds.fit import throughput_model
    from hetsched.speeds.model import FORMAT
    from hetsched.speeds.model_file import load_model
    from hetsched.speeds.profiles import read_profile

    if path.is_dir():  # Pollux's or Sia's measurements (a traces/ folder): not fitted
        from hetsched.speeds.pollux import read_pollux
        from hetsched.speeds.sia import is_sia_folder, read_sia

        folder = read_sia(path) if is_sia_folder(path) else read_pollux(path)
        return folder, folder, CoLocationModel(default_factor=colocation_factor)
    if not path.is_file():
        raise InputError("no such throughput file", file=str(path), path="throughput_path")
    if path.suffix.lower() == ".json" and f'"{FORMAT}"' in path.read_text(
            encoding="utf-8", errors="replace")[:2000]:
        fitted = load_model(path)
        return (throughput_model(fitted, mode="measured"), fitted,
                CoLocationModel(default_factor=colocation_factor))
    profile = read_profile(path)
    measured = throughput_model(profile, mode="measured")
    return (measured, throughput_model(profile, mode="fitted") if fit else measured,
            profile.colocation_model(colocation_factor))


def source_bytes(source: Path) -> bytes:
    """What identifies a throughput source's content: a file's bytes; for a folder of
    Pollux's measurements, the name and bytes of each application's CSV files, sorted."""
    if not source.is_dir():
        return source.read_bytes()
    return b"".join(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes()
                    for path in sorted(source.glob("*/*.csv")))


def default_throughput(trace: Path, trace_format: str) -> Path | None:
    """Gavel's measurements beside a Gavel trace (``gavel/traces/X.trace`` ->
    ``gavel/simulation_throughputs.json``), Pollux's beside a Pollux workload
    (``pollux/workloads/workload-1.csv`` -> ``pollux/traces/``), Sia's for a Sia workload
    (``SIA/workloads/saturn/workload-1.csv`` -> ``SIA/traces/``), else ``None`` (the
    built-in catalogue)."""
    if trace_format == "pollux":
        from hetsched.files.traces.pollux import measurements_folder

        return measurements_folder(trace)
    if trace_format == "sia":
        from hetsched.files.traces.sia import measurements_folder as sia_folder

        found = sia_folder(trace)
        if not found.is_dir():
            raise InputError("no Sia measurements for this workload", file=str(trace),
                             value=str(found), expected="Sia's traces/ folder in the "
                             "workload's folder or one of its 3 parents (SIA/traces for "
                             "SIA/workloads/<trace>/workload-<k>.csv), or --throughput")
        return found
    if trace_format != "gavel":
        return None
    for folder in (trace.parent, trace.parent.parent):
        candidate = folder / "simulation_throughputs.json"
        if candidate.is_file():
            return candidate
    return None


@dataclasses.dataclass(frozen=True)
class Throughputs:
    """The measured throughput jobs advance at (``truth``), what policies see
    (``model``), the file they came from (``None``: the built-in catalogue), the GPU
    aliases applied to both, the GPU types an alias may name (``known``: the model's,
    or the catalogue's; () when the model lists none) and how fast jobs sharing a GPU run
    (``colocation``: the profile's measured pairs, with the aliases, and the default
    factor)."""

    truth: ThroughputModel
    model: ThroughputModel
    source: Path | None
    aliases: Mapping[str, str]
    known: tuple[str, ...]
    colocation: CoLocationModel


def throughputs(cluster: Cluster, source: Path | None,
                aliases: Mapping[str, str] | None = None,
                colocation_factor: float = DEFAULT_COLOCATION_FACTOR,
                pairs: Mapping[PairKey, float] | None = None) -> Throughputs:
    """The throughput of a replay on ``cluster`` from ``source`` (a profile or fitted
    model; ``None``: the built-in catalogue on the cluster's types), with ``aliases``
    (:func:`parse_gpu_aliases`): each must name a type the model knows; one of a type the
    cluster does not have is left out (a warning). ``pairs``: co-location factors measured
    on their own (:func:`hetsched.speeds.pairs.read_pairs_csv`), over the profile's."""
    aliases = dict(aliases or {})
    unused = [name for name in aliases if name not in cluster.type_names]
    if unused:  # (one list of aliases may serve several clusters)
        log.warning("GPU aliases for types the cluster does not have, not used: %s "
                    "(the cluster's types: %s)", ", ".join(unused),
                    ", ".join(cluster.type_names))
        aliases = {name: target for name, target in aliases.items() if name not in unused}
    if source is None:
        for target in aliases.values():
            if target not in GPU_TYPES:
                raise InputError("GPU alias to a type the built-in catalogue lacks",
                                 path="gpu_aliases", value=target,
                                 expected="one of " + ", ".join(GPU_TYPES))
        # The cluster's types (an aliased one with its target's speeds), and the alias
        # targets themselves (so that one can be the reference GPU type).
        like = {t: aliases.get(t, t) for t in cluster.type_names
                if aliases.get(t, t) in GPU_TYPES}
        like.update({target: target for target in aliases.values()})
        table = catalogue_table(like) if like else catalogue_table(["v100"])
        return Throughputs(table, table, None, aliases, tuple(GPU_TYPES),
                           CoLocationModel(dict(pairs or {}), colocation_factor))
    truth, fitted, colocation = _read_source(source, colocation_factor)
    if pairs:
        colocation = CoLocationModel({**colocation.pairs, **pairs}, colocation.default_factor)
    known = model_gpu_types(truth)
    for target in aliases.values():
        if known and target not in known:
            raise InputError("GPU alias to a type the throughput model does not know",
                             file=str(source), path="gpu_aliases", value=target,
                             expected="one of " + ", ".join(known))
    if aliases:
        truth, fitted = AliasedThroughput(truth, aliases), AliasedThroughput(fitted, aliases)
        pairs = dict(colocation.pairs)
        for (gpu_type, job_type, other), factor in colocation.pairs.items():
            for name, target in aliases.items():
                if target == gpu_type:
                    pairs[(name, job_type, other)] = factor
        colocation = CoLocationModel(pairs, colocation.default_factor)
    return Throughputs(truth, PolicyView(fitted, truth), source, aliases, known, colocation)


def known_gpu_cluster(cluster: Cluster, speeds: Throughputs, *, unknown_gpus: str = "error",
                      what: str = "cluster_spec") -> tuple[Cluster, dict[str, int]]:
    """``cluster`` when the measured throughput of ``speeds`` knows every GPU type of it;
    else, with ``unknown_gpus="error"``, an :class:`InputError` naming the types, their
    GPUs and the ways out (``--gpu-alias``, ``--unknown-gpus drop``); with ``"drop"``, the
    cluster without their nodes (a warning is logged) and ``{type: GPUs left out}``. GPUs
    of a type the model does not know would count in capacity and never run a job."""
    if unknown_gpus not in UNKNOWN_GPUS:
        raise InputError("bad unknown_gpus", path="unknown_gpus", value=unknown_gpus,
                         expected=" or ".join(UNKNOWN_GPUS))
    known = set(model_gpu_types(speeds.truth))
    missing = [t for t in cluster.type_names if known and t not in known]
    if not missing:
        return cluster, {}
    dropped = {t: cluster.num_gpus(t) for t in missing}
    listing = ", ".join(f"{t} ({n} GPUs)" for t, n in dropped.items())
    if unknown_gpus == "error" or len(missing) == len(cluster.type_names):
        model = "the built-in catalogue" if speeds.source is None else str(speeds.source)
        raise InputError(f"GPU types {model} does not know", path=what, value=listing,
                         expected="types of " + ", ".join(speeds.known) + ": map one with "
                         "--gpu-alias TYPE=KNOWN_TYPE, or leave its nodes out with "
                         "--unknown-gpus drop")
    log.warning("left out the nodes of GPU types the throughput model does not know: %s",
                listing)
    nodes = tuple(node for node in cluster.nodes if node.gpu_type not in dropped)
    types = tuple(t for t in cluster.gpu_types if t.name not in dropped)
    return Cluster(types, nodes), dropped


def scale_arrivals(jobs: Sequence[Job], load: float) -> tuple[Job, ...]:
    """The jobs with the arrival rate multiplied by ``load``: every arrival's offset from
    the first arrival divided by ``load`` (2 halves every inter-arrival time); a deadline
    keeps its distance from its job's arrival. Work, sizes and types are unchanged.
    ``load`` is from :data:`MIN_LOAD` to :data:`MAX_LOAD`, and the scaled times must stay
    within ``hetsched.core.records.MAX_TIME_S``."""

    check_load(load)
    if load == 1 or not jobs:
        return tuple(jobs)
    first = min(job.arrival for job in jobs)
    scaled = []
    for job in jobs:
        arrival = first + (job.arrival - first) / load
        deadline = None if job.deadline is None else arrival + (job.deadline - job.arrival)
        if max(arrival, deadline or 0.0) > MAX_TIME_S:
            raise InputError("load too small for this trace", path="load", value=load,
                             expected=f"a load that keeps every scaled time <= "
                             f"{MAX_TIME_S:g} s (job {job.id} arrives at "
                             f"{arrival:.4g} s at this load)")
        scaled.append(dataclasses.replace(job, arrival=arrival, deadline=deadline))
    return tuple(scaled)


def _read_settings(trace: Trace, jobs: Sequence[Job], aliases: Mapping[str, str],
                   dropped: Mapping[str, int], gpu_sharing: bool,
                   colocation: CoLocationModel) -> dict[str, object]:
    """What summary.json records of how a trace was read: the reference GPU, the GPU
    aliases, the GPUs left out, GPU sharing (on or off, the default co-location factor,
    the jobs that ask for a share) and the jobs that need CPUs or memory."""
    return {"reference_gpu": trace.reference_gpu, "gpu_aliases": dict(aliases),
            "dropped_gpus": dict(dropped), "gpu_sharing": gpu_sharing,
            "colocation_factor": colocation.default_factor,
            "gpu_share_jobs": sum(job.gpu_share is not None for job in jobs),
            "node_resource_jobs": sum(job.needs_node_resources for job in jobs)}


@dataclasses.dataclass(frozen=True)
class ReplayInputs:
    """What every replay of one trace on one cluster shares, read once (a bench puts it in
    Ray's object store once): the trace file and format, the cluster spec and the cluster
    (less the nodes left out with ``unknown_gpus="drop"``: ``dropped_gpus``), the
    measured throughput (``truth``), the policies' view of it (``model``) and its file
    (``source``; ``None``: the built-in catalogue), the GPU aliases, how fast jobs
    sharing a GPU run (``colocation``), whether they may (``gpu_sharing``) and the
    reference GPU asked for. The jobs, which a seed may change, are read from it by
    :func:`read_jobs`."""

    trace_path: Path
    trace_format: str
    cluster_spec: str
    cluster: Cluster
    truth: ThroughputModel
    model: ThroughputModel
    source: Path | None
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dropped_gpus: Mapping[str, int] = dataclasses.field(default_factory=dict)
    colocation: CoLocationModel = dataclasses.field(default_factory=CoLocationModel)
    gpu_sharing: bool = True
    reference_gpu: str | None = None
    #: the tenants' weights and quotas (``--tenants``; docs/fairness.md), or none
    tenants: TenantTable | None = None

    def settings(self, trace: Trace, jobs: Sequence[Job]) -> dict[str, object]:
        """What summary.json records of how ``trace`` was read (:class:`TraceJobs`'s
        :meth:`~TraceJobs.settings`)."""
        return _read_settings(trace, jobs, self.aliases, self.dropped_gpus, self.gpu_sharing,
                              self.colocation)


def replay_inputs(trace_path: Path, trace_format: str, cluster_spec: str, *,
                  throughput_path: Path | None = None, cluster: Cluster | None = None,
                  settings: ReplaySettings | None = None,
                  tenants_path: Path | None = None,
                  pairs_path: Path | None = None) -> ReplayInputs:
    """The shared inputs of replays of ``trace_path``: the cluster of ``cluster_spec``
    (``cluster`` if already parsed) at the settings' ``prices``, the throughput source
    (``throughput_path``, else Gavel's table beside a Gavel trace, else the built-in
    catalogue) with the settings' GPU aliases (:func:`throughputs`; with ``spread_speed``
    ``packed``, every gang at its packed speed: :class:`PackedEverywhere`), and the
    cluster's GPU types checked against it (:func:`known_gpu_cluster`, the settings'
    ``unknown_gpus``); the tenant table of ``tenants_path``
    (:func:`hetsched.files.tenants.read_tenants`), if given, every quota on a GPU type of
    the cluster (:meth:`~hetsched.core.tenants.TenantTable.check_cluster`); the co-location pairs of
    ``pairs_path`` (:func:`hetsched.speeds.pairs.read_pairs_csv`) over the profile's."""
    from hetsched.core.prices import with_prices
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.tenants import read_tenants
    from hetsched.speeds.pairs import read_pairs_csv

    settings = settings or ReplaySettings()
    cluster = with_prices(cluster if cluster is not None else parse_cluster(cluster_spec),
                          settings.prices)
    pairs = read_pairs_csv(pairs_path) if pairs_path is not None else None
    speeds = throughputs(cluster, throughput_path or default_throughput(trace_path,
                                                                        trace_format),
                         settings.gpu_aliases, settings.colocation_factor, pairs)
    if settings.spread_speed == "packed":
        speeds = dataclasses.replace(speeds, truth=PackedEverywhere(speeds.truth),
                                     model=PackedEverywhere(speeds.model))
    tenants = read_tenants(tenants_path) if tenants_path is not None else None
    if tenants is not None:  # (the cluster's own types: a dropped type is still its)
        tenants.check_cluster(cluster.type_names, str(tenants_path))
    cluster, dropped = known_gpu_cluster(cluster, speeds, unknown_gpus=settings.unknown_gpus)
    return ReplayInputs(trace_path, trace_format, cluster_spec, cluster, speeds.truth,
                        speeds.model, speeds.source, speeds.aliases, dropped,
                        speeds.colocation, settings.gpu_sharing, settings.reference_gpu,
                        tenants)


def read_jobs(inputs: ReplayInputs, settings: ReplaySettings | None = None) -> Trace:
    """The trace of ``inputs`` read with the measured throughput (durations on the
    reference GPU; default: ``v100`` if the model knows it, else the cluster's GPU type
    with the most GPUs it knows; the settings' ``seed`` draws what the trace lacks: job
    types, synthetic deadlines; their ``limit_jobs``, ``on_bad_row`` and
    ``deadline_fraction``), every job checked to run on the cluster: a job no node of its
    GPU types can hold (CPUs, memory) is an error, or left out with ``on_bad_row="skip"``."""
    from hetsched.allocation.layout import fits_a_node
    from hetsched.core.records import configurations
    from hetsched.files.traces import read_trace

    settings = settings or ReplaySettings()
    seed, on_bad_row = settings.seed, settings.on_bad_row
    limit_jobs, deadline_fraction = settings.limit_jobs, settings.deadline_fraction
    cluster, trace_path = inputs.cluster, inputs.trace_path
    by_size = sorted(cluster.type_names, key=lambda t: -cluster.num_gpus(t))  # (stable)
    trace = read_trace(trace_path, inputs.trace_format, throughput=inputs.truth,
                       gpu_types=by_size, reference_gpu=inputs.reference_gpu, seed=seed,
                       on_bad_row=on_bad_row, limit_jobs=limit_jobs,
                       deadline_fraction=deadline_fraction, gpu_sharing=inputs.gpu_sharing,
                       elastic=settings.elastic)
    if not trace.jobs:
        raise InputError("no job to replay in the trace", file=str(trace_path),
                         value=dict(trace.excluded), expected="rows of jobs, not all "
                         "excluded (rows left out on purpose, by reason, are shown)")
    unfit: list[Job] = []
    for job in trace.jobs:
        configs = configurations(cluster, inputs.truth, job)
        if not configs:
            raise InputError("job cannot run on this cluster", file=str(trace_path),
                             path=f"job {job.id}", value=f"{job.num_gpus} x {job.job_type}",
                             expected="a GPU type of the cluster with measured throughput")
        if not any(fits_a_node(cluster, job, config) for config in configs):
            if on_bad_row == "fatal":
                raise InputError(
                    "no node of its GPU types has the CPUs and memory it needs",
                    file=str(trace_path), path=f"job {job.id}",
                    value=f"{job.num_gpus} GPUs, {job.cpus or 0:g} cores, "
                    f"{job.memory_gb or 0:g} GB", expected="a job some node can hold (or "
                    "--on-bad-row skip to leave such jobs out)")
            unfit.append(job)
    if unfit:
        log.warning("%d jobs left out: no node of their GPU types has the CPUs and memory "
                    "they need (the first: %s)", len(unfit), unfit[0].id)
        trace = dataclasses.replace(
            trace, jobs=tuple(j for j in trace.jobs if j not in unfit),
            skipped_rows=trace.skipped_rows + len(unfit),
            notes=(*trace.notes, "no node of its GPU types has the CPUs and memory it needs: "
                   f"skipped: {len(unfit)} jobs"))
    return trace


@dataclasses.dataclass(frozen=True)
class TraceJobs:
    """The jobs of a trace as a replay runs them (load-scaled) on ``cluster`` (the one
    given, less the nodes left out with ``unknown_gpus="drop"``: ``dropped_gpus``), the
    measured throughput (``truth``, what they advance at), the policies' view
    (``model``), the trace as read, the throughput file (``None``: the built-in
    catalogue) and the GPU aliases."""

    jobs: tuple[Job, ...]
    truth: ThroughputModel
    model: ThroughputModel
    trace: Trace
    source: Path | None
    cluster: Cluster
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dropped_gpus: Mapping[str, int] = dataclasses.field(default_factory=dict)
    colocation: CoLocationModel = dataclasses.field(default_factory=CoLocationModel)
    gpu_sharing: bool = True

    def settings(self) -> dict[str, object]:
        """What summary.json records of how the trace was read: the reference GPU, the
        GPU aliases, the GPUs left out, GPU sharing (on or off, the default co-location
        factor, the jobs that ask for a share) and the jobs that need CPUs or memory."""
        return _read_settings(self.trace, self.jobs, self.aliases, self.dropped_gpus,
                              self.gpu_sharing, self.colocation)


def trace_jobs(trace_path: Path, trace_format: str, cluster: Cluster, *,
               throughput_path: Path | None = None,
               settings: ReplaySettings | None = None) -> TraceJobs:
    """Read a trace as :func:`hetsched.replaying.run_replay` does with ``settings`` (the
    same jobs): :func:`replay_inputs` (the throughput source with the GPU aliases, the
    cluster's GPU types checked against it), :func:`read_jobs` (durations on the reference
    GPU, every job checked to run on the cluster), arrivals scaled by the settings'
    ``load``."""
    settings = settings or ReplaySettings()
    inputs = replay_inputs(trace_path, trace_format, "", throughput_path=throughput_path,
                           cluster=cluster, settings=settings)
    trace = read_jobs(inputs, settings)
    return TraceJobs(scale_arrivals(trace.jobs, settings.load), inputs.truth, inputs.model,
                     trace, inputs.source, inputs.cluster, inputs.aliases,
                     inputs.dropped_gpus, inputs.colocation, settings.gpu_sharing)
