"""How long ``hetsched replay`` takes on the real traces.

Cases (each one ``python -m hetsched replay ...`` in a fresh process, timed from start to
exit, so interpreter start, reading the trace, the lower bounds and writing the outputs
all count; its peak memory is the child's maximum resident set size):

* ``philly-fifo``: ``fifo`` on all 82,247 jobs of ``philly.csv`` on
  ``v100=832,p100=832,k80=832`` (2,496 GPUs, servers of 4). Target: <= 2 min end to end
  on the 2-core machine. The jobs of 12-128 GPUs are capped at 8 (the built-in
  catalogue's largest gang; summary.json's notes), so every job runs there.
* ``philly-fifo-queued``: the same on ``v100=192,p100=192,k80=192`` (576 GPUs), where
  the queue grows to tens of thousands of jobs: the replay must stay linear in events.
* ``gavel-fifo``: ``fifo`` on all 2,000 jobs of Gavel's ``ee9e8c.trace`` on
  ``v100=36,p100=36,k80=36`` (Gavel's cluster and measured throughputs).
* ``gavel-deadline`` (with ``--deadline``): the rolling ``deadline`` policy on the same.
  Targets: <= 10 min end to end, decision time p50 <= 1 s and p95 <= 5 s, no fallbacks.
* The allocation LP with many active jobs (``peak_active`` from decisions.csv):
  ``gavel-gavel-load2`` (``gavel`` on ee9e8c at ``--load 2`` on ``v100=8,p100=8,k80=8``),
  ``gavel-gavel-pop4`` (``--partitions 4`` on Gavel's cluster), ``philly-gavel``,
  ``philly-gavel-max-sum`` and ``philly-gavel-pop8`` (all 82,247 jobs on
  ``v100=192,p100=192,k80=192``; target <= 15 min end to end, 0 fallbacks).
* The ``progress`` policy's MILP over every active job: ``gavel-progress-load2``
  and ``gavel-progress-load1000`` (ee9e8c on ``v100=8,p100=8,k80=8``; target decision
  time p95 <= 1 s, 0 fallbacks).

Prints one line per case and writes ``benchmarks/results/replay.csv`` (a row per case;
a rerun replaces the rows of the cases it ran). The replays' own outputs go to a
temporary folder unless ``--keep DIR``.

    python benchmarks/replay.py                         # the three fifo cases (~1 min)
    python benchmarks/replay.py --deadline --cases gavel-deadline --deadline-jobs 300
    python benchmarks/replay.py --cases philly-gavel,philly-gavel-max-sum,philly-gavel-pop8
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
DATA = ROOT.parent / "shared" / "data"
PHILLY = DATA / "philly" / "philly.csv"
GAVEL = DATA / "gavel" / "traces" / "ee9e8c.trace"

COLUMNS = ("case", "trace", "format", "cluster", "gpus", "policy", "jobs", "completed",
           "decisions", "end_to_end_s", "simulation_s", "peak_rss_mb",
           "decision_time_p50_s", "decision_time_p95_s", "decision_time_max_s", "fallbacks",
           "avg_jct_s", "avg_queue_s", "utilization", "peak_active", "pop_objective_ratio_min",
           "pop_objective_ratio_mean", "target", "meets_target", "status",
           "load_avg_1min", "commit")


@dataclass(frozen=True)
class Case:
    """One replay to time, and its target."""

    name: str
    trace: Path
    trace_format: str
    cluster: str
    policy: str
    target: str = ""
    limit_jobs: int | None = None
    #: further options of ``hetsched replay`` (``--load``, ``--partitions``)
    options: tuple[str, ...] = ()

    def command(self, out: Path) -> list[str]:
        """The ``hetsched replay`` command line (run as ``python -m hetsched``)."""
        command = [sys.executable, "-m", "hetsched", "replay", str(self.trace), "--format",
                   self.trace_format, "--cluster", self.cluster, "--policy", self.policy,
                   "--out", str(out)]
        if self.limit_jobs is not None:
            command += ["--limit-jobs", str(self.limit_jobs)]
        return command + list(self.options)


def cases(deadline_jobs: int | None) -> list[Case]:
    """Every case this benchmark knows (``gavel-deadline`` runs only with --deadline)."""
    return [
        Case("philly-fifo", PHILLY, "philly", "v100=832,p100=832,k80=832", "fifo",
             "end_to_end_s <= 120"),
        Case("philly-fifo-queued", PHILLY, "philly", "v100=192,p100=192,k80=192", "fifo"),
        Case("gavel-fifo", GAVEL, "gavel", "v100=36,p100=36,k80=36", "fifo"),
        Case("gavel-deadline", GAVEL, "gavel", "v100=36,p100=36,k80=36", "deadline",
             "end_to_end_s <= 600, decision p50 <= 1 s, p95 <= 5 s, 0 fallbacks",
             deadline_jobs),
        # The allocation LP where hundreds to thousands of jobs are active.
        Case("gavel-gavel-load2", GAVEL, "gavel", "v100=8,p100=8,k80=8", "gavel",
             "0 fallbacks", options=("--load", "2")),
        # The progress policy's MILP over every active job, ~2,000 at the peak.
        Case("gavel-progress-load2", GAVEL, "gavel", "v100=8,p100=8,k80=8", "progress",
             "decision p95 <= 1 s, 0 fallbacks", options=("--load", "2")),
        # ... and with every job of the trace arriving within minutes (--load 1000): the
        # queue holds nearly all 2,000 jobs at once (~1,900 active at the peak).
        Case("gavel-progress-load1000", GAVEL, "gavel", "v100=8,p100=8,k80=8", "progress",
             "decision p95 <= 1 s, 0 fallbacks", options=("--load", "1000")),
        Case("gavel-gavel-pop4", GAVEL, "gavel", "v100=36,p100=36,k80=36", "gavel",
             "0 fallbacks", options=("--partitions", "4")),
        Case("philly-gavel", PHILLY, "philly", "v100=192,p100=192,k80=192", "gavel",
             "end_to_end_s <= 900, 0 fallbacks"),
        Case("philly-gavel-max-sum", PHILLY, "philly", "v100=192,p100=192,k80=192",
             "gavel-max-sum", "end_to_end_s <= 900, 0 fallbacks"),
        Case("philly-gavel-pop8", PHILLY, "philly", "v100=192,p100=192,k80=192", "gavel",
             "end_to_end_s <= 900, 0 fallbacks", options=("--partitions", "8")),
    ]


def run_case(case: Case, out: Path, timeout_s: float) -> dict[str, object]:
    """Run one case in a child process (its stdout and stderr kept in ``out``, the replay's
    files in ``out/replay``); its figures as a CSV row: the replay's from summary.json,
    the wall-clock ones from timing.json."""
    row: dict[str, object] = {
        "case": case.name, "trace": case.trace.name, "format": case.trace_format,
        "cluster": case.cluster, "policy": case.policy, "target": case.target,
        "load_avg_1min": round(os.getloadavg()[0], 2), "commit": _commit()}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "stdout.txt", "w") as stdout, open(out / "stderr.txt", "w") as stderr:
        began = time.perf_counter()
        child = subprocess.Popen(case.command(out / "replay"), stdout=stdout, stderr=stderr,
                                 cwd=ROOT)
        status, usage = _wait(child, timeout_s)
        row["end_to_end_s"] = round(time.perf_counter() - began, 2)
    row["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1) if usage else None  # KiB on Linux
    if status is None:
        row["status"] = f"timeout after {timeout_s:g} s"
        return row
    if status != 0:
        last = (out / "stderr.txt").read_text().strip().splitlines()[-1:]
        row["status"] = f"exit {status}: {' '.join(last)}"
        return row
    summary = json.loads((out / "replay" / "summary.json").read_text())
    timing = json.loads((out / "replay" / "timing.json").read_text())
    row["status"] = "ok"
    row["simulation_s"] = round(timing["wall_time_s"], 2)
    for key in ("decision_time_p50_s", "decision_time_p95_s", "decision_time_max_s"):
        row[key] = timing.get(key)
    for key in ("gpus", "jobs", "completed", "decisions", "fallbacks", "avg_jct_s",
                "avg_queue_s", "utilization", "pop_objective_ratio_min",
                "pop_objective_ratio_mean"):
        row[key] = summary.get(key)
    row["peak_active"] = _peak_active(out / "replay" / "decisions.csv")
    row["meets_target"] = _meets(case, row)
    return row


def _peak_active(decisions: Path) -> int | None:
    """The most jobs waiting or running at once, from decisions.csv."""
    if not decisions.is_file():
        return None
    with open(decisions, newline="") as handle:
        return max((int(row["pending"]) + int(row["running"])
                    for row in csv.DictReader(handle)), default=0)


def _wait(child: subprocess.Popen[bytes], timeout_s: float
          ) -> tuple[int | None, resource.struct_rusage | None]:
    """Wait for ``child``: its exit code and resource usage (``None`` on a timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return child.returncode, usage
        if time.monotonic() > deadline:
            child.kill()
            _, _, usage = os.wait4(child.pid, 0)
            child.returncode = -9
            return None, usage
        time.sleep(0.05)


def _meets(case: Case, row: dict[str, object]) -> bool | str:
    """Whether the row meets the case's target ("" without one, or on part of the trace)."""
    def number(key: str) -> float:
        value = row.get(key)
        return float(value) if isinstance(value, int | float) else float("inf")

    if case.limit_jobs is not None:
        return ""
    if case.name == "philly-fifo":
        return number("end_to_end_s") <= 120 and row.get("completed") == row.get("jobs")
    if case.name.startswith("philly-gavel"):
        return (number("end_to_end_s") <= 900 and row.get("fallbacks") == 0
                and row.get("completed") == row.get("jobs"))
    if case.name.startswith("gavel-gavel"):
        return row.get("fallbacks") == 0 and row.get("completed") == row.get("jobs")
    if case.name.startswith("gavel-progress"):
        return (number("decision_time_p95_s") <= 1 and row.get("fallbacks") == 0
                and row.get("completed") == row.get("jobs"))
    if case.name == "gavel-deadline":
        return (number("end_to_end_s") <= 600 and number("decision_time_p50_s") <= 1
                and number("decision_time_p95_s") <= 5 and row.get("fallbacks") == 0
                and row.get("completed") == row.get("jobs"))
    return ""


def _commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=ROOT, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def print_row(row: dict[str, object]) -> None:
    """One line of figures."""
    def fmt(key: str, spec: str = ",.2f") -> str:
        value = row.get(key)
        return format(value, spec) if isinstance(value, int | float) else "-"

    print(f"{row['case']:19s} {row['status']}: {fmt('jobs', ',')} jobs, "
          f"{fmt('decisions', ',')} decisions, end to end {fmt('end_to_end_s')} s "
          f"(simulation {fmt('simulation_s')} s), peak RSS {fmt('peak_rss_mb', ',.0f')} MB, "
          f"decision p50/p95/max {fmt('decision_time_p50_s', '.2g')}/"
          f"{fmt('decision_time_p95_s', '.2g')}/{fmt('decision_time_max_s', '.2g')} s, "
          f"fallbacks {fmt('fallbacks', 'd')}, avg JCT {fmt('avg_jct_s', ',.0f')} s"
          + (f"; target {row['target']}: {'met' if row['meets_target'] else 'NOT met'}"
             if isinstance(row.get("meets_target"), bool) else "")
          + f" [load {row['load_avg_1min']}]")


def write_rows(rows: list[dict[str, object]], path: Path) -> None:
    """Write ``rows`` into ``path``, keeping the rows of cases not run this time."""
    kept: list[dict[str, object]] = []
    if path.is_file():
        with open(path, newline="") as handle:
            ran = {row["case"] for row in rows}
            kept = [row for row in csv.DictReader(handle) if row.get("case") not in ran]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows([*kept, *rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=None,
                        help="comma-separated case names (default: every fifo case, and "
                        "gavel-deadline with --deadline; the gavel cases by name)")
    parser.add_argument("--deadline", action="store_true",
                        help="also the rolling deadline policy on ee9e8c (long)")
    parser.add_argument("--deadline-jobs", type=int, default=None,
                        help="only the N earliest jobs in gavel-deadline (default: all)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds before a case is stopped (default 3600)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the replays' outputs in DIR/<case>/")
    parser.add_argument("--csv", type=Path, default=OUT / "replay.csv")
    args = parser.parse_args()
    known = {case.name: case for case in cases(args.deadline_jobs)}
    if args.cases:
        names = [name.strip() for name in args.cases.split(",") if name.strip()]
        unknown = [name for name in names if name not in known]
        if unknown:
            parser.error(f"unknown case {unknown[0]}; known: {', '.join(known)}")
    else:
        names = [name for name in known if "fifo" in name
                 or (name == "gavel-deadline" and args.deadline)]
    if not DATA.is_dir():
        parser.error(f"the shared data folder {DATA} is absent")
    rows = []
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as scratch:
        for name in names:
            folder = (args.keep or Path(scratch)) / name
            rows.append(run_case(known[name], folder, args.timeout))
            print_row(rows[-1])
            write_rows(rows, args.csv)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
