"""One replay pipeline, one set of defaults: the ``hetsched replay`` command,
:func:`hetsched.replaying.run_replay`, the ``hetsched bench`` command and
:func:`hetsched.bench.runner.run_bench`, and :func:`hetsched.replay` on the same jobs give
byte-identical ``jobs.csv`` and ``decisions.csv`` when no setting is given, and record
the same solver limit per decision (the one default of
:class:`hetsched.core.settings.ReplaySettings`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetsched
from hetsched.bench.runner import run_bench
from hetsched.bench.settings import BenchSettings
from hetsched.cli.main import main
from hetsched.core.settings import DECISION_LIMIT, ReplaySettings
from hetsched.files.replay_inputs import read_jobs, replay_inputs
from hetsched.replaying import run_replay
from tests.helpers import ENGINE_CLUSTER as CLUSTER
from tests.helpers import ROOT, engine_trace

TRACE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


def _files(folder: Path) -> tuple[str, str, object]:
    summary = json.loads((folder / "summary.json").read_text())
    return ((folder / "jobs.csv").read_text(), (folder / "decisions.csv").read_text(),
            summary["solver_limit"])


# gavel solves an LP at every round and deadline a MILP at every event, under the limit
# per decision; srtf solves nothing.
@pytest.mark.slow
@pytest.mark.parametrize("policy", ["srtf", "gavel", "deadline"])
def test_every_entry_point_replays_alike_by_default(policy: str, tmp_path: Path) -> None:
    # 20 jobs of the built-in catalogue on 4 V100 + 4 K80, arriving every 2 minutes on
    # average: jobs queue, so the policies' choices matter.
    trace = engine_trace(tmp_path / "trace", jobs=20)
    common = [str(trace), "--format", "native", "--cluster", CLUSTER]
    main(["replay", *common, "--policy", policy, "--out", str(tmp_path / "cli")])
    run_replay(trace, "native", CLUSTER, policy, out=tmp_path / "python",
               show_progress=False)
    main(["bench", "--trace", *common, "--policies", policy, "--workers", "1",
          "--no-lp-bound", "--out", str(tmp_path / "bench-cli")])
    run_bench(BenchSettings(trace=trace, trace_format="native", cluster=CLUSTER,
                            policies=(policy,), workers=1, lp_bound=False),
              tmp_path / "bench-python", report=False)
    run = f"runs/{policy}-s0-l1"
    outputs = {name: _files(folder) for name, folder in (
        ("cli", tmp_path / "cli"), ("python", tmp_path / "python"),
        ("bench-cli", tmp_path / "bench-cli" / run),
        ("bench-python", tmp_path / "bench-python" / run))}
    # The one default: DECISION_LIMIT deterministic work units per decision.
    limit = {"per_decision": DECISION_LIMIT, "unit": "work units"}
    assert {name: files[2] for name, files in outputs.items()} == dict.fromkeys(outputs, limit)
    reference = outputs["cli"][:2]
    assert {name: files[:2] == reference for name, files in outputs.items()} == dict.fromkeys(
        outputs, True)
    # In memory: hetsched.replay on the jobs the trace reader gives (the same reader, the
    # same seed), and hetsched.replay_trace on the file.
    inputs = replay_inputs(trace, "native", CLUSTER)
    jobs = read_jobs(inputs).jobs
    outcome = hetsched.replay(jobs, inputs.cluster, policy, throughput=inputs.truth,
                              model=inputs.model, colocation=inputs.colocation)
    files = outcome.replay.files()
    assert (files["jobs.csv"], files["decisions.csv"]) == reference
    files = hetsched.replay_trace(trace, "native", CLUSTER, policy).replay.files()
    assert (files["jobs.csv"], files["decisions.csv"]) == reference


def test_the_defaults_are_defined_once() -> None:
    # Every entry point's default is the record's: the command's options show it, and a
    # policy made by the registry with no setting gets the replay's limit per decision.
    from hetsched.cli.replay_options import DEFAULTS
    from hetsched.registry import rolling

    assert ReplaySettings() == DEFAULTS
    assert (DEFAULTS.time_limit_s, DEFAULTS.deterministic, DEFAULTS.restart_penalty_s) == (
        0.1, True, 30.0)
    gavel = rolling("gavel")
    params = gavel.params  # type: ignore[attr-defined]
    assert (params.time_limit_s, params.deterministic) == (0.1, True)
    settings = BenchSettings(trace=TRACE, trace_format="philly", cluster=CLUSTER,
                             policies=("fifo",), workers=1)
    assert settings.run_settings(3, 2.0) == ReplaySettings(seed=3, load=2.0)


@pytest.mark.parametrize(("changes", "message"), [
    ({"time_limit_s": float("nan")}, "bad time limit"),
    ({"time_limit_s": float("inf")}, "bad time limit"),
    ({"load": 0.0}, "bad load"),
    ({"seed": 0.5}, "bad seed"),
    ({"deterministic": 1}, "bad deterministic"),
    ({"restart_penalty_s": 86_401.0}, "bad restart penalty"),
    ({"start_latency_s": -1.0}, "bad start latency"),
    ({"start_latency_s": True}, "bad start latency"),
    ({"interval_s": 0.5}, "bad decision interval"),
    ({"on_bad_row": "ignore"}, "bad on_bad_row"),
    ({"gpu_aliases": "g3"}, "bad GPU alias"),
    ({"colocation_factor": 0.0}, "bad co-location factor"),
])
def test_settings_are_checked_when_made(changes: dict[str, object], message: str) -> None:
    with pytest.raises(hetsched.InputError, match=message):
        ReplaySettings(**changes)  # type: ignore[arg-type]
