"""Sia's own simulator run beside hetsched: Sia (SOSP'23) public artifact
``siasosp23/artifacts``, folder ``sia-simulator/``, at the pinned commit :data:`SIA_COMMIT`.

What it measures, never copying Sia's code into this project:

* :func:`prepare`: Sia's files at the pinned commit in ``SCRATCH/artifacts`` and a Python 3.11
  venv with :data:`REQUIREMENTS` in ``SCRATCH/venv`` (both reused once their marker is there).
* :func:`run_workload`: one workload file under ``sia``, ``gavel`` or ``pollux`` with the flags
  of Sia's ``run_experiment.sh``; Sia writes to ``--output`` one JSON record per scheduling
  round (``Cluster.step_log``: every submitted job's state), once every job has finished.
  The run is one process: one workload file at a time (``num_parallel_traces`` only matters
  for a folder) and ``num_parallel_jobs = 1``; :data:`RUNNER` also sets CBC's
  ``sia_solver_num_threads`` from 8 to ``SIA_CBC_THREADS`` (default 1) in Sia's
  ``simulator_config`` module before Sia's script starts: the checkout is never edited.
* :func:`read_results` / :func:`summarize`: per job the JCT (completion - submission, s),
  GPU-seconds (Sia's ``utils/print_run_stats.py``: each round a job holds an allocation
  counts ``len(GPUs) x interval``), restarts; per run average and p99 JCT, makespan (last
  completion - first submission, as ``print_run_stats.get_makespans``), decision times
  (stdout's ``Policy optimization took X ms`` lines: the policy's solve per round).
* :func:`physics_probes`: the time Sia's ``job.Job.step`` gives one job alone on a fixed
  (GPU type, GPU count), rigid (batch size fixed) or adaptive (batch tuned), with Sia's
  calibration ``SLOWDOWNS`` and its restart delay ``rescale_time`` included.

``python benchmarks/sia_side.py prepare|probe|run|summary|check --help``; results under
``benchmarks/results/sia/`` (Sia's figures only), scratch under ``/work/scratch/sia``."""

from __future__ import annotations

import argparse
import collections
import csv
import json
import logging
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LOG = logging.getLogger("sia_side")
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "sia"
DEFAULT_SCRATCH = Path("/work/scratch/sia")
SIA_COMMIT = "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70"
MIRROR = Path("/work/.mirror/siasosp23+artifacts/repo")
UPSTREAM = "https://github.com/siasosp23/artifacts"
FOLDER = "sia-simulator"
#: Verified on Python 3.11 (2026-12-07). Sia's sia.py solves its MIP with cp.CBC (cylp),
#: whatever simulator_config.sia_solver says; Gavel's LP uses ECOS; pollux needs pymoo 0.4;
#: utils/print_run_stats.py imports matplotlib.
REQUIREMENTS = [
    "numpy==1.23.5", "pandas==1.5.3", "scipy==1.10.1", "cvxpy==1.3.4", "cylp==0.92.3",
    "cvxopt==1.3.2", "ecos==2.0.14", "pymoo==0.4.2.1", "autograd==1.6.2", "rich==13.7.1",
    "psutil==5.9.8", "matplotlib==3.7.5",
]
#: policy -> (Sia's script, its flags in run_experiment.sh); the interval is the flag's.
POLICIES: dict[str, tuple[str, list[str]]] = {
    "sia": ("multi_simulator.py", ["--policy=sia", "--policy_p_val=-0.5", "--mip_lambda_a=0.01",
                                   "--mip_lambda_n=1.1", "--interval=60", "--project_throughput",
                                   "--share_max_replicas"]),
    "gavel": ("multi_simulator.py", ["--policy=gavel", "--interval=360"]),
    "pollux": ("multi_simulator_unaware.py", ["--policy=pollux", "--interval=60",
                                              "--policy_p_val=-1"]),
}
#: Sia's simulator_config.cluster_ngpus_per_node for the default 64-GPU cluster.
NODE_GPUS = {"aws": 4, "rtx": 8, "dgx-ext": 8}
APPS = ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]
#: Sia's Cluster gives every ncf job this batch size under policy sia (cluster.py:65-68);
#: no workload has ncf, so the probe uses it for ncf.
NCF_BATCH = 32768
#: What Sia's stdout says of the policy's time a round: multi_simulator.py (cluster.py),
#: multi_simulator_unaware.py (cluster_unaware.py, pollux: its optimize with the repair
#: and the mapping of virtual nodes).
DECISIONS = ("Policy optimization took ", "policy.optimize(): ")
RUNNER = '''"""Runs one of Sia's scripts with simulator_config set to one process (hetsched)."""
import os, runpy, sys
sys.path.insert(0, os.getcwd())
import simulator_config as config
config.num_parallel_traces = 1
config.num_parallel_jobs = 1
config.sia_solver_num_threads = int(os.environ.get("SIA_CBC_THREADS", "1"))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''
PROBE_DRIVER = '''"""One job alone on a fixed placement in Sia's simulator (hetsched's probe)."""
import json, os, sys
sys.path.insert(0, os.getcwd())
import simulator_config as config
from applications import APPLICATIONS
from job import Job

def probe(spec):
    name, gpu_type, gpus = spec["app"], spec["gpu_type"], spec["num_gpus"]
    per_node = config.cluster_ngpus_per_node[gpu_type]
    placement = [per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else [])
    apps = {cluster: by_app[name] for cluster, by_app in APPLICATIONS.items() if name in by_app}
    job = Job(name + "-probe", apps, 0.0, cache_speedups=False, target_num_replicas=gpus,
              target_batch_size=spec["batch_size"])
    if spec["mode"] == "rigid":
        job.disable_bsz_tuning()
    out = dict(spec, placement="-".join(map(str, placement)), slowdown=config.SLOWDOWNS[name])
    app = apps[gpu_type]
    pid = int("".join(map(str, sorted(placement))))
    out["measured"] = bool(pid in app.placements.placement.values)
    try:
        job.migrate(gpu_type, placement)
        out["restart_s"] = job.rescale_time
        out["first_local_bsz"] = job.atomic_bsz * (job.accum_steps + 1)
        while job.completion_time is None:
            step, _ = app.get_throughput(tuple(job.placement), job.atomic_bsz)
            if not step > 0:
                raise ValueError(f"no step time at local batch {job.atomic_bsz} on {placement}")
            if job.current_time > spec["max_seconds"]:
                raise ValueError(f"not done after {spec['max_seconds']} s")
            job.step(60)
    except (AssertionError, ValueError, KeyError) as error:
        return dict(out, status="refused", reason=f"{type(error).__name__}: {error}"[:200])
    last = job.atomic_bsz * (job.accum_steps + 1) * gpus
    return dict(out, status="ok", seconds=job.completion_time, epochs=job.epoch,
                last_batch_size=last, reason="")

for line in sys.stdin:
    print("PROBE " + json.dumps(probe(json.loads(line))), flush=True)
'''


@dataclass(frozen=True)
class SiaCheckout:
    """Sia's files at ``commit`` (``simulator`` is its sia-simulator/ folder) and the
    venv's ``python`` that runs them; ``scratch`` holds both, and the runs."""

    scratch: Path
    simulator: Path
    python: Path
    commit: str


@dataclass(frozen=True)
class JobResult:
    """One job of a finished run, in Sia's figures (times in s from the trace's start)."""

    name: str
    application: str
    submission_s: float
    completion_s: float
    jct_s: float
    gpu_seconds: float
    num_restarts: int
    gpu_seconds_by_type: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary:
    """A run's figures: JCTs (s), makespan (s), GPU-hours a job, policy time a round (s)."""

    jobs: int
    avg_jct_s: float
    p99_jct_s: float
    p99_jct_sia_s: float
    makespan_s: float
    gpu_hours_per_job: float
    restarts_per_job: float
    decision_p50_s: float
    decision_p95_s: float
    decision_rounds: int


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    LOG.debug("running %s", " ".join(command))
    return subprocess.run(command, check=True, text=True, capture_output=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def _extract(source: str, scratch: Path, target: Path) -> None:
    """Sia's sia-simulator/ at :data:`SIA_COMMIT`, file by file from a bare repository
    (the mirror lacks the blob of a large trace, so a clone or archive of it fails)."""
    repo = Path(source)
    if not repo.is_dir():
        repo = scratch / "artifacts.git"
        if not repo.is_dir():
            LOG.info("cloning %s into %s", source, repo)
            _run(["git", "clone", "--bare", "--filter=blob:none", source, str(repo)])
    names = _run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", SIA_COMMIT,
                  FOLDER]).stdout.split()
    missing = []
    for name in names:
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shown = subprocess.run(["git", "-C", str(repo), "show", f"{SIA_COMMIT}:{name}"],
                               capture_output=True, check=False)
        if shown.returncode:
            missing.append(name)
            continue
        path.write_bytes(shown.stdout)
    for name in missing:
        LOG.warning("not in %s, skipped: %s", repo, name)
    LOG.info("extracted %d files of %s at %s", len(names) - len(missing), FOLDER, SIA_COMMIT)


def prepare(scratch: Path = DEFAULT_SCRATCH, source: str | None = None) -> SiaCheckout:
    """Sia's files and venv in ``scratch`` (made once: a marker file records each step)."""
    source = source or (str(MIRROR) if MIRROR.is_dir() else UPSTREAM)
    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / "artifacts"
    marker = target / f".extracted-{SIA_COMMIT}"
    if not marker.is_file():
        _extract(source, scratch, target)
        marker.write_text(source + "\n")
    venv = scratch / "venv"
    installed = venv / ".sia-requirements"
    wanted = "\n".join(REQUIREMENTS) + "\n"
    if not installed.is_file() or installed.read_text() != wanted:
        if not (venv / "bin" / "python").is_file():
            LOG.info("creating %s with python3.11", venv)
            _run(["python3.11", "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        LOG.info("installing %s", " ".join(REQUIREMENTS))
        # pymoo 0.4's setup.py imports numpy: numpy first, then the rest without isolation
        _run([*pip, "--upgrade", "pip", "setuptools<70", "wheel", "cython<3", REQUIREMENTS[0]])
        _run([*pip, "--no-build-isolation", *REQUIREMENTS])
        installed.write_text(wanted)
    simulator = target / FOLDER
    (scratch / "run_sia.py").write_text(RUNNER)
    (scratch / "probe_driver.py").write_text(PROBE_DRIVER)
    return SiaCheckout(scratch, simulator, venv / "bin" / "python", SIA_COMMIT)


def _sia_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONHASHSEED="0", COLUMNS="160")
    env.update(dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"))
    env.setdefault("SIA_CBC_THREADS", "1")
    return env


def is_complete(out: Path, workload: Path | None = None) -> bool:
    """Whether ``out`` is a finished run's output: its last record parses and lists every
    job (of ``workload``, when given) with a completion time."""
    if not out.is_file() or out.stat().st_size == 0:
        return False
    with out.open("rb") as handle:
        handle.seek(max(0, out.stat().st_size - (1 << 24)))
        lines = handle.read().splitlines()
    try:
        jobs = json.loads(lines[-1])["submitted_jobs"]
    except (ValueError, KeyError, IndexError):
        return False
    if workload is not None:
        with workload.open() as handle:
            if len(jobs) != sum(1 for _ in csv.DictReader(handle)):
                return False
    return all(job["completion_time"] is not None for job in jobs)


def run_workload(checkout: SiaCheckout, workload: Path, policy: str, out: Path) -> Path:
    """Sia's simulator on ``workload`` under ``policy`` (sia, gavel, pollux), its records
    written to ``out``, stdout and stderr to ``out``.stdout, wall time and settings to
    ``out``.meta.json; a run whose ``out`` is complete is not run again."""
    if is_complete(out, workload):
        LOG.info("%s is complete: not rerun", out)
        return out
    script, flags = POLICIES[policy]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    log = out.with_suffix(".stdout")
    env = _sia_env()
    command = [str(checkout.python), str(checkout.scratch / "run_sia.py"), script,
               str(workload.resolve()), *flags, f"--output={partial.resolve()}"]
    LOG.info("running %s %s on %s (log %s)", script, policy, workload, log)
    start = time.monotonic()
    with log.open("w") as handle:
        done = subprocess.run(command, cwd=checkout.simulator, env=env, stdout=handle,
                              stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - start
    if done.returncode or not is_complete(partial, workload):
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"Sia's {script} failed ({done.returncode}) on {workload}:\n{tail}")
    partial.replace(out)
    meta = {"policy": policy, "workload": str(workload), "command": command[2:],
            "wall_s": round(wall, 1), "sia_commit": checkout.commit,
            "cbc_threads": env["SIA_CBC_THREADS"],
            "finished": time.strftime("%FT%TZ", time.gmtime())}
    out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    LOG.info("%s %s done in %.0f s", workload.name, policy, wall)
    return out


def read_results(path: Path) -> list[JobResult]:
    """Every job of Sia's ``--output`` file (JSON lines, one record a round), in the order of
    its last record; GPU-seconds as ``print_run_stats.py`` counts them (allocation x
    interval for every round the job holds GPUs before it completes; the interval is the
    records' spacing)."""
    gpu_s: dict[str, dict[str, float]] = collections.defaultdict(dict)
    last: dict[str, Any] = {}
    stamps: list[float] = []
    per_record: list[list[tuple[str, str, int]]] = []  # (job, GPU type, GPUs) a record
    with path.open() as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            stamps.append(float(record["timestamp"]))
            held = []
            for job in record["submitted_jobs"]:
                allocation = job["allocation"]
                if job["completion_time"] is None and allocation and allocation[0] is not None:
                    held.append((job["name"], str(allocation[0]), len(allocation[1])))
            per_record.append(held)
            last = record
    if not stamps:
        raise ValueError(f"{path}: no records")
    interval = stamps[1] - stamps[0] if len(stamps) > 1 else stamps[0]
    for held in per_record:
        for name, gpu_type, gpus in held:
            gpu_s[name][gpu_type] = gpu_s[name].get(gpu_type, 0.0) + gpus * interval
    results = []
    for job in last["submitted_jobs"]:
        if job["completion_time"] is None:
            raise ValueError(f"{path}: job {job['name']} has not completed")
        name = str(job["name"])
        submitted, completed = float(job["submission_time"]), float(job["completion_time"])
        by_type = dict(sorted(gpu_s[name].items()))
        results.append(JobResult(name, name.split("-")[0], submitted, completed,
                                 completed - submitted, float(sum(by_type.values())),
                                 int(job["num_restarts"] or 0), by_type))
    return results


def read_decision_times(log: Path) -> list[float]:
    """The policy's time (s) each round, from the :data:`DECISIONS` lines of Sia's stdout
    (one per round with active jobs: ``Policy optimization took X ms``)."""
    times = []
    with log.open(errors="replace") as handle:
        for line in handle:
            for said in DECISIONS:
                at = line.find(said)
                if at >= 0:
                    times.append(float(line[at + len(said):].split("ms", 1)[0]) / 1000.0)
    return times


def summarize(jobs: list[JobResult], decision_times: list[float]) -> RunSummary:
    """The run's figures: mean JCT; p99 JCT both as numpy's linear percentile (as hetsched
    reports it) and as Sia's ``print_run_stats.get_p99_jct`` (sorted JCTs at int(0.99 n));
    makespan = last completion - first submission; GPU-hours per job = all GPU-seconds /
    3600 / jobs; decision p50 / p95 over the rounds (NaN when the log has none)."""
    jct = np.array([job.jct_s for job in jobs])
    times = np.array(decision_times)
    nan = math.nan
    return RunSummary(
        jobs=len(jobs), avg_jct_s=float(jct.mean()), p99_jct_s=float(np.percentile(jct, 99)),
        p99_jct_sia_s=float(sorted(jct)[int(0.99 * len(jct))]),
        makespan_s=max(j.completion_s for j in jobs) - min(j.submission_s for j in jobs),
        gpu_hours_per_job=sum(j.gpu_seconds for j in jobs) / 3600.0 / len(jobs),
        restarts_per_job=sum(j.num_restarts for j in jobs) / len(jobs),
        decision_p50_s=float(np.percentile(times, 50)) if len(times) else nan,
        decision_p95_s=float(np.percentile(times, 95)) if len(times) else nan,
        decision_rounds=len(times))


def workload_path(checkout: SiaCheckout, trace: str, number: int) -> Path:
    """Sia's ``workloads/<trace>/workload-<number>.csv``."""
    return checkout.simulator / "workloads" / trace / f"workload-{number}.csv"


def read_run(out: Path) -> tuple[list[JobResult], RunSummary]:
    """A finished run's jobs and figures (decision times from ``out``.stdout)."""
    jobs = read_results(out)
    log = out.with_suffix(".stdout")
    return jobs, summarize(jobs, read_decision_times(log) if log.is_file() else [])


def common_batch_sizes(workload: Path) -> dict[str, int]:
    """Each application's most common batch size in ``workload`` (ncf: :data:`NCF_BATCH`)."""
    counts: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    with workload.open() as handle:
        for row in csv.DictReader(handle):
            counts[row["application"]][int(float(row["batch_size"]))] += 1
    found = {app: count.most_common(1)[0][0] for app, count in counts.items()}
    return {app: found.get(app, NCF_BATCH) for app in APPS} | {"ncf": NCF_BATCH}


def probe_specs(batch_sizes: dict[str, int], apps: tuple[str, ...] = tuple(APPS),
                gpu_types: tuple[str, ...] = tuple(NODE_GPUS),
                counts: tuple[int, ...] = (1, 2, 4, 8, 16),
                max_seconds: float = 60 * 86400.0) -> list[dict[str, object]]:
    """Every (application, GPU type, GPU count, rigid|adaptive) the probe measures."""
    return [{"app": app, "gpu_type": gpu_type, "num_gpus": gpus, "mode": mode,
             "batch_size": batch_sizes[app], "max_seconds": max_seconds}
            for app in apps for gpu_type in gpu_types for gpus in counts
            for mode in ("rigid", "adaptive")]


def physics_probes(checkout: SiaCheckout,
                   specs: list[dict[str, object]]) -> list[dict[str, object]]:
    """Sia's simulator's time for each spec's job alone: the driver (our code, Sia's venv)
    builds ``job.Job`` as ``Cluster`` does for a workload row (``disable_bsz_tuning()`` if
    rigid), places it with ``job.migrate(type, placement)`` as ``Cluster.optimize_policy``
    does for a new job (nodes filled in order), and calls ``job.step(60)`` until its
    ``completion_time``: ``seconds`` from placement to completion, the restart delay
    ``restart_s`` included; ``status`` refused with a reason where Sia has no step time."""
    LOG.info("probing %d placements in Sia's simulator", len(specs))
    process = subprocess.Popen([str(checkout.python), str(checkout.scratch / "probe_driver.py")],
                               cwd=checkout.simulator, env=_sia_env(), text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write("".join(json.dumps(spec) + "\n" for spec in specs))
    process.stdin.close()
    results = []
    for line in process.stdout:
        if line.startswith("PROBE "):
            results.append(json.loads(line[6:]))
            LOG.info("probe %d/%d: %s", len(results), len(specs),
                     {k: results[-1].get(k) for k in ("app", "gpu_type", "num_gpus", "mode",
                                                       "seconds", "status")})
    if process.wait() or len(results) != len(specs):
        raise RuntimeError(f"the probe driver ended with {process.returncode} after "
                           f"{len(results)} of {len(specs)} probes")
    return results


def physics_probe(checkout: SiaCheckout, app: str, gpu_type: str, num_gpus: int,
                  mode: str = "adaptive", batch_size: int | None = None) -> dict[str, object]:
    """One job of ``app`` alone on ``num_gpus`` GPUs of ``gpu_type`` (see
    :func:`physics_probes`); ``batch_size`` default: saturn workload-1's most common."""
    if batch_size is None:
        batch_size = common_batch_sizes(workload_path(checkout, "saturn", 1))[app]
    spec = {"app": app, "gpu_type": gpu_type, "num_gpus": num_gpus, "mode": mode,
            "batch_size": batch_size, "max_seconds": 60 * 86400.0}
    return physics_probes(checkout, [spec])[0]


RUN_COLUMNS = ["trace", "workload", "policy", "jobs", "avg_jct_s", "p99_jct_s", "p99_jct_sia_s",
               "makespan_s", "gpu_hours_per_job", "restarts_per_job", "decision_p50_s",
               "decision_p95_s", "decision_rounds", "worst_rho", "wall_s", "sia_commit"]
PROBE_COLUMNS = ["app", "gpu_type", "num_gpus", "mode", "batch_size", "seconds", "restart_s",
                 "placement", "measured", "slowdown", "first_local_bsz", "last_batch_size",
                 "epochs", "status", "reason"]


def _write_rows(path: Path, rows: list[dict[str, object]], columns: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore", restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})


def upsert_run(path: Path, row: dict[str, object]) -> None:
    """``row`` into the runs CSV ``path``, replacing the row of the same trace, workload
    and policy (the file stays sorted by them)."""
    rows: list[dict[str, object]] = []
    if path.is_file():
        with path.open() as handle:
            rows = list(csv.DictReader(handle))
    key = ("trace", "workload", "policy")
    rows = [r for r in rows if tuple(str(r[k]) for k in key) != tuple(str(row[k]) for k in key)]
    rows.append(row)
    rows.sort(key=lambda r: (str(r["trace"]), int(str(r["workload"])), str(r["policy"])))
    _write_rows(path, rows, RUN_COLUMNS)


def record_run(out: Path, trace: str, number: int, policy: str, results: Path) -> dict[str, object]:
    """A finished run's row in ``results``/sia_runs.csv and its jobs in
    ``results``/jobs-<trace>-<number>-<policy>.csv; returns the row."""
    jobs, summary = read_run(out)
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    row = {"trace": trace, "workload": number, "policy": policy, **asdict(summary),
           "worst_rho": "", "wall_s": meta["wall_s"], "sia_commit": meta["sia_commit"]}
    upsert_run(results / "sia_runs.csv", row)
    types = sorted({t for job in jobs for t in job.gpu_seconds_by_type})
    rows = [{**{k: v for k, v in asdict(job).items() if k != "gpu_seconds_by_type"},
             **{f"gpu_seconds_{t}": job.gpu_seconds_by_type.get(t, 0.0) for t in types}}
            for job in jobs]
    columns = [k for k in asdict(jobs[0]) if k != "gpu_seconds_by_type"]
    _write_rows(results / f"jobs-{trace}-{number}-{policy}.csv", rows,
                columns + [f"gpu_seconds_{t}" for t in types])
    return row


def _table(rows: list[dict[str, object]], columns: list[str]) -> str:
    def cell(value: object) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    cells = [[cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def _numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "probe", "run", "summary", "check"])
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH)
    parser.add_argument("--source", default=None, help="Sia's repository (default: the mirror)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--trace", default="saturn", help="saturn, philly, newtrace, ...")
    parser.add_argument("--workloads", type=_numbers, default=[1])
    parser.add_argument("--policies", default="sia", help="of sia,gavel,pollux")
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--counts", type=_numbers, default=[1, 2, 4, 8, 16])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.command == "summary":
        with (args.out / "sia_runs.csv").open() as handle:
            print(_table(list(csv.DictReader(handle)), RUN_COLUMNS[:-1]))
        return 0
    checkout = prepare(args.scratch, args.source)
    if args.command == "probe":
        batches = common_batch_sizes(workload_path(checkout, "saturn", 1))
        specs = probe_specs(batches, tuple(args.apps.split(",")), counts=tuple(args.counts))
        rows = physics_probes(checkout, specs)
        _write_rows(args.out / "physics_sia.csv", rows, PROBE_COLUMNS)
        print(_table(rows, [*PROBE_COLUMNS[:8], "status"]))
    elif args.command in ("run", "check"):
        for number in args.workloads:
            for policy in args.policies.split(","):
                out = args.scratch / "runs" / args.trace / policy / f"workload-{number}.log"
                if args.command == "check":
                    print(check_with_sia_stats(checkout, out, policy))
                    continue
                run_workload(checkout, workload_path(checkout, args.trace, number), policy, out)
                row = record_run(out, args.trace, number, policy, args.out)
                print(_table([row], RUN_COLUMNS[:12]), flush=True)
    return 0


def check_with_sia_stats(checkout: SiaCheckout, out: Path, policy: str) -> str:
    """Sia's ``utils/print_run_stats.py`` on one finished run (a folder holding its log and
    the ``summary.json`` Sia's multi_simulator writes for a folder of workloads), beside
    this module's figures, to check the parser against Sia's own."""
    jobs, summary = read_run(out)
    folder = checkout.scratch / "check" / f"{out.parent.parent.name}-{policy}-{out.stem}"
    workloads = folder / "workloads"
    workloads.mkdir(parents=True, exist_ok=True)
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    (workloads / f"{out.stem}.csv").write_bytes(Path(meta["workload"]).read_bytes())
    (folder / f"{out.stem}.log").unlink(missing_ok=True)
    (folder / f"{out.stem}.log").symlink_to(out.resolve())
    jcts = {job.name: job.jct_s for job in jobs}
    (folder / "summary.json").write_text(json.dumps({"jcts": {out.stem: jcts}}))
    interval = next(f for f in POLICIES[policy][1] if f.startswith("--interval="))
    stats = subprocess.run([str(checkout.python), "utils/print_run_stats.py",
                            f"--workload_dir={workloads}", f"--output_dir={folder}",
                            interval], cwd=checkout.simulator, env=_sia_env(),
                           text=True, capture_output=True, check=False)
    hours = {k: f"{getattr(summary, k) / 3600:.6f} h"
             for k in ("avg_jct_s", "p99_jct_sia_s", "makespan_s")}
    ours = (f"ours: {hours}, restarts/job {summary.restarts_per_job:.3f}, "
            f"GPU-h/job {summary.gpu_hours_per_job:.4f}")
    return f"{stats.stdout}{stats.stderr[-1500:]}\n{ours}"


if __name__ == "__main__":
    sys.exit(main())
