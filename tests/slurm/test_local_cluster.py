"""The local Slurm cluster (hetsched.slurm.local) against its real daemons, and the Slurm
commands the agent will use on it: a held job pinned to a node and a GPU type, then
released; requeue; squeue --json's fields (Slurm 22.05, openapi v0.0.38)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.slurm.local import LocalCluster, LocalClusterError
from hetsched.slurm.processes import daemon_pids, is_alive
from tests.slurm.commands import (
    free_port,
    job_record,
    run_slurm,
    start_pinned,
    submit_held,
    wait_for_state,
)

#: Release to RUNNING (s): slurmctld's background loop runs the scheduler about once a
#: second once an event asks for it (SchedulerParameters=batch_sched_delay=0): 0.2 to
#: 1.0 s seen on an idle machine. This bound only says the job does start (Slurm's own
#: restart delay after a requeue is 120 s); the latency itself is a benchmark's figure
#: (benchmarks/slurm_fidelity.py), never a test's, on a shared machine.
START_LATENCY_S = 30.0


def test_every_node_shows_its_gpu_type_count_cpus_and_memory(cluster: LocalCluster) -> None:
    nodes = {node["name"]: node for node in json.loads(run_slurm(cluster, "sinfo",
                                                                  "--json"))["nodes"]}
    assert sorted(nodes) == ["k80-0", "v100-0", "v100-1"]
    for node in cluster.nodes:
        shown = nodes[node.name]
        assert shown["gres"] == f"gpu:{node.gpu_type}:4"
        assert (shown["cpus"], shown["real_memory"]) == (node.cpus, node.memory_mb)
        assert shown["partitions"] == ["gpu"]
        assert shown["state"] == "idle"
        assert shown["port"] == cluster.node_port(cluster.nodes.index(node))


def test_start_reuses_the_running_cluster(cluster: LocalCluster) -> None:
    pids = cluster.daemon_pids()
    began = time.monotonic()
    assert cluster.start() is False
    assert time.monotonic() - began < 30.0  # no start: it returned without waiting
    assert cluster.daemon_pids() == pids


def test_a_held_job_pinned_to_a_node_and_gpu_type_runs_there_when_released(
        cluster: LocalCluster) -> None:
    # How the agent starts a job (hetsched.slurm.agent): submitted held with no GPU
    # request, then given a GPU type, count and node, then released.
    job = submit_held(cluster, 2, comment='{"hetsched": 1}')
    run_slurm(cluster, "scontrol", "update", f"JobId={job}", "TresPerNode=gres:gpu:k80:2",
              "NodeList=k80-0")
    record = job_record(cluster, job)
    assert (record["job_state"], record["state_reason"], record["priority"]) == \
        ("PENDING", "JobHeldUser", 0)
    assert record["required_nodes"] == "k80-0"
    run_slurm(cluster, "scontrol", "release", job)
    record, latency = wait_for_state(cluster, job, {"RUNNING"})
    print(f"release to RUNNING: {latency:.2f} s")
    assert latency < START_LATENCY_S
    assert record["nodes"] == "k80-0"
    assert record["gres_detail"] == ["gpu:k80:2(IDX:0-1)"]
    assert record["tres_per_node"] == "gres:gpu:k80:2"
    assert record["comment"] == '{"hetsched": 1}'
    started = record["start_time"]
    assert record["submit_time"] <= started <= time.time() + 1
    record, _ = wait_for_state(cluster, job, {"COMPLETED"})
    assert record["exit_code"] == 0
    assert record["start_time"] == started
    assert 1 <= record["end_time"] - started <= 30  # sleep 2, on a machine maybe loaded


def test_a_requeued_job_keeps_its_id_and_waits_for_its_begin_time(
        cluster: LocalCluster) -> None:
    job = submit_held(cluster, 30)
    record = start_pinned(cluster, job, "gres:gpu:1", "v100-1")
    submitted = record["submit_time"]
    run_slurm(cluster, "scontrol", "requeue", job)
    record, _ = wait_for_state(cluster, job, {"PENDING"})
    deadline = time.monotonic() + 30
    while record["state_reason"] == "None" and time.monotonic() < deadline:
        time.sleep(0.1)  # Slurm names the reason at its next pass (seconds when loaded)
        record = job_record(cluster, job)
    # Not held: Slurm would start it again by itself on its pinned node, once its
    # begin time (now + AuthInfo's cred_expire, 120 s) has come.
    assert (record["job_id"], record["restart_cnt"]) == (int(job), 1)
    assert record["state_reason"] == "BeginTime"
    assert record["priority"] > 0
    assert record["eligible_time"] >= time.time() + 100
    assert record["submit_time"] >= submitted  # the requeue's time: keep the first
    assert record["required_nodes"] == "v100-1"


def test_requeuehold_holds_the_job_and_it_moves_to_another_gpu_type(
        cluster: LocalCluster) -> None:
    # How the agent preempts and later restarts a job elsewhere: the GPU request untyped
    # (the node gives the type), requeuehold, re-pinned, StartTime=now (a requeued job
    # may not start before cred_expire otherwise), released.
    job = submit_held(cluster, 30)
    record = start_pinned(cluster, job, "gres:gpu:2", "k80-0")
    assert record["gres_detail"] == ["gpu:k80:2(IDX:0-1)"]
    run_slurm(cluster, "scontrol", "requeuehold", job)
    record, _ = wait_for_state(cluster, job, {"PENDING"})
    assert (record["restart_cnt"], record["priority"]) == (1, 0)
    assert record["state_reason"] == "JobHeldUser"  # as sbatch -H; root asked
    assert record["state_description"] == "job requeued in held state"
    run_slurm(cluster, "scontrol", "update", f"JobId={job}", "TresPerNode=gres:gpu:1",
              "NodeList=v100-0", "StartTime=now")
    run_slurm(cluster, "scontrol", "release", job)
    record, latency = wait_for_state(cluster, job, {"RUNNING"})
    print(f"requeued job, release to RUNNING: {latency:.2f} s")
    assert latency < START_LATENCY_S
    assert (record["nodes"], record["gres_detail"]) == ("v100-0", ["gpu:v100:1(IDX:0)"])
    assert record["job_id"] == int(job)


def test_a_typed_request_cannot_change_gpu_type(cluster: LocalCluster) -> None:
    # Slurm 22.05: once TresPerNode names a type, another type leaves the job pending
    # for good (BadConstraints), even before it ever ran. The agent asks untyped.
    job = submit_held(cluster, 1)
    run_slurm(cluster, "scontrol", "update", f"JobId={job}", "TresPerNode=gres:gpu:k80:1",
              "NodeList=k80-0")
    run_slurm(cluster, "scontrol", "update", f"JobId={job}", "TresPerNode=gres:gpu:v100:1",
              "NodeList=v100-0")
    run_slurm(cluster, "scontrol", "release", job)
    deadline = time.monotonic() + 5.0
    while job_record(cluster, job)["state_reason"] != "BadConstraints":
        assert time.monotonic() < deadline, job_record(cluster, job)
        time.sleep(0.1)
    assert job_record(cluster, job)["job_state"] == "PENDING"


def test_stop_leaves_no_daemon_and_start_again_works(tmp_path: Path) -> None:
    cluster = LocalCluster.from_gpus({"k80": 6}, gpus_per_node=4, state_dir=tmp_path / "c",
                                     port=free_port("restart", 2))
    assert [node.gpus for node in cluster.nodes] == [4, 2]
    try:
        assert cluster.start() is True
        pids = cluster.daemon_pids()
        assert all(pid is not None for pid in pids.values()), pids
        job = submit_held(cluster, 60)
        run_slurm(cluster, "scontrol", "release", job)
        wait_for_state(cluster, job, {"RUNNING"})
        # slurmctld calls the job RUNNING before slurmd has forked its slurmstepd
        # (CI once looked in between), so wait for the step daemon to appear.
        deadline = time.monotonic() + 10.0
        while not (stepd := daemon_pids([], str(cluster.conf_path))):  # its slurmstepd
            assert time.monotonic() < deadline, "no slurmstepd 10 s after RUNNING"
            time.sleep(0.05)
        cluster.stop()
        assert not [pid for pid in [*pids.values(), *stepd] if pid and is_alive(pid)]
        assert not daemon_pids([str(cluster.conf_path), f"--socket={cluster.munge_socket}"],
                               str(cluster.conf_path))
        assert not cluster.is_running()
        assert (cluster.log_dir / "slurmctld.log").stat().st_size > 0
        assert cluster.start() is True
        assert set(cluster.node_states().values()) == {"idle"}
        record = job_record(cluster, job)  # recovered from the saved state
        assert record["job_state"] == "CANCELLED"
    finally:
        cluster.stop()
    assert not cluster.is_running()


def test_a_taken_port_is_named(tmp_path: Path) -> None:
    cluster = LocalCluster.from_gpus({"v100": 4}, state_dir=tmp_path / "c",
                                     port=free_port("taken", 1))
    with socket.socket() as holder:
        holder.bind(("", cluster.node_port(0)))
        holder.listen()
        with pytest.raises(LocalClusterError, match=f"ports taken.*{cluster.node_port(0)}"):
            cluster.start()
    assert not cluster.is_running()


@pytest.mark.parametrize(("gpus", "expected"), [
    ({"v100": 0}, "GPU counts must be >= 1"),
    ({"v1.00": 4}, "GPU type Slurm cannot take"),
    ({"v100": 4 * 65}, "bad number of nodes"),
])
def test_bad_clusters_are_input_errors(gpus: dict[str, int], expected: str) -> None:
    with pytest.raises(InputError, match=expected):
        LocalCluster.from_gpus(gpus)


def test_load_reads_what_start_wrote(cluster: LocalCluster) -> None:
    assert LocalCluster.load(cluster.state_dir) == cluster
    assert cluster.env()["SLURM_CONF"] == str(cluster.state_dir / "slurm.conf")
