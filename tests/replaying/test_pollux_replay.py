"""Replaying Pollux's workloads (``--format pollux``): a made-up workload whose
completions are worked by hand, and a real workload under ``tiresias`` past the checker."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hetsched.cli.main import main
from tests.helpers import ROOT

TOY = ROOT / "tests" / "data" / "pollux" / "workloads" / "workload-1.csv"


def test_a_made_up_workload_completes_when_worked_by_hand(tmp_path: Path) -> None:
    # tests/data/pollux: three toy jobs at 20 samples a step, each 100 / 1.6 + 140 / (12/7)
    # = 144.1667 steps to its goal (tests/speeds/test_efficiency.py), on one node of 4
    # T4s under FIFO:
    # - toy-0, 2 GPUs, arrives at 0 s: 1.8 s a step packed -> 259.5 s;
    # - toy-1, 1 GPU, at 10 s: two passes of 10 samples, 3.0 s a step -> 432.5 s;
    # - toy-2, 2 GPUs, at 20 s: 1 GPU free, waits for toy-0 -> starts at 259.5 s, ends
    #   at 519 s: JCT 499 s. Average (259.5 + 432.5 + 499) / 3 = 397 s.
    main(["replay", str(TOY), "--format", "pollux", "--cluster", "t4=4", "--policy", "fifo",
          "--out", str(tmp_path)])
    with (tmp_path / "jobs.csv").open() as handle:
        jobs = {row["job"]: row for row in csv.DictReader(handle)}
    assert float(jobs["toy-0"]["jct"]) == pytest.approx(259.5)
    assert float(jobs["toy-1"]["jct"]) == pytest.approx(432.5)
    assert float(jobs["toy-2"]["start"]) == pytest.approx(259.5)
    assert float(jobs["toy-2"]["jct"]) == pytest.approx(499.0)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["avg_jct_s"] == pytest.approx(397.0)
    assert summary["format"] == "pollux"
    assert summary["throughput"].endswith("pollux/traces")


def test_a_real_workload_under_tiresias_passes_the_checker(shared_data: Path,
                                                           tmp_path: Path) -> None:
    # Pollux's workload 6 (160 jobs) on 16 nodes of 4 T4s: every job completes and the
    # replay passes the checker (a violation would exit 1). Its average JCT lies within
    # 25 % of Pollux's own tiresias (3,470 s; docs/elastic.md explains the difference).
    trace = shared_data / "pollux" / "workloads" / "workload-6.csv"
    main(["replay", str(trace), "--format", "pollux", "--cluster", "t4=64x4",
          "--policy", "tiresias", "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["jobs"] == summary["completed"] == 160
    assert summary["gpus"] == 64
    assert summary["fallbacks"] == 0
    assert summary["avg_jct_s"] == pytest.approx(3469.69375, rel=0.25)
    with (tmp_path / "jobs.csv").open() as handle:
        types = {row["job_type"] for row in csv.DictReader(handle)}
    assert "cifar10 (batch size 2048)" in types
    assert "ncf (batch size 32768)" in types
