"""A policy's decision time at 2,048 GPUs with 1,000 and more active jobs: the Philly
trace at load 4 on v100=688,p100=680,k80=680 (servers of 4), replayed for ``--cap``
wall seconds (SIGINT then: the replay writes what finished); the decision times of the
decisions where at least ``--active`` jobs were running or waiting, their p50, p95 and
maximum, and the fallbacks. Prints a line per policy and writes CSV. Run it alone: the
figures are wall-clock times.

With ``--sia SIA`` (Sia's ``sia-simulator`` folder), the elastic case instead: Sia's
``workloads/scale/scale_32x/workload-1.csv`` (Helios Saturn's 160 jobs, each issued 32
times: 5,120 jobs, Sia's own 2,048-GPU run) on Sia's cluster at ``--cluster_scale`` 32
(``hetsched.speeds.sia.cluster_spec(32)``: aws=768x4,rtx=768x8,dgx-ext=512x8), every job
elastic, the start latency and restart penalty 50 s as benchmarks/sia.py has them, at
``--load`` (its arrivals that much faster, so that 1,000 jobs are active within the cap).

    python benchmarks/decision_scale.py --out benchmarks/results/decision_scale.csv
    python benchmarks/decision_scale.py --sia /tmp/sia_src/sia-simulator \
        --policies progress-elastic --load 4 --cap 600 --append \
        --out benchmarks/results/decision_scale.csv

``--analyse DIR...`` computes the figures of replay folders kept from capped runs of the
same replay (``timeout -s INT CAP hetsched replay ... --out DIR``), at each of
``--thresholds``, one label per folder in ``--policies``.
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


def replay_arguments(sia: Path | None, load: float) -> tuple[list[str], str]:
    """The replay's trace arguments and its cluster: Philly's, or Sia's 32x (module)."""
    if sia is None:
        return [str(PHILLY), "--format", "philly", "--cluster", CLUSTER, "--load",
                repr(load)], CLUSTER
    from hetsched.speeds.sia import cluster_spec

    workload = sia / "workloads" / "scale" / "scale_32x" / "workload-1.csv"
    cluster = cluster_spec(32)
    return [str(workload), "--format", "sia", "--elastic", "--cluster", cluster,
            "--start-latency", "50", "--restart-penalty", "50", "--load", repr(load)], cluster


def measure(policy: str, cap_s: float, active: int, folder: Path, sia: Path | None = None,
            load: float = 4.0) -> dict[str, object]:
    """One capped replay; the decision-time figures of its decisions over ``active``."""
    out = folder / "replay"
    trace, cluster = replay_arguments(sia, load)
    process = subprocess.Popen(
        [sys.executable, "-m", "hetsched", "replay", *trace, "--policy", policy,
         "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        process.wait(timeout=cap_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        process.wait()
    return {"policy": policy, "workload": "philly" if sia is None else "sia-scale_32x-1",
            "load": load, "cluster": cluster, "cap_s": cap_s, **figures(out, active)}


def figures(out: Path, active: int) -> dict[str, object]:
    """The decision-time figures of the replay in ``out`` over the decisions with at
    least ``active`` jobs running or waiting."""
    timing = json.loads((out / "timing.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    with (out / "decisions.csv").open(newline="") as handle:
        counts = [int(row["pending"]) + int(row["running"]) for row in csv.DictReader(handle)]
    times = sorted(t for t, n in zip(timing["decision_time_s"], counts, strict=True)
                   if n >= active)
    row: dict[str, object] = {
        "decisions": len(counts), "fallbacks": summary["fallbacks"],
        "completed": summary["completed"], "max_active": max(counts, default=0),
        "active_at_least": active, "decisions_over_active": len(times)}
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
    parser.add_argument("--load", type=float, default=4.0, help="the arrivals' speed-up")
    parser.add_argument("--sia", type=Path, default=None,
                        help="Sia's sia-simulator folder: its 32x workload (module)")
    parser.add_argument("--append", action="store_true", help="add to --out's rows")
    parser.add_argument("--analyse", nargs="+", type=Path, default=None, metavar="DIR",
                        help="no replay: the figures of these replay folders (kept from "
                        "capped runs of the same command), as --policies names them, at "
                        "each of --thresholds")
    parser.add_argument("--thresholds", default=None,
                        help="with --analyse: comma-separated --active values")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.sia is None and not PHILLY.is_file():
        sys.exit(f"{PHILLY} is absent: this benchmark needs ../shared/data")
    if args.sia is not None and not (args.sia / "workloads" / "scale").is_dir():
        sys.exit(f"{args.sia}/workloads/scale is absent: give Sia's sia-simulator folder")
    rows: list[dict[str, object]] = []
    if args.append and args.out.is_file():
        with args.out.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        for old in rows:  # (rows from before the Sia case: Philly at load 4)
            old.setdefault("workload", "philly")
            old.setdefault("load", "4.0")
    if args.analyse:
        labels = args.policies.split(",")
        if len(labels) != len(args.analyse):
            sys.exit("--analyse needs one --policies label per folder")
        for label, folder in zip(labels, args.analyse, strict=True):
            cluster = replay_arguments(args.sia, args.load)[1]
            for active in [int(a) for a in (args.thresholds or str(args.active)).split(",")]:
                rows.append({"policy": label, "workload": "philly" if args.sia is None
                             else "sia-scale_32x-1", "load": args.load, "cluster": cluster,
                             "cap_s": args.cap, **figures(folder, active)})
                print(rows[-1], flush=True)
        write_csv(args.out, rows, list(dict.fromkeys(key for row in rows for key in row)))
        return
    for policy in args.policies.split(","):
        with tempfile.TemporaryDirectory() as folder:
            row = measure(policy, args.cap, args.active, Path(folder), args.sia, args.load)
        rows.append(row)
        print(f"{policy}: {row['decisions_over_active']} decisions with >= {args.active} "
              f"active jobs (max {row['max_active']}): p50 {row.get('p50_s')} s, p95 "
              f"{row.get('p95_s')} s, max {row.get('max_s')} s; {row['fallbacks']} "
              f"fallbacks in {row['decisions']} decisions", flush=True)
    write_csv(args.out, rows, list(dict.fromkeys(key for row in rows for key in row)))


if __name__ == "__main__":
    main()
