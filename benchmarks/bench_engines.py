"""The Ray engine against the local engine, and what a full sweep
would take.

``quick``: the acceptance bench (ee9e8c, 36 V100 + 36 P100 + 36 K80, fifo, srtf
and gavel, seeds 0 and 1, loads 0.5 and 1, the first 200 jobs: 12 replays) run as
``hetsched bench`` processes, local and Ray interleaved (local, ray, local, ray, ...) so
that both see the same machine, each timed end to end (start-up, LP bounds, Ray's start
and stop, replays, report). Each run's results are compared cell for cell with the first
local run's (wall-clock columns aside). The machine's load is recorded around each run:
the 1-minute load average and the busy cores (all processes, from /proc/stat).

``overhead``: Ray's own cost, apart from the replays: a bench of fifo alone (the 200
jobs, 4 replays of milliseconds, no LP bound), local and Ray interleaved; the difference
is Ray's start, stop and task costs.

``four-cell``: the 4-cell bench (ee9e8c and 6214e9, first 1,000 jobs, loads 0.5 and 1:
four trace x load cells) of the 12 policies of the full sweep
(POLICIES), seed 0, as one sweep spec on one engine; and the same at 200 jobs, to
see how a replay's cost grows with the number of jobs. Reports replays and cells per
hour per core: from the wall time (inflated by other users' jobs on a shared machine)
and from the replays' CPU time (results.csv's ``cpu_time_s``: what a core of one's own
would take).

``projection``: the full sweep (the 15 Gavel traces, whole, x 12 policies x 3 seeds x 3
loads = 1,620 replays) on 1, 8 and 64 cores, from the four-cell measurements: each
replay's cost is the measured CPU time of its policy and load at 1,000 jobs scaled to its
trace's jobs by the exponent fitted between 200 and 1,000 jobs (load 2, not measured,
costs as load 1; seeds as seed 0); the replays are scheduled longest first on the cores;
the LP bounds, which the bench solves in one process of the driver while the replays
run, are one more chain of work on one core, and Ray's own cost measured by
``overhead`` is added.

    python benchmarks/bench_engines.py quick --repeats 3
    python benchmarks/bench_engines.py overhead --repeats 3
    ray start --head --num-cpus 2 && \
        python benchmarks/bench_engines.py quick --repeats 3 --address auto; ray stop
    python benchmarks/bench_engines.py four-cell --engine ray
    python benchmarks/bench_engines.py projection

Figures are printed and written to ``benchmarks/results/engines_*.csv``.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "gavel"
RESULTS = ROOT / "benchmarks" / "results"
CLUSTER = "v100=36,p100=36,k80=36"
QUICK = ["--trace", str(DATA / "traces" / "ee9e8c.trace"), "--format", "gavel", "--cluster",
         CLUSTER, "--policies", "fifo,srtf,gavel", "--seeds", "0,1", "--load", "0.5,1",
         "--limit-jobs", "200"]
#: 11 policies and progress: the 12 of the full sweep.
POLICIES = ("fifo", "srtf", "edf", "tiresias", "gandiva", "gavel", "gavel-agnostic", "optimus",
            "allox", "deadline", "deadline-agnostic", "progress")
FOUR_CELL_TRACES = ("ee9e8c", "6214e9")
TIMING = {"wall_time_s", "decision_time_p50_s", "decision_time_p95_s", "decision_time_max_s",
          "cpu_time_s"}


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def timed_bench(args: list[str], out: Path) -> dict[str, float]:
    """Run ``hetsched bench ARGS --out OUT`` in a fresh process; its wall time (s), the
    load average before and after, and the machine's busy cores meanwhile (and busy
    CPU-seconds: busy cores x wall time, every process of the machine)."""
    shutil.rmtree(out, ignore_errors=True)
    load_before = os.getloadavg()[0]
    busy0, total0 = busy_jiffies()
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hetsched", "bench", *args, "--out", str(out)],
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    busy1, total1 = busy_jiffies()
    if done.returncode != 0:
        raise SystemExit(f"bench failed ({done.returncode}): {done.stderr[-2000:]}")
    cores = os.cpu_count() or 1
    busy_cores = cores * (busy1 - busy0) / max(total1 - total0, 1)
    return {"wall_s": wall, "load_before": load_before, "load_after": os.getloadavg()[0],
            "busy_cores": busy_cores, "busy_cpu_s": busy_cores * wall}


def rows(folder: Path) -> dict[tuple[str, ...], dict[str, str]]:
    """results.csv of every bench under ``folder``, by (bench folder, policy, seed, load)."""
    found = {}
    for path in sorted(folder.rglob("results.csv")):
        bench = str(path.parent.relative_to(folder))
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                found[(bench, row["policy"], row["seed"], row["load"])] = row
    return found


def same_cells(one: Path, other: Path) -> bool:
    """Whether two bench folders hold the same cells (wall-clock columns aside)."""
    mine, theirs = rows(one), rows(other)
    return mine.keys() == theirs.keys() and all(
        {k: v for k, v in row.items() if k not in TIMING}
        == {k: v for k, v in theirs[key].items() if k not in TIMING}
        for key, row in mine.items())


def write_csv(path: Path, records: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for r in records for k in r))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)


#: The overhead bench: fifo alone on the quick bench's jobs, no LP bound (4 replays).
OVERHEAD = [*QUICK[:QUICK.index("--policies") + 1], "fifo", *QUICK[QUICK.index("--seeds"):],
            "--no-lp-bound"]


def quick(args: argparse.Namespace, scratch: Path) -> None:
    """The quick bench (or, for ``overhead``, fifo alone), local and Ray interleaved."""
    bench = QUICK if args.part == "quick" else OVERHEAD
    records: list[dict[str, object]] = []
    first_local = scratch / "local-0"
    for repeat in range(args.repeats):
        for engine in ("local", "ray"):
            out = scratch / f"{engine}-{repeat}"
            joining = ["--address", args.address] if engine == "ray" and args.address else []
            figures = timed_bench([*bench, "--engine", engine, "--workers",
                                   str(args.workers), *joining], out)
            same = same_cells(out, first_local)
            records.append({"repeat": repeat, "engine": engine, "cells": len(rows(out)),
                            **{k: round(v, 2) for k, v in figures.items()},
                            "same_cells_as_local_0": same})
            print(f"repeat {repeat} {engine}: {figures['wall_s']:.1f} s (load average "
                  f"{figures['load_before']:.2f} -> {figures['load_after']:.2f}, busy cores "
                  f"{figures['busy_cores']:.2f} of {os.cpu_count()}), same cells as local "
                  f"run 0: {same}")
    pairs = [(float(loc["wall_s"]), float(r["wall_s"]))  # type: ignore[arg-type]
             for loc, r in zip(records[::2], records[1::2], strict=True)]
    print("ray / local wall time per pair: " + ", ".join(f"{r / loc:.2f}x" for loc, r in pairs)
          + f"; median {statistics.median(r / loc for loc, r in pairs):.2f}x; ray - local: "
          + ", ".join(f"{r - loc:+.1f} s" for loc, r in pairs)
          + f"; median {statistics.median(r - loc for loc, r in pairs):+.1f} s")
    # The least wall time the machine allows Ray's runs: their busy CPU-seconds spread
    # over every core, against the local run's wall time.
    cores = os.cpu_count() or 1
    floors = [float(r["busy_cpu_s"]) / cores / float(loc["wall_s"])  # type: ignore[arg-type]
              for loc, r in zip(records[::2], records[1::2], strict=True)]
    print("busy CPU-seconds, local: " + ", ".join(f"{r['busy_cpu_s']}" for r in records[::2])
          + "; ray: " + ", ".join(f"{r['busy_cpu_s']}" for r in records[1::2])
          + f"; on {cores} cores Ray needs at least " + ", ".join(f"{f:.2f}x" for f in floors)
          + " the local wall time even with every core busy all along")
    path = RESULTS / f"engines_{args.part}{'_running_ray' if args.address else ''}.csv"
    write_csv(path, records)
    print(f"wrote {path}")


def four_cell_spec(jobs: int) -> str:
    traces = "".join(
        f'[[traces]]\npath = "{DATA / "traces" / f"{t}.trace"}"\nformat = "gavel"\n'
        f'cluster = "{CLUSTER}"\nname = "{t}-{jobs}"\n\n' for t in FOUR_CELL_TRACES)
    return (f"# made by benchmarks/bench_engines.py four-cell\nseeds = [0]\nloads = [0.5, 1]\n"
            f"limit_jobs = {jobs}\ndeadline_fraction = 0.5\ntime_limit = 0.1\n"
            f"policies = {json.dumps(list(POLICIES))}\n\n{traces}")


def four_cell(args: argparse.Namespace, scratch: Path) -> None:
    records: list[dict[str, object]] = []
    summary: list[dict[str, object]] = []
    for jobs in (200, 1000):
        spec = scratch / f"four-cell-{jobs}.toml"
        spec.write_text(four_cell_spec(jobs))
        out = scratch / f"four-cell-{jobs}-{args.engine}"
        figures = timed_bench(["--spec", str(spec), "--engine", args.engine, "--workers",
                               str(args.workers)], out)
        found = rows(out)
        replay_s = sum(float(r["wall_time_s"]) for r in found.values())
        cpu_s = sum(float(r["cpu_time_s"]) for r in found.values())
        lp_s = sum(float(b["build_s"]) + float(b["lp_s"]) for path in out.rglob("lp_bounds.json")
                   for b in json.loads(path.read_text())["bounds"].values())
        core_h = figures["wall_s"] * args.workers / 3600
        summary.append({"jobs": jobs, "engine": args.engine, "workers": args.workers,
                        "replays": len(found), **{k: round(v, 2) for k, v in figures.items()},
                        "replay_wall_s": round(replay_s, 1), "replay_cpu_s": round(cpu_s, 1),
                        "lp_bound_s": round(lp_s, 1),
                        "replays_per_core_hour_wall": round(len(found) / core_h, 1),
                        "cells_per_core_hour_wall": round(4 / core_h, 2),
                        "replays_per_cpu_hour": round(len(found) * 3600 / cpu_s, 1),
                        "cells_per_cpu_hour": round(4 * 3600 / cpu_s, 2)})
        print(f"four-cell at {jobs} jobs on {args.engine} ({args.workers} workers): "
              f"{figures['wall_s'] / 60:.1f} min for {len(found)} replays (load average "
              f"{figures['load_before']:.2f} -> {figures['load_after']:.2f}, busy cores "
              f"{figures['busy_cores']:.2f}): {len(found) / core_h:.1f} replays and "
              f"{4 / core_h:.2f} cells per core-hour of wall time; the replays took "
              f"{cpu_s / 60:.1f} CPU-min ({replay_s / 60:.1f} min of wall time in their "
              f"workers): {len(found) * 3600 / cpu_s:.1f} replays and {4 * 3600 / cpu_s:.2f} "
              f"cells per CPU-hour; LP bounds {lp_s:.0f} s on the driver")
        records += [{"jobs": jobs, "trace": key[0].split("-")[0], "policy": key[1],
                     "load": key[3], "wall_time_s": row["wall_time_s"],
                     "cpu_time_s": row["cpu_time_s"]} for key, row in found.items()]
        records += [{"jobs": jobs, "trace": "(lp bounds)", "policy": "", "load": "",
                     "wall_time_s": round(lp_s, 3), "cpu_time_s": ""}]
    write_csv(RESULTS / "engines_four_cell.csv", summary)
    write_csv(RESULTS / "engines_replay_costs.csv", records)
    print(f"wrote {RESULTS / 'engines_four_cell.csv'}, {RESULTS / 'engines_replay_costs.csv'}")


def makespan(durations: list[float], cores: int) -> float:
    """Longest first onto the least loaded of ``cores`` (a list schedule)."""
    heap = [0.0] * cores
    for duration in sorted(durations, reverse=True):
        heapq.heappush(heap, heapq.heappop(heap) + duration)
    return max(heap)


def projection(args: argparse.Namespace) -> None:
    costs: dict[tuple[int, str, str], list[float]] = {}
    lp: dict[int, float] = {}
    with (RESULTS / "engines_replay_costs.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["trace"] == "(lp bounds)":
                lp[int(row["jobs"])] = float(row["wall_time_s"])
            else:  # CPU time: what a replay costs a core of its own
                costs.setdefault((int(row["jobs"]), row["policy"], row["load"]), []).append(
                    float(row["cpu_time_s"]))
    mean = {key: sum(v) / len(v) for key, v in costs.items()}
    fixed = 0.0  # Ray's start, stop and task costs in the overhead bench (s of wall time)
    overhead_path = RESULTS / "engines_overhead.csv"
    if overhead_path.is_file():
        with overhead_path.open(newline="") as handle:
            measured = list(csv.DictReader(handle))
        fixed = max(0.0, statistics.median(
            float(b["wall_s"]) - float(a["wall_s"])
            for a, b in zip(measured[::2], measured[1::2], strict=True)))
    sizes = {p.stem: sum(1 for line in p.read_text().splitlines() if line.strip())
             for p in sorted((DATA / "traces").glob("*.trace"))}
    exponent = {}
    for policy in POLICIES:
        ratios = [mean[(1000, policy, load)] / mean[(200, policy, load)]
                  for load in ("0.5", "1") if mean.get((200, policy, load), 0) > 0
                  and (1000, policy, load) in mean]
        fitted = math.log(sum(ratios) / len(ratios)) / math.log(5) if ratios else 1.0
        exponent[policy] = min(max(fitted, 1.0), 2.5)
    durations = []
    for jobs in sizes.values():
        for policy in POLICIES:
            for load in ("0.5", "1", "2"):
                base = mean[(1000, policy, "1" if load == "2" else load)]
                durations += [base * (jobs / 1000) ** exponent[policy]] * 3
    lp_serial = lp.get(1000, 0.0) / 4 * sum(  # per (trace, load) job set, scaled linearly
        3 * jobs / 1000 for jobs in sizes.values())
    total = sum(durations)
    print(f"full sweep: {len(durations)} replays of {len(sizes)} traces "
          f"({sum(sizes.values()):,} jobs), {total / 3600:.1f} core-hours of replays, "
          f"Ray's own {fixed:.1f} s, LP bounds {lp_serial / 60:.0f} min on the driver; "
          "exponents " + ", ".join(f"{p} {e:.2f}" for p, e in exponent.items()))
    records = []
    for cores in (1, 8, 64):
        span = makespan(durations, cores) + fixed
        # The bench solves the LP bounds in one process of the driver while the replays
        # run: one more chain of work on one of the cores.
        with_bounds = makespan([*durations, lp_serial], cores) + fixed
        records.append({"cores": cores, "replays": len(durations),
                        "replays_h": round(span / 3600, 2),
                        "with_lp_bounds_h": round(with_bounds / 3600, 2),
                        "longest_replay_h": round(max(durations) / 3600, 2)})
        print(f"{cores:>3} cores: {span / 3600:.1f} h of replays, {with_bounds / 3600:.1f}"
              f" h with the LP bounds beside them (longest replay "
              f"{max(durations) / 3600:.2f} h)")
    write_csv(RESULTS / "engines_projection.csv", records)
    print(f"wrote {RESULTS / 'engines_projection.csv'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("quick", "overhead", "four-cell", "projection"))
    parser.add_argument("--repeats", type=int, default=2, help="quick: local/ray pairs")
    parser.add_argument("--engine", default="ray", help="four-cell: local or ray")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--address", default=None,
                        help="quick, overhead: the Ray runs join this running Ray (auto: the "
                        "one 'ray start --head' runs here) instead of starting their own; "
                        "results in engines_<part>_running_ray.csv")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the bench folders here (default: a temporary folder)")
    args = parser.parse_args()
    if args.part == "projection":
        projection(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as temporary:
        scratch = args.keep or Path(temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
        (four_cell if args.part == "four-cell" else quick)(args, scratch)


if __name__ == "__main__":
    main()
