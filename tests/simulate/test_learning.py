"""Throughputs learned in a replay (``--learn``, :mod:`hetsched.simulate.learning`): each
run observed from its resume (no restore time), at every decision and when it ends; the
policy plans with the learned table; the jobs still run at the truth; what was learned
written beside the replay; the setting recorded and checked."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from hetsched.bench.spec import load_sweep
from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.generate import catalogue_table
from hetsched.registry import rolling
from hetsched.replaying import check_replay
from hetsched.simulate.learning import RunLearner
from hetsched.simulate.simulator import Simulator
from hetsched.speeds.learned import LearnedThroughput
from tests.helpers import ROOT, engine_trace, exits_2

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD
#: Two job types on V100s and K80s, 1 or 2 GPUs, packed or spread (2 GPUs on two nodes)
TRUTH = ThroughputTable.from_rows([
    (job, gpu, count, placement, speed * count * (0.8 if placement is SPREAD else 1.0))
    for job, per_gpu in (("a", {"v100": 4.0, "k80": 1.0}), ("b", {"v100": 2.0, "k80": 1.5}))
    for gpu, speed in per_gpu.items() for count in (1, 2)
    for placement in ((PACKED,) if count == 1 else (PACKED, SPREAD))])
#: 2 nodes of 2 V100s, 1 of 2 K80s
CLUSTER = Cluster((GpuType("v100"), GpuType("k80")),
                  (Node("v1", "v100", 2), Node("v2", "v100", 2), Node("k1", "k80", 2)))


def workload(seed: int, jobs: int = 24) -> list[Job]:
    """Jobs of both types on 1 or 2 GPUs arriving within a few hours, long and short
    mixed, so that srtf preempts (a short job arrives while long ones hold the GPUs)."""
    draw = random.Random(seed)
    return [Job(f"j{i}", round(draw.uniform(0, 4 * 3600)), draw.choice("ab"),
                draw.choice((1, 1, 2)), draw.choice((2_000.0, 20_000.0, 80_000.0)))
            for i in range(jobs)]


def learning_replay(jobs: list[Job], prior: ThroughputTable | None, policy: str = "srtf"
                    ) -> tuple[Simulator, RunLearner]:
    learner = RunLearner(LearnedThroughput(prior, CLUSTER.type_names), TRUTH, CLUSTER)
    return Simulator(CLUSTER, jobs, rolling(policy), truth=TRUTH, learner=learner), learner


def test_a_run_is_observed_from_its_resume_and_a_steady_speed_changes_nothing() -> None:
    learner = RunLearner(LearnedThroughput(None, ["v100"]), TRUTH, CLUSTER)
    job = Job("x", 0.0, "a", 1, 100.0)
    # Started at 0, restoring until 30: at 50 it has made 20 s x 4 steps/s = 80 steps.
    # Counting the restore would learn 80 / 50 = 1.6; from the resume it is 80 / 20 = 4.
    learner.started(job, "v100", ("v1/0",), now=0.0, resume=30.0, left=100.0)
    learner.observe("x", 50.0, 20.0)
    assert learner.learned.measured("a", "v100", 1, PACKED) == 4.0
    table = learner.model([job])
    version = learner.learned.version
    # the last 20 steps in 5 s: the same 4 steps/s; the answers, the version and the
    # table the policy plans with stay as they were
    learner.ended("x", 55.0, 0.0)
    assert learner.learned.sums() == {("a", "v100", 1, PACKED): (100.0, 25.0)}
    assert learner.learned.version == version
    assert learner.model([job]) is table
    assert list(learner.running()) == []
    # a run still restoring when observed teaches nothing
    learner.started(job, "v100", ("v1/0",), now=60.0, resume=90.0, left=100.0)
    learner.observe("x", 80.0, 100.0)
    assert learner.learned.sums() == {("a", "v100", 1, PACKED): (100.0, 25.0)}


def test_learning_from_the_truth_itself_changes_no_decision() -> None:
    # The prior is the truth: every observation confirms it, so the replay must be the
    # one that does not learn, start for start; a learner that counted restore time, or
    # steps of the wrong run, would learn slower speeds and move jobs elsewhere.
    jobs = workload(3)
    plain = Simulator(CLUSTER, jobs, rolling("srtf"), truth=TRUTH).run()
    simulator, learner = learning_replay(jobs, TRUTH)
    learned = simulator.run()
    assert sum(r.preemptions for r in plain.records.values()) > 0  # restores happened
    assert check_replay(learned, jobs, TRUTH) == []
    for job_id, record in plain.records.items():
        other = learned.records[job_id]
        assert (other.first_start, other.finish, other.gpu_types) == \
            (record.first_start, record.finish, record.gpu_types)
    assert learned.learned is learner.learned
    assert_rows_are_the_truth(learner.learned)


def assert_rows_are_the_truth(model: LearnedThroughput) -> None:
    rows = model.rows()
    assert rows
    for job, gpu, count, placement, speed in rows:
        assert speed == pytest.approx(TRUTH.throughput(job, gpu, count, placement), rel=1e-9)


def test_learning_from_nothing_measures_every_run_exactly() -> None:
    # No prior: the first decisions plan with the fallback (1 step/s per GPU, the same
    # on both types); every key that ran is then measured, at the truth.
    jobs = workload(5)
    simulator, learner = learning_replay(jobs, None)
    replay = simulator.run()
    assert check_replay(replay, jobs, TRUTH) == []
    assert all(r.finish is not None for r in replay.records.values())
    assert_rows_are_the_truth(learner.learned)
    ran = {(r.job.job_type, gpu) for r in replay.records.values() for gpu in r.gpu_types}
    assert {(job, gpu) for job, gpu, *_ in learner.learned.rows()} == ran


PHILLY = ["replay", str(ROOT / "tests" / "data" / "traces" / "philly_small.csv"),
          "--format", "philly", "--cluster", "v100=4,k80=4"]


def test_replay_learns_writes_what_it_learned_and_records_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main([*PHILLY, "--learn", "none", "--out", str(tmp_path / "r")])
    capsys.readouterr()
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    with (tmp_path / "r" / "learned_throughput.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert (summary["learn"], summary["learned_keys"], summary["completed"]) == \
        ("none", len(rows), 3)
    assert rows
    # the Philly jobs run at the catalogue's speeds: what was learned is those
    truth = catalogue_table(["v100", "k80"])
    for row in rows:
        assert float(row["throughput"]) == pytest.approx(truth.throughput(
            row["job_type"], row["gpu_type"], int(row["num_gpus"]),
            Placement(row["placement"])), rel=1e-9)
    assert 'learn = "none"\n' in (tmp_path / "r" / "run.toml").read_text()
    main([*PHILLY, "--out", str(tmp_path / "off")])
    capsys.readouterr()
    assert json.loads((tmp_path / "off" / "summary.json").read_text())["learn"] == "off"
    assert not (tmp_path / "off" / "learned_throughput.csv").exists()


def test_bad_learn_settings_exit_2_in_one_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2([*PHILLY, "--learn", "bogus", "--out", str(tmp_path / "r")], capsys)
    assert err.startswith("error: Invalid value for '--learn': 'bogus' is not one of 'off', ")
    with pytest.raises(InputError, match="learn: a learned throughput table does not "
                       "apply to elastic jobs"):
        ReplaySettings(learn="catalogue", elastic=True)
    with pytest.raises(InputError, match="learn: bad learn"):
        ReplaySettings(learn="sometimes")


def test_a_sweep_learns_where_its_spec_says_and_names_a_bad_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine_trace(tmp_path / "a", jobs=6)
    spec = ('seeds = [0]\nlearn = "none"\nlp_bound = false\npolicies = ["srtf"]\n'
            '[[traces]]\npath = "a/trace.csv"\nformat = "native"\ncluster = "v100=4,k80=4"\n'
            'name = "a"\n[[traces]]\npath = "a/trace.csv"\nformat = "native"\n'
            'cluster = "v100=4,k80=4"\nname = "b"\nlearn = "LEARN"\n')
    path = tmp_path / "sweep.toml"
    path.write_text(spec.replace("LEARN", "off"))
    (a, first), (b, second) = load_sweep(path).benches
    assert (a, first.replay.learn, b, second.replay.learn) == ("a", "none", "b", "off")
    main(["bench", "--spec", str(path), "--out", str(tmp_path / "out")])
    capsys.readouterr()
    learned = tmp_path / "out" / "a" / "runs" / "srtf-s0-l1"
    assert json.loads((learned / "summary.json").read_text())["learn"] == "none"
    assert (learned / "learned_throughput.csv").is_file()
    assert not (tmp_path / "out" / "b" / "runs" / "srtf-s0-l1" / "learned_throughput.csv"
                ).exists()
    path.write_text(spec.replace("LEARN", "sometimes"))
    with pytest.raises(InputError) as bad:
        load_sweep(path)
    assert str(bad.value) == (f"{path}: $.traces[1].learn: bad value (got 'sometimes'; "
                              "expected one of off, source, catalogue, none, bootstrap)")
