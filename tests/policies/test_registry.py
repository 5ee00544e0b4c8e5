"""One registry: every name works in solve (static), replay (rolling) and bench alike."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hetsched.core.check import check
from hetsched.core.errors import InputError
from hetsched.core.result import Status
from hetsched.files.instance import load_instance
from hetsched.policies.fifo import FifoPlanner
from hetsched.policies.replanning import Replanning
from hetsched.registry import ENTRIES, entry, is_exact, names, planner, rolling
from hetsched.simulate.simulated import Simulated
from hetsched.simulate.simulator import Simulator
from hetsched.solving import SolveOptions, solve
from tests.helpers import INSTANCES, ROOT

TINY = load_instance(INSTANCES / "tiny.json")
SMALL = load_instance(INSTANCES / "small.json")


def test_entries_declare_what_their_classes_do() -> None:
    # The registry declares back-ends without importing the classes; they must agree.
    for name, found in ENTRIES.items():
        assert found.planner or found.policy, name
        if found.planner is not None:
            made = planner(name)
            assert made.name == name
            assert tuple(made.backends) == found.backends, name
    assert [n for n in names() if is_exact(n)] == ["allox", "deadline", "progress",
                                                    "progress-elastic", "progress-packed",
                                                    "topology"]
    assert is_exact("deadline-agnostic")
    assert not is_exact("gavel")
    assert not is_exact("no-such-policy")


@pytest.mark.parametrize("name", [*names(), "srtf-agnostic", "deadline-agnostic"])
def test_every_name_solves_a_static_instance_and_passes_the_checker(name: str) -> None:
    # tiny.json: 3 jobs on 2 GPUs. Rolling policies run through the simulator
    # (Simulated), static models are solved; every schedule passes the checker.
    result = solve(TINY, name, SolveOptions(time_limit_s=30.0, deterministic=True))
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert check(TINY, result.schedule) == []
    assert result.metrics is not None
    assert result.metrics.scheduled == 3


@pytest.mark.parametrize("name", names())
def test_every_name_is_a_rolling_policy(name: str) -> None:
    policy = rolling(name, time_limit_s=1.0, deterministic=True)
    assert policy.name == name
    if ENTRIES[name].policy is None:  # a static model, replanned
        assert isinstance(policy, Replanning)
        assert policy.preemptive == (name == "deadline")


def test_simulated_srtf_is_the_replay_of_the_instance() -> None:
    # solve --model srtf is the simulator's replay of small.json under SRTF (restart
    # penalty 30 s): the same run segments, and the objective is the total weighted
    # completion time of the jobs' last segments.
    result = solve(SMALL, model="srtf")
    replay = Simulator(SMALL.cluster, SMALL.jobs, rolling("srtf"), truth=SMALL.throughput).run()
    assert result.schedule == replay.schedule()
    assert result.extra["preemptions"] == replay.summary()["preemptions"]
    assert len(result.schedule) == len(SMALL.jobs) + result.extra["preemptions"]
    finish = {r.job.id: r.finish for r in replay.records.values()}
    assert result.objective == pytest.approx(sum(
        job.weight * (finish[job.id] - job.arrival) for job in SMALL.jobs))
    assert check(SMALL, result.schedule) == []
    assert result.bound is None
    assert result.status is Status.FEASIBLE


def test_jobs_that_arrived_before_now_are_released_at_now() -> None:
    later = SMALL.replace(now=500.0)
    result = solve(later, model="sjf")
    assert min(a.start for a in result.schedule) >= 500.0
    assert check(later, result.schedule) == []


def test_fifo_is_static_in_solve_and_native_in_replay() -> None:
    assert isinstance(planner("fifo"), FifoPlanner)
    assert isinstance(planner("gavel"), Simulated)
    assert planner("gavel").backends == ("highs", "cbc", "scip")


def test_unknown_names_and_back_ends_name_the_parameter() -> None:
    with pytest.raises(InputError) as error:
        planner("magic")
    assert (error.value.problem, error.value.path) == ("unknown model", "model")
    with pytest.raises(InputError) as error:
        rolling("magic-agnostic")
    assert (error.value.problem, error.value.path) == ("unknown policy", "policy")
    assert entry("gavel-agnostic").name == "gavel"
    with pytest.raises(InputError, match="no such back-end") as error:
        solve(TINY, "srtf", SolveOptions(backend="cpsat"))
    assert error.value.path == "backend"


@pytest.mark.slow
def test_cli_solve_with_a_rolling_policy() -> None:
    # ``solve`` with a rolling policy as the model; the JSON's schedule has the run segments.
    done = subprocess.run([sys.executable, "-m", "hetsched", "solve",
                           str(INSTANCES / "small.json"), "--model", "srtf", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["violations"] == []
    assert document["model"] == "srtf"
    # A preempted job's rows carry the work of each segment; the others run whole.
    segments = [row for row in document["schedule"] if "work" in row]
    preemptions = document["extra"]["preemptions"]
    assert len(document["schedule"]) == 20 + preemptions
    assert preemptions < len(segments) <= 2 * preemptions
    bad = subprocess.run([sys.executable, "-m", "hetsched", "solve",
                          str(INSTANCES / "small.json"), "--model", "srtf", "--backend",
                          "cpsat"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2
    assert "--backend: model srtf has no such back-end" in bad.stderr


def test_model_knobs_are_constructor_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from hetsched.cli.main import main

    tardy = solve(TINY, "deadline", SolveOptions(time_limit_s=30.0, deterministic=True),
                  objective="tardiness")
    assert tardy.extra["deadline_objective"] == "tardiness"
    assert planner("allox", alpha=0.5).alpha == 0.5  # type: ignore[attr-defined]
    # A rolling policy's parameters reach it through Simulated.
    assert check(SMALL, solve(SMALL, model="srtf", margin=0.0).schedule) == []
    with pytest.raises(InputError, match="model fifo has no setting alpha") as error:
        solve(TINY, model="fifo", alpha=0.5)
    assert error.value.path == "alpha"
    with pytest.raises(InputError, match="bad alpha"):
        planner("allox", alpha=2.0)
    with pytest.raises(InputError, match="unknown deadline objective"):
        planner("deadline", objective="late")
    # On the command line a knob is passed only when given, and named by its option.
    with pytest.raises(SystemExit) as exit_info:
        main(["solve", str(INSTANCES / "tiny.json"), "--model", "fifo", "--alpha", "0.5"])
    assert exit_info.value.code == 2
    assert "error: --alpha: model fifo has no setting alpha" in capsys.readouterr().err
