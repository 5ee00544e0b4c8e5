"""``hetsched bench --spec sweep.toml`` (hetsched.bench.spec): every bench of the spec
runs (traces, clusters, policies with settings, seeds, loads), the copy in the output
folder runs the same sweep again, and bad specs end in one line naming the file, the key
and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.bench.results import read_results
from hetsched.bench.runner import run_bench
from hetsched.bench.spec import load_sweep
from hetsched.cli.main import main
from tests.helpers import ROOT, engine_bench, engine_trace, exits_2, same_results

POLLUX = ROOT / "tests" / "data" / "pollux" / "workloads" / "workload-1.csv"

SPEC = """\
# the engine bench of tests/helpers.py, on two traces and two clusters
seeds = [0, 1]
loads = [1]
deadline_fraction = 0.5
time_limit = 0.1
lp_bound = false

[[traces]]
path = "a/trace.csv"
format = "native"
clusters = ["v100=4,k80=4", "v100=8,k80=8"]
name = "a"

[[traces]]
path = "b/trace.csv"
format = "native"
cluster = "v100=4,k80=4"
name = "second"

[[policies]]
name = "fifo"

[[policies]]
name = "srtf"

[[policies]]
name = "gavel"

[[policies]]
name = "gavel"
label = "gavel-pop2"
partitions = 2
"""


@pytest.mark.slow
def test_a_spec_runs_every_bench_and_its_copy_runs_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "spec"
    trace_a, trace_b = engine_trace(folder / "a", jobs=12), engine_trace(folder / "b", jobs=6)
    (folder / "sweep.toml").write_text(SPEC)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # relative paths are the spec's, not the shell's
    main(["bench", "--spec", str(folder / "sweep.toml"), "--out", str(out)])
    printed = capsys.readouterr().out
    for name in ("a/v100_4_k80_4", "a/v100_8_k80_8", "second"):
        assert f"{name}: 8 runs done, 0 already in results.csv, 0 failed" in printed
    # Each bench is the bench the API runs with the same settings, cell for cell.
    run_bench(engine_bench(trace_a), tmp_path / "api", report=False)
    same_results(out / "a" / "v100_4_k80_4", tmp_path / "api")
    rows = read_results(out / "a" / "v100_8_k80_8" / "results.csv")
    assert {r["policy"] for r in rows} == {"fifo", "srtf", "gavel", "gavel-pop2"}
    assert {r["cluster"] for r in rows} == {"v100=8,k80=8"}
    labelled = [r for r in rows if r["policy"] == "gavel-pop2"]
    assert {(r["policy_name"], r["partitions"]) for r in labelled} == {("gavel", "2")}
    assert json.loads(labelled[0]["policy_params"]) == {"partitions": 2}
    recorded = json.loads((out / "second" / "bench.json").read_text())
    assert recorded["trace"] == str(trace_b)
    assert recorded["policy_params"] == {"gavel-pop2": {"policy": "gavel", "partitions": 2}}
    # The copy: the spec as written, its root set, so it runs the same sweep from anywhere.
    copy = (out / "sweep.toml").read_text()
    assert copy == f'root = "{folder}"\n' + SPEC
    monkeypatch.chdir(out)
    main(["bench", "--spec", "sweep.toml", "--out", str(out)])
    assert capsys.readouterr().out.count("0 runs done, 8 already in results.csv") == 3
    assert load_sweep(out / "sweep.toml").benches == load_sweep(folder / "sweep.toml").benches


@pytest.mark.slow
def test_a_changed_policy_setting_under_a_label_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine_trace(tmp_path / "a")
    spec = tmp_path / "sweep.toml"
    text = SPEC.split("[[traces]]\npath = \"b")[0] + "[[policies]]\nname = \"gavel\"\n" \
        "label = \"gavel-pop2\"\npartitions = 2\n"
    spec.write_text(text.replace("seeds = [0, 1]", "seeds = [0]"))
    main(["bench", "--spec", str(spec), "--out", str(tmp_path / "out")])
    capsys.readouterr()
    spec.write_text(spec.read_text().replace("partitions = 2", "partitions = 3"))
    err = exits_2(["bench", "--spec", str(spec), "--out", str(tmp_path / "out")], capsys)
    assert "bench.json: policy_params.gavel-pop2: the output folder holds a bench with " \
        "other settings" in err


def spec(top: str = "", policies: str = 'policies = ["fifo"]\n', trace: str = "",
         tables: str = "") -> str:
    """A spec of one trace (a/trace.csv): top-level keys, the policies list, the trace
    table's keys, and tables after it (e.g. [[policies]])."""
    return (f"seeds = [0]\n{top}{policies}[[traces]]\npath = \"a/trace.csv\"\n"
            f"format = \"native\"\ncluster = \"v100=4,k80=4\"\n{trace}{tables}")


@pytest.mark.parametrize(("text", "pieces"), [
    ("seeds = [0\n", ["$: not TOML: "]),
    ('policies = ["fifo"]\n', ["$.traces: missing key"]),
    (spec(policies=""), ["$.policies: missing key"]),
    (spec(top="seed = 1\n"), ["$.seed: unknown key (got 1; expected one of root, traces, "]),
    (spec(trace="threads = 2\n"), ["$.traces[0].threads: unknown key (got 2; "]),
    (spec().replace('"native"', '"csv"'),
     ["$.traces[0].format: bad value (got 'csv'; expected one of gavel, "]),
    (spec(top="seeds = [0, -1]\n").replace("seeds = [0]\n", ""),
     ["$.seeds[1]: bad value (got -1; expected an integer from 0 to "]),
    (spec(top="loads = [1, 0]\n"),
     ["$.loads[1]: bad value (got 0; expected a number from 0.001 to 1000)"]),
    (spec().replace("seeds = [0]", 'seeds = "0,1"'), ["$.seeds: not a list (got '0,1'"]),
    (spec().replace("a/trace.csv", "a/missing.csv"),
     ["$.traces[0].path: no such trace file", "missing.csv"]),
    (spec().replace("v100=4,k80=4", "v100=four"), ["$.traces[0].cluster: ", "v100=four"]),
    (spec(trace='clusters = ["v100=4"]\n'), ["$.traces[0]: one of cluster or clusters"]),
    (spec(trace="limit_jobs = 0\n"),
     ["$.traces[0].limit_jobs: bad value (got 0; expected an integer from 1 to"]),
    (spec(top="deadline_fraction = 2\n"),
     ["$.deadline_fraction: bad value (got 2; expected a number from 0 to 1)"]),
    (spec(policies='policies = ["fifo", "magic"]\n'),
     ["$.policies[1]: unknown policy (got 'magic'"]),
    (spec(policies="", tables='[[policies]]\nname = "fifo"\nlabel = "f2"\npartitions = 2\n'),
     ["$.policies[0].partitions: policy fifo has no setting partitions (got 2; expected "
      "none: fifo has no settings of its own)"]),
    (spec(policies="", tables='[[policies]]\nname = "gavel"\nlabel = "g"\nround = 60\n'),
     ["$.policies[0].round: policy gavel has no setting round (got 60; expected one of "
      "objective, round_s, starvation_rounds, partitions, work_conserving, rounds, "
      "reset_interval_s, water_filling, hierarchical, spare, keep_whole)"]),
    (spec(policies="", tables='[[policies]]\nname = "gavel"\nlabel = "g"\nbackend = "cbc"\n'),
     ["$.policies[0].backend: policy gavel has no setting backend", "(the replay sets it)"]),
    (spec(policies="", tables='[[policies]]\nname = "gavel"\nlabel = "g"\npartitions = 0\n'),
     ["$.policies[0].partitions: bad number of partitions (got 0; expected an integer from"]),
    (spec(policies="", tables='[[policies]]\nname = "gavel"\npartitions = 2\n'),
     ["$.policies[0].label: a policy with settings needs a label", "e.g. gavel-partitions"]),
    (spec(policies='policies = ["gavel", {name = "gavel", label = "gavel", partitions = 2}]\n'),
     ["$.policies[1]: two policies with one label (got 'gavel'"]),
    (spec(policies='policies = [{name = "gavel", label = "a/b", partitions = 2}]\n'),
     ["$.policies[0].label: bad label (got 'a/b'"]),
    (spec(policies='policies = [{name = "gavel", label = "g", round_s = [1, 2]}]\n'),
     ["$.policies[0].round_s: bad value (got [1, 2]; expected a number, a string or"]),
    (spec(trace='gpu_aliases = "g3"\n'),
     ["$.traces[0].gpu_aliases: bad GPU alias (got 'g3'; expected CLUSTER_TYPE=MODEL_TYPE"]),
    (spec(top="gpu_aliases = [1]\n"), ["$.gpu_aliases: bad GPU aliases (got [1]"]),
    (spec(trace='unknown_gpus = "keep"\n'),
     ["$.traces[0].unknown_gpus: bad value (got 'keep'; expected one of error, drop)"]),
    (spec(top="colocation_factor = 0\n"),
     ["$.colocation_factor: bad co-location factor (got 0"]),
    (spec(trace='gpu_sharing = "yes"\n'), ["$.traces[0].gpu_sharing: "]),
    (spec(trace='elastic = 1\n'), ["$.traces[0].elastic: "]),
    # What only reading the inputs finds is found before anything is written, and told
    # with the spec's key, not the command's option (--prices, --elastic, --gpu-alias).
    (spec(top='prices = "foo=1"\n'),
     ["$.prices: price for a GPU type the cluster lacks (got 'foo'"]),
    (spec(top='prices = ""\n'), ["$.prices: bad value (got ''; expected TYPE=USD,"]),
    (spec(trace="elastic = true\n"), ["$.traces[0].elastic: elastic jobs need a format with "
                                      "batch sizes (got 'native'; expected one of pollux"]),
    (spec(top="elastic = true\n"), ["$.elastic: elastic jobs need a format with batch sizes"]),
    (spec(trace='gpu_aliases = "k80=zz9"\n'),
     ["$.traces[0].gpu_aliases: GPU alias to a type the built-in catalogue lacks (got 'zz9'"]),
    (spec().replace("v100=4,k80=4", "v100=4,zz9=4"),
     ["$.traces[0].cluster: GPU types the built-in catalogue does not know (got 'zz9 (4 "]),
])
def test_a_bad_spec_exits_2_naming_the_file_the_key_and_the_value(
        tmp_path: Path, text: str, pieces: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    engine_trace(tmp_path / "a", jobs=4)
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    err = exits_2(["bench", "--spec", str(path), "--out", str(tmp_path / "out")], capsys)
    assert err.startswith(f"error: {path}: "), err
    assert err.count("\n") == 1
    for piece in pieces:
        assert piece in err
    assert not (tmp_path / "out").exists()


def test_what_to_run_comes_from_the_spec_or_the_options_not_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = engine_trace(tmp_path / "a", jobs=4)
    path = tmp_path / "sweep.toml"
    path.write_text(spec())
    err = exits_2(["bench", "--spec", str(path), "--seeds", "0,1", "--out",
                   str(tmp_path / "out")], capsys)
    assert "--seeds: given in the spec file (got '0,1'; expected only --out, --engine, " \
        "--address and --workers beside --spec" in err
    err = exits_2(["bench", "--trace", str(trace), "--format", "native", "--policies", "fifo",
                   "--out", str(tmp_path / "out")], capsys)
    assert "--cluster: missing option" in err
    err = exits_2(["bench", "--spec", str(tmp_path / "nope.toml"), "--out",
                   str(tmp_path / "out")], capsys)
    assert "nope.toml: --spec: cannot read the spec" in err
    assert not (tmp_path / "out").exists()


def test_the_documented_example_spec_reads(shared_data: Path) -> None:
    # benchmarks/sweeps/example.toml is the spec docs/bench.md shows.
    example = ROOT / "benchmarks" / "sweeps" / "example.toml"
    assert example.read_text() in (ROOT / "docs" / "bench.md").read_text()
    sweep = load_sweep(example)
    assert [name for name, _ in sweep.benches] == [
        "ee9e8c/v100_36_p100_36_k80_36", "ee9e8c/v100_8_p100_8_k80_8", "6214e9"]
    first, _, last = (settings for _, settings in sweep.benches)
    # (resolved: ../shared may be a link to the data elsewhere)
    assert first.trace == (shared_data / "gavel" / "traces" / "ee9e8c.trace").resolve()
    assert (first.seeds, first.loads, first.replay.limit_jobs, last.replay.limit_jobs) == \
        ((0, 1), (0.5, 1.0), 200, 100)
    assert first.policies == ("fifo", "gavel", "gavel-pop4")
    assert first.policy_of("gavel-pop4") == ("gavel", (("partitions", 4),))


def test_the_trace_reading_keys_reach_the_benchs_settings(tmp_path: Path) -> None:
    # Top-level values are every trace's default, a trace's own value wins.
    engine_trace(tmp_path / "a", jobs=4)
    path = tmp_path / "sweep.toml"
    path.write_text(spec(top='reference_gpu = "k80"\ncolocation_factor = 0.5\n',
                         trace='gpu_aliases = {p100 = "v100"}\ngpu_sharing = false\n'
                         'unknown_gpus = "drop"\nreference_gpu = "v100"\n'))
    ((_, settings),) = load_sweep(path).benches
    replay = settings.replay
    assert (replay.reference_gpu, dict(replay.gpu_aliases), replay.unknown_gpus,
            replay.gpu_sharing, replay.colocation_factor, replay.elastic) == \
        ("v100", {"p100": "v100"}, "drop", False, 0.5, False)
    # elastic, with the one format whose jobs may be (a native trace's is refused below)
    path.write_text(f'elastic = true\npolicies = ["fifo"]\n[[traces]]\npath = "{POLLUX}"\n'
                    'format = "pollux"\ncluster = "t4=4"\n')
    ((_, settings),) = load_sweep(path).benches
    assert settings.replay.elastic


def two_tenants(folder: Path) -> tuple[Path, Path]:
    """Two tenants as a native trace and a tenant table: A is guaranteed
    the 8 V100s, B the 8 K80s, both may borrow; B's 12 one-GPU jobs come at 0 (8 borrow
    the V100s, the faster type), A's 6 at 1,000 while B's still run."""
    from hetsched.core.records import Job
    from hetsched.files.traces import write_native

    folder.mkdir(parents=True, exist_ok=True)
    jobs = [*(Job(f"b{i}", 0.0, "image-cnn-small", 1, 200000.0, tenant="B")
              for i in range(12)),
            *(Job(f"a{i}", 1000.0, "image-cnn-small", 1, 200000.0, tenant="A")
              for i in range(6))]
    trace = folder / "two.csv"
    write_native(jobs, trace)
    table = folder / "tenants.json"
    table.write_text(json.dumps({"tenants": [
        {"name": "A", "quotas": {"v100": {"nominal": 8}}},
        {"name": "B", "quotas": {"k80": {"nominal": 8}}}]}))
    return trace, table


def test_a_benchs_tenants_are_kept_around_every_policy(tmp_path: Path) -> None:
    # The spec's tenant table reaches every run: fifo alone would leave A's jobs behind
    # B's borrowed V100s (tests/policies/test_quotas.py); kept, every one of A's 6 jobs
    # starts at 1,000 s on a V100 and no quota is broken.
    _, table = two_tenants(tmp_path / "in")
    path = tmp_path / "sweep.toml"
    path.write_text('tenants = "in/tenants.json"\nlp_bound = false\n[[traces]]\n'
                    'path = "in/two.csv"\nformat = "native"\ncluster = "v100=8,k80=8"\n'
                    'name = "two"\n[[policies]]\nname = "fifo"\n')
    ((_, settings),) = load_sweep(path).benches
    assert settings.tenants == table.resolve()
    main(["bench", "--spec", str(path), "--out", str(tmp_path / "out")])
    (row,) = read_results(tmp_path / "out" / "two" / "results.csv")
    assert float(row["quota_violation_gpu_s"]) == 0.0
    summary = json.loads((tmp_path / "out" / "two" / "runs" / "fifo-s0-l1" /
                          "summary.json").read_text())
    assert summary["quota_reclaims"] == 6
    jobs = (tmp_path / "out" / "two" / "runs" / "fifo-s0-l1" / "jobs.csv").read_text()
    assert sum(1 for line in jobs.splitlines() if line.startswith("a")) == 6


def test_a_benchs_tenants_file_is_checked_before_any_run(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    _, table = two_tenants(tmp_path / "in")
    path = tmp_path / "sweep.toml"
    body = ('[[traces]]\npath = "in/two.csv"\nformat = "native"\ncluster = "v100=8"\n'
            '[[policies]]\nname = "fifo"\n')
    path.write_text('tenants = "in/none.json"\n' + body)
    err = exits_2(["bench", "--spec", str(path), "--out", str(tmp_path / "out")], capsys)
    assert "tenants: no such tenants file" in err
    assert "none.json" in err
    table.write_text('{"tenants": [{"name": "A", "weight": -1}]}')
    path.write_text('tenants = "in/tenants.json"\n' + body)
    err = exits_2(["bench", "--spec", str(path), "--out", str(tmp_path / "out")], capsys)
    for piece in ("tenants.json", "weight", "-1"):
        assert piece in err
    assert not (tmp_path / "out").exists()
