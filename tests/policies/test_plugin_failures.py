"""A policy of yours that exits, raises, returns garbage or hangs
ends the replay with one line naming the policy, the decision time and the job, exit 3,
and what ran until then written and marked as the policy's failure (as an interrupt
is); one that fails to import or to be made is a bad ``--policy`` (exit 2). Before, a
``sys.exit(0)`` in ``decide`` ended the replay with exit 0 and nothing written, and a
loop hung it for ever."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetsched
from hetsched import plugins
from hetsched.cli.main import main
from hetsched.core.errors import EXIT_POLICY_FAILED, PolicyError
from tests.helpers import INSTANCES, ROOT, exits_2

SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
CLUSTER = "v100=4,k80=4"

POLICY = '''
import sys
import time

from hetsched.policy_api import Decision, PolicyHooks, Start


class Bad(PolicyHooks):
    name = "bad"
    round_s = None

    def decide(self, state):
        job = min(state.pending, key=lambda job: job.id)
        v100 = sorted(g for g in state.free if state.cluster.gpu_by_id[g].gpu_type == "v100")
        k80 = sorted(g for g in state.free if state.cluster.gpu_by_id[g].gpu_type == "k80")
{body}
'''


def _policy(tmp_path: Path, body: str) -> str:
    path = tmp_path / "bad.py"
    path.write_text(POLICY.format(body="\n".join("        " + line
                                                 for line in body.splitlines())))
    return f"{path}:Bad"


def _fails(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == EXIT_POLICY_FAILED, err
    assert "Traceback" not in err
    assert "internal error" not in err
    return err


@pytest.mark.slow
@pytest.mark.parametrize(("body", "problem"), [
    ("sys.exit(0)", "decide called sys.exit(0)"),
    ("raise ValueError('nope')", "decide raised ValueError: nope"),
    ("return None", "decide returned NoneType None, not a Decision"),
    ("return 'start everything'", "decide returned str 'start everything', not a Decision"),
    ("return Decision(start=[job.id])", "a start that is not a Start of GPU ids: str"),
    ("return Decision((Start(job.id, 'v100', (v100[0], v100[0])),))",
     ", job 0: started it on GPUs that are not free"),
    ("return Decision((Start(job.id, 'v100', ('nowhere/9',)),))",
     ", job 0: started it on GPUs the cluster does not have: ['nowhere/9']"),
    ("return Decision((Start(job.id, 'v100', (k80[0],)),))",
     ", job 0: started it on GPUs of the wrong type"),
    ("return Decision((Start('ghost', 'v100', (v100[0],)),))",
     ", job ghost: started a job that is not pending"),
    ("return Decision((Start(job.id, 'v100', tuple(v100[:job.num_gpus + 1])),))",
     ", job 0: gave it 3 GPUs, allowed [2]"),
    ("while True:\n    pass", "decide ran over its limit of 0.5 s wall time per decision"),
    ("time.sleep(60)", "decide ran over its limit of 0.5 s wall time per decision"),
], ids=["exit-0", "raises", "none", "string", "start-not-start", "gpu-twice", "no-such-gpu",
        "wrong-type", "not-pending", "too-many-gpus", "loop", "sleep"])
def test_a_failing_policy_ends_the_replay_with_exit_3_and_writes_what_ran(
        body: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    err = _fails(["replay", str(SAMPLE), "--format", "philly", "--cluster", CLUSTER,
                  "--policy", _policy(tmp_path, body), "--decision-timeout", "0.5",
                  "--out", str(out)], capsys)
    # The first decision is at the first arrival (t = 0 s: arrivals count from the first).
    assert err.startswith("error: policy bad failed at t = 0.0 s"), err
    assert problem in err, err
    assert err.count("\n") == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["policy_failure"] == err.removeprefix("error: ").strip()
    assert (out / "decisions.csv").is_file()
    assert (out / "run.toml").is_file()


def test_in_python_the_failure_is_raised_with_what_ran(tmp_path: Path) -> None:
    instance = hetsched.load_instance(INSTANCES / "small.json")
    reference = _policy(tmp_path, "raise ValueError('nope')")
    with pytest.raises(PolicyError, match="decide raised ValueError: nope") as raised:
        hetsched.replay(instance.jobs, instance.cluster, reference,
                        throughput=instance.throughput)
    partial = raised.value.replay
    assert partial.interrupted
    assert partial.failure is raised.value
    assert partial.summary()["completed"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(("text", "problem"), [
    ("import sys\nsys.exit(3)\n", "the policy file failed to load: sys.exit(3) was called"),
    ("raise ImportError('no lab here')\n",
     "the policy file failed to load: ImportError: no lab here"),
    ("while True:\n    pass\n", "the policy file failed to load: still running after 0.5 s"),
    ("from hetsched.policy_api import PolicyHooks\n\nclass Bad(PolicyHooks):\n"
     "    name = 'bad'\n    round_s = None\n\n    def __init__(self):\n"
     "        raise RuntimeError('no GPUs for me')\n\n    def decide(self, state):\n"
     "        return None\n", "cannot make the policy: RuntimeError: no GPUs for me"),
], ids=["exit-at-import", "raise-at-import", "loop-at-import", "constructor-raises"])
def test_a_policy_that_fails_to_load_or_to_be_made_is_a_bad_policy_option(
        text: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "LOAD_TIMEOUT_S", 0.5)
    path = tmp_path / "bad.py"
    path.write_text(text)
    out = tmp_path / "out"
    err = exits_2(["replay", str(SAMPLE), "--format", "philly", "--cluster", CLUSTER,
                   "--policy", f"{path}:Bad", "--out", str(out)], capsys)
    assert problem in err, err
    assert "--policy" in err
    assert err.count("\n") == 1
    assert not out.exists()
