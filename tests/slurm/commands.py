"""Slurm's commands against a test cluster, and the ports of the test clusters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hetsched.slurm.local import LocalCluster
from hetsched.slurm.processes import INSTALL_HINT, busy_ports, missing_programs

#: Where the search for each test cluster's ports starts (:func:`free_port`), away from
#: the default 16817 of ``hetsched slurm cluster start`` so that a cluster of yours runs on.
PORTS = {"session": 17817, "restart": 17917, "cli": 18017, "taken": 18117, "outage": 18217,
         "handover": 18317, "faults": 18417}


def free_port(cluster: str, nodes: int) -> int:
    """A port for slurmctld of test cluster ``cluster`` with the ``nodes`` ports after it
    free too: the first such from ``PORTS[cluster]`` on, in steps of 1000."""
    for port in range(PORTS[cluster], 60000, 1000):
        if not busy_ports(range(port, port + nodes + 1)):
            return port
    raise AssertionError(f"no free ports for test cluster {cluster}")


@contextmanager
def running(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """``cluster`` started, and stopped at the end (a test's own cluster)."""
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def skip_reason() -> str | None:
    """Why the Slurm tests cannot run here, or None."""
    missing = missing_programs()
    if missing:
        return f"Slurm is not installed (missing {', '.join(missing)}: {INSTALL_HINT})"
    if os.geteuid() != 0:
        return "a local Slurm cluster runs as root"
    return None


def run_slurm(cluster: LocalCluster, *command: str) -> str:
    """Run a Slurm command against ``cluster``; its stdout (fails the test on an error)."""
    done = subprocess.run(command, env=cluster.env(), capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stderr.strip()}"
    return done.stdout.strip()


def job_record(cluster: LocalCluster, job_id: str) -> dict[str, Any]:
    """The job's record in ``squeue --json`` (openapi v0.0.38)."""
    jobs = json.loads(run_slurm(cluster, "squeue", "--json"))["jobs"]
    found = [job for job in jobs if str(job["job_id"]) == job_id]
    assert found, f"job {job_id} is not in squeue --json"
    return dict(found[0])


def wait_for_state(cluster: LocalCluster, job_id: str, states: set[str],
                   timeout_s: float = 60.0) -> tuple[dict[str, Any], float]:
    """Poll ``squeue --json`` until the job is in one of ``states``: its record, and the
    seconds that took."""
    began = time.monotonic()
    while True:
        record = job_record(cluster, job_id)
        if record["job_state"] in states:
            return record, time.monotonic() - began
        assert time.monotonic() - began < timeout_s, \
            f"job {job_id} still {record['job_state']} ({record['state_reason']})"
        time.sleep(0.05)


def submit_held(cluster: LocalCluster, seconds: float, comment: str = "hetsched-test") -> str:
    """``sbatch -H``: a held job of ``seconds`` of sleep asking for no GPU; its id."""
    return run_slurm(cluster, "sbatch", "--parsable", "-H", "-o", "/dev/null",
                     f"--comment={comment}", "--wrap", f"sleep {seconds}")


def start_pinned(cluster: LocalCluster, job_id: str, tres: str, node: str) -> dict[str, Any]:
    """Pin a held job to ``node`` with ``tres`` (``gres:gpu:2``), release it, wait until
    it runs: its record."""
    run_slurm(cluster, "scontrol", "update", f"JobId={job_id}", f"TresPerNode={tres}",
              f"NodeList={node}")
    run_slurm(cluster, "scontrol", "release", job_id)
    record, _ = wait_for_state(cluster, job_id, {"RUNNING"})
    return record


def agent_command(cluster: LocalCluster, out: Path, *extra: str,
                  policy: str = "fifo") -> tuple[list[str], dict[str, str]]:
    """``hetsched slurm run`` of ``policy`` on ``cluster``'s partition, writing ``out``
    (polling every 0.1 s), with ``extra`` options: its command line and environment."""
    return ([sys.executable, "-m", "hetsched", "slurm", "run", "--policy", policy, "--out",
             str(out), "--cluster-dir", str(cluster.state_dir), "--poll", "0.1", *extra],
            {**os.environ, "SLURM_CONF": str(cluster.conf_path)})


def run_agent(cluster: LocalCluster, out: Path, *extra: str,
              timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """:func:`agent_command` run to its end (killed after ``timeout_s``)."""
    command, env = agent_command(cluster, out, *extra)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                          env=env, check=False)
