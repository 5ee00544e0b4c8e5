"""Every option of ``hetsched replay`` either changes the replay or says it does not apply:
each case replays a small shipped trace with and without the option, and either jobs.csv
differs or summary.json's ``warnings`` name the option (hetsched.setting_notices)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetsched
from hetsched.bench.results import read_results
from hetsched.cli.main import main
from hetsched.core.records import Job
from hetsched.files.traces import write_native
from hetsched.registry import ENTRIES
from tests.helpers import ROOT, SHARED_DATA

SAMPLES = ROOT / "tests" / "data" / "traces"
PHILLY = [str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster", "v100=4,k80=4"]
#: Gavel's measurements (its job types, its measured co-location pairs)
GAVEL_JSON = SHARED_DATA / "gavel" / "simulation_throughputs.json"
GAVEL = [str(SAMPLES / "gavel7.trace"), "--format", "gavel", "--cluster",
         "v100=4,p100=4,k80=4", "--throughput", str(GAVEL_JSON)]
#: a Gavel trace of two one-GPU jobs (its 10-field layout)
GAVEL_ONES = [str(SAMPLES / "gavel10.trace"), "--format", "gavel", "--cluster",
              "v100=4,p100=4,k80=4", "--throughput", str(GAVEL_JSON)]
POLLUX = [str(ROOT / "tests" / "data" / "pollux" / "workloads" / "workload-1.csv"),
          "--format", "pollux", "--cluster", "t4=4"]
OPENB = [str(SAMPLES / "openb_small_pods.csv"), "--format", "openb", "--cluster",
         f"openb:{SAMPLES / 'openb_small_nodes.csv'}", "--unknown-gpus", "drop"]


def replayed(folder: Path, args: list[str]) -> tuple[dict[str, object], str]:
    """``hetsched replay ARGS --out FOLDER``: its summary.json and jobs.csv."""
    main(["replay", *args, "--out", str(folder)])
    return (json.loads((folder / "summary.json").read_text()),
            (folder / "jobs.csv").read_text())


def warnings_of(summary: dict[str, object]) -> list[str]:
    found = summary["warnings"]
    assert isinstance(found, list)
    return [str(line) for line in found]


#: (the replay, the option, the setting the warning names, a piece of the warning's why)
IGNORED: list[tuple[object, ...]] = [
    # The default co-location factor prices a job beside others only where no pair was
    # measured, and only jobs that ask for a share of a GPU are placed so: gavel-packed
    # packs whole jobs at measured pairs only.
    ([*GAVEL, "--policy", "gavel-packed"], ["--colocation-factor", "1e-300"],
     "colocation_factor (--colocation-factor) 1e-300", "no job asks for a share"),
    (PHILLY, ["--colocation-factor", "0.5"], "colocation_factor", "no job asks for a share"),
    # Pollux's workloads give each job's work, not a duration measured on some GPU.
    (POLLUX, ["--reference-gpu", "v100"], "reference_gpu (--reference-gpu) v100",
     "the pollux trace gives each job's work"),
    (GAVEL, ["--reference-gpu", "k80"], "reference_gpu (--reference-gpu) k80",
     "the gavel trace gives each job's work"),
    # Elastic jobs under a policy that does not choose GPU counts, and the other way round.
    ([*POLLUX, "--policy", "gavel"], ["--elastic"], "elastic (--elastic) True",
     "policy gavel does not choose GPU counts"),
    ([*POLLUX, "--policy", "fifo"], ["--elastic"], "elastic (--elastic) True",
     "policy fifo does not choose GPU counts"),
    (POLLUX, ["--policy", "progress-elastic"], "policy progress-elastic is made for elastic "
     "jobs", "it ran rigid jobs"),
    # A policy that solves no model has no back-end, solver limit or clock to use.
    (PHILLY, ["--backend", "highs"], "backend (--backend) highs",
     "policy fifo solves no model"),
    (PHILLY, ["--time-limit", "5"], "time_limit_s (--time-limit) 5.0",
     "policy fifo solves no model"),
    (PHILLY, ["--wall-clock"], "deterministic (--wall-clock) False",
     "policy fifo solves no model"),
    # A class of yours takes what its constructor names: examples/my_policy.py nothing.
    ([*PHILLY, "--policy", f"{ROOT / 'examples' / 'my_policy.py'}:MyPolicy"],
     ["--backend", "highs"], "backend (--backend) highs",
     "the constructor of policy " + str(ROOT / "examples" / "my_policy.py")
     + ":MyPolicy takes no backend"),
    # A back-end the policy does not have: it runs with its own first.
    ([*PHILLY, "--policy", "gavel"], ["--backend", "cpsat"], "backend (--backend) cpsat",
     "policy gavel has the back-ends highs, cbc, scip; it ran with highs"),
    # ... a model re-solved at each decision too (not a failure at every decision).
    ([*PHILLY, "--policy", "allox"], ["--backend", "cpsat"], "backend (--backend) cpsat",
     "policy allox has the back-ends matching, highs, cbc, scip; it ran with matching"),
    # Reading the trace: an alias of a type the cluster lacks, a limit above the trace's
    # jobs, a JCT window past its last job, GPU sharing off where nobody shares.
    (PHILLY, ["--gpu-alias", "p100=v100"], "gpu_aliases (--gpu-alias) p100",
     "the cluster has no GPU type p100"),
    (PHILLY, ["--limit-jobs", "50"], "limit_jobs (--limit-jobs) 50", "the trace has 3 jobs"),
    (PHILLY, ["--jct-window", "10:20"], "jct_window (--jct-window) 10:20",
     "the trace has 3 jobs"),
    (PHILLY, ["--no-gpu-sharing"], "gpu_sharing (--no-gpu-sharing) False",
     "no job of the philly trace asks for a share"),
    # Decision points on the grid of the policy's own rounds (gavel's 360 s) add none.
    ([*PHILLY, "--policy", "gavel"], ["--interval", "720"], "interval_s (--interval) 720.0",
     "policy gavel decides every 360 s already"),
    # A seed that draws nothing: Pollux's workloads name each job's type and work, and
    # progress (a rolling policy) is given no seed.
    ([*POLLUX, "--policy", "progress"], ["--seed", "3"], "seed (--seed) 3",
     "the pollux trace names every job's type and work"),
    # Every job on one GPU: no gang to spread, so its packed speed changes nothing.
    (GAVEL_ONES, ["--spread-speed", "packed"], "spread_speed (--spread-speed) packed",
     "every job runs on one GPU"),
]


def cases(table: list[tuple[object, ...]]) -> list[object]:
    """The cases of ``table``, named by the option and the trace's format; those of a
    Gavel trace skip without Gavel's measurements (the real data folder)."""
    made = []
    for case in table:
        base, option = case[0], case[1]
        assert isinstance(base, list)
        assert isinstance(option, list)
        gavel = str(GAVEL_JSON) in base
        made.append(pytest.param(*case, id=" ".join(option) + " " + base[2], marks=[
            pytest.mark.skipif(gavel and not GAVEL_JSON.is_file(),
                               reason=f"real data folder {SHARED_DATA} is absent")]))
    return made


@pytest.mark.parametrize(("base", "option", "named", "why"), cases(IGNORED))
def test_an_option_that_cannot_apply_says_so(tmp_path: Path, base: list[str],
                                             option: list[str], named: str, why: str) -> None:
    without, jobs_without = replayed(tmp_path / "without", base)
    summary, jobs = replayed(tmp_path / "with", base + option)
    assert summary["fallbacks"] == without["fallbacks"] == 0
    said = [line for line in warnings_of(summary) if line.startswith(named)]
    assert len(said) == 1, warnings_of(summary)
    assert why in said[0]
    # ... and it did not apply: the same jobs.csv (elastic jobs have their own types and
    # work, another policy its own schedule), and the replay without it warns of nothing.
    if option[0] not in ("--elastic", "--policy"):
        assert jobs == jobs_without
    assert warnings_of(without) == []


def test_synthetic_deadlines_where_every_job_has_its_own_say_so(tmp_path: Path) -> None:
    trace = tmp_path / "own.csv"
    write_native([Job(f"j{i}", 10.0 * i, "image-cnn-small", 1, 5000.0, deadline=5000.0)
                  for i in range(4)], trace)
    base = [str(trace), "--format", "native", "--cluster", "v100=4"]
    _, jobs_without = replayed(tmp_path / "without", base)
    summary, jobs = replayed(tmp_path / "with", [*base, "--deadline-fraction", "1"])
    assert jobs == jobs_without
    (said,) = warnings_of(summary)
    assert said.startswith("deadline_fraction (--deadline-fraction) 1.0 does not apply: "
                           "every job of the native trace has a deadline of its own")


#: (the replay, the option): options that change jobs.csv, and say nothing.
APPLIED: list[tuple[object, ...]] = [
    (PHILLY, ["--seed", "3"]),  # job types drawn
    (OPENB, ["--colocation-factor", "0.2"]),  # jobs share GPUs (gpu_milli)
    (OPENB, ["--no-gpu-sharing"]),
    ([*POLLUX, "--policy", "progress"], ["--elastic"]),
    (PHILLY, ["--reference-gpu", "k80"]),
    (PHILLY, ["--limit-jobs", "2"]),
]


@pytest.mark.parametrize(("base", "option"), cases(APPLIED))
def test_an_option_that_applies_changes_the_replay_and_says_nothing(
        tmp_path: Path, base: list[str], option: list[str]) -> None:
    _, jobs_without = replayed(tmp_path / "without", base)
    summary, jobs = replayed(tmp_path / "with", base + option)
    assert jobs != jobs_without
    assert not [line for line in warnings_of(summary) if "does not apply" in line]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_registry_says_which_policies_choose_elastic_jobs_gpu_counts(name: str) -> None:
    # Pollux's toy workload, elastic, on 4 T4s: a policy that chooses GPU counts runs some
    # job on a count it did not ask for (and says nothing); one that does not, never does,
    # and its replay says --elastic did not apply.
    outcome = hetsched.replay_trace(POLLUX[0], "pollux", "t4=4", name, elastic=True)
    resized = [record.job.id for record in outcome.replay.records.values()
               if any(len(segment.gpus) != record.job.num_gpus
                      for segment in record.segments)]
    said = [line for line in outcome.summary.warnings if line.startswith("elastic ")]
    if ENTRIES[name].elastic:
        assert resized
        assert not said
    else:
        assert not resized
        assert len(said) == 1


def test_pairs_measured_on_their_own_say_when_nothing_packs(tmp_path: Path) -> None:
    # No job of the Philly sample asks for a share of a GPU, and fifo packs none: the
    # pairs cannot price anything; gavel-packed packs pairs, so they reach it.
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("job_type,other_job_type,gpu_type,throughput,other_throughput,alone,"
                     "other_alone\na,b,v100,6,9,10,12\n")
    _, jobs_without = replayed(tmp_path / "without", PHILLY)
    summary, jobs = replayed(tmp_path / "with", [*PHILLY, "--pairs", str(pairs)])
    assert jobs == jobs_without
    (said,) = warnings_of(summary)
    assert said.startswith(f"pairs (--pairs) {pairs} does not apply: no job asks for a share "
                           "of a GPU and policy fifo packs no jobs (policies that do: gandiva,")
    summary, _ = replayed(tmp_path / "packed", [*PHILLY, "--pairs", str(pairs), "--policy",
                                                "gavel-packed"])
    assert warnings_of(summary) == []


def test_a_bench_says_which_option_did_not_apply_to_which_run(tmp_path: Path) -> None:
    # One --time-limit for fifo, which solves no model, and progress, which does: fifo's
    # rows (and run folders) say it did not apply, progress's say nothing.
    main(["bench", "--trace", PHILLY[0], "--format", "philly", "--cluster", "v100=4,k80=4",
          "--policies", "fifo,progress", "--time-limit", "0.2", "--no-lp-bound",
          "--out", str(tmp_path / "b")])
    rows = {row["policy"]: row for row in read_results(tmp_path / "b" / "results.csv")}
    assert json.loads(rows["fifo"]["warnings"]) == [
        "time_limit_s (--time-limit) 0.2 does not apply: policy fifo solves no model"]
    assert json.loads(rows["progress"]["warnings"]) == []
    summary = json.loads((tmp_path / "b" / "runs" / "fifo-s0-l1" / "summary.json")
                         .read_text())
    assert summary["warnings"] == json.loads(rows["fifo"]["warnings"])
    report = (tmp_path / "b" / "report.md").read_text()
    assert "## Settings that did not apply\n\n- time_limit_s (--time-limit) 0.2 does not " \
        "apply: policy fifo solves no model (runs of fifo)\n" in report


def test_a_native_traces_gpu_shares_are_kept_without_gpu_sharing_and_say_so(
        tmp_path: Path) -> None:
    trace = tmp_path / "shares.csv"
    write_native([Job(f"j{i}", 10.0 * i, "image-cnn-small", 1, 5000.0, gpu_share=0.5)
                  for i in range(3)], trace)
    base = [str(trace), "--format", "native", "--cluster", "v100=4"]
    _, jobs_without = replayed(tmp_path / "without", base)
    summary, jobs = replayed(tmp_path / "with", [*base, "--no-gpu-sharing"])
    assert jobs == jobs_without
    assert warnings_of(summary) == [
        "gpu_sharing (--no-gpu-sharing) False does not apply to the native format: its jobs "
        "keep their gpu_share"]
