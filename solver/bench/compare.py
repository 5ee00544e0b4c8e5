"""Replays side by side (``hetsched compare RUN_DIR...``): the metrics of several replay
folders in one table, and their job completion time CDFs on one axis.

A run folder is what ``hetsched replay --out`` writes (``summary.json``, ``jobs.csv``),
or a run of a bench (``BENCH/runs/<policy>-s<seed>-l<load>/``). Anything else is an
:class:`~hetsched.core.errors.InputError` naming the folder and what it lacks.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hetsched.core.errors import InputError
from hetsched.simulate.summary import ReplaySummary

#: What a replay folder must hold to be compared.
NEEDED = ("summary.json", "jobs.csv")


@dataclass(frozen=True)
class RunRecord:
    """One replay as read back from its folder: the label it is shown under, its metrics,
    what it ran (policy, trace, cluster, load, seed, as summary.json records them) and the
    finished jobs' completion times (s)."""

    label: str
    folder: Path
    summary: ReplaySummary
    policy: str
    trace: str
    cluster: str
    load: float
    seed: int
    jct: npt.NDArray[np.float64]
    #: the trace file as summary.json names it (``trace`` is its name alone)
    trace_file: str = ""
    #: the quota keeper's counts (``--tenants``: starts it dropped, jobs it preempted to
    #: give tenants their quotas back); ``None`` for a run without tenants
    quota_dropped_starts: int | None = None
    quota_reclaims: int | None = None


def _not_a_replay(folder: Path, why: str, expected: str | None = None) -> InputError:
    hint = expected or "a folder written by hetsched replay --out (summary.json, jobs.csv)"
    if (folder / "results.csv").is_file() and (folder / "runs").is_dir():
        hint = (f"a replay folder; this is a bench: compare its runs, e.g. {folder}/runs/* "
                "(docs/bench.md)")
    return InputError(why, file=str(folder), path="RUN_DIR", expected=hint)


def read_run(folder: str | Path, label: str | None = None) -> RunRecord:
    """The replay written into ``folder`` (``summary.json`` and ``jobs.csv``)."""
    path = Path(folder)
    if not path.is_dir():
        raise _not_a_replay(path, "no such folder" if not path.exists() else "not a folder")
    missing = [name for name in NEEDED if not (path / name).is_file()]
    if missing:
        raise _not_a_replay(path, f"not a replay folder: no {missing[0]}")
    try:
        document = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _not_a_replay(path, f"unreadable summary.json: {exc}") from None
    if not isinstance(document, dict):
        raise _not_a_replay(path, "summary.json is not a JSON object")
    try:
        summary = ReplaySummary.from_dict(document)
    except InputError as exc:
        raise _not_a_replay(path, f"summary.json lacks '{exc.path}'") from None
    except (TypeError, ValueError) as exc:
        raise _not_a_replay(path, f"summary.json has a bad value: {exc}") from None
    return RunRecord(label or path.name, path, summary, str(document.get("policy", "?")),
                     Path(str(document.get("trace", "?"))).name,
                     str(document.get("cluster", "?")), float(document.get("load", 1.0)),
                     int(document.get("seed", 0)), _completion_times(path / "jobs.csv"),
                     str(document.get("trace", "?")),
                     _count(document.get("quota_dropped_starts")),
                     _count(document.get("quota_reclaims")))


def _count(value: object) -> int | None:
    """A count summary.json may hold (``None`` when absent or not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _completion_times(path: Path) -> npt.NDArray[np.float64]:
    """The ``jct`` column of jobs.csv (s), finished jobs only."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if "jct" not in (reader.fieldnames or []):
            raise _not_a_replay(path.parent, "jobs.csv has no 'jct' column")
        values = []
        for line, row in enumerate(reader, start=2):
            text = row.get("jct") or ""
            if not text:
                continue  # not finished (an interrupted replay)
            try:
                values.append(float(text))
            except ValueError:
                raise InputError("bad jct", file=str(path), path=f"line {line}.jct",
                                 value=text, expected="seconds, or empty") from None
    return np.array(values, dtype=float)


def read_runs(folders: Sequence[str | Path]) -> list[RunRecord]:
    """Every folder read (:func:`read_run`), each labelled by its name, or by as much of its
    path as tells it apart from the others (``a/run`` and ``b/run``)."""
    paths = [Path(folder) for folder in folders]
    if not paths:
        raise InputError("no replay folders", path="RUN_DIR", expected="one or more")
    return [read_run(path, label) for path, label in zip(paths, _labels(paths), strict=True)]


def _labels(paths: Sequence[Path]) -> list[str]:
    depth = 1
    while True:
        labels = ["/".join(path.absolute().parts[-depth:]) for path in paths]
        longest = max(len(path.absolute().parts) for path in paths)
        if len(set(labels)) == len(labels) or depth >= longest:
            return labels
        depth += 1


def _duration(seconds: float) -> str:
    """Seconds as ``12.3 s`` or, from an hour on, ``4.56 h``; ``-`` if unknown."""
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:,.2f} h"
    return f"{seconds:,.1f} s"


def _figure(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``; "-" when unknown (NaN)."""
    return format(value, spec) if math.isfinite(value) else "-"


def _rows(runs: Sequence[RunRecord]) -> list[tuple[str, list[str]]]:
    first = runs[0].summary.avg_jct_s
    rows: list[tuple[str, list[str]]] = [
        ("policy", [r.policy for r in runs]),
        ("trace", [r.trace for r in runs]),
        ("cluster", [r.cluster for r in runs]),
        ("load, seed", [f"{r.load:g}, {r.seed}" for r in runs]),
        ("jobs completed", [f"{r.summary.completed:,} of {r.summary.jobs:,}" for r in runs]),
        ("avg JCT", [_duration(r.summary.avg_jct_s) for r in runs]),
        (f"avg JCT / {runs[0].label}'s", [
            f"{r.summary.avg_jct_s / first:.3f}" if first > 0 and math.isfinite(
                r.summary.avg_jct_s) else "-" for r in runs]),
        ("p50 JCT", [_duration(r.summary.p50_jct_s) for r in runs]),
        ("p95 JCT", [_duration(r.summary.p95_jct_s) for r in runs]),
        ("p99 JCT", [_duration(r.summary.p99_jct_s) for r in runs]),
        ("makespan", [_duration(r.summary.makespan_s) for r in runs]),
        ("avg queueing", [_duration(r.summary.avg_queue_s) for r in runs]),
        ("deadlines met", [f"{r.summary.deadline_met:,} of {r.summary.deadline_jobs:,}"
                           if r.summary.deadline_jobs else "-" for r in runs]),
        ("utilisation", [f"{r.summary.utilization:.1%}" for r in runs]),
        ("max rho", [_figure(r.summary.max_rho, ".3f") for r in runs]),
        ("mean rho", [_figure(r.summary.mean_rho, ".3f") for r in runs]),
        ("jobs with rho > 1", [_figure(r.summary.rho_above_1, ".1%") for r in runs]),
        ("tenants' Jain index", [_figure(r.summary.tenant_jain_index, ".3f") for r in runs]),
        ("preemptions", [f"{r.summary.preemptions:,}" for r in runs]),
        ("decisions", [f"{r.summary.decisions:,}" for r in runs]),
        ("fallbacks", [f"{r.summary.fallbacks:,}" for r in runs]),
    ]
    rows += _quota_rows(runs)
    if any(r.summary.interrupted for r in runs):
        rows.append(("interrupted", ["yes" if r.summary.interrupted else "no" for r in runs]))
    return rows


def _quota_rows(runs: Sequence[RunRecord]) -> list[tuple[str, list[str]]]:
    """The rows of the tenants' quotas (docs/fairness.md), when some run has them: GPU-s
    held beyond quotas while a tenant within its own waited, the starts the quota keeper
    dropped and the jobs it preempted to give quotas back ("-" for a run without)."""
    rows: list[tuple[str, list[str]]] = []
    if any((math.isfinite(r.summary.quota_violation_gpu_s) and r.summary.quota_violation_gpu_s
           > 0) or r.quota_dropped_starts is not None for r in runs):
        rows.append(("quota violations", [
            _figure(r.summary.quota_violation_gpu_s, ",.1f") + " GPU-s"
            if math.isfinite(r.summary.quota_violation_gpu_s) else "-" for r in runs]))
    for name, counts in (("quota dropped starts", [r.quota_dropped_starts for r in runs]),
                         ("quota reclaims", [r.quota_reclaims for r in runs])):
        if any(value is not None for value in counts):
            rows.append((name, [f"{value:,}" if value is not None else "-"
                                for value in counts]))
    return rows


def comparison_lines(runs: Sequence[RunRecord]) -> list[str]:
    """The metrics of ``runs`` side by side: one column per run, one row per metric
    (durations in s or h), then a note when the runs did not replay the same jobs."""
    rows = [("", [r.label for r in runs]), *_rows(runs)]
    width = max(len(name) for name, _ in rows)
    columns = [max(len(row[1][i]) for row in rows) for i in range(len(runs))]
    lines = []
    for index, (name, cells) in enumerate(rows):
        lines.append(f"{name:<{width}}  " + "  ".join(
            cell.rjust(columns[i]) for i, cell in enumerate(cells)).rstrip())
        if index == 0:
            lines.append("-" * width + "  " + "  ".join("-" * c for c in columns))
    lines += [f"note: {warning}" for warning in comparison_warnings(runs)]
    return lines


#: What runs compared side by side should share, and how to read it off a run.
#: Traces by file name (a replay names its trace as it was given, relative or not; an
#: agent's run by the name ``slurm submit`` put in its jobs' metadata), clusters by GPUs
#: of each type (a spec may name them in any order or by nodes; an agent's run by what
#: it found in Slurm).
_ALIKE: tuple[tuple[str, Callable[[RunRecord], object]], ...] = (
    ("traces", lambda r: r.trace), ("job counts", lambda r: r.summary.jobs),
    ("loads", lambda r: r.load), ("seeds", lambda r: r.seed),
    ("clusters", lambda r: gpus_by_type(r.cluster)))


def gpus_by_type(spec: str) -> str:
    """A cluster spec as its GPU counts by type, sorted (``k80=4,v100=8``); the spec
    itself where it cannot be read (a file since moved)."""
    from hetsched.files.cluster_spec import parse_cluster

    try:
        cluster = parse_cluster(spec)
    except (InputError, OSError, ValueError):
        return spec
    return ",".join(f"{kind}={cluster.num_gpus(kind)}" for kind in sorted(cluster.type_names)
                    if cluster.num_gpus(kind))


def comparison_warnings(runs: Sequence[RunRecord]) -> list[str]:
    """What makes ``runs`` unlike for a comparison: different traces, job counts, loads,
    seeds or clusters (each run's value named), and runs stopped before every job finished
    (their metrics cover the finished jobs only)."""
    warnings = []
    for what, value in _ALIKE:
        values = [value(r) for r in runs]
        if len(set(values)) > 1:
            warnings.append(f"the runs replayed different {what}: " + ", ".join(
                f"{r.label} {v}" for r, v in zip(runs, values, strict=True))
                + ": compare with care")
    for run in runs:
        if run.summary.interrupted:
            warnings.append(f"{run.label} was stopped before every job finished "
                            f"({run.summary.completed} of {run.summary.jobs}): its metrics "
                            "cover the finished jobs only")
    return warnings


def to_frame(runs: Sequence[RunRecord]) -> Any:
    """The runs' metrics as a pandas DataFrame, one row per run (the label, policy, trace,
    cluster, load, seed and every field of :class:`ReplaySummary`)."""
    import pandas as pd

    return pd.concat([r.summary.to_frame().assign(
        run=r.label, policy=r.policy, trace=r.trace, cluster=r.cluster, load=r.load,
        seed=r.seed, quota_dropped_starts=r.quota_dropped_starts,
        quota_reclaims=r.quota_reclaims) for r in runs], ignore_index=True)


def jct_cdf(runs: Sequence[RunRecord], ax: Any = None) -> Any:
    """The completion time CDFs of ``runs`` on one axis (log time in hours), each labelled
    with its run and average JCT; returns the matplotlib ``Axes``."""
    from matplotlib.figure import Figure

    if ax is None:
        ax = Figure(figsize=(8, 5)).add_subplot()
    for index, run in enumerate(runs):
        hours = np.sort(run.jct) / 3600.0
        if not len(hours):
            continue
        share = np.arange(1, len(hours) + 1) / run.summary.jobs
        ax.step(np.maximum(hours, 1e-4), share, where="post", color=f"C{index % 10}",
                linestyle=("-", "--", "-.", ":")[index // 10 % 4],
                label=f"{run.label} ({run.policy}): avg {_duration(run.summary.avg_jct_s)}")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h, log scale)")
    ax.set_ylabel("share of the jobs completed")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("JCT CDF: " + ", ".join(sorted({r.trace for r in runs})), fontsize=10)
    return ax
