"""The fitted throughput model: coefficient recovery, flags and fallbacks, the two modes
behind one interface, persistence, an honest leave-one-out, and its accuracy on Gavel."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement, ThroughputTable, throughput_matrix
from hetsched.speeds.fit import fit_throughput_model, throughput_model
from hetsched.speeds.leave_one_out import leave_one_out
from hetsched.speeds.model import Basis, CountRange, FitSettings, FittedThroughputModel
from hetsched.speeds.model_file import load_model, save_model
from hetsched.speeds.profiles import Profile, ProfilePoint, read_gavel_throughputs
from tests.helpers import (
    BETA,
    COMPUTE,
    COUNTS,
    GAMMA,
    PACKED,
    SPREAD,
    raises_input_error,
    step_time,
    synthetic_profile,
)


def test_recovers_known_coefficients_from_synthetic_data() -> None:
    model = fit_throughput_model(synthetic_profile())
    for job, a in COMPUTE.items():
        for placement in Placement:
            fit = model.series[(job, "g", placement)]
            expected = [a, *(b + c * a for b, c in
                             zip(BETA[placement], GAMMA[placement], strict=True))]
            assert fit.coefficients == pytest.approx(expected, rel=1e-6, abs=1e-9)
            # Exact data: every count correction is 1.
            assert [n for n, _ in fit.corrections] == list(COUNTS)
            assert [f for _, f in fit.corrections] == pytest.approx([1.0] * len(COUNTS), rel=1e-9)
    assert model.diagnostics is not None
    (block,) = model.diagnostics.blocks
    for placement in Placement:
        assert block.overhead[placement.value] == pytest.approx(
            [*BETA[placement], *GAMMA[placement]], rel=1e-6, abs=1e-9)
    assert model.diagnostics.max_ape == pytest.approx(0.0, abs=1e-6)


def test_naive_settings_recover_each_series_alone() -> None:
    # One series per job, t(n) = c0 + c1 log2 n + c2 (n-1)/n with its own coefficients.
    truth = {("r", PACKED): (0.2, 0.01, 0.05), ("r", SPREAD): (0.2, 0.08, 0.3)}
    points = [ProfilePoint("r", "g", 1, PACKED, 1 / 0.2)]
    for (job, placement), (c0, c1, c2) in truth.items():
        for n in (2, 4, 8):
            points.append(ProfilePoint(job, "g", n, placement,
                                       n / (c0 + c1 * math.log2(n) + c2 * (n - 1) / n)))
    model = fit_throughput_model(Profile(tuple(points)), FitSettings.naive(("log2n", "ring")))
    for (job, placement), coefficients in truth.items():
        assert model.series[(job, "g", placement)].coefficients == pytest.approx(
            coefficients, rel=1e-6)


def test_predicts_any_count_to_64_with_flags() -> None:
    model = fit_throughput_model(synthetic_profile(counts=(1, 2, 4, 8)))
    job = "net (batch size 32)"
    for n in (1, 3, 5, 8, 16, 33, 64):
        for placement in Placement:
            prediction = model.predict(job, "g", n, placement)
            assert prediction.throughput == pytest.approx(n / step_time(job, n, placement),
                                                          rel=1e-6)
            assert prediction.basis is Basis.OWN_DATA
    assert model.predict(job, "g", 4, SPREAD).count_range is CountRange.MEASURED
    assert model.predict(job, "g", 5, SPREAD).count_range is CountRange.INTERPOLATED
    assert model.predict(job, "g", 64, SPREAD).flags == "own-data, extrapolated"


def test_a_measured_one_gpu_throughput_is_returned_as_measured() -> None:
    # The 1-GPU run of one batch size is 30% slower than its multi-GPU scaling implies
    # (like Gavel's V100 ResNet-18 rows): 1 GPU keeps the measurement, the rest the curve.
    job = "net (batch size 32)"
    points = [ProfilePoint(*p.key, p.throughput * (0.7 if p.key == (job, "g", 1, PACKED)
                                                   else 1.0))
              for p in synthetic_profile().points]
    model = fit_throughput_model(Profile(tuple(points)))
    for placement in Placement:
        assert model.throughput(job, "g", 1, placement) == pytest.approx(
            0.7 / step_time(job, 1, PACKED), rel=1e-12)
    assert model.predict(job, "g", 1, SPREAD).flags == "own-data, measured"
    assert model.throughput(job, "g", 8, SPREAD) == pytest.approx(
        8 / step_time(job, 8, SPREAD), rel=0.05)


@pytest.mark.parametrize(("args", "problem", "path"), [
    (("net (batch size 8)", "g", 2, PACKED), "unknown job type", "job_type"),
    (("net (batch size 16)", "h100", 2, PACKED), "unknown GPU type", "gpu_type"),
    (("net (batch size 16)", "g", 0, PACKED), "outside the fitted model's range", "num_gpus"),
    (("net (batch size 16)", "g", 65, PACKED), "outside the fitted model's range", "num_gpus"),
])
def test_unknown_names_and_counts_are_clear_errors(args: tuple[str, str, int, Placement],
                                                   problem: str, path: str) -> None:
    model = fit_throughput_model(synthetic_profile())
    with pytest.raises(InputError, match=problem) as caught:
        model.throughput(*args)
    assert caught.value.path == path
    with pytest.raises(InputError, match=problem):
        model.matrix([args[0]], [args[1]], [args[2]], args[3])
    with pytest.raises(InputError, match=problem):  # an error is not remembered as an answer
        model.throughput(*args)


def test_remembered_answers_equal_fresh_predictions() -> None:
    """The fitted model and the policies' view remember their answers (replays ask the same
    questions hundreds of thousands of times): the second answer is the first, and both
    are the prediction's."""
    from hetsched.core.throughput import PolicyView

    model = fit_throughput_model(synthetic_profile())
    measured = ThroughputTable({("net (batch size 16)", "g", 1, PACKED): 10.0})
    view = PolicyView(model, measured)
    for count in (1, 2, 4):
        predicted = model.predict("net (batch size 16)", "g", count, PACKED).throughput
        assert predicted > 0
        assert model.throughput("net (batch size 16)", "g", count, PACKED) == predicted
        assert model.throughput("net (batch size 16)", "g", count, PACKED) == predicted
        # The view answers the fitted speed where the measurement is positive, else 0.
        expected = predicted if count == 1 else 0.0
        assert view.throughput("net (batch size 16)", "g", count, PACKED) == expected
        assert view.throughput("net (batch size 16)", "g", count, PACKED) == expected


def test_single_gpu_only_family_is_unsupported_beyond_one_gpu() -> None:
    points = (*synthetic_profile().points, ProfilePoint("A3C", "g", 1, PACKED, 7.0))
    model = fit_throughput_model(Profile(points))
    assert model.throughput("A3C", "g", 1, SPREAD) == pytest.approx(7.0)
    for n in (2, 8, 64):
        prediction = model.predict("A3C", "g", n, PACKED)
        assert prediction.throughput == 0.0
        assert prediction.basis is Basis.UNSUPPORTED
        assert "no measurement of family 'A3C' on more than 1 g" in prediction.note
    assert model.summary()["single-gpu-only"] == 2


def test_family_shape_fallback_is_exact_for_a_shared_overhead() -> None:
    job = "net (batch size 64)"
    profile = synthetic_profile(drop={(job, n, SPREAD) for n in COUNTS})
    model = fit_throughput_model(profile)
    for n in (2, 8, 48):
        prediction = model.predict(job, "g", n, SPREAD)
        assert prediction.basis is Basis.FAMILY_SHAPE
        assert prediction.throughput == pytest.approx(n / step_time(job, n, SPREAD), rel=1e-6)
    assert "overhead from family 'net'" in model.predict(job, "g", 2, SPREAD).note
    assert model.summary() == {"own-data": 5, "family-shape": 1, "single-gpu-only": 0,
                               "no-data": 0}


def test_measured_zero_makes_that_count_and_larger_ones_unsupported() -> None:
    job = "net (batch size 64)"
    points = [p for p in synthetic_profile().points
              if not (p.job_type == job and p.num_gpus > 2)]
    points = [ProfilePoint(p.job_type, p.gpu_type, p.num_gpus, p.placement, 0.0)
              if p.job_type == job and p.num_gpus == 2 and p.placement is PACKED else p
              for p in points]
    model = fit_throughput_model(Profile(tuple(points)))
    assert model.throughput(job, "g", 1, PACKED) > 0
    assert [model.throughput(job, "g", n, PACKED) for n in (2, 3, 16)] == [0.0, 0.0, 0.0]
    assert "measured 0 steps/s at 2 GPUs" in model.predict(job, "g", 4, PACKED).note
    # The spread series has its own 2-GPU measurement, so the packed zero does not apply.
    assert model.throughput(job, "g", 16, SPREAD) > 0
    # Without it, the spread series inherits the packed zero instead of pretending.
    no_spread = Profile(tuple(p for p in points if not (
        p.job_type == job and p.placement is SPREAD and p.num_gpus > 1)))
    prediction = fit_throughput_model(no_spread).predict(job, "g", 4, SPREAD)
    assert prediction.throughput == 0.0
    assert "packed measured 0 steps/s at 2 GPUs" in prediction.note


def test_known_job_on_a_gpu_type_it_was_never_measured_on_gets_zero() -> None:
    points = (*synthetic_profile().points, ProfilePoint("solo", "h", 1, PACKED, 2.0))
    model = fit_throughput_model(Profile(points))
    prediction = model.predict("solo", "g", 1, PACKED)
    assert prediction.throughput == 0.0
    assert prediction.note == "no measurement of solo on g"
    assert model.throughput("net (batch size 16)", "h", 1, PACKED) == 0.0


def test_matrix_equals_scalar_calls_for_both_modes() -> None:
    profile = Profile((*synthetic_profile(counts=(1, 2, 8)).points,
                       ProfilePoint("A3C", "g", 1, PACKED, 7.0)))
    jobs = ["A3C", *COMPUTE]
    counts = [1, 2, 3, 8, 64]
    for model in (throughput_model(profile, "fitted"), throughput_model(profile, "measured")):
        for placement in Placement:
            speeds = model.matrix(jobs, ["g"], counts, placement)
            assert speeds.shape == (len(jobs), 1, len(counts))
            expected = [[[model.throughput(j, "g", n, placement) for n in counts]] for j in jobs]
            assert speeds == pytest.approx(np.array(expected), rel=1e-12)
            assert throughput_matrix(model, jobs, ["g"], counts, placement) == \
                pytest.approx(speeds, rel=1e-12)
    table = throughput_model(profile, "measured")
    assert isinstance(table, ThroughputTable)
    assert table.matrix(["A3C"], ["g", "h"], [1, 2], PACKED).tolist() == [[[7.0, 0.0],
                                                                          [0.0, 0.0]]]


def test_throughput_matrix_falls_back_to_scalar_calls() -> None:
    class Linear:
        def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                       placement: Placement) -> float:
            return 2.0 * num_gpus if placement is PACKED else 0.0

    speeds = throughput_matrix(Linear(), ["a", "b"], ["g"], [1, 4], PACKED)
    assert speeds.tolist() == [[[2.0, 8.0]], [[2.0, 8.0]]]


def test_bad_mode_is_an_input_error() -> None:
    with pytest.raises(InputError, match="bad throughput mode"):
        throughput_model(synthetic_profile(), "guessed")


def test_count_corrections_carry_a_family_wide_anomaly() -> None:
    # Every batch size runs at 60% of the smooth curve on 4 packed GPUs (a dip like
    # Gavel's V100 LM rows): the held-out member's dip is predicted from the others'.
    points = [ProfilePoint(p.job_type, p.gpu_type, p.num_gpus, p.placement,
                           p.throughput * (0.6 if (p.num_gpus, p.placement) == (4, PACKED)
                                           else 1.0))
              for p in synthetic_profile().points]
    profile = Profile(tuple(points))
    key = ("net (batch size 32)", "g", 4, PACKED)
    measured = profile.by_key[key].throughput
    pooled = fit_throughput_model(profile.without(key)).throughput(*key)
    smooth = fit_throughput_model(profile.without(key),
                                  FitSettings(count_corrections=False)).throughput(*key)
    assert abs(pooled - measured) / measured < 0.05
    assert abs(smooth - measured) / measured > 0.25


def test_save_and_load_give_the_same_predictions(tmp_path: Path) -> None:
    profile = Profile((*synthetic_profile().points, ProfilePoint("A3C", "g", 1, PACKED, 7.0)))
    model = fit_throughput_model(profile)
    path = tmp_path / "model.json"
    save_model(model, path)
    loaded = load_model(path)
    jobs, counts = list(model.job_types), list(range(1, 65))
    for placement in Placement:
        assert loaded.matrix(jobs, ["g"], counts, placement).tolist() == \
            model.matrix(jobs, ["g"], counts, placement).tolist()
    assert loaded.settings == model.settings
    assert loaded.table().rows() == profile.table().rows()
    doc = json.loads(path.read_text())
    assert doc["settings"]["features"] == ["log2n", "ring"]
    assert doc["diagnostics"]["points"] == len(profile)
    assert len(doc["data"]) == len(profile)
    assert doc["families"]["net (batch size 16)"] == "net"


def _model_doc(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "model.json"
    save_model(fit_throughput_model(synthetic_profile()), path)
    doc: dict[str, object] = json.loads(path.read_text())
    return doc


@pytest.mark.parametrize(("change", "pieces"), [
    (lambda d: d.update(format="hetsched-instance"), ["$.format", "not a throughput model"]),
    (lambda d: d.update(version=9), ["$.version", "got 9"]),
    (lambda d: d["settings"].update(features=["cubic"]),
     ["$.settings.features[0]", "'cubic'", "log2n"]),
    (lambda d: d["settings"].update(colour="red"), ["$.settings", "unknown settings field"]),
    (lambda d: d["series"][0].update(coefficients=[0.1, -1.0, 0.0]),
     ["$.series[0].coefficients[1]", "-1.0", ">= 0"]),
    (lambda d: d["series"][0].update(coefficients=[0.1]),
     ["wrong number of coefficients", "3 (c[0] and one per feature)"]),
    (lambda d: d["series"][0].update(placement="diagonal"), ["$.series[0]", "'diagonal'"]),
    (lambda d: d["series"][1].update(d["series"][0]), ["$.series[1]", "duplicate series"]),
    (lambda d: d["series"][0].update(corrections=[[4, 0]]),
     ["$.series[0].corrections[0][1]", "> 0"]),
    (lambda d: d.pop("series"), ["$", "missing field 'series'"]),
    (lambda d: d["data"][0].update(throughput=-3), ["bad throughput", "-3"]),
])
def test_bad_model_files_are_clear_errors(tmp_path: Path, change: object,
                                          pieces: list[str]) -> None:
    doc = _model_doc(tmp_path)
    change(doc)  # type: ignore[operator]
    path = tmp_path / "bad-model.json"
    path.write_text(json.dumps(doc))
    raises_input_error(lambda: load_model(path), str(path), pieces)


def test_leave_one_out_never_sees_the_held_out_point() -> None:
    profile = synthetic_profile(counts=(1, 2, 4, 8))
    key = ("net (batch size 16)", "g", 4, SPREAD)
    # Make the held-out point wildly wrong: its own prediction must not move, because
    # it was fitted without it (pooled overhead and count corrections included).
    corrupted = Profile(tuple(
        ProfilePoint(*p.key, p.throughput * 10) if p.key == key else p
        for p in profile.points))
    clean, dirty = leave_one_out(profile), leave_one_out(corrupted)
    assert len(clean.points) == len(dirty.points) == 3 * 2 * 3
    before = {(p.job_type, p.gpu_type, p.num_gpus, p.placement): p for p in clean.points}
    after = {(p.job_type, p.gpu_type, p.num_gpus, p.placement): p for p in dirty.points}
    assert after[key].predicted == before[key].predicted
    assert after[key].measured == 10 * before[key].measured
    assert after[key].ape == pytest.approx(90.0, rel=1e-6)
    # ... while a point of the same family that was fitted with it does move.
    neighbour = ("net (batch size 32)", "g", 4, SPREAD)
    assert after[neighbour].predicted != pytest.approx(before[neighbour].predicted, rel=1e-3)
    # Exact synthetic data: every held-out point is predicted exactly.
    assert clean.median_ape == pytest.approx(0.0, abs=1e-6)


@pytest.fixture
def gavel(shared_data: Path) -> Profile:
    return read_gavel_throughputs(shared_data / "gavel" / "simulation_throughputs.json")


@pytest.mark.slow
def test_local_refits_give_the_whole_refits_leave_one_out(gavel: Profile) -> None:
    # Refitting only the held-out point's group on its GPU type
    # predicts every point exactly as refitting the whole table does, float for float,
    # with family pooling (the default) on Gavel's table, and per series (the naive
    # baseline) on a synthetic profile of two GPU types.
    local, whole = (leave_one_out(gavel, local=flag) for flag in (True, False))
    assert local.points == whole.points
    assert len(local.points) == 333
    profile = Profile.from_rows([*synthetic_profile().rows(), *(
        (job, "h", n, placement, speed * 1.5)
        for job, _, n, placement, speed in synthetic_profile(counts=(1, 2, 4)).rows())])
    naive = FitSettings.naive(("log2n", "ring"))
    local, whole = (leave_one_out(profile, naive, local=flag) for flag in (True, False))
    assert local.points == whole.points
    assert {p.gpu_type for p in local.points} == {"g", "h"}


def test_local_leave_one_out_falls_back_when_the_group_leaves_nothing_of_the_job() -> None:
    # "lm" has one point on "h" (2 GPUs): held out, nothing of lm is left on h, and the
    # whole-profile refit says what it says (lm known, unsupported on h: 0 steps/s).
    rows = [*synthetic_profile(counts=(1, 2)).rows(), ("lm", "h", 2, PACKED, 7.0),
            ("lm", "g", 1, PACKED, 3.0)]
    profile = Profile.from_rows(rows)
    seen: list[tuple[int, int]] = []
    report = leave_one_out(profile, progress=lambda done, total: seen.append((done, total)))
    whole = leave_one_out(profile, local=False)
    assert report.points == whole.points
    lonely = next(p for p in report.points if p.job_type == "lm")
    assert (lonely.gpu_type, lonely.predicted, lonely.ape) == ("h", 0.0, 100.0)
    assert seen == [(k, len(report.points)) for k in range(1, len(report.points) + 1)]


def test_gavel_leave_one_out_meets_the_targets(gavel: Profile) -> None:
    report = leave_one_out(gavel)
    assert len(report.points) == 333
    assert report.median_ape <= 5.0
    assert report.p90_ape <= 20.0
    # The figures measured when the model was chosen (docs/throughput-model.md).
    assert report.median_ape == pytest.approx(4.35, abs=0.01)
    assert report.p90_ape == pytest.approx(15.48, abs=0.01)


def test_gavel_model_answers_every_configuration(gavel: Profile) -> None:
    model = fit_throughput_model(gavel)
    assert isinstance(model, FittedThroughputModel)
    counts = list(range(1, 65))
    for placement in Placement:
        speeds = model.matrix(model.job_types, model.gpu_types, counts, placement)
        assert np.isfinite(speeds).all()
        assert (speeds >= 0).all()
        assert (speeds[:, :, 0] > 0).all()  # every job type runs on one GPU of every type
    assert model.summary() == {"own-data": 111, "family-shape": 1, "single-gpu-only": 44,
                               "no-data": 0}
    for point in gavel.points:
        if point.num_gpus == 1:
            assert model.throughput(*point.key) == pytest.approx(point.throughput, rel=1e-9)
    spread = model.predict("ResNet-50 (batch size 64)", "k80", 4, SPREAD)
    assert spread.basis is Basis.FAMILY_SHAPE
    assert spread.throughput > 0
    assert model.throughput("ResNet-50 (batch size 128)", "k80", 4, SPREAD) == 0.0
    assert model.throughput("Recommendation (batch size 512)", "p100", 2, PACKED) == 0.0
    assert model.predict("LM (batch size 10)", "v100", 64, SPREAD).count_range is \
        CountRange.EXTRAPOLATED
