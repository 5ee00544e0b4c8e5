"""The agent under faults, on a local Slurm cluster (hetsched.slurm.local): 15 jobs of
Gavel's ee9e8c trace (the first that last 12 to 36 hours on their fastest GPU type, as
slurm_fidelity.py picks them) on v100=8,k80=8 (nodes of 4 GPUs), time-compressed by
--speedup, each the training emulator; `hetsched slurm run` schedules them while one
fault strikes once the first job has run --at wall seconds:

  node-kill          the batch host of a running job loses its power (its slurmd and
                     its jobs' processes SIGKILLed), back after --down s
  node-drain         a node with a running job drained (scontrol), resumed after --down s
  slurmd-restart     a running job's slurmd stopped (SIGTERM; the jobs run on), started
                     again after 10 s
  slurmctld-restart  slurmctld stopped (SIGTERM) and started again from its state
  agent-kill         the agent SIGKILLed, started again on the same --out after 5 s
  requeue            every running job requeued by someone else (scontrol requeue, as an
                     operator or Slurm's own preemption would), twice, 10 s apart
  preempt-checkpointing  a running job requeued the moment its checkpoint file changes
                     (within milliseconds of its write), for two jobs in turn

For each run: the jobs lost (not completed exactly once by the end: Slurm's jobcomp
log), those run again after completing (a run in the emulator's checkpoint after its
completed one, or two COMPLETED lines), those left pending, whether the agent wrote its
outputs, its checker's violations, and its average JCT against a replay of the same
jobs without the fault (`hetsched replay`, same restart penalty). Printed, and written
to CSV with --out.

    python benchmarks/slurm_faults.py --repeats 3 --out benchmarks/results/slurm_faults.csv
    python benchmarks/slurm_faults.py --faults node-kill --repeats 1 --keep /tmp/faults
    python benchmarks/slurm_faults.py --summarize benchmarks/results/slurm_faults.csv

It starts a fresh local cluster per run in a temporary folder on ports from 21817.
Needs root, slurm-wlm and munge, ../shared/data.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurm_fidelity import HETSCHED, THROUGHPUT, TRACE, band_trace, jcts

CLUSTER = "v100=8,k80=8"
FAULTS = ("node-kill", "node-drain", "slurmd-restart", "slurmctld-restart", "agent-kill",
          "requeue", "preempt-checkpointing")
PORT = 21817


def slurm(cluster_dir: Path, *command: str) -> str:
    """A Slurm command against the local cluster; its output ("" if it failed)."""
    env = {"SLURM_CONF": str(cluster_dir / "slurm.conf"), "PATH": "/usr/bin:/bin:/usr/sbin"}
    done = subprocess.run(list(command), env=env, capture_output=True, text=True, check=False,
                          timeout=30)
    return done.stdout


def running_jobs(cluster_dir: Path) -> list[tuple[str, str]]:
    """(Slurm id, batch host) of each running job."""
    out = slurm(cluster_dir, "squeue", "-h", "-t", "R", "-o", "%i %B")
    return [(line.split()[0], line.split()[1]) for line in out.splitlines() if line.split()]


def agent(cluster_dir: Path, policy: str, out: Path, jobs: int) -> subprocess.Popen[bytes]:
    """`hetsched slurm run` in the background until ``jobs`` managed jobs ended."""
    log = (out.parent / f"{out.name}.log").open("ab")
    return subprocess.Popen([*HETSCHED, "slurm", "run", "--policy", policy, "--out", str(out),
                             "--cluster-dir", str(cluster_dir), "--throughput",
                             str(THROUGHPUT), "--stop-after", str(jobs), "--poll", "0.1"],
                            stdout=log, stderr=log)


class Fault:
    """One fault, struck from a thread once a job has run ``at`` wall seconds."""

    def __init__(self, kind: str, local: object, cluster_dir: Path, at_s: float,
                 down_s: float, restart_agent: object) -> None:
        self.kind, self.local, self.cluster_dir = kind, local, cluster_dir
        self.at_s, self.down_s = at_s, down_s
        self.restart_agent = restart_agent
        self.note = ""
        self.thread = threading.Thread(target=self._strike, daemon=True)

    def _strike(self) -> None:
        began = time.monotonic()
        while not running_jobs(self.cluster_dir):
            if time.monotonic() - began > 600:
                self.note = "no job ran"
                return
            time.sleep(0.5)
        time.sleep(self.at_s)
        jobs = running_jobs(self.cluster_dir)
        if not jobs and self.kind not in ("slurmctld-restart", "agent-kill"):
            self.note = "no job ran at the fault's time"
            return
        node = jobs[0][1] if jobs else ""
        local = self.local
        if self.kind == "node-kill":
            local.kill_node(node)  # type: ignore[attr-defined]
            time.sleep(self.down_s)
            local.start_node(node)  # type: ignore[attr-defined]
        elif self.kind == "node-drain":
            slurm(self.cluster_dir, "scontrol", "update", f"NodeName={node}", "State=DRAIN",
                  "Reason=hetsched-fault")
            time.sleep(self.down_s)
            slurm(self.cluster_dir, "scontrol", "update", f"NodeName={node}", "State=RESUME")
        elif self.kind == "slurmd-restart":
            local.stop_node(node)  # type: ignore[attr-defined]
            time.sleep(10.0)
            local.start_node(node)  # type: ignore[attr-defined]
        elif self.kind == "slurmctld-restart":
            local.restart_controller()  # type: ignore[attr-defined]
        elif self.kind == "agent-kill":
            self.restart_agent()  # type: ignore[operator]
        elif self.kind == "requeue":
            for _ in range(2):
                for job, _host in running_jobs(self.cluster_dir):
                    slurm(self.cluster_dir, "scontrol", "requeue", job)
                time.sleep(10.0)
        elif self.kind == "preempt-checkpointing":
            for job, _host in jobs[:2]:
                node = f"{node} job {job} ({self.requeue_at_write(job)})"
        self.note = f"{self.kind} on {node or '-'} at {time.monotonic() - began:.0f} s"

    def requeue_at_write(self, job: str) -> str:
        """Requeue Slurm job ``job`` as soon as its checkpoint file changes; how soon."""
        path = self.cluster_dir / "checkpoints" / f"{job}.json"
        try:
            before = path.stat().st_mtime_ns
        except OSError:
            return "no checkpoint"
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            try:
                now = path.stat().st_mtime_ns
            except OSError:
                now = before
            if now != before:
                slurm(self.cluster_dir, "scontrol", "requeue", job)
                return f"{(time.time_ns() - now) / 1e6:.0f} ms after a write"
            time.sleep(0.001)
        return "no write in 30 s"


def completions(cluster_dir: Path) -> Counter[str]:
    """Job name -> COMPLETED lines in jobcomp.txt."""
    found: Counter[str] = Counter()
    path = cluster_dir / "log" / "jobcomp.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("JobState") == "COMPLETED":
            found[fields.get("Name", "")] += 1
    return found


def ran_after_completing(checkpoints: Path) -> int:
    """Jobs whose emulator checkpoint has a run that made progress after a completed run."""
    count = 0
    for path in checkpoints.glob("*.json"):
        runs = json.loads(path.read_text()).get("runs", [])
        done = [i for i, run in enumerate(runs) if run.get("state") == "completed"]
        if done and any(run.get("steps_end", 0) > run.get("steps_start", 0)
                        for run in runs[done[0] + 1:]):
            count += 1
    return count


def replay(trace: Path, jobs: int, policy: str, out: Path) -> dict[str, float]:
    """The same jobs replayed without the fault: job id -> JCT."""
    subprocess.run([*HETSCHED, "replay", str(trace), "--format", "gavel", "--cluster", CLUSTER,
                    "--limit-jobs", str(jobs), "--policy", policy, "--throughput",
                    str(THROUGHPUT), "--restart-penalty", "30", "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return jcts(out)


def one_run(kind: str, repeat: int, folder: Path, trace: Path,
            args: argparse.Namespace) -> dict[str, object]:
    """One fault on a fresh cluster; the run's figures."""
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.slurm.local import LocalCluster

    name = f"{kind}-{repeat}"
    cluster_dir = folder / f"{name}-cluster"
    out = folder / name
    local = LocalCluster.from_cluster(parse_cluster(CLUSTER), gpus_per_node=4,
                                      state_dir=cluster_dir, port=args.port)
    local.start()
    began = time.monotonic()
    try:
        process = [agent(cluster_dir, args.policy, out, args.jobs)]

        def restart_agent() -> None:
            process[0].send_signal(signal.SIGKILL)
            process[0].wait()
            time.sleep(5.0)
            process[0] = agent(cluster_dir, args.policy, out, args.jobs)

        fault = Fault(kind, local, cluster_dir, args.at, args.down, restart_agent)
        time.sleep(1.0)
        subprocess.run([*HETSCHED, "slurm", "submit", str(trace), "--format", "gavel",
                        "--cluster-dir", str(cluster_dir), "--limit-jobs", str(args.jobs),
                        "--speedup", str(args.speedup), "--throughput", str(THROUGHPUT)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        fault.thread.start()
        deadline = time.monotonic() + args.timeout
        # (while the fault strikes, the agent may be down: killed, not yet restarted)
        while (process[0].poll() is None or fault.thread.is_alive()) \
                and time.monotonic() < deadline:
            time.sleep(1.0)
        timed_out = process[0].poll() is None
        if timed_out:
            process[0].send_signal(signal.SIGTERM)
            process[0].wait(timeout=120)
        fault.thread.join(timeout=120)
        pending = slurm(cluster_dir, "squeue", "-h", "-o", "%i %T %r").splitlines()
        done = completions(cluster_dir)
    finally:
        local.stop()
    wall = time.monotonic() - began
    real = jcts(out) if (out / "jobs.csv").exists() else {}
    summary = json.loads((out / "summary.json").read_text()) \
        if (out / "summary.json").exists() else {}
    predicted = replay(trace, args.jobs, args.policy, folder / f"{name}-replay")
    both = [job for job in real if job in predicted]
    ratio = (sum(real[j] for j in both) / sum(predicted[j] for j in both)) if both else math.nan
    completed_once = sum(1 for count in done.values() if count == 1)
    row: dict[str, object] = {
        "fault": kind, "repeat": repeat, "jobs": args.jobs, "speedup": args.speedup,
        "policy": args.policy, "note": fault.note,
        "completed_once": completed_once, "lost": args.jobs - len(done),
        "completed_twice": sum(1 for count in done.values() if count > 1),
        "ran_after_completing": ran_after_completing(cluster_dir / "checkpoints"),
        "left_in_slurm": len(pending), "agent_timed_out": timed_out,
        "outputs_written": bool(summary) and bool(real),
        "checker_violations": summary.get("checker_violations"),
        "end_states": json.dumps(summary.get("end_states", {}), sort_keys=True),
        "avg_jct_vs_replay": ratio, "wall_s": round(wall, 1)}
    print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return row


def main() -> None:
    """Run the faults, print the figures, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=15)
    parser.add_argument("--speedup", type=float, default=2000.0)
    parser.add_argument("--policy", default="progress")
    parser.add_argument("--at", type=float, default=10.0,
                        help="wall seconds after the first job started")
    parser.add_argument("--down", type=float, default=60.0,
                        help="wall seconds a killed or drained node stays out")
    parser.add_argument("--timeout", type=float, default=1200.0,
                        help="the longest (wall s) one run may take")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--summarize", type=Path, nargs="+", default=None, metavar="CSV",
                        help="only summarize the runs of these CSV files, per fault")
    args = parser.parse_args()
    if args.summarize is not None:
        rows_read: list[dict[str, object]] = []
        for path in args.summarize:
            with path.open() as handle:
                rows_read.extend(csv.DictReader(handle))
        print("\n".join(summarize(rows_read)))
        return
    if not TRACE.is_file():
        sys.exit(f"{TRACE} is absent: this benchmark needs ../shared/data")
    kinds = args.faults.split(",")
    unknown = [kind for kind in kinds if kind not in FAULTS]
    if unknown:
        sys.exit(f"unknown faults {unknown}: choose from {', '.join(FAULTS)}")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) if args.keep is None else args.keep
        folder.mkdir(parents=True, exist_ok=True)
        trace = band_trace(folder, args.jobs, (12.0, 36.0))
        for repeat in range(1, args.repeats + 1):
            for kind in kinds:
                rows.append(one_run(kind, repeat, folder, trace, args))
                if args.out is not None:
                    write(rows, args.out)
    print("\n".join(summarize(rows)))


def summarize(rows: list[dict[str, object]]) -> list[str]:
    """One line per fault over its runs: jobs completed once of all, lost, run twice or
    after completing, left in Slurm, runs with outputs, checker violations, and the
    average JCT against the replay (mean, range)."""
    lines = []
    for kind in dict.fromkeys(str(row["fault"]) for row in rows):
        mine = [row for row in rows if row["fault"] == kind]

        def total(key: str, runs: list[dict[str, object]] = mine) -> int:
            return sum(int(float(str(row[key] or 0))) for row in runs)

        ratios = [float(str(row["avg_jct_vs_replay"])) for row in mine]
        lines.append(
            f"{kind}: {len(mine)} runs, {total('completed_once')} of "
            f"{total('jobs')} jobs completed once, lost {total('lost')}, run twice "
            f"{total('completed_twice')}, after completing {total('ran_after_completing')}, "
            f"left in Slurm {total('left_in_slurm')}, outputs in "
            f"{sum(str(row['outputs_written']) == 'True' for row in mine)} runs, checker "
            f"violations {total('checker_violations')}, average JCT / replay "
            f"{sum(ratios) / len(ratios):.3f} ({min(ratios):.3f} to {max(ratios):.3f})")
    return lines


def write(rows: list[dict[str, object]], path: Path) -> None:
    """The rows as CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
