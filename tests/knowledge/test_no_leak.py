"""Under ``--knowledge estimate`` and ``none`` nothing of a job's true work reaches the
policy before it finishes (issue 64): two replays that differ only in one job's work are
the same replay until that job finishes, guesses included, and a policy that writes down
every figure it is shown never sees the true work, only the guess and twice what was done."""

from __future__ import annotations

import dataclasses

import pytest

from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.knowledge import HistoryEstimator, KnowledgeView
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RollingFifo
from hetsched.registry import rolling
from hetsched.replaying import replay
from hetsched.simulate.record import DecisionLog, Replay
from hetsched.simulate.simulator import Simulator

#: one node of two V100s
CLUSTER = parse_cluster("v100=2")
#: type a: 2 steps/s on one GPU, 3 on two; type b: 1 and 1.8
TABLE = ThroughputTable({("a", "v100", 1, Placement.PACKED): 2.0,
                         ("b", "v100", 1, Placement.PACKED): 1.0,
                         ("a", "v100", 2, Placement.PACKED): 3.0,
                         ("b", "v100", 2, Placement.PACKED): 1.8})
#: x and p start at once; x (200 steps of a at 2/s) finishes at 100 s, at 200 s when its
#: work is twice as large; q and r arrive before that, s and t after, w much later.
JOBS = (Job("x", 0.0, "a", 1, 200.0, user="u1"), Job("p", 0.0, "b", 1, 1000.0, user="u2"),
        Job("q", 10.0, "b", 1, 300.0, user="u1"), Job("r", 50.0, "a", 2, 600.0, user="u2"),
        Job("s", 150.0, "a", 1, 100.0, user="u1"), Job("t", 400.0, "a", 1, 50.0, user="u3"),
        Job("w", 2000.0, "b", 2, 900.0, user="u2"))


def estimated(policy: str, x_work: float) -> tuple[Replay, KnowledgeView]:
    """The replay of :data:`JOBS`, x's work set to ``x_work``, under ``policy`` shown the
    history's estimates; and the view (its guesses)."""
    jobs = [dataclasses.replace(j, work=x_work) if j.id == "x" else j for j in JOBS]
    view = KnowledgeView(CLUSTER, TABLE, HistoryEstimator())
    ran = Simulator(CLUSTER, jobs, rolling(policy), truth=TABLE, knowledge=view).run()
    return ran, view


@pytest.mark.parametrize("policy", ["srtf", "qssf", "sjf", "tiresias", "progress", "fifo"])
def test_one_jobs_true_work_changes_nothing_before_it_finishes(policy: str) -> None:
    (short, short_view), (long, long_view) = estimated(policy, 200.0), estimated(policy, 400.0)
    # x runs from 0 in both: it finishes at 100 s (200 steps at 2/s) or at 200 s.
    assert (short.records["x"].finish, long.records["x"].finish) == (100.0, 200.0)
    # Every job arriving before 100 s (x, p, q, r) was guessed at the prior, 3600 ideal
    # s x its fastest speed (a: 2/s on one GPU, 3/s on two; b: 1/s), in both replays;
    # x's own guess too: it never reads x's work.
    for view in (short_view, long_view):
        early = {k: view.guessed[k] for k in ("x", "p", "q", "r")}
        assert early == {"x": 7200.0, "p": 3600.0, "q": 3600.0, "r": 10800.0}
        assert {view.levels[k] for k in early} == {"prior"}
    # Until 100 s the two replays are one: the same decisions, the same runs started.
    def before(ran: Replay) -> tuple[list[DecisionLog], list[tuple[str, float, tuple[str, ...]]]]:
        decisions = [dataclasses.replace(d, decision_time_s=0.0) for d in ran.decisions
                     if d.time < 100.0]
        starts = sorted((r.job.id, s.start, s.gpus) for r in ran.records.values()
                        for s in r.segments if s.start < 100.0)
        return decisions, starts
    assert before(short) == before(long)
    decisions, starts = before(short)
    assert [d.time for d in decisions] == [0.0, 10.0, 50.0]  # x and p start, q, r arrive
    assert [(job, start) for job, start, _ in starts] == [("p", 0.0), ("x", 0.0)]
    # After x finished the history differs, as it should: s (u1's a on one GPU, at 150
    # s) is guessed from x's 100 ideal s (the geometric mean of one job; x 2/s = 200
    # steps, to 1e-12: exp(log(100)) x 2 = 200.00000000000009) where x finished first;
    # in the other replay nothing has finished by 150 s: the prior, 7200 steps.
    assert short_view.guessed["s"] == pytest.approx(200.0, rel=1e-12)
    assert short_view.levels["s"] == "owner-type-gpus"
    assert (long_view.guessed["s"], long_view.levels["s"]) == (7200.0, "prior")


#: the job whose true work the policy must never see
SECRET = 7777.0


class Recorder(PolicyHooks):
    """FIFO every 1,000 s that writes down each figure it is shown of job "big": its work
    and steps left, pending and running, its work in ``held()``, and in ``on_finished``;
    it preempts big once at its first decision from 3,000 s where big runs (so big waits
    with some work done) and starts it again at the next."""

    name = "recorder"
    round_s = 1000.0

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, float, float | None]] = []
        self.preempted = False

    def decide(self, state: ClusterState) -> Decision:
        for job in state.pending:
            if job.id == "big":
                self.seen.append((state.now, "pending", job.work, state.remaining[job.id]))
        for run in state.running:
            if run.job.id == "big":
                self.seen.append((state.now, "running", run.job.work, run.remaining))
        for job_id, held in state.held().items():
            if job_id == "big":
                self.seen.append((state.now, "held", held.job.work, None))
        if state.now >= 3000.0 and not self.preempted and any(
                run.job.id == "big" for run in state.running):
            self.preempted = True
            return Decision((), ("big",))
        return RollingFifo().decide(state)

    def on_finished(self, job: Job, now: float) -> None:
        if job.id == "big":
            self.seen.append((now, "finished", job.work, None))


#: warm (u's b, 500 steps at 1/s) runs 0-500 s and other (a, 20,000 steps at 2/s)
#: 0-10,000 s on the two GPUs; big (u's b, 7,777 steps) arrives at 1,000 s and starts
#: at once; preempted at 3,000 s (2,000 steps done), started again at 4,000 s, it
#: restores for 30 s and finishes at 4,030 + 5,777 = 9,807 s.
RECORDED_JOBS = (Job("warm", 0.0, "b", 1, 500.0, user="u"),
                 Job("other", 0.0, "a", 1, 20000.0, user="v"),
                 Job("big", 1000.0, "b", 1, SECRET, user="u"))


def shown(knowledge: str) -> tuple[Recorder, Replay]:
    policy = Recorder()
    ran = replay(RECORDED_JOBS, CLUSTER, policy, throughput=TABLE, knowledge=knowledge).replay
    return policy, ran


def running(now: float, work: float, left: float) -> list[tuple[float, str, float, float | None]]:
    """What the recorder writes at ``now`` of big running: itself, then in ``held()``."""
    return [(now, "running", work, left), (now, "held", work, None)]


def test_the_recorder_sees_the_truth_under_truth() -> None:
    policy, ran = shown("truth")
    assert [(s.start, s.finish) for s in ran.records["big"].segments] == \
        [(1000.0, 3000.0), (4000.0, 9807.0)]
    # steps done: 1,000 by 2,000 s, 2,000 at the preemption, 2,970 by 5,000 s (30 s of
    # restoring), then 1,000 more every 1,000 s
    assert policy.seen == [
        (1000.0, "pending", SECRET, SECRET), *running(2000.0, SECRET, 6777.0),
        *running(3000.0, SECRET, 5777.0), (4000.0, "pending", SECRET, 5777.0),
        *running(5000.0, SECRET, 4807.0), *running(6000.0, SECRET, 3807.0),
        *running(7000.0, SECRET, 2807.0), *running(8000.0, SECRET, 1807.0),
        *running(9000.0, SECRET, 807.0), (9807.0, "finished", SECRET, None)]


def test_the_estimate_shows_the_guess_from_history_never_the_truth() -> None:
    policy, ran = shown("estimate")
    # the same runs: the recorder is FIFO, blind to the work
    assert [(s.start, s.finish) for s in ran.records["big"].segments] == \
        [(1000.0, 3000.0), (4000.0, 9807.0)]
    # big's guess: u's b on one GPU finished in 500 ideal s (warm; the geometric mean of
    # one job, to 1e-12: exp(log(500)) = 499.99999999999983) x 1 step/s = 500 steps;
    # shown total max(500, 2 done), remaining max(500 - done, done): done 1,000 at 2,000
    # s, 2,000 at 3,000 s and 4,000 s (preempted), 2,970 at 5,000 s (30 s of restoring),
    # 1,000 more every 1,000 s; at the finish 7,777 done: 15,554. (Only the first figures
    # are the guess; from 2,000 s on they are twice or once what was done: exact.)
    guess = pytest.approx(500.0, rel=1e-12)
    assert policy.seen == [
        (1000.0, "pending", guess, guess), *running(2000.0, 2000.0, 1000.0),
        *running(3000.0, 4000.0, 2000.0), (4000.0, "pending", 4000.0, 2000.0),
        *running(5000.0, 5940.0, 2970.0), *running(6000.0, 7940.0, 3970.0),
        *running(7000.0, 9940.0, 4970.0), *running(8000.0, 11940.0, 5970.0),
        *running(9000.0, 13940.0, 6970.0), (9807.0, "finished", 15554.0, None)]
    assert SECRET not in {figure for seen in policy.seen for figure in seen[2:]}
    estimates = ran.estimates
    assert estimates is not None
    assert estimates["levels"] == {"owner-type-gpus": 1, "prior": 2}


def test_with_no_knowledge_every_guess_is_the_prior() -> None:
    policy, _ = shown("none")
    # 3600 ideal s x 1 step/s: 3,600 shown until 1,800 steps are done, then twice what
    # was done (done 1,000 at 2,000 s, 2,000 at 3,000 s, 2,970 at 5,000 s, ...; 7,777
    # at the finish: 15,554)
    assert policy.seen == [
        (1000.0, "pending", 3600.0, 3600.0), *running(2000.0, 3600.0, 2600.0),
        *running(3000.0, 4000.0, 2000.0), (4000.0, "pending", 4000.0, 2000.0),
        *running(5000.0, 5940.0, 2970.0), *running(6000.0, 7940.0, 3970.0),
        *running(7000.0, 9940.0, 4970.0), *running(8000.0, 11940.0, 5970.0),
        *running(9000.0, 13940.0, 6970.0), (9807.0, "finished", 15554.0, None)]
    assert SECRET not in {figure for seen in policy.seen for figure in seen[2:]}


def test_a_job_unplaceable_at_its_requested_count_is_not_guessed_at_its_work() -> None:
    # Two nodes of two V100s and no spread speed: a 4-GPU gang cannot run, but the
    # elastic job may run on 2 (so the replay takes it). Two such jobs that differ only
    # in their work must get the same guess.
    cluster = Cluster((GpuType("v100"),), (Node("n0", "v100", 2), Node("n1", "v100", 2)))
    view = KnowledgeView(cluster, TABLE, HistoryEstimator())
    one = view.arrived(Job("e1", 0.0, "a", 4, SECRET, allowed_gpu_counts=(2, 4)))
    other = view.arrived(Job("e2", 0.0, "a", 4, 2 * SECRET, allowed_gpu_counts=(2, 4)))
    assert one.work == other.work
