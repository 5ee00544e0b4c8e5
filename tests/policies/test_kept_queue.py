"""The queue kept from decision to decision (hetsched.policies.baselines.kept_queue) and
the bound of the walk over it (hetsched.policies.baselines.guarded): each piece on small
cases worked out by hand, the bound against the test it stands for on random cases."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from hetsched.core.records import Job
from hetsched.files.generate import GeneratorSettings, generate
from hetsched.policies.baselines.kept_queue import FeedReader, KeptOrder, KindIndex
from hetsched.policies.baselines.walk import _threshold, walked_running
from hetsched.policies.rolling import ClusterState, PendingFeed, PendingLog
from tests.policies.test_baselines import one_gpu


def job(name: str, arrival: float = 0.0, work: float = 100.0, gpus: int = 1,
        job_type: str = "cnn") -> Job:
    return Job(name, arrival, job_type, gpus, work)


def state_with(pending: tuple[Job, ...], feed: PendingFeed | None) -> ClusterState:
    cluster, table = one_gpu()
    return ClusterState(now=0.0, cluster=cluster, throughput=table, pending=pending,
                        remaining={}, running=(), free=frozenset(), pending_feed=feed)


def test_a_reader_follows_the_log_and_reads_whole_what_it_cannot_follow() -> None:
    log = PendingLog()
    a, b, c = job("a"), job("b"), job("c")
    reader = FeedReader()
    log.joined(a)
    log.joined(b)
    # The first read has nothing to follow from: whole.
    assert reader.read(state_with((a, b), PendingFeed(log, 2))) is None
    assert list(reader.jobs) == ["a", "b"]
    log.left("a")
    log.joined(c)
    assert reader.read(state_with((b, c), PendingFeed(log, 4))) == [(None, "a"), (c, "c")]
    assert list(reader.jobs) == ["b", "c"]
    # A state derived with other jobs (one left out) but the same feed: read whole.
    assert reader.read(state_with((c,), PendingFeed(log, 4))) is None
    assert list(reader.jobs) == ["c"]
    # No feed (a state made by hand): whole, every time.
    assert reader.read(state_with((b, c), None)) is None
    assert reader.read(state_with((b, c), None)) is None
    # Another replay's log: whole.
    other = PendingLog()
    other.joined(a)
    assert reader.read(state_with((a,), PendingFeed(other, 1))) is None
    assert list(reader.jobs) == ["a"]


def test_a_kept_order_puts_promoted_jobs_first_and_follows_changes() -> None:
    jobs = {name: job(name, arrival=float(i), work=w)
            for i, (name, w) in enumerate([("a", 50.0), ("b", 10.0), ("c", 30.0), ("d", 20.0)])}

    def key(j: Job) -> tuple[float, str]:
        return (j.work, j.id)

    def by_arrival(j: Job) -> tuple[float, str]:
        return (j.arrival, j.id)

    order = KeptOrder()
    order.rebuild([jobs["a"], jobs["b"], jobs["c"]], {"c"}, key, by_arrival,
                  lambda j: j.work)
    # c promoted (front); then by work: b (10), a (50).
    assert [j.id for j in order] == ["c", "b", "a"]
    # b started, d arrived (work 20), a promoted now.
    order.follow([(None, "b"), (jobs["d"], "d")], {"c", "a"}, ["a"],
                 {"a": jobs["a"], "c": jobs["c"], "d": jobs["d"]}, key, by_arrival,
                 lambda j: j.work)
    # Front by arrival: a (0) before c (2); then d.
    assert [j.id for j in order] == ["a", "c", "d"]
    # Only d is not promoted: the one kind holds it alone.
    assert [[j.id for _, j in entries] for entries in order.kinds.by_key.values()] == [["d"]]


def test_a_kind_index_yields_only_jobs_some_rule_of_their_kind_admits_in_key_order() -> None:
    index = KindIndex()
    small = [job(f"s{i}", work=w) for i, w in enumerate([5.0, 50.0, 20.0, 8.0])]
    big = [job(f"b{i}", work=w, gpus=4) for i, w in enumerate([1.0, 2.0])]
    odd = replace(job("x", work=1e9), allowed_nodes=("n0",))  # of no kind
    for rank, j in enumerate([*small, *big, odd]):
        index.add(j, (rank,), j.work)
    small_kind, big_kind = KindIndex.kind(small[0]), KindIndex.kind(big[0])
    assert KindIndex.kind(odd) is None
    # Small jobs up to 20 steps, no big job (no rule admits any): s0 (rank 0), s2 (2),
    # s3 (3), and x always.
    chosen = index.candidates(None, {small_kind: [(20.0, None)], big_kind: []})
    assert [j.id for _, j in chosen] == ["s0", "s2", "s3", "x"]
    # Up to 20 steps below rank 3 (victims' GPUs), or up to 6 steps anywhere (free
    # ones): s0, s2; after rank 0, every big job (no rules given for their kind).
    rules = {small_kind: [(20.0, (3,)), (6.0, None)]}
    assert [j.id for _, j in index.candidates(None, rules)] == ["s0", "s2", "b0", "b1", "x"]
    assert [j.id for _, j in index.candidates((0,), rules)] == ["s2", "b0", "b1", "x"]
    # Any steps below rank 2: s0, s1.
    assert [j.id for _, j in index.candidates(None, {small_kind: [(math.inf, (2,))],
                                                     big_kind: []})] == ["s0", "s1", "x"]
    for name in ("s2", "b0", "b1"):
        index.drop(name)
    assert big_kind not in index.by_key
    assert [j.id for _, j in index.candidates(None, {small_kind: [(100.0, None)]})] == \
        ["s0", "s1", "s3", "x"]


class _Releases:
    def __init__(self, times: dict[str, float]) -> None:
        self.times = times

    def earliest(self, gpu_type: str, count: int) -> float:
        return self.times[gpu_type]


class _Types:
    def __init__(self, times: dict[str, float]) -> None:
        self.releases = _Releases(times)


def worth(speeds: dict[str, float], times: dict[str, float], now: float, steps: float,
          gpu_type: str) -> bool:
    """TypeChoice's test, written out: starting on ``gpu_type`` now finishes no later
    than waiting for any type (with its tolerance)."""
    best = min(times[t] + steps / s for t, s in speeds.items())
    return now + steps / speeds[gpu_type] <= best + 1e-9 * max(1.0, abs(best))


def largest_worth(speeds: dict[str, float], times: dict[str, float], now: float,
                  gpu_type: str) -> float:
    """The largest steps for which starting on ``gpu_type`` is worth it, by bisection
    (``inf`` if it always is): the test is true below a threshold and false above."""
    high = 1e15
    if worth(speeds, times, now, high, gpu_type):
        return math.inf
    low = 0.0
    if not worth(speeds, times, now, low, gpu_type):
        return -math.inf
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if worth(speeds, times, now, middle, gpu_type) \
            else (low, middle)
    return low


def test_the_bound_is_at_least_the_largest_steps_worth_starting_and_barely_more() -> None:
    rng = random.Random(33)
    finite = 0
    for _ in range(3000):
        now = rng.choice([0.0, 1.0, rng.uniform(1e3, 1e7)])
        speeds = dict(sorted({t: rng.choice([rng.uniform(0.1, 100.0), 7.0])
                              for t in ("v100", "p100", "k80")}.items(),
                             key=lambda item: -item[1]))
        times = {t: now if rng.random() < 0.3 else
                 rng.choice([now + rng.uniform(0, 1e5), math.inf, now + 1e-7])
                 for t in speeds}
        gpu_type = rng.choice(list(speeds))
        bound = _threshold(speeds, gpu_type, speeds[gpu_type], 1,
                           _Types(times), now)  # type: ignore[arg-type]
        largest = largest_worth(speeds, times, now, gpu_type)
        # Never below what the test accepts (no job that could start is left out) ...
        assert bound >= largest, (speeds, times, now, gpu_type, bound, largest)
        # ... and only a hair above it (the bound prunes).
        if math.isfinite(largest):
            finite += 1
            assert bound <= largest * 1.01 + 0.01, (bound, largest)
    assert finite > 1000


def test_first_key_is_the_smallest_waiting_key_and_the_walk_starts_there() -> None:
    rng = random.Random(5)
    jobs = [job(f"j{i}", arrival=float(i), work=rng.uniform(1, 100)) for i in range(40)]
    order = KeptOrder()
    promoted = {j.id for j in jobs[::7]}

    def key(j: Job) -> tuple[int, float, str]:
        return (1, j.work, j.id)

    def front(j: Job) -> tuple[int, float, str]:
        return (0, j.arrival, j.id)

    order.rebuild(jobs, promoted, key, front, lambda j: j.work)
    assert order.first_key() == (0, 0.0, "j0")  # j0 is promoted, the first to arrive
    order.rebuild(jobs[1:7], set(), key, front, lambda j: j.work)
    assert order.first_key() == min(key(j) for j in jobs[1:7])
    first = order.first_key()
    # Running jobs below every waiting key are left out; the rest come sorted.
    running = [((1, rng.uniform(1, 100), f"r{i}"), job(f"r{i}")) for i in range(30)]
    walked = walked_running(order, running)
    assert [k for k, _ in walked] == sorted(k for k, _ in running if k >= first)
    assert 0 < len(walked) < len(running)  # (the draw has both)
    order.rebuild([], set(), key, front, lambda j: j.work)
    assert order.first_key() is None
    assert walked_running(order, running) == sorted(running, key=lambda item: item[0])


@pytest.mark.parametrize("name", ["tiresias", "gandiva", "srtf"])
def test_leaving_out_running_jobs_before_every_waiting_one_decides_the_same(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A busy cluster (a job every 30 s, 6 GPUs) where these policies preempt: the
    # replay is the same, record for record, with every running job walked.
    from hetsched import registry
    from hetsched.policies.baselines import duration, gandiva, tiresias
    from hetsched.simulate.simulator import Simulator

    instance = generate(GeneratorSettings(jobs=150, gpus={"v100": 2, "k80": 4}, seed=3,
                                          gpus_per_node=2, mean_interarrival_s=30.0))

    def run() -> list[tuple[object, ...]]:
        replay = Simulator(instance.cluster, instance.jobs, registry.rolling(name),
                           truth=instance.throughput).run()
        return [(r.job.id, r.first_start, r.finish, r.preemptions, r.gpu_types)
                for r in replay.records.values()]

    trimmed = run()
    for module in (duration, gandiva, tiresias):
        monkeypatch.setattr(module, "walked_running",
                            lambda order, running: sorted(running, key=lambda i: i[0]))
    assert run() == trimmed
    assert sum(preemptions for *_, preemptions, _ in trimmed) > 0  # (they preempt here)
