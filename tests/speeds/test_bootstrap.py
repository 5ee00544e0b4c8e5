"""Sia's bootstrap (hetsched.speeds.bootstrap and ``--learn bootstrap``): an elastic job
type is known on one GPU of each type, on a type it ran on up to twice the most GPUs it
ran on, elsewhere projected by its one-GPU ratio; rigid types see the truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import Placement
from hetsched.simulate.learning import BootstrapLearner, learner_of
from hetsched.speeds.bootstrap import BootstrapThroughput

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD
E, R = "e (elastic)", "r (batch size 8)"


class Truth:
    """steps/s on types ``a`` (nodes of 4) and ``b`` (nodes of 8): ``e`` runs at
    10 n^0.9 on a and 3 n on b (on b at most 4 GPUs: out of memory beyond); a gang
    larger than a node is spread. After half its work (done >= 50) every speed halves;
    over a horizon the mean is the speed (test values only)."""

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        per_node = {"a": 4, "b": 8}.get(gpu_type)
        if per_node is None or (placement is PACKED) != (num_gpus <= per_node):
            return 0.0
        if job_type == E:
            return 10.0 * num_gpus ** 0.9 if gpu_type == "a" else \
                3.0 * num_gpus if num_gpus <= 4 else 0.0
        return 7.0 * num_gpus if job_type == R else 0.0

    def throughput_after(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float) -> float:
        speed = self.throughput(job_type, gpu_type, num_gpus, placement)
        return speed / 2 if done >= 50 else speed

    def throughput_ahead(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float, horizon_s: float) -> float:
        return self.throughput_after(job_type, gpu_type, num_gpus, placement, done)

    def speed_change_after(self, job_type: str, done: float) -> float | None:
        return 50.0 if done < 50 else None


def test_before_any_run_one_gpu_of_each_type_at_its_profiled_speed() -> None:
    known = BootstrapThroughput(Truth(), frozenset({E}))
    assert known.limit(E) == 1
    assert known.throughput(E, "a", 1, PACKED) == 10.0
    assert known.throughput(E, "b", 1, PACKED) == 3.0
    # Sia's max_replicas: max(2 x 0, 1) = 1 before the job type ran anywhere.
    assert known.throughput(E, "a", 2, PACKED) == 0.0
    # A rigid job type is profiled where it asks to run: the truth.
    assert known.throughput(R, "a", 4, PACKED) == 28.0
    assert known.throughput(R, "b", 8, PACKED) == 56.0
    # The epochs are the truth's (the job measures its gradients as it trains).
    assert known.speed_change_after(E, 10.0) == 50.0
    assert known.throughput_after(E, "b", 1, PACKED, 60.0) == 1.5


def test_a_run_teaches_its_type_and_twice_its_count() -> None:
    first = BootstrapThroughput(Truth(), frozenset({E}))
    known = first.learn(E, "a", 2)
    assert known is not first  # (frozen: a new model)
    assert first.limit(E) == 1
    assert known.learn(E, "a", 1) is known  # nothing new: the same object
    assert known.learn(R, "a", 8) is known  # rigid types learn nothing
    assert known.limit(E) == 4
    # On a: the truth up to 4 GPUs, 0 beyond.
    assert known.throughput(E, "a", 4, PACKED) == pytest.approx(10.0 * 4 ** 0.9)
    assert known.throughput(E, "a", 8, SPREAD) == 0.0
    # On b (not run there): a's speed at the count times the one-GPU ratio 3 / 10.
    assert known.throughput(E, "b", 2, PACKED) == pytest.approx(10.0 * 2 ** 0.9 * 0.3)
    assert known.throughput(E, "b", 4, PACKED) == pytest.approx(10.0 * 4 ** 0.9 * 0.3)
    # Where the truth says the job cannot run, 0 (b's memory), and a placement b's
    # nodes do not have (4 GPUs spread on nodes of 8) likewise.
    assert known.throughput(E, "b", 4, SPREAD) == 0.0
    # After its epoch, the projection follows a's epoch too.
    assert known.throughput_after(E, "b", 2, PACKED, 60.0) == pytest.approx(
        10.0 * 2 ** 0.9 * 0.3 / 2)
    assert known.throughput_ahead(E, "b", 2, PACKED, 0.0, 600.0) == pytest.approx(
        10.0 * 2 ** 0.9 * 0.3)
    # 8 GPUs run on a (spread: a's nodes have 4): the limit is 16, on b 4 at most (the
    # truth's 0 at 8), and on b projected from a's 8 GPUs where b may run them.
    wide = known.learn(E, "a", 8)
    assert wide.limit(E) == 16
    assert wide.throughput(E, "b", 8, PACKED) == 0.0
    # Once b ran, b's own truth: 3 n.
    both = wide.learn(E, "b", 1)
    assert both.limit(E) == 16
    assert both.throughput(E, "b", 4, PACKED) == 12.0


def test_a_run_teaches_only_once_it_made_progress() -> None:
    jobs = [Job("j1", 0.0, E, 1, 100.0, allowed_gpu_counts=(1, 2, 4, 8)),
            Job("j2", 0.0, R, 2, 100.0)]
    learner = BootstrapLearner(Truth(), jobs)
    assert learner.known.elastic == {E}
    before = learner.model(jobs)
    learner.started(jobs[0], "a", ("a0", "a1"), now=0.0, resume=50.0, left=100.0)
    learner.observe("j1", 50.0, 100.0)  # at its resume: nothing yet
    assert learner.model(jobs) is before
    learner.observe("j1", 60.0, 90.0)
    assert learner.model(jobs).throughput(E, "a", 4, PACKED) > 0
    learner.ended("j1", 70.0, 80.0)
    # A run preempted during its restore teaches nothing.
    learner.started(jobs[0], "b", ("b0",) * 4, now=80.0, resume=130.0, left=80.0)
    learner.ended("j1", 100.0, 80.0)
    assert learner.known.ran[E] == {"a"}
    assert learner.learned is None


def test_bootstrap_is_for_elastic_jobs_only() -> None:
    assert ReplaySettings(elastic=True, learn="bootstrap").learn == "bootstrap"
    with pytest.raises(InputError, match="elastic"):
        ReplaySettings(learn="bootstrap")
    with pytest.raises(InputError, match="learned throughput table"):
        ReplaySettings(elastic=True, learn="catalogue")
    assert learner_of("off", None, [], Truth(), None) is None  # type: ignore[arg-type]


def _runs(records: object) -> list[tuple[str, str, int, float, float]]:
    """Each run (a start and the segments continuing it): job type, GPU type, GPUs,
    start, end."""
    runs: list[tuple[str, str, int, float, float]] = []
    for record in records.values():  # type: ignore[attr-defined]
        for segment in record.segments:
            if segment.continued:
                job_type, gpu_type, count, start, _ = runs[-1]
                runs[-1] = (job_type, gpu_type, count, start, segment.finish)
            else:
                runs.append((record.job.job_type, segment.gpu_type, len(segment.gpus),
                             segment.start, segment.finish))
    return runs


def _checked_growth(runs: list[tuple[str, str, int, float, float]], latency: float) -> int:
    """Every run of a job type had at most twice the most GPUs of any run of its type
    that had made progress before it started (1 GPU when none had): the runs checked."""
    checked = 0
    for job_type in {r[0] for r in runs}:
        mine = sorted((r for r in runs if r[0] == job_type), key=lambda r: r[3])
        for _, _, count, start, _ in mine:
            taught = [c for _, _, c, s, end in mine if s + latency < start and end > s + latency]
            assert count <= max(1, 2 * max(taught, default=0)), (job_type, start, count)
            checked += 1
    return checked


def test_a_sia_workload_grows_each_job_type_as_it_learns(tmp_path: Path) -> None:
    import hetsched
    from hetsched.registry import rolling
    from tests.helpers import ROOT

    sia = ROOT / "tests" / "data" / "sia"
    workload = tmp_path / "workloads" / "saturn" / "workload-1.csv"
    workload.parent.mkdir(parents=True)
    (tmp_path / "traces").symlink_to(sia / "traces")
    # Eight toy jobs a minute apart: the first runs on one GPU, the later ones grow as
    # their type learns (the toy is measured on 1 and 2 GPUs of a node, and 2 nodes).
    workload.write_text("name,time,application,num_replicas,batch_size\n" + "".join(
        f"toy-{k},{60 * k},toy,1,10\n" for k in range(8)))
    runs = {}
    for learn in ("off", "bootstrap"):
        settings = ReplaySettings(elastic=True, learn=learn, start_latency_s=50.0,
                                  restart_penalty_s=0.0)
        policy = rolling("progress-elastic", **settings.policy_arguments(),
                         restart_penalty_s=50.0)
        result = hetsched.replay_trace(workload, "sia", "aws=8x4,rtx=8x8", policy,
                                       settings=settings)
        assert all(r.finish is not None for r in result.replay.records.values())
        runs[learn] = _runs(result.replay.records)
    # With the truth the first job starts on more than one GPU: the check can fail.
    first = min(runs["off"], key=lambda r: r[3])
    assert first[2] > 1
    with pytest.raises(AssertionError):
        _checked_growth(runs["off"], 50.0)
    first = min(runs["bootstrap"], key=lambda r: r[3])
    assert first[2] == 1
    assert _checked_growth(runs["bootstrap"], 50.0) == len(runs["bootstrap"]) >= 8
