"""Files that were misread. Numbers are read from ASCII digits
only, everywhere (Python's ``float`` and ``int`` also read full-width and other Unicode
digits, which no format here writes); Philly's timestamp is its one format (a number was
read as epoch seconds: a 47.8-year makespan with exit 0); a machine list's ``inf`` is a
clear error; a profile of zeros fails ``validate``. Every file is written here from the
column lists of docs/traces.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, exits_2

SAMPLES = ROOT / "tests" / "data" / "traces"
FULL_WIDTH_8 = "\uff18"
PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("stamp", ["1.5", "5e-324", "1507532515", FULL_WIDTH_8 * 4,
                                   "2017-10-09T07:01:55", "2017-10-09 07:01:55+02:00",
                                   "2017-10-09"])
def test_a_philly_timestamp_is_yyyy_mm_dd_hh_mm_ss_only(
        stamp: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "philly.csv", PHILLY + f"{stamp},100.0,1,100.0,c1\n")
    err = exits_2(["validate", "--format", "philly", str(path)], capsys)
    assert err == (f"error: {path}: line 2.timestamp: bad timestamp (got {stamp!r}; "
                   "expected a time 'YYYY-MM-DD HH:MM:SS')\n")


@pytest.mark.parametrize(("file_format", "name", "text", "column"), [
    ("philly", "philly.csv", PHILLY + f"2017-10-09 07:01:55,1{FULL_WIDTH_8}0.0,1,100.0,c1\n",
     "line 2.duration"),
    ("philly", "philly.csv", PHILLY + f"2017-10-09 07:01:55,100.0,{FULL_WIDTH_8},100.0,c1\n",
     "line 2.num_gpus"),
    ("native", "jobs.csv", "id,arrival,job_type,num_gpus,work,deadline,weight,user,"
     f"allowed_gpu_counts,allowed_gpu_types\nj1,{FULL_WIDTH_8},resnet50,1,1000,,1,,,\n",
     "line 2.arrival"),
    ("openb-nodes", "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n"
     f"n0,32000,131072,{FULL_WIDTH_8},T4\n", "line 2.gpu"),
    ("profile", "profile.csv", "job_type,gpu_type,num_gpus,placement,throughput\n"
     f"cnn,v100,1,packed,{FULL_WIDTH_8}.5\n", "line 2.throughput"),
    ("profile", "profile.csv", "job_type,gpu_type,num_gpus,placement,throughput\n"
     f"cnn,v100,{FULL_WIDTH_8},packed,2.5\n", "line 2.num_gpus"),
], ids=["philly-duration", "philly-gpus", "native-arrival", "openb-nodes-gpu",
        "profile-throughput", "profile-gpus"])
def test_a_full_width_digit_in_a_csv_field_is_a_bad_value(
        file_format: str, name: str, text: str, column: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, name, text)
    err = exits_2(["validate", "--format", file_format, str(path)], capsys)
    assert err.startswith(f"error: {path}: {column}: bad "), err
    assert FULL_WIDTH_8 in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("spec", [f"v100={FULL_WIDTH_8}", f"v100=8x{FULL_WIDTH_8}"])
def test_a_full_width_digit_in_a_cluster_spec_is_refused(
        spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly",
                   "--cluster", spec, "--out", str(tmp_path / "out")], capsys)
    assert err.startswith(f"error: --cluster: bad cluster spec item (got {spec!r}"), err


def test_a_full_width_gpu_count_in_generate_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["generate", "--jobs", "3", "--gpus", f"v100={FULL_WIDTH_8}",
                   "-o", str(tmp_path / "i.json")], capsys)
    assert err.startswith(f"error: --gpus: bad GPU count (got 'v100={FULL_WIDTH_8}'"), err


@pytest.mark.parametrize(("row", "column"), [
    ("m1,V100,inf,512,8", "cap_cpu"), ("m1,V100,96,512,inf", "cap_gpu"),
    ("m1,V100,96,nan,8", "cap_mem"), (f"m1,V100,9{FULL_WIDTH_8},512,8", "cap_cpu"),
    ("m1,V100,-4,512,8", "cap_cpu"),
])
def test_a_machine_list_value_that_is_not_a_finite_count_names_its_line_and_column(
        row: str, column: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before, inf in cap_cpu or cap_gpu ended in "internal error" (int(inf)).
    path = _write(tmp_path, "pai.csv", "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n"
                  f"{row}\nm2,V100,96,512,8\n")
    err = exits_2(["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly",
                   "--cluster", f"pai:{path}", "--out", str(tmp_path / "out")], capsys)
    assert err.startswith(f"error: {path}: line 2.{column}: bad {column} (got "), err
    assert "expected a finite number >= 0" in err


def test_validate_refuses_a_profile_whose_throughputs_are_all_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # validate said OK although every replay with it exits 2.
    path = _write(tmp_path, "zero.csv", "job_type,gpu_type,num_gpus,placement,throughput\n"
                  "cnn,v100,1,packed,0\nlm,k80,1,packed,0\n")
    err = exits_2(["validate", "--format", "profile", str(path)], capsys)
    assert err == (f"error: {path}: no measurement above 0 steps/s (got '2 measurements, all "
                   "0'; expected at least one job type that runs on some GPU type (throughput "
                   "> 0))\n")


def test_notes_count_the_jobs_replayed_not_every_row_of_the_trace(tmp_path: Path) -> None:
    # "--limit-jobs 300" printed "GPU count capped: 373 jobs": the rows
    # of the whole trace. Four 64-GPU rows (no job type of the catalogue runs on 64 GPUs:
    # each capped), the earliest two kept.
    from hetsched.files.traces import read_trace

    rows = "".join(f"2017-10-09 07:0{i}:00,100.0,64,6400.0,c1\n" for i in range(4))
    path = _write(tmp_path, "philly.csv", PHILLY + rows)
    everything = read_trace(path, "philly", gpu_types=["v100"])
    two = read_trace(path, "philly", gpu_types=["v100"], limit_jobs=2)
    assert len(everything.jobs) == 4
    assert len(two.jobs) == 2
    assert [note.rsplit(": ", 1)[1] for note in everything.notes] == ["4 jobs"] * len(
        everything.notes)
    assert [note.rsplit(": ", 1)[1] for note in two.notes] == ["2 jobs"] * len(two.notes)
    assert any("capped at" in note for note in two.notes)
    assert any("built-in catalogue" in note for note in two.notes)


def test_validate_groups_the_gpu_count_caps_of_a_trace() -> None:
    # validate of a Gavel trace printed 55 unsorted note lines, one per
    # (job type, GPU count) pair capped. Grouped by the count they were capped at.
    from hetsched.cli.validate_command import grouped_notes

    pair = ("({}, {}): 0 steps/s on every GPU type of the throughput model; capped at {} "
            "GPUs: {} jobs")
    notes = ["all (job type, GPU count) pairs with 0 steps/s on every GPU type: GPU count "
             "capped: 10 jobs", pair.format("A3C", 4, 1, 2), pair.format("LM", 16, 8, 3),
             pair.format("CycleGAN", 8, 1, 5), "no throughput model given: 1 jobs"]
    assert grouped_notes(notes) == [
        notes[0], notes[4],
        "capped at 1 GPU: 7 jobs of 2 (job type, GPU count) pairs with 0 steps/s on every "
        "GPU type (most: CycleGAN x 8: 5, A3C x 4: 2)",
        "capped at 8 GPUs: 3 jobs of 1 (job type, GPU count) pairs with 0 steps/s on every "
        "GPU type (most: LM x 16: 3)"]
