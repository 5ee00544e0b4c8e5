"""A replay's decisions log at DEBUG: ``-v`` shows the replay, not one line per decision."""

from __future__ import annotations

import logging

import pytest

import hetsched
from hetsched.core.log_levels import per_decision_logs, solve_log_level
from hetsched.files.instance import load_instance
from tests.helpers import INSTANCES

SMALL = load_instance(INSTANCES / "small.json")


def test_solve_stages_are_info_alone_and_debug_inside_a_replay() -> None:
    assert solve_log_level() == logging.INFO
    with per_decision_logs():
        assert solve_log_level() == logging.DEBUG
        with per_decision_logs():
            assert solve_log_level() == logging.DEBUG
        assert solve_log_level() == logging.DEBUG
    assert solve_log_level() == logging.INFO


def test_a_replanned_model_logs_each_decision_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    # allox is re-solved at the decision points of the replay (20 jobs: 21 decisions, 20
    # with jobs to place), one "solving" line each, all at DEBUG; a solve of its own logs
    # the same line at INFO.
    caplog.set_level(logging.DEBUG, logger="hetsched")
    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, "allox", throughput=SMALL.throughput)
    solving = [r for r in caplog.records if r.getMessage().startswith("solving ")]
    assert len(solving) == outcome.summary.decisions - 1 == 20
    assert {r.levelno for r in solving} == {logging.DEBUG}
    assert not [r for r in caplog.records
                if r.levelno == logging.INFO and r.name.startswith("hetsched.policies")]
    caplog.clear()
    hetsched.solve(SMALL, model="allox")
    solving = [r for r in caplog.records if r.getMessage().startswith("solving ")]
    assert [r.levelno for r in solving] == [logging.INFO]
