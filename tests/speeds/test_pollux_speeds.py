"""Pollux's step times and job types (hetsched.speeds.measured_steps, hetsched.speeds.pollux):
the interpolation and batch plans by hand, and a job alone taking the time Pollux's own
simulator gave it."""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement, PolicyView, ThroughputTable, throughput_ahead
from hetsched.speeds.measured_steps import canonical_placement, read_measured_steps
from hetsched.speeds.pollux import elastic_job_type_name, job_type_name, node_layout, read_pollux
from tests.helpers import ROOT

TOY = ROOT / "tests" / "data" / "pollux" / "traces"


def test_placements_and_layouts() -> None:
    assert canonical_placement((4, 2)) == (2, 4)
    assert canonical_placement((2, 0, 1, 3)) == (1, 3, 2)
    assert node_layout(3, Placement.PACKED) == (3,)
    assert node_layout(5, Placement.PACKED) is None
    assert node_layout(4, Placement.SPREAD) == (3, 1)
    assert node_layout(10, Placement.SPREAD) == (4, 4, 2)
    assert node_layout(1, Placement.SPREAD) is None


def test_step_times_interpolated_by_hand() -> None:
    # toy/placements.csv: "1" 1.0 s at 5 samples per GPU, 1.5 s at 10; "2" 1.2 / 1.8 s
    # (sync 0.2 / 0.3 s); "11" 1.5 / 2.0 s.
    steps = read_measured_steps(TOY / "toy")
    assert steps.step_time((1,), 7.5) == pytest.approx(1.25)
    assert steps.times((2,), 10) == pytest.approx((1.8, 0.3))
    assert steps.sync_time((1, 1), 5) == pytest.approx(0.5)
    with pytest.raises(InputError, match="outside the measured step times"):
        steps.step_time((1,), 11)
    assert pickle.loads(pickle.dumps(steps)).step_time((1,), 7.5) == pytest.approx(1.25)


def test_batch_plans_and_throughput_by_hand() -> None:
    # toy: base batch 10, largest 40, 5 to 10 samples per GPU. 20 samples on 2 GPUs: 10
    # each in one pass, 1.8 s a step packed ((2,)), 2.0 s spread ((1, 1)); on 1 GPU: 20 is
    # above the base batch, so two passes of 10: 1.5 s + (1.5 - 0) s = 3.0 s.
    model = read_pollux(TOY)
    app = model.applications["toy"]
    plan = app.batch_plan(20, 2)
    assert (plan.atomic_bsz, plan.accum_steps, plan.batch_size) == (10, 0, 20)
    plan = app.batch_plan(20, 1)
    assert (plan.atomic_bsz, plan.accum_steps, plan.batch_size) == (10, 1, 20)
    job_type = job_type_name("toy", 20)
    assert job_type == "toy (batch size 20)"
    assert model.throughput(job_type, "t4", 2, Placement.PACKED) == pytest.approx(1 / 1.8)
    assert model.throughput(job_type, "t4", 2, Placement.SPREAD) == pytest.approx(0.5)
    assert model.throughput(job_type, "t4", 1, Placement.PACKED) == pytest.approx(1 / 3.0)
    # Where it cannot run: another GPU type, an unknown name, 5 samples per GPU below on
    # 8 GPUs (20 / 8 -> 3 < 5), a batch outside 10-40, a count not measured (3 GPUs).
    assert model.throughput(job_type, "v100", 2, Placement.PACKED) == 0.0
    assert model.throughput("toy", "t4", 2, Placement.PACKED) == 0.0
    assert model.throughput(job_type, "t4", 8, Placement.SPREAD) == 0.0
    assert model.throughput(job_type_name("toy", 80), "t4", 2, Placement.PACKED) == 0.0
    assert model.throughput(job_type, "t4", 3, Placement.PACKED) == 0.0
    assert model.gpu_types == {"t4"}
    assert model.job_types == {"toy (batch size 10)", "toy (batch size 40)", "toy (elastic)"}
    copy = pickle.loads(pickle.dumps(model))
    assert copy.throughput(job_type, "t4", 2, Placement.PACKED) == pytest.approx(1 / 1.8)


def test_real_batch_plans_follow_pollux(shared_data: Path) -> None:
    model = read_pollux(shared_data / "pollux" / "traces")
    # ncf, 32,768 on 1 GPU: two passes of 16,384 (one GPU above the base batch 256).
    plan = model.applications["ncf"].batch_plan(32768, 1)
    assert (plan.atomic_bsz, plan.accum_steps, plan.batch_size) == (16384, 1, 32768)
    # bert, 384 on 6 GPUs: 64 each, above its 12 a pass: 6 passes of 11, cut to
    # 384 / 36 -> 10: 360 samples a step.
    plan = model.applications["bert"].batch_plan(384, 6)
    assert (plan.atomic_bsz, plan.accum_steps, plan.batch_size) == (10, 5, 360)
    # More nodes than placements.csv has: scalability.csv's own point comes back.
    cifar10 = model.applications["cifar10"].steps
    assert cifar10.times((1,) * 6, 32) == pytest.approx((0.14090566635131835,
                                                         0.09941204528808593))


#: (application, GPUs, batch) that ran alone at least once in Pollux's tiresias at load 0.5.
ALONE = [("cifar10", 6, 2048), ("cifar10", 12, 4096), ("cifar10", 16, 4096),
         ("deepspeech2", 6, 320), ("deepspeech2", 12, 640), ("ncf", 1, 32768),
         ("yolov3", 4, 64), ("bert", 12, 384), ("bert", 16, 384), ("imagenet", 32, 6400)]


def test_a_job_alone_takes_the_time_pollux_gave_it(shared_data: Path) -> None:
    # Pollux's simulator starts a job at the first 60 s boundary after it arrives and
    # charges 30 s before it makes progress: its shortest JCT for a job kind is our
    # steps x step time (on the GPUs of the nodes taken in order) plus 30 to 90 s.
    pollux = shared_data / "pollux"
    model = read_pollux(pollux / "traces")
    jcts = json.loads((pollux / "reference-results" / "jobload-tiresias-0.5.json")
                      .read_text())["jcts"]
    shortest: dict[tuple[str, int, int], float] = {}
    for index in range(1, 9):
        path = pollux / "workloads-0.5" / f"workload-{index}.csv"
        with path.open() as handle:
            for row in csv.DictReader(handle):
                kind = (row["application"], int(row["num_replicas"]), int(row["batch_size"]))
                jct = jcts[f"workload-{index}"][row["name"]]
                shortest[kind] = min(shortest.get(kind, jct), jct)
    for name, gpus, batch in ALONE:
        placement = Placement.PACKED if gpus <= 4 else Placement.SPREAD
        speed = model.throughput(job_type_name(name, batch), "t4", gpus, placement)
        alone = model.applications[name].steps_to_goal(batch, gpus) / speed
        assert 25 <= shortest[(name, gpus, batch)] - alone <= 90, (name, gpus, alone)


def test_an_elastic_job_runs_each_epoch_at_its_best_batch() -> None:
    # toy: goal 240 base-batch steps (epochs of 100 and 140), base batch 10, 5 to 10
    # samples per GPU. On 1 GPU a batch above 10 takes two passes at least: 20 samples
    # take 3.0 s for 1.6 (then 12/7) base steps, 40 take 6.0 s for 2.29; so every epoch
    # runs at 10 samples, 1.5 s a base step: 240 / (240 x 1.5) = 1/1.5 base steps/s.
    model = read_pollux(TOY)
    app = model.applications["toy"]
    assert app.goal_base_steps == pytest.approx(240.0)
    elastic = elastic_job_type_name("toy")
    assert elastic == "toy (elastic)"
    assert model.throughput(elastic, "t4", 1, Placement.PACKED) == pytest.approx(1 / 1.5)
    # On 2 GPUs its time to the goal is the sum over the epochs of each epoch's best
    # seconds per base step, so it is at least as fast as the same job held at any one
    # batch (20 samples: 240 base steps in (100 / 1.6 + 140 x 7 / 12) steps of 1.8 s =
    # 0.925 base steps/s); here 18 samples are best in both epochs, so it equals that.
    rate = model.throughput(elastic, "t4", 2, Placement.PACKED)
    fixed = {batch: app.goal_base_steps / (app.convergence.steps_to_goal(batch)
                                           * app.step_time((2,), batch))
             for batch in app.batch_choices(2)}
    assert fixed[20] == pytest.approx(240 / ((100 / 1.6 + 140 * 7 / 12) * 1.8))
    assert rate == pytest.approx(max(fixed.values())) == pytest.approx(fixed[18])
    per_epoch = [min(app.step_time((2,), b) / app.convergence.gain(b, e)
                     for b in app.batch_choices(2)) for e in range(2)]
    assert rate == pytest.approx(240 / (100 * per_epoch[0] + 140 * per_epoch[1]))
    # It runs each epoch at that epoch's rate, which changes at the epoch's end (100
    # base-batch steps); the whole-life rate above is what the policies plan with.
    for done, epoch in ((0.0, 0), (50.0, 0), (100.0, 1), (200.0, 1), (240.0, 1)):
        assert model.throughput_after(elastic, "t4", 2, Placement.PACKED, done) == \
            pytest.approx(1 / per_epoch[epoch])
    assert model.speed_change_after(elastic, 50.0) == pytest.approx(100.0)
    assert model.speed_change_after(elastic, 150.0) is None
    # A job at a fixed batch runs at the same speed all along.
    fixed_type = job_type_name("toy", 20)
    assert model.throughput_after(fixed_type, "t4", 2, Placement.PACKED, 50.0) == \
        model.throughput(fixed_type, "t4", 2, Placement.PACKED)
    assert model.speed_change_after(fixed_type, 50.0) is None
    # Where no batch runs (no step time measured on 4 GPUs of a node): 0.
    assert model.throughput(elastic, "t4", 4, Placement.PACKED) == 0.0
    assert model.throughput(elastic, "v100", 1, Placement.PACKED) == 0.0


def test_elastic_rates_on_pollux_data_beat_every_fixed_batch(shared_data: Path) -> None:
    model = read_pollux(shared_data / "pollux" / "traces")
    for name, app in model.applications.items():
        for layout in ((1,), (4,), (4, 4), (4, 4, 4, 4)):
            rate = model.throughput(elastic_job_type_name(name), "t4", sum(layout),
                                    Placement.PACKED if len(layout) == 1
                                    else Placement.SPREAD)
            best_fixed = max(
                (app.goal_base_steps / (app.convergence.steps_to_goal(batch)
                                        * app.step_time(layout, batch))
                 for batch in app.batch_choices(sum(layout))), default=0.0)
            assert rate >= best_fixed * (1 - 1e-12), (name, layout)
            assert rate > 0, (name, layout)


def test_an_elastic_jobs_rate_over_the_next_horizon_by_hand() -> None:
    # toy on 2 GPUs packed: 18 samples are best in both epochs (9 a GPU: 1.2 + 0.6 x 4/5
    # = 1.68 s a step); in epoch 0 (base-batch steps 0-100; grad_var 3, grad_sqr 1) a
    # step is worth (3 + 1) / (3 / 1.8 + 1) = 1.5 base steps: 1.12 s a base step; in
    # epoch 1 (100-240) c1 = 1.68 / gain(18, 1) s (its statistics interpolated).
    model = read_pollux(TOY)
    elastic = elastic_job_type_name("toy")
    c1 = 1 / model.throughput_after(elastic, "t4", 2, Placement.PACKED, 150.0)
    assert c1 == pytest.approx(1.68 / model.applications["toy"].convergence.gain(18, 1))
    assert c1 == pytest.approx(1.0486720867)

    def ahead(done: float, horizon_s: float, num_gpus: int = 2) -> float:
        return model.throughput_ahead(elastic, "t4", num_gpus, Placement.PACKED, done,
                                      horizon_s)

    # With 50 done, the next 120 s: the 50 steps left of epoch 0 in 56 s, then 64 s of
    # epoch 1 (64 / c1 steps): 111.0296 steps in 120 s.
    assert ahead(50.0, 120.0) == pytest.approx((50 + 64 / 1.0486720867) / 120) \
        == pytest.approx(0.9252464)
    # Within epoch 0, its rate; within the last epoch, its rate.
    assert ahead(50.0, 30.0) == pytest.approx(1 / 1.12)
    assert ahead(0.0, 56.0) == pytest.approx(1 / 1.12)
    assert ahead(100.0, 120.0) == pytest.approx(ahead(150.0, 30.0)) == pytest.approx(1 / c1)
    # A horizon past the goal: the rate over the work left (190 steps in 56 + 140 c1 s),
    # from the start the whole-life rate; no horizon or at the goal: the epoch's rate.
    assert ahead(50.0, 1000.0) == pytest.approx(190 / (56.0 + 140 * 1.0486720867)) \
        == pytest.approx(0.9368185)
    assert ahead(0.0, 1000.0) == pytest.approx(
        model.throughput(elastic, "t4", 2, Placement.PACKED))
    assert ahead(200.0, 120.0) == pytest.approx(1 / c1)
    assert ahead(50.0, 0.0) == pytest.approx(1 / 1.12)
    assert ahead(240.0, 120.0) == pytest.approx(1 / c1)
    # On 1 GPU every epoch runs at 10 samples, 1.5 s a base step, whatever is done.
    for done in (0.0, 99.0, 230.0):
        assert ahead(done, 120.0, 1) == pytest.approx(1 / 1.5)
    # A fixed batch: its throughput; where no batch runs: 0.
    fixed = job_type_name("toy", 20)
    assert model.throughput_ahead(fixed, "t4", 2, Placement.PACKED, 50.0, 120.0) == \
        model.throughput(fixed, "t4", 2, Placement.PACKED)
    assert ahead(50.0, 120.0, 4) == 0.0
    # What a policy sees (PolicyView) answers the same; a model without it, its throughput.
    view = PolicyView(model, model)
    assert throughput_ahead(view, elastic, "t4", 2, Placement.PACKED, 50.0, 120.0) == \
        ahead(50.0, 120.0)
    assert view.speed_change_after(elastic, 50.0) == pytest.approx(100.0)
    table = ThroughputTable({(fixed, "t4", 2, Placement.PACKED): 0.5})
    assert throughput_ahead(table, fixed, "t4", 2, Placement.PACKED, 50.0, 120.0) == 0.5
