"""hetsched beside Pollux's simulator on Pollux's own workloads: how close its replays come.

Pollux's artifact ran its 8 workloads (160 jobs each at load 1.0; 80, 240 and 320 at
loads 0.5, 1.5 and 2.0, in ``workloads-<load>/``) on 16 nodes of 4 T4s and published
every job's JCT under its ``tiresias``, ``optimus`` and ``pollux`` policies
(``reference-results/jobload-<policy>-<load>.json``). This replays the same workloads with
``--format pollux`` on ``t4=64x4`` (each job at its requested GPUs and batch size) under:

* ``tiresias``: hetsched's Tiresias as registered (three queues at 1 and 10 GPU-hours,
  promotion after waiting 4x its run time, 360 s rounds, no start latency, 30 s restart
  penalty);
* ``tiresias-pollux``: the same policy at the settings of Pollux's ``tiresias.py`` and
  simulator: two queues split at 16 GPU-hours, no promotion (its ``solve_starvation`` 0),
  60 s rounds, 30 s without progress at every start, first or not (its ``rescale_time``);
* ``fifo`` and ``progress`` (hetsched's optimisation policy, non-elastic).

It prints, per load and policy, each workload's average JCT beside Pollux's ``tiresias``
(and ``pollux``) reference, and the mean over the workloads of each workload's average
JCT (Pollux's published figure), then the same per application and GPU count; it writes
``benchmarks/results/pollux_fidelity.csv`` (per workload, policy, load) and
``pollux_fidelity_apps.csv`` (per application and GPU count). Every replay passes the
checker (``hetsched.replay_trace`` checks it). Needs ../shared/data/pollux.

    python benchmarks/pollux_fidelity.py                # every workload, load 1.0
    python benchmarks/pollux_fidelity.py --loads 0.5,1.0,1.5,2.0
    python benchmarks/pollux_fidelity.py --quick        # workloads 1-2, load 1.0
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import hetsched
from hetsched.core.settings import ReplaySettings
from hetsched.policies.baselines.tiresias import Tiresias
from hetsched.policies.rolling import RollingPolicy

ROOT = Path(__file__).resolve().parent.parent
POLLUX = ROOT.parent / "shared" / "data" / "pollux"
RESULTS = ROOT / "benchmarks" / "results"
CLUSTER = "t4=64x4"
#: Pollux's Tiresias: one demotion threshold, 16 GPU-hours (its ``_queue_threshold``).
POLLUX_THRESHOLD_GPU_S = 16 * 3600.0
#: Pollux's scheduling interval and re-scale time (s).
POLLUX_INTERVAL_S = 60.0
POLLUX_RESCALE_S = 30.0


def pollux_tiresias() -> tuple[RollingPolicy, ReplaySettings]:
    """hetsched's Tiresias at the settings of Pollux's (module notes)."""
    policy = Tiresias(thresholds_gpu_s=(POLLUX_THRESHOLD_GPU_S,), promote_knob=math.inf,
                      round_s=POLLUX_INTERVAL_S)
    return policy, ReplaySettings(start_latency_s=POLLUX_RESCALE_S, restart_penalty_s=0.0)


POLICIES: dict[str, Callable[[], tuple[str | RollingPolicy, ReplaySettings]]] = {
    "tiresias": lambda: ("tiresias", ReplaySettings()),
    "tiresias-pollux": pollux_tiresias,
    "fifo": lambda: ("fifo", ReplaySettings()),
    "progress": lambda: ("progress", ReplaySettings()),
}


def workload_path(load: float, index: int) -> Path:
    """Pollux's workload ``index`` at ``load`` (1.0: ``workloads/``)."""
    folder = "workloads" if load == 1.0 else f"workloads-{load:.1f}"
    return POLLUX / folder / f"workload-{index}.csv"


def reference(policy: str, load: float) -> dict[str, dict[str, float]]:
    """Pollux's JCTs (s) under ``policy`` at ``load``, by workload and job."""
    path = POLLUX / "reference-results" / f"jobload-{policy}-{load:.1f}.json"
    jcts: dict[str, dict[str, float]] = json.loads(path.read_text())["jcts"]
    return jcts


def run(loads: list[float], workloads: list[int], policies: list[str]
        ) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The rows of both CSV files (module notes)."""
    rows: list[dict[str, object]] = []
    per_app: dict[tuple[float, str, str], list[tuple[float, float]]] = defaultdict(list)
    for load in loads:
        tiresias_ref, pollux_ref = reference("tiresias", load), reference("pollux", load)
        for policy_name in policies:
            ratios = []
            for index in workloads:
                name = f"workload-{index}"
                policy, settings = POLICIES[policy_name]()
                result = hetsched.replay_trace(workload_path(load, index), "pollux", CLUSTER,
                                               policy, settings=settings)
                frame = result.replay.jobs_frame()
                summary = result.replay.summary()
                ours = float(summary["avg_jct_s"])  # type: ignore[arg-type]
                theirs = sum(tiresias_ref[name].values()) / len(tiresias_ref[name])
                elastic = sum(pollux_ref[name].values()) / len(pollux_ref[name])
                ratios.append((ours, theirs, elastic))
                rows.append({"load": load, "workload": name, "policy": policy_name,
                             "jobs": len(frame), "hetsched_avg_jct_s": round(ours, 1),
                             "pollux_tiresias_avg_jct_s": round(theirs, 1),
                             "ratio": round(ours / theirs, 4),
                             "pollux_pollux_avg_jct_s": round(elastic, 1),
                             "preemptions": summary["preemptions"]})
                print(f"load {load:.1f} {policy_name:16s} {name}: {ours:9,.0f} s  Pollux "
                      f"tiresias {theirs:9,.0f} s  ratio {ours / theirs:.3f}", flush=True)
                for job, job_type, gpus, jct in zip(frame["job"], frame["job_type"],
                                                    frame["num_gpus"], frame["jct"],
                                                    strict=True):
                    app = f"{str(job_type).split(' ')[0]} x{int(gpus)}"
                    per_app[(load, policy_name, app)].append(
                        (float(jct), float(tiresias_ref[name][str(job)])))
            mean = [sum(r[i] for r in ratios) / len(ratios) for i in range(3)]
            rows.append({"load": load, "workload": "mean", "policy": policy_name,
                         "jobs": "", "hetsched_avg_jct_s": round(mean[0], 1),
                         "pollux_tiresias_avg_jct_s": round(mean[1], 1),
                         "ratio": round(mean[0] / mean[1], 4),
                         "pollux_pollux_avg_jct_s": round(mean[2], 1), "preemptions": ""})
            print(f"load {load:.1f} {policy_name:16s} mean of the workloads: {mean[0]:,.0f} s "
                  f"(Pollux tiresias {mean[1]:,.0f} s, pollux {mean[2]:,.0f} s): ratio "
                  f"{mean[0] / mean[1]:.3f}", flush=True)
    app_rows: list[dict[str, object]] = []
    for (load, policy_name, app), pairs in sorted(per_app.items()):
        ours = sum(p[0] for p in pairs) / len(pairs)
        theirs = sum(p[1] for p in pairs) / len(pairs)
        jobs = sum(len(per_app[(load, policy_name, other)]) for other in
                   {key[2] for key in per_app if key[:2] == (load, policy_name)})
        app_rows.append({"load": load, "policy": policy_name, "application": app,
                         "jobs": len(pairs), "hetsched_avg_jct_s": round(ours, 1),
                         "pollux_tiresias_avg_jct_s": round(theirs, 1),
                         "ratio": round(ours / theirs, 4),
                         # what this application adds to the difference of the averages
                         "share_of_difference_s": round((ours - theirs) * len(pairs) / jobs,
                                                        1)})
    return rows, app_rows


def write(path: Path, rows: list[dict[str, object]]) -> None:
    """``rows`` as CSV (the first row's keys as the header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison (module notes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="workloads 1 and 2 at load 1.0 (written to *_quick.csv)")
    parser.add_argument("--loads", default="1.0", help="comma-separated, of 0.5,1.0,1.5,2.0")
    parser.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args(argv)
    if not POLLUX.is_dir():
        print(f"{POLLUX} is absent: nothing to compare", file=sys.stderr)
        return 2
    loads = [1.0] if args.quick else [float(x) for x in args.loads.split(",")]
    workloads = [1, 2] if args.quick else [int(x) for x in args.workloads.split(",")]
    policies = args.policies.split(",")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        print(f"unknown policies {unknown}: choose among {list(POLICIES)}", file=sys.stderr)
        return 2
    rows, app_rows = run(loads, workloads, policies)
    print("\nper application and GPU count (mean JCT, s):")
    for row in app_rows:
        print(f"load {row['load']:.1f} {row['policy']:16s} {row['application']:15s} "
              f"{row['jobs']:4d} jobs: {row['hetsched_avg_jct_s']:9,.0f} vs Pollux "
              f"{row['pollux_tiresias_avg_jct_s']:9,.0f} (ratio {row['ratio']:.2f}; "
              f"{row['share_of_difference_s']:+,.0f} s of the average's difference)")
    suffix = "_quick" if args.quick else ""
    write(RESULTS / f"pollux_fidelity{suffix}.csv", rows)
    write(RESULTS / f"pollux_fidelity_apps{suffix}.csv", app_rows)
    print(f"wrote {RESULTS / f'pollux_fidelity{suffix}.csv'} and "
          f"{RESULTS / f'pollux_fidelity_apps{suffix}.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
