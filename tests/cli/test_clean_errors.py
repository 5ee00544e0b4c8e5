"""Inputs that once ended in "internal error" (exit 1) or in a message
that did not name the value in the file are clean input errors (exit 2, one line naming
where, the value and what was expected)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.records import Job
from tests.helpers import INSTANCES, ROOT, exits_2

PHILLY = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


def tiny(change: Any) -> dict[str, Any]:
    """instances/tiny.json with ``change(document)`` applied."""
    document = json.loads((INSTANCES / "tiny.json").read_text(encoding="utf-8"))
    changed = copy.deepcopy(document)
    change(changed)
    return changed  # type: ignore[no-any-return]


def set_now(d: dict[str, Any]) -> None:
    d["now"] = 1e18


def set_work(d: dict[str, Any]) -> None:
    d["jobs"][0]["work"] = 1e20


def epoch_nanoseconds(d: dict[str, Any]) -> None:
    base = 1_700_000_000_000_000_000
    d["now"] = base
    for job in d["jobs"]:
        job["arrival"] = base + int(job["arrival"] * 1e9)
        job["deadline"] = base + int(job["deadline"] * 1e9)


@pytest.mark.parametrize(("change", "piece"), [
    (set_now, "$.now: value too large (got 1e+18"),
    (set_work, "$.jobs[0].work: value too large (got 1e+20"),
    (epoch_nanoseconds, "$.jobs[0].arrival: value too large (got 1700000000000000000"),
])
@pytest.mark.parametrize("model", [["--model", "deadline", "--backend", "highs"],
                                   ["--model", "deadline"], ["--model", "allox"]])
def test_absurd_times_and_work_are_input_errors(change: Any, piece: str, model: list[str],
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Before: PlacementError (now 1e18, highs), IndexError (work 1e20), CP-SAT's int64
    # Domain TypeError (Unix-epoch nanoseconds): "internal error", exit 1.
    path = tmp_path / "i.json"
    path.write_text(json.dumps(tiny(change)), encoding="utf-8")
    err = exits_2(["solve", str(path), *model, "--time-limit", "5"], capsys)
    assert piece in err


@pytest.mark.parametrize("seeds", ["²", "0,¹", "٣", "2147483648", "99999999999999999999999"])
def test_bench_seeds_must_be_ascii_integers_solvers_take(
        seeds: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "²".isdigit() is True and int("²") raises ValueError: "internal error", exit 1. A
    # seed beyond 2**31 - 1 crashed CP-SAT (the deadline policy) in one run of the bench.
    err = exits_2(["bench", "--trace", str(PHILLY), "--format", "philly", "--cluster",
                   "v100=4", "--policies", "fifo", "--seeds", seeds,
                   "--out", str(tmp_path / "b")], capsys)
    assert "--seeds: bad seed" in err
    assert not (tmp_path / "b").exists()


def test_replay_seed_beyond_32_bits_is_an_input_error(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["replay", str(PHILLY), "--format", "philly", "--cluster", "v100=4",
                   "--policy", "deadline", "--seed", "99999999999999999999999",
                   "--out", str(tmp_path / "r")], capsys)
    assert "--seed: bad seed" in err


def test_a_policy_typo_is_reported_before_the_trace_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import hetsched.files.traces

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the trace was read before the policy name was checked")

    monkeypatch.setattr(hetsched.files.traces, "read_trace", never)
    err = exits_2(["replay", str(PHILLY), "--format", "philly", "--cluster", "v100=4",
                   "--policy", "fifoo", "--out", str(tmp_path / "r")], capsys)
    assert "--policy: unknown policy (got 'fifoo'" in err


def test_a_cluster_node_without_num_gpus_names_the_node_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "c.json"
    cluster.write_text('{"gpu_types": [{"name": "v100"}], "nodes": [{"name": "a", '
                       '"gpu_type": "v100", "num_gpus": 4}, {"name": "b", '
                       '"gpu_type": "v100"}]}', encoding="utf-8")
    err = exits_2(["replay", str(PHILLY), "--format", "philly", "--cluster", str(cluster),
                   "--out", str(tmp_path / "r")], capsys)
    assert "c.json: $.nodes[1]: missing field 'num_gpus'" in err
    assert "__init__" not in err


def test_a_deadline_error_shows_the_arrival_as_given() -> None:
    # Unix-epoch seconds: "1.7e+09" said nothing about which arrival it was.
    with pytest.raises(InputError, match=r"deadline: deadline is not after the arrival "
                       r"\(got 1700000400.0; expected a time after the arrival "
                       r"1700000500.0 s\)"):
        Job("b", 1_700_000_500.0, "cnn", 1, 10.0, deadline=1_700_000_400.0)


@pytest.mark.parametrize(("option", "value"), [("--threads", "100000"), ("--threads", "0"),
                                               ("--gap", "nan"), ("--gap", "-1")])
def test_solver_settings_out_of_range_are_refused(option: str, value: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # Before: --threads 100000 gave HiGHS 100,000 OS threads (it did not stop within its
    # limit: "EngineStuckError", the thread abandoned) and CP-SAT an error, status ERROR
    # with an empty schedule and "checker: OK", exit 0; --gap nan was passed on.
    exits_2(["solve", str(INSTANCES / "small.json"), "--model", "deadline", option, value],
            capsys)


@pytest.mark.parametrize(("field", "value"), [("threads", 100_000), ("threads", True),
                                              ("seed", 2**31), ("seed", -1),
                                              ("gap", float("nan")),
                                              ("time_limit_s", float("nan")),
                                              ("time_limit_s", -1.0)])
def test_solve_options_out_of_range_are_input_errors(field: str, value: object) -> None:
    from hetsched.solving import SolveOptions

    with pytest.raises(InputError, match=f"{field}: bad"):
        SolveOptions(**{field: value})  # type: ignore[arg-type]


def test_solve_takes_its_settings_in_one_solve_options() -> None:
    from hetsched.files.instance import load_instance
    from hetsched.solving import solve

    tiny = load_instance(INSTANCES / "tiny.json")
    with pytest.raises(TypeError, match=r"solve\(\) takes the solve setting 'time_limit' in "
                       r"options: solve\(instance, model, SolveOptions\(time_limit_s=\.\.\.\)\)"):
        solve(tiny, "deadline", time_limit=5.0)
    with pytest.raises(TypeError, match="'backend' in options"):
        solve(tiny, "deadline", backend="cpsat")


@pytest.mark.parametrize("limit", ["0.1", "0.01"])
def test_a_tiny_cbc_limit_returns_the_start_plan(limit: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # Before: status INFEASIBLE, 0 of 20 jobs, "checker: OK", exit 0. Whatever a machine
    # reaches in 0.1 s, a complete schedule that the checker accepts comes back (the start
    # plan at least) and the status never claims infeasibility.
    main(["solve", str(INSTANCES / "small.json"), "--model", "deadline", "--backend", "cbc",
          "--time-limit", limit, "--json"])  # returns: exit 0
    document = json.loads(capsys.readouterr().out)
    assert document["status"] in ("OPTIMAL", "FEASIBLE", "TIME_LIMIT")
    assert len(document["schedule"]) == 20
    assert document["violations"] == []


def test_errors_cross_process_boundaries_as_themselves() -> None:
    """A bench worker's error is pickled back to the bench: an InputError and a checker
    failure (InvalidScheduleError) come back with their message and fields (an error
    that cannot be pickled kills the worker pool, and the cell is reported as a lost
    worker instead of its error)."""
    import pickle

    from hetsched.core.check import Violation
    from hetsched.core.errors import InvalidScheduleError

    error = InputError("bad load", path="load", value=5000, expected="<= 1000", file="f")
    back = pickle.loads(pickle.dumps(error))
    assert (str(back), back.path, back.value) == (str(error), "load", 5000)
    failed = InvalidScheduleError("the replay", [Violation("j1", "finish", "late")])
    again = pickle.loads(pickle.dumps(failed))
    assert (type(again), str(again), again.violations) == \
        (InvalidScheduleError, str(failed), failed.violations)
