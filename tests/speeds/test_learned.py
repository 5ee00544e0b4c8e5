"""The learned throughput model (hetsched.speeds.learned): a measured key is its runs'
time-weighted mean; another GPU count is scaled by the prior's reference job types (or
the job's own scaling on another GPU type, or linearly), another GPU type by the prior's
median GPU-type ratio; a never-seen job type starts at the prior's median; it pickles,
dumps a table hetsched reads back, and refuses bad observations."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable
from hetsched.files.instance import read_throughput_table, write_throughput_csv
from hetsched.speeds.learned import LearnedThroughput
from tests.helpers import raises_input_error

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD

# The prior: three reference job types the new jobs are not. On v100, 1 -> 4 GPUs scales
# r1 by 30/10 = 3, r2 by 20/5 = 4, r3 by 1.5/1 = 1.5 (median 3, mean 2.83); k80 / v100
# at one GPU is r1 2/10 = 0.2, r2 2/5 = 0.4, r3 0.35/1 = 0.35 (median 0.35, mean 0.32).
PRIOR = ThroughputTable.from_rows([
    ("r1", "v100", 1, PACKED, 10.0), ("r1", "v100", 4, PACKED, 30.0),
    ("r2", "v100", 1, PACKED, 5.0), ("r2", "v100", 4, PACKED, 20.0),
    ("r3", "v100", 1, PACKED, 1.0), ("r3", "v100", 4, PACKED, 1.5),
    ("r1", "k80", 1, PACKED, 2.0), ("r2", "k80", 1, PACKED, 2.0),
    ("r3", "k80", 1, PACKED, 0.35),
])


def learned(prior: ThroughputModel | None = PRIOR, **kwargs: object) -> LearnedThroughput:
    return LearnedThroughput(prior, **kwargs)  # type: ignore[arg-type]


def assert_answer(found: tuple[float, str], value: float, rule: str) -> None:
    """The answer is ``value`` (to 1e-9 relative) by ``rule``."""
    assert found[0] == pytest.approx(value, rel=1e-9)
    assert found[1] == rule


def test_a_key_observed_once_answers_steps_over_seconds() -> None:
    model = learned()
    assert model.observe("new", "v100", 1, PACKED, steps=1200, trace_seconds=600) == 2.0
    assert model.explain("new", "v100", 1, PACKED) == (2.0, "measured")
    assert model.throughput("new", "v100", 1, PACKED) == 2.0
    assert model.measured("new", "v100", 1, "packed") == 2.0
    assert model.measured("new", "v100", 2, PACKED) is None
    assert isinstance(model, ThroughputModel)


def test_two_runs_are_averaged_by_their_seconds() -> None:
    # 1,200 steps in 600 s (2 steps/s), then 300 steps in 300 s (1 step/s): weighted by
    # seconds, (2 * 600 + 1 * 300) / 900 = 1,500 steps / 900 s = 5/3, not the plain mean 1.5.
    model = learned()
    model.observe("new", "v100", 1, PACKED, 1200, 600)
    assert model.observe("new", "v100", 1, PACKED, 300, 300) == pytest.approx(5 / 3)
    assert model.throughput("new", "v100", 1, PACKED) == pytest.approx(5 / 3)
    assert model.sums() == {("new", "v100", 1, PACKED): (1500.0, 900.0)}
    assert model.version == 2


def test_another_gpu_count_is_scaled_by_the_priors_median_reference() -> None:
    model = learned()
    model.observe("new", "v100", 1, PACKED, 7 * 100, 100)  # 7 steps/s on one V100
    # 1 -> 4 GPUs: median of the references' 3, 4 and 1.5 is 3: 7 * 3 = 21.
    assert_answer(model.explain("new", "v100", 4, PACKED), 21.0, "count-scaled")
    other = learned()
    other.observe("new", "v100", 4, PACKED, 12 * 100, 100)  # 12 steps/s on four V100s
    # 4 -> 1 GPU: median of 10/30, 5/20 and 1/1.5 is 1/3: 12 / 3 = 4.
    assert other.throughput("new", "v100", 1, PACKED) == pytest.approx(4.0)


def test_the_jobs_own_scaling_on_another_gpu_type_comes_first() -> None:
    model = learned()
    model.observe("new", "k80", 1, PACKED, 200, 100)  # 2 steps/s
    model.observe("new", "k80", 4, PACKED, 500, 100)  # 5 steps/s: it scales by 2.5 there
    model.observe("new", "v100", 1, PACKED, 700, 100)  # 7 steps/s
    # On the V100 at 4 GPUs: 7 * 2.5 = 17.5 (its own scaling), not the prior's 7 * 3.
    assert_answer(model.explain("new", "v100", 4, PACKED), 17.5, "count-scaled")


def test_without_references_a_count_scales_linearly() -> None:
    model = learned(None, gpu_types=["v100"])
    model.observe("new", "v100", 2, PACKED, 600, 100)  # 6 steps/s on 2 GPUs: 3 per GPU
    assert model.throughput("new", "v100", 8, PACKED) == pytest.approx(24.0)  # 8 * 3
    # A change of placement alone scales by 1.
    assert model.throughput("new", "v100", 2, SPREAD) == pytest.approx(6.0)


def test_another_gpu_type_is_borrowed_by_the_priors_median_ratio() -> None:
    model = learned()
    model.observe("new", "v100", 1, PACKED, 700, 100)  # 7 steps/s on a V100
    # k80 / v100 at one GPU: median of 0.2, 0.4 and 0.35 is 0.35: 7 * 0.35 = 2.45.
    assert_answer(model.explain("new", "k80", 1, PACKED), 2.45, "type-borrowed")
    # At 4 GPUs on a K80: 21 on four V100s (count-scaled as above); the prior has no
    # reference at 4 K80s, so the one-GPU ratio 0.35: 21 * 0.35 = 7.35.
    assert model.throughput("new", "k80", 4, PACKED) == pytest.approx(7.35)


def test_borrowed_from_several_gpu_types_is_their_median() -> None:
    # One reference: 1, 2 and 4 steps/s on a, b and c. The job ran at 3 on a and at 10 on
    # b: borrowed to c, 3 * 4/1 = 12 and 10 * 4/2 = 20, their median (mean) 16.
    prior = ThroughputTable.from_rows([("r", "a", 1, PACKED, 1.0), ("r", "b", 1, PACKED, 2.0),
                                       ("r", "c", 1, PACKED, 4.0)])
    model = learned(prior)
    model.observe("new", "a", 1, PACKED, 30, 10)
    model.observe("new", "b", 1, PACKED, 100, 10)
    assert_answer(model.explain("new", "c", 1, PACKED), 16.0, "type-borrowed")


def test_a_never_seen_job_type_starts_at_the_priors_median() -> None:
    model = learned()
    # One V100: median of 10, 5, 1 = 5; one K80: median of 2, 2, 0.35 = 2; four V100s:
    # median of 30, 20, 1.5 = 20.
    assert model.explain("unseen", "v100", 1, PACKED) == (5.0, "bootstrap")
    assert model.explain("unseen", "k80", 1, PACKED) == (2.0, "bootstrap")
    assert model.throughput("unseen", "v100", 4, PACKED) == 20.0
    # Two V100s, which no reference has: the one-GPU median 5 scaled 1 -> 2 GPUs, which
    # no reference gives either: linearly, 10.
    assert model.throughput("unseen", "v100", 2, PACKED) == pytest.approx(10.0)
    # Schedulable on every GPU type the prior has; an unheard-of type is 0.
    assert all(model.throughput("unseen", g, 1, PACKED) > 0 for g in PRIOR.gpu_types)
    assert model.explain("unseen", "a100", 1, PACKED) == (0.0, "unknown")


def test_a_measurement_replaces_the_bootstrap() -> None:
    model = learned()
    assert model.throughput("new", "v100", 1, PACKED) == 5.0
    model.observe("new", "v100", 1, PACKED, 90, 10)
    assert model.throughput("new", "v100", 1, PACKED) == 9.0


def test_with_nothing_known_the_fallback_makes_a_job_schedulable() -> None:
    model = learned(None, gpu_types=["v100", "k80"], fallback=0.5)
    assert model.explain("new", "v100", 4, PACKED) == (2.0, "fallback")  # 0.5 per GPU
    assert model.throughput("new", "p100", 1, PACKED) == 0.0
    # Once other job types ran on the GPU type, a new one starts at their median.
    model.observe("a", "k80", 1, PACKED, 30, 10)
    model.observe("b", "k80", 1, PACKED, 10, 10)
    model.observe("c", "k80", 1, PACKED, 20, 10)
    assert model.explain("new", "k80", 1, PACKED) == (2.0, "bootstrap")  # median 3, 1, 2


def test_a_job_the_prior_knows_keeps_the_priors_answers_and_zeros() -> None:
    model = learned()
    assert model.explain("r1", "v100", 4, PACKED) == (30.0, "prior")
    assert model.throughput("r1", "k80", 4, PACKED) == 0.0  # the prior: cannot run
    model.observe("r1", "v100", 1, PACKED, 800, 100)  # 8 steps/s, the prior said 10
    # Scaled by its own prior curve (x3), not the references' median: 8 * 3 = 24.
    assert_answer(model.explain("r1", "v100", 4, PACKED), 24.0, "count-scaled")
    # Borrowed to the K80 by its own prior ratio 2/10: 8 * 0.2 = 1.6.
    assert model.throughput("r1", "k80", 1, PACKED) == pytest.approx(1.6)
    assert model.explain("r1", "k80", 4, PACKED) == (0.0, "prior")


def test_matrix_job_and_gpu_types() -> None:
    model = learned(gpu_types=["p100"])
    model.observe("new", "v100", 1, PACKED, 700, 100)
    grid = model.matrix(["new", "unseen"], ["v100", "k80"], [1, 4], PACKED)
    assert grid.shape == (2, 2, 2)
    assert grid == pytest.approx(np.array([[[7.0, 21.0], [2.45, 7.35]],
                                           [[5.0, 20.0], [2.0, 2.0 * 3]]]))
    assert model.job_types == {"r1", "r2", "r3", "new"}
    assert model.gpu_types == {"v100", "k80", "p100"}


def test_pickle_keeps_what_was_learned() -> None:
    model = learned(gpu_types=["p100"])
    model.observe("new", "v100", 1, PACKED, 1200, 600)
    model.observe("new", "v100", 1, PACKED, 300, 300)
    copy = pickle.loads(pickle.dumps(model))
    assert copy.sums() == model.sums()
    assert copy.gpu_types == model.gpu_types
    for key in [("new", "v100", 1, PACKED), ("new", "k80", 4, PACKED),
                ("unseen", "p100", 1, PACKED)]:
        assert copy.explain(*key) == model.explain(*key)
    copy.observe("new", "v100", 1, PACKED, 0, 100)
    assert model.sums() == {("new", "v100", 1, PACKED): (1500.0, 900.0)}


def test_what_was_learned_is_a_table_hetsched_reads(tmp_path: Path) -> None:
    model = learned()
    model.observe("new", "v100", 1, PACKED, 1200, 600)
    model.observe("new", "k80", 8, SPREAD, 50, 100)
    assert model.rows() == [("new", "k80", 8, SPREAD, 0.5), ("new", "v100", 1, PACKED, 2.0)]
    path = tmp_path / "learned.csv"
    write_throughput_csv(model.table(), path)
    assert read_throughput_table(path).rows() == model.rows()
    frozen = model.snapshot(["new"], ["v100"], [1, 4], [PACKED])
    assert frozen.rows() == [("new", "v100", 1, PACKED, 2.0),
                             ("new", "v100", 4, PACKED, pytest.approx(6.0))]


@pytest.mark.parametrize(("args", "pieces"), [
    (("new", "v100", 1, PACKED, -1.0, 10.0), ["observe.steps", "bad steps", "-1.0"]),
    (("new", "v100", 1, PACKED, 10.0, math.nan), ["observe.trace_seconds", "nan"]),
    (("new", "v100", 1, PACKED, 10.0, 0.0), ["observe.trace_seconds", "a run of no time"]),
    (("new", "v100", 1, PACKED, math.inf, 10.0), ["observe.steps", "inf"]),
    (("new", "v100", 0, PACKED, 10.0, 10.0), ["observe.num_gpus", "bad GPU count"]),
    (("new", "v100", True, PACKED, 10.0, 10.0), ["observe.num_gpus"]),
    (("new", "v100", 1, "stacked", 10.0, 10.0), ["observe.placement", "'stacked'"]),
    (("", "v100", 1, PACKED, 10.0, 10.0), ["observe.job_type", "empty name"]),
    (("new", "v100", 1, PACKED, 1e12, 1.0), ["throughput out of range"]),
])
def test_a_bad_observation_is_refused_and_changes_nothing(args: tuple[object, ...],
                                                          pieces: list[str]) -> None:
    model = learned()
    model.observe("new", "v100", 1, PACKED, 100, 10)
    raises_input_error(lambda: model.observe(*args), "observe.", pieces)  # type: ignore[arg-type]
    assert model.sums() == {("new", "v100", 1, PACKED): (100.0, 10.0)}
    assert model.version == 1


def test_a_run_without_progress_is_a_measured_zero() -> None:
    model = learned()
    assert model.observe("new", "k80", 1, PACKED, 0, 100) == 0.0
    assert model.explain("new", "k80", 1, PACKED) == (0.0, "measured")
    # A zero is not borrowed elsewhere: one V100 is still the bootstrap.
    assert model.explain("new", "v100", 1, PACKED) == (5.0, "bootstrap")


def test_the_learned_file_is_a_table_and_learning_goes_on_from_it(tmp_path: Path) -> None:
    model = learned()
    model.observe("new", "v100", 1, PACKED, 1200, 600)
    model.observe("new", "v100", 1, PACKED, 300, 300)
    model.observe("new", "k80", 8, SPREAD, 50, 100)
    path = tmp_path / "learned.csv"
    model.write_csv(path)
    # --throughput reads it as a table (the steps and seconds columns ignored) ...
    assert read_throughput_table(path).rows() == model.rows()
    # ... and a restarted agent learns on with the same weights: one more run of 1,500
    # steps in 900 s gives (1,500 + 1,500) / (900 + 900) = 5/3 again, then 3,000 more in
    # 900 s: 6,000 / 2,700 = 2.222.
    again = LearnedThroughput.read_csv(path, PRIOR)
    assert again.sums() == model.sums()
    assert again.observe("new", "v100", 1, PACKED, 1500, 900) == pytest.approx(5 / 3)
    assert again.observe("new", "v100", 1, PACKED, 3000, 900) == pytest.approx(6000 / 2700)
    assert again.explain("new", "k80", 8, SPREAD) == (0.5, "measured")


@pytest.mark.parametrize(("row", "pieces"), [
    ("new,v100,1,packed,2,1200,0", ["line 2.seconds", "'0'"]),
    ("new,v100,1,stacked,2,1200,600", ["line 2.placement", "'stacked'"]),
    ("new,v100,0,packed,2,1200,600", ["line 2.num_gpus"]),
    (",v100,1,packed,2,1200,600", ["observe.job_type", "empty name"]),
])
def test_a_bad_learned_file_names_the_line(tmp_path: Path, row: str, pieces: list[str]) -> None:
    path = tmp_path / "learned.csv"
    path.write_text("job_type,gpu_type,num_gpus,placement,throughput,steps,seconds\n"
                    f"{row}\n")
    raises_input_error(lambda: LearnedThroughput.read_csv(path), str(path), pieces)
