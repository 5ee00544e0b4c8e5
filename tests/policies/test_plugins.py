"""Policies of your own: ``module:Class``, ``file.py:Class`` and installed entry points,
checked against the RollingPolicy protocol (docs/policies.md, "Your own policy")."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import hetsched
from hetsched import plugins
from hetsched.cli.main import main
from hetsched.files.instance import load_instance
from hetsched.registry import entry, names, rolling
from tests.helpers import INSTANCES, ROOT, exits_2

EXAMPLE = ROOT / "examples" / "my_policy.py"
SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
SMALL = load_instance(INSTANCES / "small.json")


def _reference() -> str:
    return f"{EXAMPLE}:MyPolicy"


def test_the_example_policy_replays_like_a_built_in(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    main(["replay", str(SAMPLE), "--format", "philly", "--cluster",
                       "v100=4,k80=4", "--policy", _reference(), "--out", str(tmp_path / "m")])
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert summary["policy"] == _reference()
    assert summary["completed"] == summary["jobs"] > 0
    assert summary["preemptions"] == 0
    # The same replay in memory, from the class itself: the same metrics.
    made = rolling(_reference())
    assert made.name == "smallest-gang-first"
    assert made.round_s is None


def test_smallest_gang_first_backfills_past_a_big_gang() -> None:
    # small.json on its own cluster: the example starts small gangs past a waiting big
    # one, so it never idles GPUs that FIFO leaves idle behind its head job.
    mine = hetsched.replay(SMALL.jobs, SMALL.cluster, rolling(_reference()),
                           throughput=SMALL.throughput)
    fifo = hetsched.replay(SMALL.jobs, SMALL.cluster, "fifo", throughput=SMALL.throughput)
    assert mine.summary.completed == 20
    assert mine.summary.avg_queue_s <= fifo.summary.avg_queue_s


def test_a_module_reference_and_the_agnostic_variant_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lab_policies.py").write_text(EXAMPLE.read_text(encoding="utf-8"))
    monkeypatch.syspath_prepend(str(tmp_path))
    made = rolling("lab_policies:MyPolicy")
    assert made.name == "smallest-gang-first"
    agnostic = rolling("lab_policies:MyPolicy-agnostic")
    assert agnostic.name == "smallest-gang-first-agnostic"
    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, "lab_policies:MyPolicy",
                              throughput=SMALL.throughput)
    assert outcome.summary.completed == 20


def test_solve_runs_a_plugin_through_the_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    main(["solve", str(INSTANCES / "small.json"), "--model", _reference()])
    out = capsys.readouterr().out
    assert "checker: OK" in out
    assert "status: FEASIBLE" in out


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bad_policy.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


@pytest.mark.parametrize(("body", "reference", "piece"), [
    ("", "missing.py:MyPolicy", "no such policy file"),
    ("class Other:\n    pass\n", "{file}:MyPolicy", "no such class in the policy's module"),
    ("class MyPolicy:\n    name = 'x'\n", "{file}:MyPolicy",
     "not a rolling policy"),
    ("from hetsched.policies.rolling import PolicyHooks\nclass MyPolicy(PolicyHooks):\n"
     "    name = 'x'\n    round_s = -5\n    def decide(self, state): pass\n",
     "{file}:MyPolicy", "a policy's round_s must be None or seconds > 0"),
    ("from hetsched.policies.rolling import PolicyHooks\nclass MyPolicy(PolicyHooks):\n"
     "    name = 'x'\n    round_s = None\n    def __init__(self, depth):\n        pass\n"
     "    def decide(self, state): pass\n",
     "{file}:MyPolicy", "cannot make the policy"),
    ("raise RuntimeError('boom')\n", "{file}:MyPolicy",
     "the policy file failed to load: RuntimeError: boom"),
    ("", "no_such_module_anywhere:MyPolicy", "cannot import the policy's module"),
    ("", "nonsense", "unknown policy"),
], ids=["no-file", "no-class", "not-a-policy", "bad-round", "needs-arguments",
        "file-raises", "no-module", "unknown-name"])
def test_a_bad_plugin_exits_2_naming_the_option_and_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, reference: str,
        piece: str) -> None:
    path = _write(tmp_path, body)
    reference = reference.format(file=path)
    err = exits_2(["replay", str(SAMPLE), "--format", "philly", "--cluster", "v100=4",
                   "--policy", reference, "--out", str(tmp_path / "out")], capsys)
    assert err.startswith("error: "), err
    assert f"--policy: {piece}" in err, err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.fixture
def installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package installed with an entry point in the group hetsched.policies, as pip
    would install it (a module and its .dist-info on sys.path)."""
    (tmp_path / "lab_scheduler.py").write_text(EXAMPLE.read_text(encoding="utf-8"))
    info = tmp_path / "lab_scheduler-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-scheduler\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[hetsched.policies]\nlab-smallest = lab_scheduler:MyPolicy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.installed_policies.cache_clear()
    yield "lab-smallest"
    plugins.installed_policies.cache_clear()


def test_an_installed_entry_point_is_a_registered_name(installed_package: str) -> None:
    assert installed_package in names()
    assert "fifo" in names()
    found = entry(installed_package)
    assert found.policy == "lab_scheduler:MyPolicy"
    assert found.plugin
    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, installed_package,
                              throughput=SMALL.throughput)
    assert outcome.summary.completed == 20
    assert hetsched.solve(SMALL, model=installed_package).is_feasible()


@pytest.mark.slow
def test_a_plugin_runs_in_a_bench_under_a_folder_name_of_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert plugins.label(_reference()) == "my_policy.MyPolicy"
    assert plugins.label("pkg.mod:Cls") == "pkg.mod.Cls"
    assert plugins.label("srtf") == "srtf"
    main(["bench", "--trace", str(SAMPLE), "--format", "philly", "--cluster",
                       "v100=4,k80=4", "--policies", f"fifo,{_reference()}", "--workers", "1",
                       "--no-lp-bound", "--out", str(tmp_path / "b")])
    assert (tmp_path / "b" / "runs" / "my_policy.MyPolicy-s0-l1" / "summary.json").is_file()
    assert _reference() in (tmp_path / "b" / "results.csv").read_text()


def test_a_class_missing_members_is_told_which(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "class MyPolicy:\n    name = 'x'\n")
    err = exits_2(["replay", str(SAMPLE), "--format", "philly", "--cluster", "v100=4",
                   "--policy", f"{path}:MyPolicy", "--out", str(tmp_path / "out")], capsys)
    assert "(missing: round_s, decide, quiet_until, on_finished, figures, on_stall; inherit " \
        "hetsched.policy_api.PolicyHooks for the hooks" in err
