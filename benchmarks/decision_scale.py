"""A policy's decision time at 2,048 GPUs with 1,000 and more active jobs: the Philly
trace at load 4 on v100=688,p100=680,k80=680 (servers of 4), replayed for ``--cap``
wall seconds (SIGINT then: the replay writes what finished); the decision times of the
decisions where at least ``--active`` jobs were running or waiting, their p50, p95 and
maximum, and the fallbacks. Prints a line per policy and writes CSV. Run it alone: the
figures are wall-clock times.

    python benchmarks/decision_scale.py --out benchmarks/results/decision_scale.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from common import DATA, write_csv

PHILLY = DATA / "philly" / "philly.csv"
CLUSTER = "v100=688,p100=680,k80=680"


def measure(policy: str, cap_s: float, active: int, folder: Path) -> dict[str, object]:
    """One capped replay; the decision-time figures of its decisions over ``active``."""
    out = folder / "replay"
    process = subprocess.Popen(
        [sys.executable, "-m", "hetsched", "replay", str(PHILLY), "--format", "philly",
         "--cluster", CLUSTER, "--load", "4", "--policy", policy, "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        process.wait(timeout=cap_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        process.wait()
    timing = json.loads((out / "timing.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    with (out / "decisions.csv").open(newline="") as handle:
        counts = [int(row["pending"]) + int(row["running"]) for row in csv.DictReader(handle)]
    times = sorted(t for t, n in zip(timing["decision_time_s"], counts, strict=True)
                   if n >= active)
    row: dict[str, object] = {
        "policy": policy, "cluster": CLUSTER, "cap_s": cap_s, "decisions": len(counts),
        "fallbacks": summary["fallbacks"], "completed": summary["completed"],
        "max_active": max(counts, default=0), "active_at_least": active,
        "decisions_over_active": len(times)}
    if times:
        row.update(p50_s=round(times[len(times) // 2], 4),
                   p95_s=round(times[min(len(times) - 1, int(0.95 * len(times)))], 4),
                   max_s=round(times[-1], 4))
    return row


def main() -> None:
    """Measure each policy asked for; print; write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="progress")
    parser.add_argument("--cap", type=float, default=300.0, help="wall seconds per policy")
    parser.add_argument("--active", type=int, default=1000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not PHILLY.is_file():
        sys.exit(f"{PHILLY} is absent: this benchmark needs ../shared/data")
    rows = []
    for policy in args.policies.split(","):
        with tempfile.TemporaryDirectory() as folder:
            row = measure(policy, args.cap, args.active, Path(folder))
        rows.append(row)
        print(f"{policy}: {row['decisions_over_active']} decisions with >= {args.active} "
              f"active jobs (max {row['max_active']}): p50 {row.get('p50_s')} s, p95 "
              f"{row.get('p95_s')} s, max {row.get('max_s')} s; {row['fallbacks']} "
              f"fallbacks in {row['decisions']} decisions", flush=True)
    write_csv(args.out, rows, list(dict.fromkeys(key for row in rows for key in row)))


if __name__ == "__main__":
    main()
