"""Gandiva's packing of one-GPU jobs at measured pair speeds and its migration of spread
gangs (hetsched.policies.baselines.gandiva): hand-built replays whose times are derived in
the comments, and random mixed traces. replay() runs the independent checker on what ran
and raises on any violation (a packed pair on a busy GPU, a packed job at the wrong
speed)."""

from __future__ import annotations

import itertools

import pytest

import hetsched
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.policies.baselines.gandiva import Gandiva
from hetsched.simulate.record import Replay
from tests.policies.test_packed_replays import CLUSTER, random_case

SETTINGS = ReplaySettings(restart_penalty_s=30.0)
ONE_GPU = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
#: Kinds ``a`` and ``c`` at 1 step/s on the one GPU.
TABLE = ThroughputTable.from_rows([("a", "v100", 1, Placement.PACKED, 1.0),
                                   ("c", "v100", 1, Placement.PACKED, 1.0)])


def pairs(same: float) -> CoLocationModel:
    """Two ``a`` jobs at ``same`` each beside the other; ``a`` beside ``c`` at 0.5 and
    ``c`` beside ``a`` at 0.4 (combined 0.9: never worth packing)."""
    return CoLocationModel({("v100", "a", "a"): same, ("v100", "a", "c"): 0.5,
                            ("v100", "c", "a"): 0.4})


def run(jobs: list[Job], policy: Gandiva, colocation: CoLocationModel,
        cluster: Cluster = ONE_GPU, table: ThroughputTable = TABLE) -> Replay:
    return hetsched.replay(jobs, cluster, policy, throughput=table, colocation=colocation,
                           settings=SETTINGS).replay


def jcts(ran: Replay) -> dict[str, float]:
    return {job_id: record.finish - record.job.arrival
            for job_id, record in ran.records.items() if record.finish is not None}


THREE = [Job("A", 0.0, "a", 1, 300.0), Job("B", 10.0, "a", 1, 300.0),
         Job("C", 20.0, "c", 1, 50.0)]


def test_gandiva_packs_the_pair_worth_packing_and_time_slices_it_as_one() -> None:
    # Quantum 100 s, restart 30 s, a beside a: 0.8 + 0.8 = 1.6; a beside c: 0.9 (never).
    # 0: A alone. 100: A is due; B (waited longest) takes its GPU; C has no GPU; A is
    # packed back beside B (1.6) rather than C (0.9): B from 100, A resumes at 130, each
    # at 0.8. 200: the pair has had its quantum; C takes the GPU and both are suspended
    # (B did 80, 220 left; A did 100 + 56, 144 left); C beside neither (0.9). 250: C done
    # (50 steps); A (last ran at 200 like B, arrived first) starts and B is packed beside
    # it, both resume at 280 at 0.8: A needs 180 s, done at 460; B has then done 144 and
    # runs its last 76 alone at full speed: 536. JCTs: A 460, B 526, C 230.
    ran = run(THREE, Gandiva(quantum_s=100.0), pairs(0.8))
    assert jcts(ran) == pytest.approx({"A": 460.0, "B": 526.0, "C": 230.0})
    records = ran.records
    assert (records["A"].preemptions, records["B"].preemptions,
            records["C"].preemptions) == (2, 1, 0)

    def spans(job_id: str) -> list[tuple[float, float, bool]]:
        return [(s.start, s.finish, s.packed) for s in records[job_id].segments
                if s.finish > s.start]  # (not the instant B's partner left at 200)

    assert spans("A") == [(0.0, 100.0, False), (100.0, 200.0, True), (250.0, 460.0, True)]
    assert spans("B") == [(100.0, 200.0, True), (250.0, 460.0, True),
                          (460.0, 536.0, True)]  # (alone from 460, still holding half)
    assert spans("C") == [(200.0, 250.0, False)]


def test_gandiva_never_packs_a_pair_whose_combined_rate_is_at_most_1() -> None:
    # a beside a at 0.5 + 0.5 = 1.0: packing would do no more than time slicing, so the
    # replay is the time-slicing one, job for job.
    packed = run(THREE, Gandiva(quantum_s=100.0), pairs(0.5))
    plain = run(THREE, Gandiva(quantum_s=100.0, packing=False, migration=False), pairs(0.5))
    assert jcts(packed) == jcts(plain)
    assert not any(s.packed for r in packed.records.values() for s in r.segments)
    # Without measured pairs, the same.
    assert jcts(run(THREE, Gandiva(quantum_s=100.0), CoLocationModel())) == jcts(plain)


def test_gandiva_joins_a_packed_job_left_alone() -> None:
    # Three a jobs (pairs at 0.8), quantum 100 s, restart 30 s. 0: A (120 steps) alone.
    # 100: A is due (20 left); B takes its GPU and C, still waiting, is packed beside it
    # (joiners tie at 1.6: the waiting one first); A is suspended. 200: B and C have had
    # their quantum (80 done each, 220 left); A takes the GPU, B is packed back beside it
    # (the pair's earlier member), C waits; both resume at 230. 255: A done (20 steps at
    # 0.8); B is alone on its GPU and C joins it there (no restart for B): from 255 B runs
    # at 0.8 with 200 left, done at 505; C resumes at 285 with 220 left at 0.8, has done
    # 176 at 505 and its last 44 alone: 549. JCTs: A 255, B 495, C 529.
    jobs = [Job("A", 0.0, "a", 1, 120.0), Job("B", 10.0, "a", 1, 300.0),
            Job("C", 20.0, "a", 1, 300.0)]
    ran = run(jobs, Gandiva(quantum_s=100.0), pairs(0.8))
    assert jcts(ran) == pytest.approx({"A": 255.0, "B": 495.0, "C": 529.0})
    # B's runs: packed at 100 and again at 200 (restarts), continued at 255 beside C.
    assert [(s.start, s.finish, s.continued) for s in ran.records["B"].segments] == [
        (100.0, 200.0, False), (200.0, 255.0, False), (255.0, 505.0, True)]


def test_gandiva_migrates_a_spread_gang_onto_a_node_that_frees() -> None:
    # Three nodes of two V100s; 1 step/s on one GPU, 2 on two of one node, 1 on two
    # spread. At 0 six one-GPU jobs fill them (a, b on n0; c, d on n1; e, f on n2). G (two
    # GPUs, 400 steps) arrives at 10 and waits. 50: a and c end; G starts spread over n0
    # and n1 (no node has two free). 150: e and f end, n2 is free, but only a quantum
    # boundary migrates. 200: G (150 done, 250 left) moves to n2: resumes at 230 at 2
    # steps/s, done at 355 (JCT 345). Without migration: 50 + 400 = 450 (JCT 440).
    cluster = Cluster((GpuType("v100"),), tuple(Node(f"n{k}", "v100", 2) for k in range(3)))
    table = ThroughputTable.from_rows([("x", "v100", 1, Placement.PACKED, 1.0),
                                       ("x", "v100", 2, Placement.PACKED, 2.0),
                                       ("x", "v100", 2, Placement.SPREAD, 1.0)])
    jobs = [Job(name, 0.0, "x", 1, work) for name, work in
            zip("abcdef", (50.0, 1000.0, 50.0, 1000.0, 150.0, 150.0), strict=True)]
    jobs.append(Job("g", 10.0, "x", 2, 400.0))
    ran = run(jobs, Gandiva(quantum_s=100.0), CoLocationModel(), cluster, table)
    record = ran.records["g"]
    assert record.finish == pytest.approx(355.0)
    assert record.preemptions == 1
    nodes = {gpu.id: gpu.node for gpu in cluster.gpus}
    assert [(s.start, sorted({nodes[g] for g in s.gpus})) for s in record.segments] == [
        (50.0, ["n0", "n1"]), (200.0, ["n2"])]
    still = run(jobs, Gandiva(quantum_s=100.0, migration=False), CoLocationModel(), cluster,
                table)
    assert still.records["g"].finish == pytest.approx(450.0)
    assert jcts(still) | {"g": 345.0} == jcts(ran)  # (no other job moved)


def test_gandiva_replays_random_traces_through_the_checker() -> None:
    # random_case: 24 jobs of one and two GPUs on two nodes of t and one of u, random
    # measured pairs (0.3 to 0.95 each way, some unmeasured).
    seeds_packed = 0
    for seed in range(6):
        jobs, table, colocation = random_case(seed)
        ran = hetsched.replay(jobs, CLUSTER, Gandiva(), throughput=table,
                              colocation=colocation, settings=SETTINGS)
        assert ran.summary.completed == len(jobs)
        packed = [s for r in ran.replay.records.values() for s in r.segments if s.packed]
        assert all(len(s.gpus) == 1 for s in packed)
        seeds_packed += bool(packed)
        kind = {job.id: job.job_type for job in jobs}
        for one, two in itertools.combinations(packed, 2):  # never a pair at or below 1
            if one.gpus == two.gpus and one.job != two.job and \
                    min(one.finish, two.finish) - max(one.start, two.start) > 1e-6:
                rate = colocation.combined(one.gpu_type, kind[one.job], kind[two.job])
                assert rate is not None
                assert rate > 1.0
    assert seeds_packed >= 4
