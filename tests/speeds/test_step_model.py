"""The step model with communication (hetsched.speeds.steps, step_fit): its formula worked
by hand, the fit recovering the parameters a synthetic profile was made from, the network
prior, Pollux's rule, and the model file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.speeds.step_extrapolation import extrapolate, fit_step_models
from hetsched.speeds.step_fit import calibrate_network, fit_step_model
from hetsched.speeds.step_model_file import load_step_models, save_step_models
from hetsched.speeds.steps import COEFFICIENTS, StatedError, StepModel, StepRow

#: A made-up job on a made-up cluster (seconds; factors).
TRUE = {"compute_base_s": 0.05, "compute_per_sample_s": 0.004, "single_sync_s": 0.002,
        "node_sync_base_s": 0.03, "node_sync_per_gpu_s": 0.01, "network_sync_base_s": 0.12,
        "network_sync_per_gpu_s": 0.003, "nic_sharing": 0.1, "two_node_penalty": 0.2,
        "overlap": 2.5}
ONE_NODE = [(1,), (2,), (3,), (4,)]
SPREAD = [(1, 1), (2, 2), (4, 4), (1, 4), (1, 1, 1), (2, 2, 2), (3, 3, 3), (1, 1, 1, 1),
          (2, 2, 2, 2), (4, 4, 4, 4), (4,) * 8]
BATCHES = (4, 8, 16, 32, 64)


def exact_model(job_type: str = "net", **changes: float) -> StepModel:
    return StepModel(job_type, "t4", **{**TRUE, **changes}, local_bsz_range=(4, 64),
                     cross_node="measured", node_error=StatedError(0, 0, 1, "exact"))


def rows_of(model: StepModel, placements: list[tuple[int, ...]]) -> list[StepRow]:
    """The rows ``model`` measures exactly (one GPU: its measured sync)."""
    return [StepRow(model.job_type, "t4", p, b, model.step_time(p, b),
                    model.sync_time(p, b)) for p in placements for b in BATCHES]


def test_the_formula_by_hand() -> None:
    model = exact_model()
    # one GPU: compute 0.05 + 0.004 * 10 = 0.09 s, plus the 1-GPU sync 0.002 s, no overlap
    assert model.compute_time(10) == pytest.approx(0.09)
    assert model.step_time((1,), 10) == pytest.approx(0.092)
    assert model.sync_time((1,), 10) == pytest.approx(0.002)
    # 4 GPUs on one node: sync 0.03 + 0.01 * 2 = 0.05 s; (0.09^2.5 + 0.05^2.5)^(1/2.5)
    one_node = (0.09 ** 2.5 + 0.05 ** 2.5) ** (1 / 2.5)
    assert model.step_time((4,), 10) == pytest.approx(one_node)
    # (2, 2): 4 GPUs on 2 nodes, 2 on the fullest: (0.12 + 0.003 * 2) * 1.1 * 1.2
    network = (0.12 + 0.006) * 1.1 * 1.2
    two_nodes = (0.09 ** 2.5 + network ** 2.5) ** (1 / 2.5)
    assert model.step_time((2, 2), 10) == pytest.approx(two_nodes)
    # the same GPUs on 4 nodes: no two-node penalty, no NIC sharing
    assert model.step_time((1, 1, 1, 1), 10) == pytest.approx(
        (0.09 ** 2.5 + 0.126 ** 2.5) ** (1 / 2.5))
    assert model.sync_time((2, 2), 10) == pytest.approx(two_nodes - 0.09)
    # 3 accumulation passes add 3 compute times; throughput counts every sample
    assert model.step_time((2, 2), 10, accumulation_steps=3) == pytest.approx(
        two_nodes + 0.27)
    assert model.throughput((2, 2), 10) == pytest.approx(40 / two_nodes)
    assert model.throughput((2, 2), 10, accumulation_steps=3) == pytest.approx(
        160 / (two_nodes + 0.27))
    # any count up to max_gpus (64), any batch in range
    assert model.step_time((4,) * 16, 64) > model.step_time((4,) * 8, 64)


@pytest.mark.parametrize(("placement", "batch", "piece"), [
    ((4,) * 17, 8, "bad placement"),
    ((2, 0), 8, "bad placement"),
    ((), 8, "bad placement"),
    ((2, 2), 65, "local batch outside the measured range"),
    ((2, 2), 3.9, "local batch outside the measured range"),
])
def test_questions_outside_the_model_are_input_errors(
        placement: tuple[int, ...], batch: float, piece: str) -> None:
    with pytest.raises(InputError, match=piece):
        exact_model().step_time(placement, batch)


def test_the_fit_recovers_the_parameters_of_a_synthetic_profile() -> None:
    model = fit_step_model(rows_of(exact_model(), ONE_NODE + SPREAD))
    for name in COEFFICIENTS:
        assert getattr(model, name) == pytest.approx(TRUE[name], rel=1e-6), name
    assert model.cross_node == "measured"
    assert model.node_error.rows == 20
    assert model.node_error.p90_ape < 1e-6
    network_error = model.stated_error((2, 2))
    assert network_error is not None
    assert network_error.rows == 55
    assert network_error.p90_ape < 1e-6
    assert model.local_bsz_range == (4.0, 64.0)


def test_pollux_rule_without_multi_node_rows() -> None:
    model = fit_step_model(rows_of(exact_model(), ONE_NODE))
    assert model.cross_node == "pollux-rule"
    assert model.node_sync_base_s == pytest.approx(0.03, rel=1e-6)
    # across nodes 1.1 x within (adaptdl's alpha_n = 1.1 alpha_r, beta_n = 1.1 beta_r)
    assert model.network_sync_base_s == pytest.approx(1.1 * 0.03, rel=1e-6)
    assert model.network_sync_per_gpu_s == pytest.approx(1.1 * 0.01, rel=1e-6)
    assert (model.nic_sharing, model.two_node_penalty) == (0.0, 0.0)
    assert model.stated_error((2, 2)) is None


def cluster_jobs() -> list[StepModel]:
    """Three jobs of one cluster: their multi-node sync base is 2.5 x their within-node
    sync at 4 GPUs, and they share the overlap, retrogression and shape factors."""
    jobs = []
    for name, compute, node_base, node_slope in (("a", 0.05, 0.03, 0.01),
                                                 ("b", 0.2, 0.1, 0.02),
                                                 ("c", 0.01, 0.004, 0.002)):
        network = 2.5 * (node_base + 2 * node_slope)
        jobs.append(exact_model(name, compute_base_s=compute, node_sync_base_s=node_base,
                                node_sync_per_gpu_s=node_slope, network_sync_base_s=network,
                                network_sync_per_gpu_s=0.02 * network, overlap=2.0))
    return jobs


def test_a_calibrated_prior_carries_one_node_rows_across_nodes() -> None:
    jobs = cluster_jobs()
    rows = [row for job in jobs[:2] for row in rows_of(job, ONE_NODE + SPREAD)]
    prior = calibrate_network(rows)
    assert prior.job_types == ("a", "b")
    assert prior.overlap == 2.0  # on the calibration grid
    assert prior.cross_ratio == pytest.approx(2.5, rel=1e-4)
    assert prior.retrogression == pytest.approx(0.02, rel=1e-3)
    assert prior.nic_sharing == pytest.approx(0.1, rel=1e-3)
    assert prior.two_node_penalty == pytest.approx(0.2, rel=1e-3)
    # the third job, measured on one node only, predicted across nodes
    third = fit_step_model(rows_of(jobs[2], ONE_NODE), prior)
    assert third.cross_node == "calibrated"
    for placement in SPREAD:
        assert third.step_time(placement, 16) == pytest.approx(
            jobs[2].step_time(placement, 16), rel=1e-3), placement


SIZES = {"a": 20e6, "b": 150e6, "c": 50e6}


def sized_jobs() -> list[tuple[StepModel, float]]:
    """:func:`cluster_jobs` with their trainable parameters, their multi-node sync base 1 ns
    per parameter plus 0.6 x their within-node sync at 4 GPUs: a 0.02 + 0.6 x 0.05 = 0.05 s
    (1.0 x within), b 0.15 + 0.6 x 0.14 = 0.234 s (1.67 x), c 0.05 + 0.6 x 0.008 = 0.0548 s
    (6.85 x: a large model with fast links within its nodes): no one cross ratio carries
    them all."""
    out = []
    for job in cluster_jobs():
        within = job.node_sync_base_s + 2 * job.node_sync_per_gpu_s
        network = 1e-9 * SIZES[job.job_type] + 0.6 * within
        out.append((dataclasses.replace(job, network_sync_base_s=network,
                                        network_sync_per_gpu_s=0.02 * network),
                    SIZES[job.job_type]))
    return out


def sized_rows(job: StepModel, size: float | None,
               placements: list[tuple[int, ...]]) -> list[StepRow]:
    return [dataclasses.replace(row, model_parameters=size) for row in rows_of(job, placements)]


def test_a_sized_prior_scales_the_network_by_the_model_parameters() -> None:
    (a, size_a), (b, size_b), (c, size_c) = sized_jobs()
    prior = calibrate_network([*sized_rows(a, size_a, ONE_NODE + SPREAD),
                               *sized_rows(b, size_b, ONE_NODE + SPREAD)])
    assert prior.sized
    assert prior.overlap == 2.0
    assert prior.seconds_per_parameter == pytest.approx(1e-9, rel=1e-3)
    assert prior.node_sync_weight == pytest.approx(0.6, rel=1e-3)
    assert prior.retrogression == pytest.approx(0.02, rel=1e-3)
    assert (prior.nic_sharing, prior.two_node_penalty) == (pytest.approx(0.1, rel=1e-3),
                                                           pytest.approx(0.2, rel=1e-3))
    third = fit_step_model(sized_rows(c, size_c, ONE_NODE), prior)
    assert third.network_sync_base_s == pytest.approx(0.0548, rel=1e-3)
    for placement in SPREAD:
        assert third.step_time(placement, 16) == pytest.approx(
            c.step_time(placement, 16), rel=1e-3), placement
    # c stating no size takes the cross ratio fitted with the same factors, between a's
    # 1.0 and b's 1.67
    unsized = fit_step_model(rows_of(c, ONE_NODE), prior)
    assert unsized.network_sync_base_s == pytest.approx(prior.cross_ratio * 0.008, rel=1e-3)
    assert 1.0 < prior.cross_ratio < 1.67
    # the same rows without sizes: the ratio prior (1.0-1.67) takes c's network far too
    # fast, (4, 4) at batch 16 over 20 % too short
    ratio = calibrate_network([*rows_of(a, ONE_NODE + SPREAD),
                               *rows_of(b, ONE_NODE + SPREAD)])
    assert not ratio.sized
    assert 1.0 < ratio.cross_ratio < 1.67
    missed = fit_step_model(rows_of(c, ONE_NODE), ratio)
    assert missed.step_time((4, 4), 16) < 0.8 * c.step_time((4, 4), 16)


def test_extrapolation_and_fitted_models_of_a_synthetic_cluster(tmp_path: Path) -> None:
    rows = [row for job in cluster_jobs() for row in rows_of(job, ONE_NODE + SPREAD)]
    calibrated = extrapolate(rows)
    assert calibrated.job_types == ("a", "b", "c")
    assert calibrated.error().rows == 3 * 55
    assert calibrated.error().p90_ape < 0.1
    assert calibrated.failures() == ()
    pollux = extrapolate(rows, "pollux-rule")
    assert pollux.error().median_ape > 20  # 1.1 x the within-node sync: far too fast
    # a fourth job on one node only takes the prior, with its stated error
    fourth = exact_model("d", compute_base_s=0.1, network_sync_base_s=2.5 * 0.05,
                         network_sync_per_gpu_s=0.02 * 2.5 * 0.05, overlap=2.0)
    models = fit_step_models([*rows, *rows_of(fourth, ONE_NODE)], calibrated)
    assert [m.cross_node for m in models.models] == ["measured"] * 3 + ["calibrated"]
    error = models.model("d", "t4").stated_error((2, 2))
    assert error is not None
    assert error.rows == 3 * 55
    path = tmp_path / "steps.json"
    save_step_models(models, path, "synthetic", calibrated)
    again = load_step_models(path)
    assert again.models == models.models
    assert again.priors == models.priors
    assert json.loads(path.read_text())["extrapolation"]["overall"]["rows"] == 165


def test_a_bad_model_file_names_its_json_path(tmp_path: Path) -> None:
    rows = rows_of(exact_model(), ONE_NODE + SPREAD)
    path = tmp_path / "steps.json"
    save_step_models(fit_step_models(rows), path)
    doc = json.loads(path.read_text())
    doc["models"][0]["overlap"] = 11
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as caught:
        load_step_models(path)
    assert str(caught.value) == (f"{path}: $.models[0].overlap: bad overlap (got 11; "
                                 "expected a number from 1 to 10)")


@pytest.mark.parametrize(("change", "piece"), [
    ({"job_type": " "}, "empty job_type"),
    ({"placement": (2, -1)}, "placement: bad placement"),
    ({"local_bsz": 0}, "local_bsz: bad local_bsz"),
    ({"step_time": float("nan")}, "step_time: bad step_time"),
    ({"sync_time": 0.5}, "sync_time: sync_time not below step_time"),
])
def test_bad_step_rows(change: dict[str, object], piece: str) -> None:
    row = StepRow("net", "t4", (2, 2), 8, 0.5, 0.1)
    with pytest.raises(InputError, match=piece):
        dataclasses.replace(row, **change)  # type: ignore[arg-type]


def test_fitting_rows_of_two_job_types_is_an_error() -> None:
    rows = [StepRow("a", "t4", (1,), 8, 0.5, 0.1), StepRow("b", "t4", (1,), 8, 0.5, 0.1)]
    with pytest.raises(InputError, match="rows of several job types or GPU types"):
        fit_step_model(rows)
    with pytest.raises(InputError, match="no job type measured on several GPUs of one node and"):
        calibrate_network(rows)
