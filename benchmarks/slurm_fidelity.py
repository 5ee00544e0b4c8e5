"""hetsched's agent against its own replays on a local Slurm cluster
(hetsched.slurm.local): 100 jobs of Gavel's ee9e8c trace (by default the first 100 that
last 12 to 36 hours on their fastest GPU type: band_trace says why) on
v100=8,p100=8,k80=8 (nodes of 4 GPUs), time-compressed by --speedup (7,000: 13 to 15
minutes a run), each job the training emulator; the agent polls every 0.1 s.

For each policy (fifo, srtf, progress): the agent (`hetsched slurm run`) schedules the
jobs `hetsched slurm submit` hands Slurm at their arrival times; then `hetsched replay`
runs the same jobs on the same cluster with the same restart penalty. Printed and
written to CSV: the average JCT on Slurm (trace seconds) against the replay's, the
per-job JCT error (p50, p95), the agent's release-to-RUNNING latency (p50, p95 wall s),
and, as the anchor, the same jobs under Slurm's own scheduler (no agent; each asks for
its GPU count of any type): average JCT and makespan beside `progress`'s.
With --crash, `progress` is run once more and the agent is killed (SIGKILL) 60 s in
and restarted: every job must finish once.

Each cell is replayed twice: with the emulator's restart penalty alone (the target's
"same restart penalty"), and told this cluster's latencies as the agent measured them in
the run (`told_*` columns): every start holds its GPUs for the median release-to-RUNNING
times X (`--start-latency`), and a restart pays on top of the emulator's penalty what a
move's median requeue-to-RUNNING adds beyond a start (told_latencies). With
--told-from KEEP..., only these replays, of runs kept earlier (--keep).

    python benchmarks/slurm_fidelity.py --crash --out benchmarks/results/slurm_fidelity.csv
    python benchmarks/slurm_fidelity.py --quick      # 30 jobs, fifo and progress

It starts (and stops) its own local cluster in a temporary folder on ports from 19817
when none is given with --cluster-dir. Needs root, slurm-wlm and munge, ../shared/data.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "data" / "gavel" / "traces"
TRACE = TRACES / "ee9e8c.trace"
THROUGHPUT = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
CLUSTER = "v100=8,p100=8,k80=8"
#: The restart penalty of the emulator and of the replays (trace s): the command's default.
RESTART_PENALTY_S = 30.0
HETSCHED = [sys.executable, "-m", "hetsched"]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (linear), NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def jcts(folder: Path) -> dict[str, float]:
    """Job id -> JCT (s) of a run folder's jobs.csv (finished jobs)."""
    with (folder / "jobs.csv").open(newline="") as handle:
        return {row["job"]: float(row["jct"]) for row in csv.DictReader(handle) if row["jct"]}


def band_trace(folder: Path, jobs: int, band_h: tuple[float, float],
               trace: Path = TRACE, load: float = 1.0) -> Path:
    """The first ``jobs`` jobs of the trace whose duration on their fastest allowed GPU
    type (at their gang size, packed; Gavel's throughputs) lies in ``band_h`` hours,
    written as a Gavel trace (the original lines, arrivals kept) into ``folder``.

    ee9e8c's job lengths span five orders of magnitude (5 % under 300 s, 5 % over a
    month): no speedup keeps a run under 15 minutes and the shortest jobs long against
    Slurm's start latency (up to a second of wall time, its backfill cycle) times X. A
    band keeps the trace's jobs, types, gangs and arrivals, and drops the tails.

    ``load`` > 1 divides the arrival times by it (Gavel's way of raising the load: the
    same jobs, arriving that much faster), written into the trace so that the run and
    the replay see the same arrivals."""
    from hetsched.core.throughput import Placement
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.replay_inputs import trace_jobs

    read = trace_jobs(trace, "gavel", parse_cluster(CLUSTER), throughput_path=THROUGHPUT)
    lines = trace.read_text().splitlines()
    kept: list[str] = []
    for job in read.jobs:
        fastest = max(read.truth.throughput(job.job_type, gpu_type, job.num_gpus,
                                            Placement.PACKED)
                      for gpu_type in read.cluster.type_names if job.may_use(gpu_type))
        if band_h[0] * 3600 <= job.work / fastest <= band_h[1] * 3600:
            fields = lines[int(job.id)].split("\t")
            at = 5 if len(fields) == 7 else 9  # Gavel's 7- and 10-field layouts
            if load != 1:
                fields[at] = f"{float(fields[at]) / load:.3f}"
            kept.append("\t".join(fields))
        if len(kept) == jobs:
            break
    scaled = "" if load == 1 else f"-load-{load:g}"
    path = folder / f"{trace.stem}-band-{band_h[0]:g}-{band_h[1]:g}h{scaled}.trace"
    path.write_text("\n".join(kept) + "\n")
    return path


def submit(trace: Path, cluster_dir: Path, jobs: int, speedup: float, *,
           slurm: bool = False) -> None:
    """`hetsched slurm submit` of the trace's first ``jobs`` jobs (blocks until the last
    is submitted)."""
    subprocess.run([*HETSCHED, "slurm", "submit", str(trace), "--format", "gavel",
                    "--cluster-dir", str(cluster_dir), "--limit-jobs", str(jobs),
                    "--speedup", str(speedup), "--throughput", str(THROUGHPUT),
                    *(["--slurm-schedules"] if slurm else [])], check=True,
                   stdout=subprocess.DEVNULL)


def agent(cluster_dir: Path, policy: str, out: Path, jobs: int, poll_s: float,
          learn: str = "off") -> subprocess.Popen[bytes]:
    """`hetsched slurm run` in the background until ``jobs`` managed jobs ended (learning
    throughputs over the prior ``learn`` unless "off")."""
    log = (out.parent / f"{out.name}.log").open("ab")
    return subprocess.Popen([*HETSCHED, "slurm", "run", "--policy", policy, "--out", str(out),
                             "--cluster-dir", str(cluster_dir), "--throughput",
                             str(THROUGHPUT), "--stop-after", str(jobs),
                             "--poll", str(poll_s), "--learn", learn],
                            stdout=log, stderr=log)


def learned_accuracy(path: Path) -> dict[str, object]:
    """What an agent learned (its learned_throughput.csv) against the measured table:
    the keys it measured, how many within 10 %, the median and largest error; a key where
    the table has no speed (the job cannot run there: a policy seeing only the prior's
    bootstrap may start it there, and the job then makes no step) is counted apart, as
    ``learned_keys_unrunnable``, with how many the agent learned as 0."""
    from hetsched.core.throughput import Placement
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.replay_inputs import throughputs

    truth = throughputs(parse_cluster(CLUSTER), THROUGHPUT).truth
    errors = []
    unrunnable = learned_zero = 0
    with path.open() as handle:
        for row in csv.DictReader(handle):
            true = truth.throughput(row["job_type"], row["gpu_type"], int(row["num_gpus"]),
                                    Placement(row["placement"]))
            if true <= 0:
                unrunnable += 1
                learned_zero += float(row["throughput"]) == 0.0
                continue
            errors.append(abs(float(row["throughput"]) - true) / true)
    return {"learned_keys": len(errors), "learned_keys_unrunnable": unrunnable,
            "learned_unrunnable_as_zero": learned_zero,
            "learned_within_10pct": sum(1 for e in errors if e <= 0.10),
            "learned_error_p50": percentile(errors, 50) if errors else math.nan,
            "learned_error_max": max(errors, default=math.nan)}


def wait_idle(cluster_dir: Path, timeout_s: float) -> None:
    """Until the partition has no pending or running job."""
    env = {"SLURM_CONF": str(cluster_dir / "slurm.conf"), "PATH": "/usr/bin:/bin"}
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        listing = subprocess.run(["squeue", "-h", "-t", "PD,R,CG", "-o", "%i"], env=env,
                                 capture_output=True, text=True, check=False).stdout
        if not listing.strip():
            return
        time.sleep(1.0)
    raise SystemExit(f"jobs still in Slurm after {timeout_s:.0f} s")


def replay(trace: Path, policy: str, jobs: int, out: Path,
           restart_penalty_s: float = RESTART_PENALTY_S,
           start_latency_s: float = 0.0, learn: str = "off") -> dict[str, float]:
    """`hetsched replay` of the same jobs on the same cluster (its policy learning the
    throughputs over the prior ``learn`` unless "off"): job id -> JCT."""
    subprocess.run([*HETSCHED, "replay", str(trace), "--format", "gavel", "--cluster", CLUSTER,
                    "--limit-jobs", str(jobs), "--policy", policy, "--throughput",
                    str(THROUGHPUT), "--restart-penalty", repr(restart_penalty_s),
                    "--start-latency", repr(start_latency_s), "--learn", learn,
                    "--out", str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return jcts(out)


def told_latencies(summary: dict[str, object], speedup: float,
                   move_p50_s: float | None) -> tuple[float, float]:
    """The start latency and restart penalty (trace s) a replay charges to predict the
    cluster a run measured: every start waits the agent's median release-to-RUNNING
    (wall s, times the speedup); a restart the emulator's penalty plus what a move's
    median requeue-to-RUNNING (``move_p50_s``) adds beyond a start."""
    start = float(str(summary.get("start_latency_p50_s") or 0.0))
    extra = 0.0 if move_p50_s is None else max(0.0, move_p50_s - start)
    return start * speedup, RESTART_PENALTY_S + extra * speedup


def errors_of(real: dict[str, float], predicted: dict[str, float]) -> dict[str, float]:
    """The average JCT's error and the per-job error's p50 and p95."""
    both = sorted(set(real) & set(predicted))
    errors = [abs(real[j] - predicted[j]) / predicted[j] for j in both]
    slurm_avg = sum(real.values()) / len(real) if real else math.nan
    replay_avg = sum(predicted.values()) / len(predicted)
    return {"replay_avg_jct_s": replay_avg, "avg_jct_error": slurm_avg / replay_avg - 1,
            "job_error_p50": percentile(errors, 50), "job_error_p95": percentile(errors, 95)}


def estimated_move_p50(events: Path) -> float | None:
    """For a run kept before the agent measured moves (no ``move_latency_p50_s``): the
    median gap, wall s, from a requeue to the job's next start among restarts under 3 s
    (a move takes about one; a job the policy paused waits longer)."""
    runs: dict[str, list[list[float]]] = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "run":
            runs.setdefault(event["job"], []).append([event["start"], math.nan])
        elif event["event"] == "end" and event["job"] in runs:
            runs[event["job"]][-1][1] = event["end"]
    gaps = [b[0] - a[1] for spans in runs.values() for a, b in itertools.pairwise(spans)]
    quick = [g for g in gaps if g < 3.0]
    return percentile(quick, 50) if quick else None


def told_from(kept: Path) -> list[dict[str, object]]:
    """The told replays of the runs kept in ``kept`` (--keep): each POLICY folder with
    its POLICY-replay beside it (whose run.toml repeats the nominal replay)."""
    rows: list[dict[str, object]] = []
    for nominal in sorted(kept.glob("*-replay")):
        run = kept / nominal.name.removesuffix("-replay")
        summary = json.loads((run / "summary.json").read_text())
        first = json.loads((run / "events.jsonl").read_text().splitlines()[0])
        speedup = float(json.loads(first["comment"].split(" ", 1)[1])["speedup"])
        move = summary.get("move_latency_p50_s")
        source = "measured"
        if move is None:
            move, source = estimated_move_p50(run / "events.jsonl"), "estimated"
        latency, penalty = told_latencies(summary, speedup, move)
        told = kept / f"{run.name}-replay-told"
        subprocess.run([*HETSCHED, "replay", "--config", str(nominal / "run.toml"),
                        "--restart-penalty", repr(penalty), "--start-latency", repr(latency),
                        "--out", str(told)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        real = jcts(run)
        rows.append({"case": run.name, "kept": str(kept), "speedup": speedup,
                     "completed": len(real),
                     "slurm_avg_jct_s": sum(real.values()) / len(real),
                     **errors_of(real, jcts(nominal)),
                     "latency_p50_s": summary.get("start_latency_p50_s"),
                     "move_latency_p50_s": move, "move_latency_source": source,
                     "told_start_latency_s": latency, "told_restart_penalty_s": penalty,
                     **{f"told_{k}": v for k, v in errors_of(real, jcts(told)).items()},
                     **(learned_accuracy(run / "learned_throughput.csv")
                        if (run / "learned_throughput.csv").is_file() else {})})
    return rows


def slurm_anchor_jcts(cluster_dir: Path) -> tuple[dict[str, float], float]:
    """JCTs (trace s) and makespan of jobs Slurm placed itself, from the emulator's
    checkpoints (each records its runs in Unix time) and the metadata's arrivals."""
    from hetsched.slurm.metadata import JobMeta

    found: dict[str, float] = {}
    ends: list[float] = []
    arrivals: list[float] = []
    for path in sorted((cluster_dir / "checkpoints").glob("*.json")):
        record = json.loads(path.read_text())
        meta = JobMeta.from_comment(record["comment"])
        runs = record.get("runs") or []
        if not runs or record.get("steps", 0.0) < meta.job.work * (1 - 1e-9):
            continue
        finish = meta.trace_time(float(runs[-1]["end"]))
        found[meta.job.id] = finish - meta.job.arrival
        ends.append(finish)
        arrivals.append(meta.job.arrival)
    return found, (max(ends) - min(arrivals)) if ends else math.nan


def main() -> None:
    """Run the cells, print the figures, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--speedup", type=float, default=7000.0)
    parser.add_argument("--policies", default="fifo,srtf,progress")
    parser.add_argument("--quick", action="store_true", help="30 jobs, fifo and progress")
    parser.add_argument("--crash", action="store_true", help="also kill -9 the agent once")
    parser.add_argument("--no-anchor", action="store_true", help="skip Slurm's own scheduler")
    parser.add_argument("--anchor-only", action="store_true",
                        help="only Slurm's own scheduler (beside --progress-jct)")
    parser.add_argument("--anchor-speedup", type=float, default=None,
                        help="the anchor's speedup (default --speedup): Slurm's own "
                        "scheduler puts long jobs on K80s, and its makespan is the longest")
    parser.add_argument("--progress-jct", type=float, default=None,
                        help="progress's average JCT on Slurm (s) from an earlier run, for "
                        "the anchor's ratio with --anchor-only")
    parser.add_argument("--cluster-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--band", default="12:36", metavar="LOW:HIGH",
                        help="only jobs lasting LOW to HIGH hours on their fastest GPU "
                        "(band_trace); 'none': the trace's first jobs")
    parser.add_argument("--trace", dest="trace_name", default="ee9e8c", metavar="NAME",
                        help="which of Gavel's Philly-derived traces (../shared/data/gavel/"
                        "traces/NAME.trace)")
    parser.add_argument("--load", type=float, default=1.0,
                        help="divide the band's arrival times by this (band_trace)")
    parser.add_argument("--learn", default="off", choices=("off", "source", "catalogue", "none"),
                        help="the agent learns throughputs from the jobs' reports over this "
                        "prior (slurm run --learn), and so does a replay of the same jobs "
                        "(replay --learn: learning_* columns); the row adds what it "
                        "learned against the measured table")
    parser.add_argument("--poll", type=float, default=0.1,
                        help="the agent's poll interval (wall s)")
    parser.add_argument("--epilog", type=float, default=None,
                        help="seconds each node's epilog lasts (default: the local "
                        "cluster's, hetsched.slurm.config.EPILOG_S; 0: none)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each run's folder (agent output, replay, logs) here")
    parser.add_argument("--told-from", type=Path, nargs="+", default=None, metavar="KEEP",
                        help="only replay runs kept earlier told their latencies")
    args = parser.parse_args()
    if args.told_from is not None:
        write_rows([row for kept in args.told_from for row in told_from(kept)], args.out)
        return
    trace = TRACES / f"{args.trace_name}.trace"
    if not trace.is_file():
        sys.exit(f"{trace} is absent: this benchmark needs ../shared/data")
    if args.quick:
        args.jobs, args.policies = 30, "fifo,progress"
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.slurm.config import EPILOG_S
    from hetsched.slurm.local import LocalCluster

    if args.epilog is None:
        args.epilog = EPILOG_S

    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) if args.keep is None else args.keep
        folder.mkdir(parents=True, exist_ok=True)
        args.trace = trace
        if args.band != "none":
            low, _, high = args.band.partition(":")
            args.trace = band_trace(folder, args.jobs, (float(low), float(high)), trace,
                                    args.load)
        local = None
        cluster_dir = args.cluster_dir
        if cluster_dir is None:
            cluster_dir = folder / "cluster"
            local = LocalCluster.from_cluster(parse_cluster(CLUSTER), gpus_per_node=4,
                                              state_dir=cluster_dir, port=19817,
                                              epilog_s=args.epilog)
            local.start()
        try:
            for policy in [] if args.anchor_only else args.policies.split(","):
                rows.append(cell(policy, cluster_dir, folder, args, crash=False))
            if args.progress_jct is not None:
                rows.append({"case": "progress", "slurm_avg_jct_s": args.progress_jct})
            if args.crash:
                rows.append(cell("progress", cluster_dir, folder, args, crash=True))
            if not args.no_anchor:
                rows.append(anchor(cluster_dir, args, rows))
        finally:
            if local is not None:
                local.stop()
    write_rows(rows, args.out)


def write_rows(rows: list[dict[str, object]], out: Path | None) -> None:
    """Print the rows, and write them as CSV to ``out`` if given."""
    for row in rows:
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()))
    if out is not None:
        columns = sorted({key for row in rows for key in row}, key=lambda k: (k != "case", k))
        with out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {out}")


def cell(policy: str, cluster_dir: Path, folder: Path, args: argparse.Namespace, *,
         crash: bool) -> dict[str, object]:
    """One policy through the agent, and its replay."""
    name = f"{policy}{'-crash' if crash else ''}" + \
        (f"-learn-{args.learn}" if args.learn != "off" else "")
    out = folder / name
    began = time.monotonic()
    running = agent(cluster_dir, policy, out, args.jobs, args.poll, args.learn)
    time.sleep(1.0)
    submitter = subprocess.Popen([*HETSCHED, "slurm", "submit", str(args.trace), "--format",
                                  "gavel",
                                  "--cluster-dir", str(cluster_dir), "--limit-jobs",
                                  str(args.jobs), "--speedup", str(args.speedup),
                                  "--throughput", str(THROUGHPUT)],
                                 stdout=subprocess.DEVNULL)
    if crash:
        time.sleep(60.0)
        running.send_signal(signal.SIGKILL)
        running.wait()
        running = agent(cluster_dir, policy, out, args.jobs, args.poll, args.learn)
    submitter.wait()
    running.wait(timeout=3600)
    wall = time.monotonic() - began
    wait_idle(cluster_dir, 120)
    real = jcts(out)
    summary = json.loads((out / "summary.json").read_text())
    predicted = replay(args.trace, policy, args.jobs, folder / f"{name}-replay")
    move = summary.get("move_latency_p50_s")
    latency, penalty = told_latencies(summary, args.speedup,
                                      None if move is None else float(move))
    told = replay(args.trace, policy, args.jobs, folder / f"{name}-replay-told", penalty,
                  latency)
    learning: dict[str, object] = {}
    if args.learn != "off":  # the replay that learns as the agent did: like for like
        learning.update({f"learning_{k}": v for k, v in errors_of(real, replay(
            args.trace, policy, args.jobs, folder / f"{name}-replay-learning",
            learn=args.learn)).items()})
        learning.update({f"told_learning_{k}": v for k, v in errors_of(real, replay(
            args.trace, policy, args.jobs, folder / f"{name}-replay-learning-told", penalty,
            latency, learn=args.learn)).items()})
    slurm_avg = sum(real.values()) / len(real) if real else math.nan
    return {"case": name, "trace": args.trace_name, "load": args.load, "jobs": args.jobs,
            "band_h": args.band,
            "poll_s": args.poll,
            "epilog_s": args.epilog,
            "speedup": args.speedup,
            "completed": len(real), "slurm_avg_jct_s": slurm_avg,
            **errors_of(real, predicted),
            "makespan_s": summary.get("makespan_s"),
            "preemptions": summary.get("preemptions"),
            "latency_p50_s": summary.get("start_latency_p50_s"),
            "latency_p95_s": summary.get("start_latency_p95_s"),
            "move_latency_p50_s": move, "moves": summary.get("moves_measured"),
            "told_start_latency_s": latency, "told_restart_penalty_s": penalty,
            **{f"told_{k}": v for k, v in errors_of(real, told).items()}, "wall_s": wall,
            **learning, **(learned_accuracy(out / "learned_throughput.csv") if args.learn != "off"
               else {})}


def anchor(cluster_dir: Path, args: argparse.Namespace,
           rows: list[dict[str, object]]) -> dict[str, object]:
    """The same jobs under Slurm's own scheduler, beside progress."""
    for old in (cluster_dir / "checkpoints").glob("*.json"):
        old.unlink()
    began = time.monotonic()
    speedup = args.anchor_speedup or args.speedup
    submit(args.trace, cluster_dir, args.jobs, speedup, slurm=True)
    wait_idle(cluster_dir, 3600)
    found, makespan = slurm_anchor_jcts(cluster_dir)
    average = sum(found.values()) / len(found) if found else math.nan
    progress = next((r for r in rows if r["case"] == "progress"), None)
    ratio = math.nan if progress is None else average / float(str(progress["slurm_avg_jct_s"]))
    return {"case": "slurm-backfill", "jobs": args.jobs, "speedup": speedup,
            "epilog_s": args.epilog,
            "completed": len(found), "slurm_avg_jct_s": average, "makespan_s": makespan,
            "avg_jct_vs_progress": ratio, "wall_s": time.monotonic() - began}


if __name__ == "__main__":
    main()
