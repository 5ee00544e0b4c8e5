"""GPU shares, CPUs and memory: jobs asking for a share of one GPU run on it
together at the co-location speed factor, continue at a new speed when co-runners come
and go, never hold more than the whole GPU; a start must fit the node's CPUs and memory;
the checker verifies all of it; every policy replays a trace with shares."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import pytest

import hetsched
from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.cli.main import main
from hetsched.core.check import check
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.result import Assignment, Schedule
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.policies.rolling import RollingFifo
from tests.helpers import ROOT

P = Placement.PACKED
SAMPLES = ROOT / "tests" / "data" / "traces"
#: One node of one GPU (8 cores, 16 GB) and one of two GPUs (8 cores, 64 GB).
CLUSTER = Cluster((GpuType("t"),), (Node("n0", "t", 1, cpus=8, memory_gb=16.0),
                                    Node("n1", "t", 2, cpus=8, memory_gb=64.0)))
TABLE = ThroughputTable.from_rows([("a", "t", 1, P, 10.0), ("b", "t", 1, P, 20.0),
                                   ("a", "t", 2, P, 18.0)])
#: Half speed beside any co-runner, 0.8 for a beside b (measured).
HALF = CoLocationModel({("t", "a", "b"): 0.8}, default_factor=0.5)


def replay(jobs: list[Job], cluster: Cluster = CLUSTER) -> hetsched.simulate.record.Replay:
    return hetsched.replay(jobs, cluster, RollingFifo(), throughput=TABLE,
                           colocation=HALF).replay


def test_two_shares_run_together_and_the_survivor_speeds_up() -> None:
    # FIFO packs both halves on n0's GPU at 0 s: a at 10 x 0.8 (measured beside b), b at
    # 20 x 0.5 (no measurement of b beside a: the default). b ends at 100 s (1,000 steps
    # at 10/s); a has done 800 of its 1,600 steps and goes on alone at 10/s: 180 s.
    jobs = [Job("A", 0.0, "a", 1, 1600.0, gpu_share=0.5),
            Job("B", 0.0, "b", 1, 1000.0, gpu_share=0.5)]
    outcome = replay(jobs)
    a, b = outcome.records["A"], outcome.records["B"]
    assert (a.gpus, b.gpus) == (("n0/0",), ("n0/0",))
    assert b.finish == pytest.approx(100.0)
    assert a.finish == pytest.approx(180.0)
    # a's two segments: 800 steps beside b, then 800 alone, continued (no restart penalty).
    assert [s.continued for s in a.segments] == [False, True]
    assert [(s.start, s.finish, s.work) for s in a.segments] == [
        pytest.approx((0.0, 100.0, 800.0)), pytest.approx((100.0, 180.0, 800.0))]
    assert a.preemptions == 0
    # GPU-seconds count the share held: half a GPU for 180 s and for 100 s.
    assert (a.gpu_seconds, b.gpu_seconds) == pytest.approx((90.0, 50.0))


def test_a_share_that_does_not_fit_waits_for_its_room() -> None:
    # 0.5 + 0.5 fill n0's GPU; C (0.6) takes a free GPU, n1/0; D (0.5) does not fit
    # the 0.4 left there: n1/1; E (0.4) fits both rooms and takes the tightest, n1/0.
    jobs = [Job("A", 0.0, "a", 1, 100.0, gpu_share=0.5),
            Job("B", 0.0, "a", 1, 100.0, gpu_share=0.5),
            Job("C", 1.0, "a", 1, 100.0, gpu_share=0.6),
            Job("D", 2.0, "a", 1, 100.0, gpu_share=0.5),
            Job("E", 3.0, "a", 1, 100.0, gpu_share=0.4)]
    outcome = replay(jobs)
    placed = {j: (r.gpus, r.first_start) for j, r in outcome.records.items()}
    assert placed == {"A": (("n0/0",), 0.0), "B": (("n0/0",), 0.0), "C": (("n1/0",), 1.0),
                      "D": (("n1/1",), 2.0), "E": (("n1/0",), 3.0)}


def test_a_start_must_fit_the_nodes_cpus_and_memory() -> None:
    # n1 has 2 GPUs but 8 cores: two 1-GPU jobs of 6 cores cannot both run there; n0 has
    # 8 cores and 16 GB, too little memory for the 20 GB job: it waits for n1.
    jobs = [Job("X", 0.0, "a", 1, 100.0, cpus=6.0, memory_gb=20.0),
            Job("Y", 0.0, "a", 1, 100.0, cpus=6.0, memory_gb=20.0),
            Job("Z", 0.0, "a", 1, 100.0, cpus=2.0, memory_gb=8.0)]
    outcome = replay(jobs)
    starts = {j: (r.gpus[0].split("/")[0], r.first_start) for j, r in outcome.records.items()}
    # X on n1 (n0 lacks memory); Y waits (n1 lacks cores, n0 memory) but strict FIFO
    # stops at Y: Z waits too; at 10 s X ends, Y starts on n1, Z on n0.
    assert starts == {"X": ("n1", 0.0), "Y": ("n1", 10.0), "Z": ("n0", 10.0)}


def test_the_checker_finds_overfull_gpus_cpus_and_wrong_sharing_speeds() -> None:
    jobs = (Job("A", 0.0, "a", 1, 800.0, gpu_share=0.6), Job("B", 0.0, "b", 1, 1000.0,
                                                            gpu_share=0.5),
            Job("C", 0.0, "a", 1, 100.0, cpus=6.0), Job("D", 0.0, "a", 1, 100.0, cpus=6.0))
    instance = Instance(CLUSTER, jobs, TABLE, colocation=HALF)
    kinds = {(v.job, v.kind) for v in check(instance, Schedule((
        # 0.6 + 0.5 of n0/0 at once; C and D want 12 cores of n1's 8.
        Assignment("A", "t", ("n0/0",), 0.0, 100.0),
        Assignment("B", "t", ("n0/0",), 0.0, 100.0),
        Assignment("C", "t", ("n1/0",), 0.0, 10.0),
        Assignment("D", "t", ("n1/1",), 0.0, 10.0))))}
    assert ("B", "gpu-share") in kinds
    assert ("D", "node-resources") in kinds
    # Right shares, wrong speed: A runs beside B at 10 x 0.8 = 8/s, so 800 steps take
    # 100 s, not the 80 s of full speed.
    fair = (Job("A", 0.0, "a", 1, 800.0, gpu_share=0.5), Job("B", 0.0, "b", 1, 1000.0,
                                                            gpu_share=0.5))
    instance = Instance(CLUSTER, fair, TABLE, colocation=HALF)
    assert check(instance, Schedule((Assignment("A", "t", ("n0/0",), 0.0, 100.0),
                                     Assignment("B", "t", ("n0/0",), 0.0, 100.0)))) == []
    found = check(instance, Schedule((Assignment("A", "t", ("n0/0",), 0.0, 80.0),
                                      Assignment("B", "t", ("n0/0",), 0.0, 100.0))))
    # (and B, whose co-runner then leaves at 80 s, inside its assignment)
    assert {(v.job, v.kind) for v in found} == {("A", "finish"), ("B", "co-runners")}
    # B leaves half way through A: A's speed changes inside one assignment.
    found = check(instance, Schedule((Assignment("A", "t", ("n0/0",), 0.0, 100.0),
                                      Assignment("B", "t", ("n0/0",), 0.0, 50.0))))
    assert ("A", "co-runners") in {(v.job, v.kind) for v in found}


def test_share_records_are_validated() -> None:
    with pytest.raises(InputError, match="gpu_share"):
        Job("j", 0.0, "a", 2, 10.0, gpu_share=0.5)  # a share is of one GPU
    with pytest.raises(InputError, match="bad gpu_share"):
        Job("j", 0.0, "a", 1, 10.0, gpu_share=1.0)
    assert Job("j", 0.0, "a", 1, 10.0, gpu_share=0.4604).gpu_share == 0.46
    with pytest.raises(InputError, match="bad co-location factor"):
        CoLocationModel(default_factor=0.0)


def test_a_fork_holds_shares_and_gives_them_back() -> None:
    master = FreeGpuIndex(CLUSTER, frozenset(CLUSTER.gpu_by_id))
    half = Job("h", 0.0, "a", 1, 10.0, gpu_share=0.5)
    fork = master.fork()
    fork.take(["n0/0"], half)
    assert (fork.is_free("n0/0"), fork.can_hold(["n0/0"], half)) == (False, True)
    fork.take(["n0/0"], half)
    assert not fork.can_hold(["n0/0"], half)
    fork.release(["n0/0"], half)
    assert not fork.is_free("n0/0")  # the other half still runs there
    fork.release(["n0/0"], half)
    assert fork.is_free("n0/0")
    assert master.is_free("n0/0")  # the master never saw any of it


@pytest.mark.slow
def test_every_policy_replays_openb_with_shares_and_the_checker_agrees(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    pods, nodes = SAMPLES / "openb_g3_pods.csv", SAMPLES / "openb_g3_nodes.csv"
    shared = {}
    for policy in hetsched.names():
        caplog.clear()
        command = ["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
                   "--reference-gpu", "t4", "--gpu-alias", "g3=a100", "--policy", policy,
                   "--out", str(tmp_path / policy)]
        if policy.startswith("max-throughput-per-cost"):
            # openb's GPU types have no price of their own: without --prices the policy
            # stops at its first solve, naming one; with them it runs.
            with pytest.raises(SystemExit) as stopped:
                main(command)
            assert stopped.value.code == 3
            assert "has no price: give one with --prices" in capsys.readouterr().err
            types = parse_cluster(f"openb:{nodes}").type_names
            command += ["--prices", ",".join(f"{name}=1.5" for name in types)]
        with caplog.at_level(logging.WARNING):
            main(command)  # exit 0: the checker passed
        summary = json.loads((tmp_path / policy / "summary.json").read_text())
        assert summary["completed"] == summary["jobs"] == 23
        assert (summary["gpu_share_jobs"], summary["node_resource_jobs"]) == (9, 23)
        with (tmp_path / policy / "jobs.csv").open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        gpus = [row["gpus"] for row in rows if row["num_gpus"] == "1"]
        shared[policy] = len(gpus) - len(set(gpus))
        models = policy in ("deadline", "allox", "topology")
        rounded = [r for r in caplog.records if "GPU shares are rounded up" in r.message]
        assert len(rounded) == (1 if models else 0), policy
    # The baselines and progress put share jobs on GPUs that other jobs used too.
    assert all(shared[p] > 0 for p in ("fifo", "srtf", "gavel", "progress", "tiresias"))


def test_native_traces_carry_shares_cpus_and_memory(tmp_path: Path) -> None:
    from hetsched.files.traces import read_trace, write_native

    jobs = (Job("a", 0.0, "a", 1, 10.0, gpu_share=0.25, cpus=1.5, memory_gb=3.0),
            Job("b", 1.0, "a", 2, 10.0))
    write_native(jobs, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines()[0].endswith(",gpu_share,cpus,memory_gb")
    assert read_trace(tmp_path / "t.csv", "native").jobs == jobs
    # Jobs without any: the columns are not written (files as before).
    write_native(jobs[1:], tmp_path / "u.csv")
    assert (tmp_path / "u.csv").read_text().splitlines()[0].endswith("allowed_gpu_types")


def test_a_pod_no_node_can_hold_is_an_error_or_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import exits_2

    header = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time")
    pods = tmp_path / "pods.csv"
    # The T4 nodes have 32 cores: a 2-GPU pod of 80 cores fits none, packed or spread
    # (2 nodes give 32 cores to 1 GPU each, 40 a GPU are needed).
    pods.write_text(f"{header}\np0,4000,1024,1,1000,,LS,Running,0,100,0\n"
                    "p1,80000,1024,2,1000,T4,LS,Running,5,100,5\n", encoding="utf-8")
    args = ["replay", str(pods), "--format", "openb", "--cluster",
            f"openb:{SAMPLES / 'openb_g3_nodes.csv'}", "--gpu-alias", "g3=a100",
            "--out", str(tmp_path / "o")]
    err = exits_2(args, capsys)
    assert "pods.csv: job p1: no node of its GPU types has the CPUs and memory it needs " \
        "(got '2 GPUs, 80 cores, 1 GB'" in err
    main([*args, "--on-bad-row", "skip"])
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["jobs"], summary["skipped_rows"]) == (1, 1)
    assert "no node of its GPU types has the CPUs and memory it needs: skipped: 1 jobs" \
        in summary["notes"]


def test_a_gang_whose_cpus_no_node_holds_runs_spread_under_progress() -> None:
    # An 8-GPU node of 64 cores and two 4-GPU nodes of 64 cores. The big job asks for 8
    # GPUs and 100 cores: the 8-GPU node has the GPUs but not the cores, so it can only
    # run spread over two nodes (4 GPUs and 50 cores on each), at the spread speed (60,
    # not 80). The policy must see that speed: planning on the packed one it would wait for
    # a placement that never comes (the small job keeps the cluster from being idle, so
    # nothing would rescue it until that job ends at 1,000 s).
    spread = Placement.SPREAD
    cluster = Cluster((GpuType("t"),), (Node("n8", "t", 8, cpus=64, memory_gb=512.0),
                                        Node("m0", "t", 4, cpus=64, memory_gb=512.0),
                                        Node("m1", "t", 4, cpus=64, memory_gb=512.0)))
    table = ThroughputTable.from_rows([("a", "t", 1, P, 10.0), ("a", "t", 8, P, 80.0),
                                       ("a", "t", 8, spread, 60.0)])
    jobs = [Job("small", 0.0, "a", 1, 10_000.0, cpus=4.0),
            Job("big", 0.0, "a", 8, 6_000.0, cpus=100.0)]
    outcome = hetsched.replay(jobs, cluster, "progress", throughput=table)
    big = outcome.replay.records["big"]
    assert big.first_start == 0.0
    assert len({g.split("/")[0] for g in big.gpus}) == 2  # spread: 4 GPUs, 50 cores each
    assert big.finish == pytest.approx(100.0)  # 6,000 steps at 60 steps/s
    assert outcome.summary.fallbacks == 0
