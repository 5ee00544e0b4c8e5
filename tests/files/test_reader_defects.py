"""Readers that never misread: zero is a time in openb, the reference GPU type,
one Gavel layout per file, tidy profile rows checked for width, skipping bad rows within
limits, GPU counts beyond a fitted model, GPU types no throughput model knows, gpu_spec
naming an absent type, GPU aliases, job types in jobs.csv, and ``validate --format``.
Every file is written here from the column lists of docs/traces.md."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.settings import parse_gpu_aliases
from hetsched.core.throughput import AliasedThroughput, Placement, ThroughputTable
from hetsched.files.traces import read_trace
from hetsched.files.traces.base import MAX_SKIPPED_ROWS
from hetsched.speeds.fit import fit_throughput_model
from hetsched.speeds.profiles import read_profile, write_profile_csv
from tests.helpers import ROOT, exits_2, synthetic_profile

SAMPLES = ROOT / "tests" / "data" / "traces"
P = Placement.PACKED
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time")
#: A table without v100: t4 (the slow one) and a100, job types cnn and lm on 1-2 GPUs.
NO_V100 = ThroughputTable.from_rows([
    ("cnn", "t4", 1, P, 2.0), ("cnn", "t4", 2, P, 3.0), ("cnn", "a100", 1, P, 8.0),
    ("cnn", "a100", 2, P, 15.0), ("lm", "t4", 1, P, 1.0), ("lm", "a100", 1, P, 5.0),
])


def _pods(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "pods.csv"
    path.write_text("\n".join((POD_HEADER, *rows)) + "\n", encoding="utf-8")
    return path


# --- zero is a time -------------------------------------------------------------------------


def test_openb_pod_created_and_scheduled_at_zero_is_read(tmp_path: Path) -> None:
    path = _pods(tmp_path, "p0,12000,16384,1,1000,,LS,Running,0,12537496,0",
                 "p1,6000,12288,1,1000,,LS,Running,427061,12902960,427061")
    trace = read_trace(path, "openb", throughput=NO_V100, reference_gpu="t4")
    p0, p1 = trace.jobs
    assert (p0.id, p0.arrival, p1.arrival) == ("p0", 0.0, 427061.0)
    # 12,537,496 s on one t4 at the drawn type's t4 speed.
    assert p0.work == 12537496.0 * NO_V100.throughput(p0.job_type, "t4", 1, P)
    assert (trace.skipped_rows, trace.excluded) == (0, {})


def test_openb_empty_scheduled_time_is_never_scheduled_and_empty_creation_is_bad(
        tmp_path: Path) -> None:
    path = _pods(tmp_path, "p0,1,1,1,1000,,LS,Running,0,100,0",
                 "p1,1,1,1,1000,,BE,Pending,10,40,")
    trace = read_trace(path, "openb", throughput=NO_V100, reference_gpu="t4")
    assert [j.id for j in trace.jobs] == ["p0"]
    assert trace.excluded == {"never scheduled": 1}
    bad = _pods(tmp_path, "p0,1,1,1,1000,,LS,Running,,100,0")
    with pytest.raises(InputError, match=r"pods.csv: line 2.creation_time: empty"):
        read_trace(bad, "openb", throughput=NO_V100, reference_gpu="t4")


# --- the reference GPU type -----------------------------------------------------------------


def test_reference_gpu_default_rule_without_v100(tmp_path: Path) -> None:
    path = _pods(tmp_path, "p0,1,1,1,1000,,LS,Running,0,100,0")
    # The model has no v100: the first of gpu_types (in the order given) it knows.
    trace = read_trace(path, "openb", throughput=NO_V100, gpu_types=("a100", "t4"))
    assert trace.reference_gpu == "a100"
    (job,) = trace.jobs
    assert job.work == 100.0 * NO_V100.throughput(job.job_type, "a100", 1, P)
    # With v100 in the model, v100 (whatever the order).
    with_v100 = ThroughputTable.from_rows([*NO_V100.rows(), ("cnn", "v100", 1, P, 4.0)])
    assert read_trace(path, "openb", throughput=with_v100,
                      gpu_types=("a100", "v100")).reference_gpu == "v100"
    with pytest.raises(InputError, match=r"reference_gpu: reference GPU type unknown"):
        read_trace(path, "openb", throughput=NO_V100, reference_gpu="v100")


def test_replay_reference_gpu_option_and_default_by_gpu_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods, nodes = SAMPLES / "openb_g3_pods.csv", SAMPLES / "openb_g3_nodes.csv"
    # No --reference-gpu: the catalogue on t4 and g3 (as a100) has no v100; t4 and g3
    # have 8 GPUs each, so the first in cluster order, t4.
    main(["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
          "--gpu-alias", "g3=a100", "--policy", "fifo", "--out", str(tmp_path / "d")])
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["reference_gpu"] == "t4"
    main(["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
          "--gpu-alias", "g3=a100", "--reference-gpu", "g3", "--policy", "fifo",
          "--out", str(tmp_path / "g")])
    summary = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert summary["reference_gpu"] == "g3"
    err = exits_2(["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
                   "--gpu-alias", "g3=a100", "--reference-gpu", "h100", "--policy", "fifo",
                   "--out", str(tmp_path / "h")], capsys)
    assert "--reference-gpu: reference GPU type unknown to the throughput model " \
        "(got 'h100'; expected one of a100, g3, t4)" in err


@pytest.mark.slow
def test_bench_takes_the_reference_gpu_and_aliases(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods, nodes = SAMPLES / "openb_g3_pods.csv", SAMPLES / "openb_g3_nodes.csv"
    main(["bench", "--trace", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
          "--policies", "fifo", "--reference-gpu", "g3", "--gpu-alias", "g3=a100",
          "--no-lp-bound", "--workers", "1", "--out", str(tmp_path / "b")])
    recorded = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert (recorded["reference_gpu"], recorded["gpu_aliases"]) == ("g3", {"g3": "a100"})
    run = json.loads(next((tmp_path / "b").glob("runs/*/summary.json")).read_text())
    assert (run["reference_gpu"], run["gpu_aliases"]) == ("g3", {"g3": "a100"})


# --- no silent misreads ---------------------------------------------------------------------


LONG = "ResNet-50\tcmd\tdir\t--steps\tFalse\t1000\t1\t1\t-1\t{arrival}"
SHORT = "ResNet-50\tcmd\t--steps\tFalse\t1000\t{arrival}\t1"


def test_gavel_line_of_the_other_layout_is_bad_not_reread(tmp_path: Path) -> None:
    path = tmp_path / "mixed.trace"
    # Line 2 is a 10-field line cut to 7 fields: read in the 7-field layout it would be
    # 2 steps arriving at 1,000 s.
    path.write_text(LONG.format(arrival=0) + "\nResNet-50\tcmd\tdir\t--steps\tFalse\t2\t1000\n"
                    + LONG.format(arrival=5) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_trace(path, "gavel")
    assert str(caught.value) == (
        f"{path}: line 2: a line of the other layout (got 7; expected 10 tab-separated "
        "fields, as on line 1 (one layout per file))")
    trace = read_trace(path, "gavel", on_bad_row="skip")
    assert (trace.skipped_rows, [j.arrival for j in trace.jobs]) == (1, [0.0, 5.0])
    # A 7-field file stays a 7-field file.
    short = tmp_path / "short.trace"
    short.write_text(SHORT.format(arrival=3) + "\n" + SHORT.format(arrival=9) + "\n")
    assert [j.work for j in read_trace(short, "gavel").jobs] == [1000.0, 1000.0]


def test_tidy_profile_row_cut_short_is_an_error_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "profile.csv"
    path.write_text("job_type,gpu_type,num_gpus,placement,throughput,batch_size\n"
                    "cnn,v100,1,packed,19.37,32\n"
                    "\n"
                    "cnn,v100,2,packed,19.0\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_profile(path)
    assert str(caught.value) == (f"{path}: line 4: wrong number of fields (got 5; expected "
                                 "6 fields as in the header)")


def test_skipping_every_row_or_too_many_rows_is_an_error(tmp_path: Path) -> None:
    path = _pods(tmp_path, *(f"p{i},1,1,1,1000,,LS,Running,x,100,0" for i in range(3)))
    with pytest.raises(InputError) as caught:
        read_trace(path, "openb", throughput=NO_V100, on_bad_row="skip", reference_gpu="t4")
    assert "3 of 3 rows are bad (skipped with on_bad_row skip), the first line " \
        "2.creation_time: bad creation_time (got 'x'" in str(caught.value)
    # 12 bad rows of 100: more than 5% and more than 10 rows.
    good = [f"g{i},1,1,1,1000,,LS,Running,{i},1000,{i}" for i in range(88)]
    bad = [f"b{i},1,1,1,1000,,LS,Running,x,1000,1" for i in range(MAX_SKIPPED_ROWS + 2)]
    with pytest.raises(InputError, match=r"12 of 100 rows are bad"):
        read_trace(_pods(tmp_path, *good, *bad), "openb", throughput=NO_V100,
                   on_bad_row="skip", reference_gpu="t4")
    # 10 bad rows are tolerated (and counted).
    trace = read_trace(_pods(tmp_path, *good, *bad[:MAX_SKIPPED_ROWS]), "openb",
                       throughput=NO_V100, on_bad_row="skip", reference_gpu="t4")
    assert (len(trace.jobs), trace.skipped_rows) == (88, MAX_SKIPPED_ROWS)


def test_replay_of_a_trace_with_no_job_left_is_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _pods(tmp_path, "p0,1,1,0,0,,LS,Running,0,100,0")  # a CPU pod only
    err = exits_2(["replay", str(path), "--format", "openb", "--cluster", "t4=4",
                   "--out", str(tmp_path / "o")], capsys)
    assert "no job to replay in the trace" in err
    assert "(got {'num_gpu 0': 1}; expected rows of jobs, not all excluded" in err


def test_fit_rejects_a_gpu_count_beyond_the_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.csv"
    write_profile_csv(synthetic_profile(counts=(1, 2, 4)), path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("a-cnn,v100,128,packed,900.0,,\n")
    lines = path.read_text().count("\n")
    with pytest.raises(InputError) as caught:
        fit_throughput_model(read_profile(path))
    assert str(caught.value) == (
        f"{path}: line {lines}.num_gpus: GPU count beyond what the fitted model answers "
        "(got 128; expected an integer from 1 to 64 (the fitted model's max_gpus))")
    err = exits_2(["fit", str(path), "-o", str(tmp_path / "m.json")], capsys)
    assert f"line {lines}.num_gpus" in err


# --- GPU types no throughput model knows; gpu_spec naming an absent type --------------------


def test_node_list_with_an_unknown_gpu_model_is_an_error_or_dropped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    pods, nodes = SAMPLES / "openb_g3_pods.csv", SAMPLES / "openb_g3_nodes.csv"
    args = ["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
            "--policy", "fifo", "--out", str(tmp_path / "o")]
    err = exits_2(args, capsys)
    assert "error: --cluster: GPU types the built-in catalogue does not know (got 'g3 (8 " \
        "GPUs)'; expected types of k80, p100, v100, t4, a100: map one with --gpu-alias" in err
    # Dropped: its nodes leave; the pods that allow only g3 are bad rows naming gpu_spec.
    err = exits_2([*args, "--unknown-gpus", "drop"], capsys)
    assert "openb_g3_pods.csv: line 14.gpu_spec: no GPU type it allows is in the " \
        "cluster (got 'g3'; expected GPU types among t4)" in err
    main([*args, "--unknown-gpus", "drop", "--on-bad-row", "skip"])
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["dropped_gpus"] == {"g3": 8}
    assert (summary["gpus"], summary["skipped_rows"], summary["jobs"]) == (8, 4, 19)
    assert "left out the nodes of GPU types the throughput model does not know: g3 (8 " \
        "GPUs)" in caplog.text


def test_the_small_openb_sample_replays_on_its_node_list_as_shipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Once its node list named G3, one of openb's undisclosed GPU codes, which no
    # throughput model knows: the pair needed --gpu-alias to replay at all. Its 8-GPU
    # server is now a P100 one (a model openb discloses and the catalogue knows); the
    # G3 pair (openb_g3_*) stays for --gpu-alias and --unknown-gpus.
    pods, nodes = SAMPLES / "openb_small_pods.csv", SAMPLES / "openb_small_nodes.csv"
    main(["validate", "--format", "openb-nodes", str(nodes)])
    assert "OK (4 nodes, 16 GPUs of 2 types: t4 8, p100 8)" in capsys.readouterr().out
    main(["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
          "--out", str(tmp_path / "o")])
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["jobs"], summary["completed"], summary["gpus"]) == (23, 23, 16)
    assert (summary["reference_gpu"], summary["gpu_aliases"]) == ("t4", {})
    assert summary["gpu_share_jobs"] == 9
    with (tmp_path / "o" / "jobs.csv").open(newline="") as handle:
        rows = {row["job"]: row for row in csv.DictReader(handle)}
    # pod-12 allows only the 8-GPU server's model, pod-22 only T4; pod-24 takes 8 GPUs.
    assert rows["pod-12"]["gpu_types"] == rows["pod-24"]["gpu_types"] == "p100"
    assert rows["pod-22"]["gpu_types"] == "t4"


def test_validate_warns_about_an_instance_gpu_type_without_throughput(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads((ROOT / "instances" / "tiny.json").read_text())
    document["gpu_types"].append({"name": "g3"})
    document["nodes"].append({"name": "g3-0", "gpu_type": "g3", "num_gpus": 8})
    path = tmp_path / "i.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SystemExit) as exited:
        main(["validate", str(path)])
    assert exited.value.code == 3
    assert "warning: " + str(path) + ": GPU type g3 (8 GPUs): the throughput table has " \
        "no entry for it, so its GPUs can never run a job" in capsys.readouterr().err


# --- aliases, job types in jobs.csv -----------------------------------------------------


def test_gpu_aliases_parse_and_answer_for_the_type_they_stand_for() -> None:
    assert parse_gpu_aliases("g3=a100, g2=v100") == {"g3": "a100", "g2": "v100"}
    for bad in ("g3", "g3=a100,g3=t4", "g3=g3", "=a100"):
        with pytest.raises(InputError, match="gpu_aliases"):
            parse_gpu_aliases(bad)
    model = AliasedThroughput(NO_V100, {"g3": "a100"})
    assert model.throughput("cnn", "g3", 2, P) == 15.0
    assert model.throughput("cnn", "t4", 2, P) == 3.0
    assert model.gpu_types == {"a100", "t4", "g3"}
    assert model.matrix(["cnn"], ["g3", "t4"], [1, 2], P).tolist() == [[[8.0, 15.0],
                                                                        [2.0, 3.0]]]


def test_acceptance_replay_with_alias_records_it_and_audits_job_types(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods, nodes = SAMPLES / "openb_g3_pods.csv", SAMPLES / "openb_g3_nodes.csv"
    main(["replay", str(pods), "--format", "openb", "--cluster", f"openb:{nodes}",
          "--reference-gpu", "t4", "--gpu-alias", "g3=a100", "--policy", "srtf",
          "--out", str(tmp_path / "o")])
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["reference_gpu"], summary["gpu_aliases"]) == ("t4", {"g3": "a100"})
    assert summary["completed"] == summary["jobs"] == 23
    with (tmp_path / "o" / "jobs.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    trace = read_trace(pods, "openb", throughput=AliasedThroughput(
        _catalogue(), {"g3": "a100"}), gpu_types=("t4", "g3"), reference_gpu="t4")
    drawn = {job.id: job.job_type for job in trace.jobs}
    assert {row["job"]: row["job_type"] for row in rows} == drawn
    assert len(set(drawn.values())) > 1


def _catalogue() -> ThroughputTable:
    from hetsched.files.generate import catalogue_table

    return catalogue_table({"t4": "t4", "a100": "a100"})


# --- validate --format ----------------------------------------------------------------------


def test_validate_format_reads_traces_node_lists_and_profiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "p.csv"
    write_profile_csv(synthetic_profile(counts=(1, 2)), profile)
    main(["validate", "--format", "openb", str(SAMPLES / "openb_g3_pods.csv")])
    main(["validate", "--format", "openb-nodes", str(SAMPLES / "openb_g3_nodes.csv")])
    main(["validate", "--format", "profile", str(profile)])
    main(["validate", "--format", "gavel", str(SAMPLES / "gavel7.trace")])
    out = capsys.readouterr().out
    assert "openb_g3_pods.csv: OK (openb: 23 jobs, durations on v100, 0 bad rows, 3 " \
        "excluded: num_gpu 0 2, never scheduled 1)" in out
    assert "openb_g3_nodes.csv: OK (4 nodes, 16 GPUs of 2 types: t4 8, g3 8)" in out
    assert "p.csv: OK (profile: 9 measurements, 3 job types, GPU types g, 1-2 GPUs)" in out
    assert "gavel7.trace: OK (gavel: 3 jobs, 0 bad rows, 0 excluded)" in out
    # As a replay would read it: the unknown g3 of the node list is an error.
    err = exits_2(["validate", "--format", "openb", str(SAMPLES / "openb_g3_pods.csv"),
                   "--cluster", f"openb:{SAMPLES / 'openb_g3_nodes.csv'}"], capsys)
    assert "error: --cluster: GPU types the built-in catalogue does not know" in err
    bad = _pods(tmp_path, "p0,1,1,1,1000,,LS,Running,-5,100,0")
    err = exits_2(["validate", "--format", "openb", str(bad)], capsys)
    assert "pods.csv: line 2.creation_time: bad creation_time (got '-5'" in err
