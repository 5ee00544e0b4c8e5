"""``hetsched validate``: check a file of any kind the project reads without running it,
and say in one line what it holds (docs/traces.md, "Checking files").

Formats (:data:`FILE_FORMATS`): ``instance`` (the default: schema, ranges, semantics),
the trace formats of :mod:`hetsched.files.traces` (``gavel``, ``philly``, ``helios``,
``openb``, ``native``), ``openb-nodes`` (an openb node list), ``cluster`` (a cluster
JSON file) and ``profile`` (a tidy CSV or Gavel's JSON of measured throughputs, or step
times as ``hetsched fit`` reads them: a tidy CSV with step columns or a folder of Pollux's
measurements, the only format a folder may be). A trace
is read as a replay reads it: with a cluster spec and a throughput file given, the GPU
types of the cluster are checked against the model, every ``gpu_spec`` against the
cluster and every job against the cluster's GPUs. Bad input raises
:class:`~hetsched.core.errors.InputError` naming the file, line and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, Instance
from hetsched.files.traces import FORMATS

#: What ``hetsched validate --format`` accepts.
FILE_FORMATS = ("instance", *FORMATS, "openb-nodes", "cluster", "profile")


@dataclass(frozen=True)
class FileCheck:
    """The verdict on a valid file: one line on what it holds, warnings (not errors, but
    what a replay or a solve would regret: GPUs that can never run a job) and the
    reader's notes (fallbacks used, with their counts)."""

    summary: str
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def check_file(path: Path, file_format: str = "instance", *, cluster_spec: str | None = None,
               throughput_path: Path | None = None, reference_gpu: str | None = None,
               gpu_aliases: Mapping[str, str] | None = None) -> FileCheck:
    """Read ``path`` as ``file_format`` (:data:`FILE_FORMATS`) and describe it; an
    :class:`InputError` for bad input. ``cluster_spec``, ``throughput_path``,
    ``reference_gpu`` and ``gpu_aliases`` check a trace as a replay would read it, a
    node list or cluster against a throughput model."""
    if file_format not in FILE_FORMATS:
        raise InputError("unknown file format", path="format", value=file_format,
                         expected="one of " + ", ".join(FILE_FORMATS))
    if file_format == "profile":
        return _profile(path)
    if path.is_dir():
        raise InputError("is a folder", file=str(path), expected="a file (a folder of "
                         "Pollux's measurements is a step profile: --format profile)")
    if file_format == "instance":
        from hetsched.files.instance import load_instance

        return _instance(load_instance(path))
    if file_format in ("openb-nodes", "cluster"):
        from hetsched.files.cluster_spec import parse_cluster

        spec = f"openb:{path}" if file_format == "openb-nodes" else str(path)
        if file_format == "cluster" and path.suffix.lower() != ".json":
            raise InputError("a cluster file must be JSON", file=str(path),
                             expected="a .json cluster or instance file")
        return _cluster(parse_cluster(spec, base_dir=Path.cwd()), throughput_path,
                        gpu_aliases)
    return _trace(path, file_format, cluster_spec, throughput_path, reference_gpu,
                  gpu_aliases)


def _instance(instance: Instance) -> FileCheck:
    cluster = instance.cluster
    known = getattr(instance.throughput, "gpu_types", None)
    warnings = tuple(
        f"GPU type {name} ({cluster.num_gpus(name)} GPUs): the throughput table has no "
        "entry for it, so its GPUs can never run a job"
        for name in cluster.type_names if known is not None and name not in known)
    return FileCheck(f"OK ({len(instance.jobs)} jobs, {cluster.num_gpus()} GPUs, "
                     f"{len(cluster.nodes)} nodes, types {', '.join(cluster.type_names)})",
                     warnings)


def _profile(path: Path) -> FileCheck:
    from hetsched.speeds.fit import check_counts
    from hetsched.speeds.model import FitSettings
    from hetsched.speeds.profiles import read_profile
    from hetsched.speeds.step_profiles import has_step_columns

    if has_step_columns(path):
        return _step_profile(path)
    profile = read_profile(path)
    check_counts(profile, FitSettings())
    if not any(point.throughput > 0 for point in profile.points):
        # Every replay with it would stop (no job type runs anywhere): say so here.
        raise InputError("no measurement above 0 steps/s", file=str(path),
                         value=f"{len(profile)} measurements, all 0",
                         expected="at least one job type that runs on some GPU type "
                         "(throughput > 0)")
    counts = sorted({p.num_gpus for p in profile.points})
    return FileCheck(f"OK (profile: {len(profile)} measurements, {len(profile.job_types)} "
                     f"job types, GPU types {', '.join(profile.gpu_types)}, "
                     f"{counts[0]}-{counts[-1]} GPUs)")


def _step_profile(path: Path) -> FileCheck:
    """A step profile, read as ``hetsched fit`` reads it."""
    from hetsched.speeds.step_profiles import read_step_rows

    rows = read_step_rows(path)
    counts = sorted({row.num_gpus for row in rows})
    spread = sum(row.num_nodes > 1 for row in rows)
    jobs = len({row.job_type for row in rows})
    return FileCheck(f"OK (step profile: {len(rows):,} step rows, "
                     f"{jobs} job type{'s' if jobs != 1 else ''}, GPU types "
                     f"{', '.join(sorted({row.gpu_type for row in rows}))}, "
                     f"{counts[0]}-{counts[-1]} GPUs, {spread:,} row{'s' if spread != 1 else ''} "
                     "on several nodes)")


def _gpu_listing(cluster: Cluster) -> str:
    return ", ".join(f"{name} {cluster.num_gpus(name):,}" for name in cluster.type_names)


def _cluster(cluster: Cluster, throughput_path: Path | None,
             gpu_aliases: Mapping[str, str] | None) -> FileCheck:
    if throughput_path is not None:
        from hetsched.files.replay_inputs import known_gpu_cluster, throughputs

        speeds = throughputs(cluster, throughput_path, gpu_aliases)
        known_gpu_cluster(cluster, speeds, what="cluster")
    return FileCheck(f"OK ({len(cluster.nodes):,} nodes, {cluster.num_gpus():,} GPUs of "
                     f"{len(cluster.gpu_types)} types: {_gpu_listing(cluster)})")


def _trace(path: Path, file_format: str, cluster_spec: str | None,
           throughput_path: Path | None, reference_gpu: str | None,
           gpu_aliases: Mapping[str, str] | None) -> FileCheck:
    from hetsched.files.traces import read_trace

    if cluster_spec is not None:
        from hetsched.core.settings import ReplaySettings
        from hetsched.files.cluster_spec import parse_cluster
        from hetsched.files.replay_inputs import trace_jobs

        read = trace_jobs(path, file_format, parse_cluster(cluster_spec),
                          throughput_path=throughput_path, settings=ReplaySettings(
                              reference_gpu=reference_gpu, gpu_aliases=gpu_aliases or {}))
        trace = read.trace
    else:
        from hetsched.files.replay_inputs import default_throughput, throughput_pair

        source = throughput_path or default_throughput(path, file_format)
        throughput = throughput_pair(source)[0] if source is not None else None
        trace = read_trace(path, file_format, throughput=throughput,
                           reference_gpu=reference_gpu)
    excluded = ", ".join(f"{reason} {count:,}" for reason, count in trace.excluded.items())
    reference = f", durations on {trace.reference_gpu}" if trace.reference_gpu else ""
    return FileCheck(f"OK ({file_format}: {len(trace.jobs):,} jobs{reference}, "
                     f"{trace.skipped_rows} bad rows, "
                     f"{sum(trace.excluded.values()):,} excluded"
                     + (f": {excluded}" if excluded else "") + ")",
                     notes=tuple(trace.notes))
