"""Tenants on a real Slurm cluster: the agent keeps the tenant table's quotas around its
policy (hetsched.policies.quotas) as a replay does, and ``hetsched slurm run --tenants``
counts quota violations in its summary."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hetsched.core.records import Job
from hetsched.core.tenants import Quota, Tenant, TenantTable
from hetsched.files.replay_inputs import throughputs
from hetsched.policies.quotas import TenantKeeper
from hetsched.registry import rolling
from hetsched.slurm.agent import Agent, AgentSettings
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.history import History
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.metadata import JobMeta
from tests.slurm.commands import job_record, run_slurm, wait_for_state

#: A is guaranteed the 8 V100s (two nodes of 4), B the 4 K80s (one node); both borrow.
TABLE = TenantTable((Tenant("A", quotas={"v100": Quota(8)}),
                     Tenant("B", quotas={"k80": Quota(4)})))
ORIGIN = time.time()


def submit(cluster: LocalCluster, job: Job) -> str:
    """``job`` as a held job of the partition with its metadata (speedup 1)."""
    comment = JobMeta(job, origin=ORIGIN, speedup=1.0, restart_penalty_s=0.0).to_comment()
    return run_slurm(cluster, "sbatch", "-H", "--parsable", f"--partition={cluster.partition}",
                     f"--comment={comment}", "--output=/dev/null", "--wrap", "sleep 120")


def test_a_tenant_gets_its_quota_back_from_a_borrower_on_slurm(cluster: LocalCluster,
                                                              tmp_path: Path) -> None:
    # B's three 4-GPU jobs come first: FIFO puts them on the fastest free GPUs, both
    # V100 nodes (borrowed: they are A's) and the K80 node (B's own). A's job comes
    # next: A is owed the V100s, so the keeper requeues B's latest-started V100 job
    # (held, to start again where B is owed) and starts A's there, in the same decision.
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition)
    speeds = throughputs(live.read().cluster, None)
    policy = TenantKeeper(rolling("fifo"), TABLE)
    agent = Agent(live, policy, speeds.model, History(tmp_path / "events.jsonl"),
                  AgentSettings(poll_s=0.1), truth=speeds.truth)
    b_jobs = [submit(cluster, Job(f"b{i}", float(i), "image-cnn-small", 4, 1e6, tenant="B"))
              for i in range(3)]
    began = time.monotonic()
    while sum(job_record(cluster, j)["job_state"] == "RUNNING" for j in b_jobs) < 3:
        assert time.monotonic() - began < 60, "B's jobs did not all start"
        agent.cycle()
        time.sleep(0.1)
    nodes = {job_record(cluster, j)["nodes"] for j in b_jobs}
    assert nodes == {"v100-0", "v100-1", "k80-0"}
    arrival = time.time() - ORIGIN
    a_job = submit(cluster, Job("a0", arrival, "image-cnn-small", 4, 1e6, tenant="A"))
    began = time.monotonic()
    while job_record(cluster, a_job)["job_state"] != "RUNNING":
        assert time.monotonic() - began < 60, "A's job did not start"
        agent.cycle()
        time.sleep(0.1)
    seen_running = time.time() - ORIGIN
    assert policy.reclaimed == 1  # in the decision A's job arrived at
    assert job_record(cluster, a_job)["nodes"].startswith("v100-")
    requeued = [j for j in b_jobs if job_record(cluster, j)["restart_cnt"] == 1]
    assert len(requeued) == 1
    record, _ = wait_for_state(cluster, requeued[0], {"PENDING"})
    assert record["priority"] == 0  # held: B may not take A's V100s back
    for _ in range(5):
        agent.cycle()
    assert job_record(cluster, requeued[0])["job_state"] == "PENDING"
    agent.history.observe(live.read(), time.time())
    (tmp_path / "out").mkdir()
    summary = agent.history.write(tmp_path / "out", policy="fifo", truth=speeds.truth,
                                  tenants=TABLE, figures=policy.figures())
    # B held A's V100s only while A's job waited for the requeue and its start, real
    # seconds on a real cluster: the violations are at most B's 4 V100s over that wait
    # (from A's arrival to the reading that saw its job running).
    assert 0.0 <= summary["quota_violation_gpu_s"] <= 4 * (seen_running - arrival) + 1e-6
    assert json.loads((tmp_path / "out" / "summary.json").read_text())[
        "quota_reclaims"] == 1
