"""The whole Philly trace (82,247 jobs of ../shared/data/philly/philly.csv
on v100=192,p100=192,k80=192) under every registered rolling policy, each in a process of
its own under a wall-clock cap (default 600 s, the target): at the cap the replay gets
SIGINT and writes what finished, so a policy that is too slow is still measured (jobs
done by the cap, decisions, decision time p50 and p95, the replay's peak memory). Prints a
line per policy and writes CSV. ``--batch S`` replays with batched decisions (``hetsched
replay --batch``), ``--append`` adds the rows to an existing CSV.

    python benchmarks/philly_policies.py --out benchmarks/results/philly_policies.csv
    python benchmarks/philly_policies.py --policies srtf,gavel --cap 120 --out /tmp/p.csv
    python benchmarks/philly_policies.py --policies progress --batch 600 --out /tmp/p.csv
    python benchmarks/philly_policies.py --batch 600 --out /tmp/p.csv \
        --policies benchmarks/progress_gap.py:ProgressGap
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import DATA, write_csv

PHILLY = DATA / "philly" / "philly.csv"
CLUSTER = "v100=192,p100=192,k80=192"
#: Seconds a replay gets, after SIGINT at the cap, to write what finished.
GRACE_S = 120.0


def run(policy: str, cap_s: float, folder: Path,
        batch_s: float | None = None) -> dict[str, object]:
    """One replay of the whole trace under ``policy``, stopped by SIGINT at ``cap_s``."""
    label = re.sub(r"[^A-Za-z0-9._+-]", "_", policy)  # (a policy may be a file:Class)
    out = folder / label
    log = folder / f"{label}.log"  # a file, not a pipe nobody reads while it runs
    batch = [] if batch_s is None else ["--batch", f"{batch_s:g}"]
    began = time.perf_counter()
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "hetsched", "replay", str(PHILLY), "--format", "philly",
             "--cluster", CLUSTER, "--policy", policy, "--out", str(out), *batch],
            stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=_default_sigint)
        capped, peak_kb = _wait(process, cap_s)
    wall = time.perf_counter() - began
    row: dict[str, object] = {"policy": policy, "batch_s": batch_s or "", "cap_s": cap_s,
                              "wall_s": round(wall, 1),
                              "finished": not capped and process.returncode == 0,
                              "exit": process.returncode,
                              "peak_memory_mb": round(peak_kb / 1024)}
    summary_path = out / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        timing = json.loads((out / "timing.json").read_text())
        row.update(jobs=summary["jobs"], completed=summary["completed"],
                   decisions=summary["decisions"],
                   decision_time_p50_s=timing.get("decision_time_p50_s"),
                   decision_time_p95_s=timing.get("decision_time_p95_s"),
                   avg_jct_s=summary.get("avg_jct_s"),
                   simulated_h=round(float(summary.get("makespan_s") or 0.0) / 3600, 1))
    else:
        row["error"] = log.read_text()[-200:]
    return row


def _default_sigint() -> None:
    """In the child: Ctrl-C's default action. A shell without job control starts its
    background commands with SIGINT ignored, and children inherit that: the SIGINT at
    the cap would then be lost and the replay run on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait(process: subprocess.Popen[bytes], cap_s: float) -> tuple[bool, int]:
    """Wait for ``process``; at ``cap_s`` send SIGINT (it writes what finished) and wait
    :data:`GRACE_S` more before killing it. Whether the cap was reached, and the process's
    peak resident memory (kB, from the kernel's accounting of the reaped child)."""
    capped = False
    deadline = time.monotonic() + cap_s
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return capped, int(usage.ru_maxrss)
        now = time.monotonic()
        if not capped and now > deadline:
            process.send_signal(signal.SIGINT)
            capped, deadline = True, now + GRACE_S
        elif capped and now > deadline:
            process.kill()
        time.sleep(0.2)


def main() -> None:
    """Run every policy asked for, print a line each, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default=None, help="default: every registered one")
    parser.add_argument("--cap", type=float, default=600.0, help="wall seconds per policy")
    parser.add_argument("--batch", type=float, default=None,
                        help="replay with --batch S (batched decisions)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--append", action="store_true", help="add to --out's rows")
    args = parser.parse_args()
    if not PHILLY.is_file():
        sys.exit(f"{PHILLY} is absent: this benchmark needs ../shared/data")
    import hetsched

    policies = args.policies.split(",") if args.policies else hetsched.names()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for policy in policies:
            row = run(policy, args.cap, Path(folder), args.batch)
            rows.append(row)
            print(f"{policy:14s} {'finished' if row['finished'] else 'capped  '} "
                  f"{row['wall_s']:>7} s  {row.get('completed', '?')}/{row.get('jobs', '?')} "
                  f"jobs  {row.get('decisions', '?')} decisions  "
                  f"p95 {row.get('decision_time_p95_s', '?')} s  "
                  f"peak {row['peak_memory_mb']} MB", flush=True)
    if args.append and args.out.is_file():
        with args.out.open(newline="") as earlier:
            rows = [*csv.DictReader(earlier), *rows]
    first = ["policy", "batch_s", "cap_s", "finished", "exit", "wall_s", "jobs", "completed",
             "decisions", "decision_time_p50_s", "decision_time_p95_s", "peak_memory_mb",
             "avg_jct_s", "simulated_h"]
    write_csv(args.out, rows, first + sorted({key for row in rows for key in row} - set(first)))


if __name__ == "__main__":
    main()
