"""Reproducing another work's figures: continuous traces drawn as Gavel's simulator draws
them (hetsched.files.traces.continuous), the average JCT over a window of jobs
(``--jct-window``), and a spec's reference figures shown beside the bench's own
(hetsched.bench.references)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hetsched.bench.results import read_results
from hetsched.bench.spec import load_sweep
from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.files.traces import read_trace
from tests.helpers import exits_2


def continuous(folder: Path, jobs: int, rate: float = 1.0, gpus: str = "single") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"continuous-{gpus}.json"
    path.write_text(json.dumps({"jobs": jobs, "rate_per_hour": rate, "gpus": gpus}))
    return path


def test_continuous_traces_follow_gavels_distributions(tmp_path: Path) -> None:
    # 20,000 jobs at 2 per hour: gaps exponential with mean 1,800 s; 80 % of durations
    # 10^U(1.5, 3) minutes (31.6 min to 16.7 h), 20 % 10^U(3, 4) (16.7 h to 6.9 days);
    # GPUs 1, 2, 4, 8 with 0.7, 0.1, 0.15, 0.05. Tolerances: about 4 standard errors.
    trace = read_trace(continuous(tmp_path, 20000, 2.0, "multi"), "continuous", seed=3)
    jobs = trace.jobs
    gaps = np.diff([job.arrival for job in jobs])
    assert gaps.mean() == pytest.approx(1800.0, rel=0.03)
    counts = Counter(job.num_gpus for job in jobs)
    for gpus, share in ((1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05)):
        assert counts[gpus] / len(jobs) == pytest.approx(share, abs=0.015)
    assert jobs[0].arrival == 0.0
    assert trace.reference_gpu == "v100"
    # The same seed draws the same trace; another seed another.
    again = read_trace(continuous(tmp_path, 20000, 2.0, "multi"), "continuous", seed=3)
    assert again.jobs == jobs
    other = read_trace(continuous(tmp_path, 20000, 2.0, "multi"), "continuous", seed=4)
    assert other.jobs != jobs


def test_continuous_single_draws_one_gpu_jobs_with_gavels_durations(tmp_path: Path) -> None:
    # Work is the duration at the reference GPU's speed, so duration = work / speed there.
    from hetsched.core.throughput import Placement
    from hetsched.files.traces.rules import catalogue_throughput

    model = catalogue_throughput()
    trace = read_trace(continuous(tmp_path, 5000), "continuous", throughput=model, seed=0)
    assert {job.num_gpus for job in trace.jobs} == {1}
    minutes = np.array([job.work / model.throughput(job.job_type, "v100", 1, Placement.PACKED)
                        / 60.0 for job in trace.jobs])
    exponent = np.log10(minutes)
    assert exponent.min() >= 1.5 - 1e-9
    assert exponent.max() <= 4.0 + 1e-9
    assert (exponent >= 3.0).mean() == pytest.approx(0.2, abs=0.025)


@pytest.mark.parametrize(("document", "piece"), [
    ({"jobs": 0, "rate_per_hour": 1}, "$.jobs"),
    ({"jobs": 10, "rate_per_hour": -1}, "$.rate_per_hour"),
    ({"jobs": 10, "rate_per_hour": 1, "gpus": "many"}, "$.gpus"),
    ({"jobs": 10}, "not a continuous trace"),
])
def test_a_bad_continuous_document_names_its_field(tmp_path: Path, document: object,
                                                    piece: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        read_trace(path, "continuous")
    assert piece in str(caught.value)
    assert str(path) in str(caught.value)


SPEC = """\
seeds = [0, 1]
loads = [2]
lp_bound = false
jct_window = [20, 60]

[[traces]]
path = "in/continuous-single.json"
format = "continuous"
cluster = "v100=2,k80=2"
name = "cont"

[[policies]]
name = "fifo"

[[policies]]
name = "srtf"

[[references]]
name = "srtf against fifo"
policy = "srtf"
baseline = "fifo"
load = 2
ratio = 0.5
source = "a figure made up for this test"
"""


@pytest.mark.slow
def test_a_spec_shows_its_references_beside_the_benchs_ratios(tmp_path: Path) -> None:
    # 80 one-GPU jobs at 2 per hour (x 2: the load) on 4 GPUs, two seeds. The bench's
    # ratio is the mean over seeds of srtf's average JCT of jobs 20 to 59 over fifo's.
    continuous(tmp_path / "in", 80, 2.0)
    path = tmp_path / "sweep.toml"
    path.write_text(SPEC)
    main(["bench", "--spec", str(path), "--out", str(tmp_path / "out")])
    rows = read_results(tmp_path / "out" / "cont" / "results.csv")
    assert {row["jct_window"] for row in rows} == {"20:60"}
    assert all(int(row["jct_window_jobs"]) == 40 for row in rows)
    mean = {policy: sum(float(r["avg_jct_window_s"]) for r in rows if r["policy"] == policy)
            / 2 for policy in ("fifo", "srtf")}
    # The window's average is over its 40 jobs only: recomputed from jobs.csv.
    jobs = (tmp_path / "out" / "cont" / "runs" / "fifo-s0-l2" / "jobs.csv").read_text()
    header, *lines = jobs.splitlines()
    cells = [dict(zip(header.split(","), line.split(","), strict=False)) for line in lines]
    cells.sort(key=lambda c: (float(c["arrival"]), int(c["job"])))
    window = [float(c["jct"]) for c in cells[20:60]]
    fifo_s0 = next(float(r["avg_jct_window_s"]) for r in rows
                   if r["policy"] == "fifo" and r["seed"] == "0")
    assert fifo_s0 == pytest.approx(sum(window) / 40, rel=1e-9)
    report = (tmp_path / "out" / "cont" / "report.md").read_text()
    ratio = mean["srtf"] / mean["fifo"]
    assert math.isfinite(ratio)
    line = next(x for x in report.splitlines() if x.startswith("| srtf against fifo"))
    assert f"| 0.500 | {ratio:.3f} (jobs 20:60) | {ratio / 0.5:.2f} |" in line


def test_a_bad_reference_names_its_table(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    continuous(tmp_path / "in", 10)
    path = tmp_path / "sweep.toml"
    for before, after, piece in (
            ('baseline = "fifo"', 'baseline = "tiresias"',
             "$.references[0].baseline: not a policy of the spec"),
            ("load = 2\n", "load = 3\n", "$.references[0].load: not a load of the spec"),
            ("ratio = 0.5", "ratio = 0", "$.references[0].ratio"),
            ("jct_window = [20, 60]", "jct_window = [60, 20]", "jct_window: bad JCT window")):
        path.write_text(SPEC.replace(before, after))
        err = exits_2(["bench", "--spec", str(path), "--out", str(tmp_path / "out")], capsys)
        assert piece in err
    path.write_text(SPEC)
    ((_, settings),) = load_sweep(path).benches
    assert settings.replay.jct_window == (20, 60)
    assert [r.policy for r in settings.references] == ["srtf"]
