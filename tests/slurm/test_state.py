"""Reading Slurm's JSON (hetsched.slurm.state, hetsched.slurm.control): GPU nodes as a
cluster in the order asked for, GPUs held from ``gres_detail``, host lists. Records as
Slurm 22.05's ``sinfo --json`` / ``squeue --json`` print them (openapi v0.0.38)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.slurm.control import SlurmControl, expand_nodes, gpu_indices
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.state import held_gpus, read_cluster, read_snapshot

NEEDS_SLURM = False  # (tests/slurm/conftest.py)


def node(name: str, gres: str, state: str = "idle") -> dict[str, object]:
    return {"name": name, "gres": gres, "state": state, "cpus": 32, "real_memory": 131072,
            "state_flags": []}


def test_nodes_follow_the_order_asked_for_and_down_nodes_are_busy() -> None:
    nodes = [node("k80-0", "gpu:k80:4"), node("p100-0", "gpu:p100:4(S:0)"),
             node("v100-10", "gpu:v100:4"), node("v100-2", "gpu:v100:4", state="drained"),
             node("cpu-0", "")]
    cluster, unusable = read_cluster(nodes)
    # By name (v100-2 before v100-10), the node without GPUs left out.
    assert [n.name for n in cluster.nodes] == ["k80-0", "p100-0", "v100-2", "v100-10"]
    assert cluster.type_names == ("k80", "p100", "v100")
    assert unusable == frozenset(f"v100-2/{i}" for i in range(4))
    cluster, _ = read_cluster(nodes, ["v100", "p100", "k80"])
    assert cluster.type_names == ("v100", "p100", "k80")
    assert [n.name for n in cluster.nodes][:2] == ["v100-2", "v100-10"]
    cluster, _ = read_cluster(nodes, ["v100-10", "v100-2", "k80-0", "p100-0"])
    assert [n.name for n in cluster.nodes] == ["v100-10", "v100-2", "k80-0", "p100-0"]
    assert (cluster.nodes[0].cpus, cluster.nodes[0].memory_gb) == (32, 128.0)


def test_held_gpus_come_from_gres_detail_one_entry_per_node() -> None:
    record = {"nodes": "v100-[0-1]", "gres_detail": ["gpu:v100:3(IDX:0,2-3)", "gpu:1(IDX:1)"]}
    assert held_gpus(record) == (("v100-0", "v100-1"),
                                 ("v100-0/0", "v100-0/2", "v100-0/3", "v100-1/1"))
    assert gpu_indices("gpu:k80:2(IDX:N/A)") == []
    assert expand_nodes("k80-0,v100-[08-10]") == ["k80-0", "v100-08", "v100-09", "v100-10"]


def _job(slurm_id: int, state: str, *, job: str | None, gpus: str = "", nodes: str = "v100-0",
         **fields: object) -> dict[str, object]:
    """A ``squeue --json`` job; managed (hetsched's comment) when ``job`` names it."""
    comment = "" if job is None else JobMeta(
        Job(job, 0.0, "resnet50", 2, work=5000.0), 1_795_742_878.5, 60.0, 30.0).to_comment()
    return {"job_id": slurm_id, "job_state": state, "comment": comment, "priority": 1,
            "nodes": nodes if gpus else "", "gres_detail": [gpus] if gpus else [],
            **fields}


def test_a_managed_job_completing_hands_its_gpus_over_and_a_foreign_one_keeps_them() -> None:
    # Slurm 22.05 lists no gres_detail while a job completes; here it does, as another
    # version might: the managed job's GPUs are handed over all the same.
    nodes = [node("v100-0", "gpu:v100:4"), node("v100-1", "gpu:v100:4")]
    jobs = [
        _job(1, "COMPLETING", job="a", gpus="gpu:v100:2(IDX:0-1)"),  # its epilog runs
        _job(2, "COMPLETING", job=None, gpus="gpu:v100:2(IDX:2-3)"),  # not hetsched's
        _job(3, "RUNNING", job="c", gpus="gpu:v100:2(IDX:0-1)", nodes="v100-1"),
        # Released onto v100-0 while job 1 completes: Slurm starts it as the epilog ends.
        _job(4, "PENDING", job="b", required_nodes="v100-0", tres_per_node="gres:gpu:2"),
    ]
    snapshot = read_snapshot(nodes, jobs)
    a, b = snapshot.jobs["a"], snapshot.jobs["b"]
    assert a.handing_over
    assert a.gpus == ("v100-0/0", "v100-0/1")
    assert not snapshot.jobs["c"].handing_over
    assert b.released
    # a's two GPUs are b's, booked; the foreign job's stay busy until Slurm frees them; of
    # the eight only v100-1's last two are free.
    assert b.gpus == ("v100-0/0", "v100-0/1")
    assert snapshot.free == frozenset({"v100-1/2", "v100-1/3"})
    assert snapshot.foreign_jobs == 1
    # With nothing released onto them, a's GPUs are free for the policy.
    assert read_snapshot(nodes, jobs[:3]).free == frozenset(
        {"v100-0/0", "v100-0/1", "v100-1/2", "v100-1/3"})


def test_a_released_uneven_gang_books_the_gpus_slurm_will_split_to_it() -> None:
    # Released with TresPerJob=gres:gpu:4 over v100-0 (one GPU busy) and v100-1, not
    # started yet: Slurm will give v100-0 its three free GPUs and v100-1 one.
    nodes = [node("v100-0", "gpu:v100:4"), node("v100-1", "gpu:v100:4")]
    jobs = [
        _job(1, "RUNNING", job="a", gpus="gpu:v100:1(IDX:0)"),
        _job(2, "PENDING", job="b", required_nodes="v100-[0-1]", tres_per_job="gres:gpu:4"),
    ]
    snapshot = read_snapshot(nodes, jobs)
    assert snapshot.jobs["b"].gpus == ("v100-0/1", "v100-0/2", "v100-0/3", "v100-1/0")
    assert snapshot.free == frozenset({"v100-1/1", "v100-1/2", "v100-1/3"})


def test_hand_over_files_are_written_for_the_jobs_and_stale_ones_removed(tmp_path: Path) -> None:
    # The last reading: Slurm jobs 11 and 13 run or complete; 12 (preempted, say, and now
    # pending) and 14 do neither, so an epilog waiting on their files has ended already.
    live = SlurmCluster(SlurmControl(env={}), handover=tmp_path)
    live._ids = {"a": 11, "b": 12}
    live._holding = {11, 13}
    for name in ("13", "14", "notes"):
        (tmp_path / name).touch()
    live.handed_over(["a", "b"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["11", "13"]


def test_the_agent_counts_steps_at_the_measured_throughput() -> None:
    # A 2-GPU resnet50 (5,000 steps) started at trace time 0 (speedup 60: Unix origin +
    # 0) and runs on v100-0. The policy's model says 10 steps/s, the measured table 5: at
    # trace time 300 the measured table leaves 5,000 - 300 x 5 = 3,500 steps; the model
    # would say 2,000 were left at 300 and nothing (a millionth) at 600.
    from hetsched.core.throughput import Placement, ThroughputTable
    from hetsched.slurm.agent import Agent
    from hetsched.slurm.history import History

    nodes = [node("v100-0", "gpu:v100:4")]
    origin = 1_795_742_878.5
    jobs = [_job(7, "RUNNING", job="j", gpus="gpu:v100:2(IDX:0-1)", start_time=int(origin))]
    snapshot = read_snapshot(nodes, jobs)
    history = History()
    history.observe(snapshot, origin)
    model = ThroughputTable({("resnet50", "v100", 2, Placement.PACKED): 10.0})
    truth = ThroughputTable({("resnet50", "v100", 2, Placement.PACKED): 5.0})
    for seen_by, now, left in ((truth, 300.0, 3500.0), (model, 300.0, 2000.0),
                               (model, 600.0, 0.005)):
        agent = Agent(None, None, model, history, truth=seen_by)  # type: ignore[arg-type]
        (run,) = agent.state(snapshot, now).running
        assert run.remaining == pytest.approx(left, rel=1e-6)
