"""What every trace reader refuses before reading a row: a CSV header that names a column
twice (every CSV reader: they share ``csv_rows``), and an empty Gavel trace (as every
other format refuses an empty file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.files.traces import openb_cluster, read_trace, write_native
from tests.helpers import ROOT, exits_2

DATA = ROOT / "tests" / "data" / "traces"
POLLUX = ROOT / "tests" / "data" / "pollux"


def _with_column_twice(source: Path, target: Path, column: str) -> Path:
    """``source`` with ``column`` named again at the end of the header, each row given a
    last field of 7 (a second 'time' of a Pollux workload: which one is the arrival?)."""
    lines = source.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join([f"{lines[0]},{column}", *(f"{line},7" for line in lines[1:]
                                                           if line.strip())]) + "\n",
                      encoding="utf-8")
    return target


def _native(folder: Path) -> Path:
    path = folder / "native.csv"
    write_native((Job("a", 0.0, "t", 1, 10.0), Job("b", 5.0, "t", 2, 20.0)), path)
    return path


@pytest.mark.parametrize(("format", "source", "column"), [
    ("philly", DATA / "philly_small.csv", "duration"),
    ("helios", DATA / "helios_small.csv", "gpu_num"),
    ("openb", DATA / "openb_pods.csv", "creation_time"),
    ("native", None, "arrival"),
    ("pollux", POLLUX / "workloads" / "workload-1.csv", "time"),
])
def test_a_column_named_twice_is_refused_by_every_csv_reader(
        tmp_path: Path, format: str, source: Path | None, column: str) -> None:
    # Once the first of the two was read and the other ignored (a Pollux workload with
    # 'time' twice replayed on the first one's arrivals).
    if format == "pollux":
        shutil.copytree(POLLUX, tmp_path / "pollux")
        source = tmp_path / "pollux" / "workloads" / "workload-1.csv"
        target = source
    else:
        source = source or _native(tmp_path)
        target = tmp_path / f"twice-{source.name}"
    read_trace(source, format)  # (the file as it is reads)
    path = _with_column_twice(source, target, column)
    with pytest.raises(InputError) as error:
        read_trace(path, format)
    assert (error.value.file, error.value.path, error.value.problem) == (
        str(path), "line 1", f"column '{column}' named twice in the header")
    assert error.value.expected == "each column once"


def test_a_node_list_with_a_column_named_twice_is_refused(tmp_path: Path) -> None:
    path = _with_column_twice(DATA / "openb_nodes.csv", tmp_path / "nodes.csv", "gpu")
    with pytest.raises(InputError, match=r"nodes.csv: line 1: column 'gpu' named twice in "
                       r"the header \(got \['sn', 'cpu_milli', 'memory_mib', 'gpu', 'model', "
                       r"'gpu'\]; expected each column once\)"):
        openb_cluster(path)


def test_the_command_names_the_column_named_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(POLLUX, tmp_path / "pollux")
    path = _with_column_twice(tmp_path / "pollux" / "workloads" / "workload-1.csv",
                              tmp_path / "pollux" / "workloads" / "workload-1.csv", "time")
    err = exits_2(["validate", "--format", "pollux", str(path)], capsys)
    assert err.startswith(f"error: {path}: line 1: column 'time' named twice in the header"), err
    assert err.count("\n") == 1


@pytest.mark.parametrize(("text", "problem", "csv_problem"), [
    ("", "the file is empty", "the file is empty"),
    ("\n\n  \n", "no job line in the file (only blank lines)", "blank header line")])
def test_an_empty_gavel_trace_is_refused_as_every_format_refuses_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str,
        csv_problem: str) -> None:
    # Once "OK (gavel: 0 jobs)", where an empty philly, helios, openb, native or pollux
    # file is an error.
    path = tmp_path / "empty.trace"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_trace(path, "gavel")
    assert (error.value.file, error.value.path, error.value.problem) == (
        str(path), "line 1", problem)
    err = exits_2(["validate", "--format", "gavel", str(path)], capsys)
    assert err == f"error: {path}: line 1: {problem} (expected tab-separated lines of 7 " \
        "(job_type ... scale_factor) or 10 (job_type ... arrival_time) fields)\n"
    empty_csv = tmp_path / "empty.csv"  # (as a philly file is refused)
    empty_csv.write_text(text, encoding="utf-8")
    err = exits_2(["validate", "--format", "philly", str(empty_csv)], capsys)
    assert err.startswith(f"error: {empty_csv}: line 1: {csv_problem}"), err


def test_a_gavel_trace_of_bad_lines_only_is_still_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.trace"
    path.write_text("just one field\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: wrong number of tab-separated fields"):
        read_trace(path, "gavel")
    main(["validate", "--format", "gavel", str(DATA / "gavel7.trace")])  # (a good one: OK)


@pytest.mark.parametrize("number", ["1_000", "\u0663", "nan", "inf"])
@pytest.mark.parametrize(("format", "header", "row", "column"), [
    ("philly", "timestamp,duration,num_gpus,gpu_time,cluster",
     "2017-10-09 07:01:55,{n},1,100.0,c1", "duration"),
    ("openb", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
     "creation_time,deletion_time,scheduled_time", "p0,1000,1024,1,1000,,LS,Running,{n},50,5",
     "creation_time"),
    ("native", "id,arrival,job_type,num_gpus,work,deadline,weight,user,allowed_gpu_counts,"
     "allowed_gpu_types", "a,0,t,1,{n},,1,,,", "work"),
    ("gavel", None, "ResNet-50\tcmd\t--steps\tFalse\t{n}\t0\t1", "total_steps"),
])
def test_a_number_cell_is_ascii_digits_only(tmp_path: Path, format: str, header: str | None,
                                            row: str, column: str, number: str) -> None:
    # float() reads '1_000' as 1000 and '٣' as 3: the readers read ASCII digits only, so
    # such a cell is a bad row naming its line and column.
    path = tmp_path / "trace.txt"
    path.write_text("\n".join([*([header] if header else []), row.format(n=number)]) + "\n",
                    encoding="utf-8")
    line = 2 if header else 1
    with pytest.raises(InputError) as error:
        read_trace(path, format)
    assert (error.value.path, error.value.value) == (f"line {line}.{column}", number)
