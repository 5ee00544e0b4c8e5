"""Instance files: round trips, throughput tables by path, and reproducible examples."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.files.instance import (
    instance_from_dict,
    instance_to_dict,
    load_instance,
    read_throughput_table,
    save_instance,
    schema,
    write_throughput_csv,
)
from hetsched.registry import model_warnings
from tests.helpers import INSTANCES, SPREAD_ONLY

EXAMPLES = ["tiny.json", "small.json", "medium.json"]
#: Every instance file the project ships (congested.json: small.json's jobs arriving 5x
#: faster, the case where proofs stall, see docs/formulations.md).
SHIPPED = [*EXAMPLES, "congested.json"]


@pytest.mark.parametrize("name", SHIPPED)
def test_examples_match_the_schema_and_load(name: str) -> None:
    doc = json.loads((INSTANCES / name).read_text())
    jsonschema.validate(doc, schema())
    instance = load_instance(INSTANCES / name)
    assert len(instance.jobs) == doc["generator"]["jobs"]


def test_example_sizes_are_as_documented() -> None:
    tiny, small, medium = (load_instance(INSTANCES / n) for n in EXAMPLES)
    assert (len(tiny.jobs), len(tiny.cluster.type_names)) == (3, 2)
    assert (len(small.jobs), len(small.cluster.type_names), len(small.cluster.nodes)) == (20, 3, 4)
    assert any(job.deadline is not None for job in small.jobs)
    assert len(medium.jobs) == 200
    assert {t: medium.cluster.num_gpus(t) for t in medium.cluster.type_names} == {
        "v100": 32, "p100": 32, "k80": 32}


@pytest.mark.parametrize("name", SHIPPED)
def test_examples_regenerate_byte_for_byte_from_their_recorded_command(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Each example records the command that made it (seed included); running it again
    # must give the same file, so the examples are reproducible, not hand-edited.
    doc = json.loads((INSTANCES / name).read_text())
    command = doc["comment"].removeprefix("made by: ")
    args = shlex.split(command)[1:]
    out = args.index("-o")
    args[out + 1] = str(tmp_path / name)
    args += ["--name", doc["name"]]
    monkeypatch.chdir(INSTANCES.parent)
    main(args)
    regenerated = json.loads((tmp_path / name).read_text())
    regenerated["comment"] = doc["comment"]
    assert regenerated == doc


def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    instance = load_instance(INSTANCES / "small.json")
    save_instance(instance, tmp_path / "copy.json")
    again = load_instance(tmp_path / "copy.json")
    assert again.jobs == instance.jobs
    assert again.cluster.nodes == instance.cluster.nodes
    assert again.cluster.gpu_types == instance.cluster.gpu_types
    assert again.throughput.rows() == instance.throughput.rows()  # type: ignore[attr-defined]
    # A tenant is kept too (the schema knows the field).
    teams = instance.replace(jobs=tuple(dataclasses.replace(job, tenant=f"team{i % 2}")
                                        for i, job in enumerate(instance.jobs)))
    save_instance(teams, tmp_path / "teams.json")
    assert load_instance(tmp_path / "teams.json").jobs == teams.jobs


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_throughput_by_relative_path(tmp_path: Path, suffix: str) -> None:
    instance = load_instance(INSTANCES / "tiny.json")
    doc = instance_to_dict(instance)
    rows = doc["throughput"]
    (tmp_path / "tables").mkdir()
    table_path = tmp_path / "tables" / f"speeds{suffix}"
    if suffix == ".csv":
        write_throughput_csv(instance.throughput, table_path)  # type: ignore[arg-type]
    else:
        table_path.write_text(json.dumps(rows))
    doc["throughput"] = f"tables/speeds{suffix}"
    (tmp_path / "inst.json").write_text(json.dumps(doc))
    loaded = load_instance(tmp_path / "inst.json")
    assert loaded.throughput.throughput("rnn-lm", "k80", 1, Placement.PACKED) == 7.0
    assert loaded.throughput.rows() == instance.throughput.rows()  # type: ignore[attr-defined]


def test_bad_csv_table_names_file_and_line(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("job_type,gpu_type,num_gpus,placement,throughput\n"
                     "cnn,v100,1,packed,3.0\ncnn,v100,two,packed,5\n")
    with pytest.raises(InputError) as error:
        read_throughput_table(table)
    assert str(error.value).startswith(f"{table}: line 3: bad row")
    table.write_text("job,gpu,n\ncnn,v100,1\n")
    with pytest.raises(InputError, match="missing column 'job_type'"):
        read_throughput_table(table)


def test_saved_files_are_strict_json(tmp_path: Path) -> None:
    instance = load_instance(INSTANCES / "tiny.json")
    save_instance(instance, tmp_path / "x.json", comment="hello")
    text = (tmp_path / "x.json").read_text()
    assert "NaN" not in text
    assert "Infinity" not in text
    assert json.loads(text)["comment"] == "hello"


def test_schema_ranges_are_the_records_ranges() -> None:
    # One set of documented ranges: the JSON Schema and the records must agree.
    from hetsched.core import records as data

    fields = schema()["properties"]
    job = fields["jobs"]["items"]["properties"]
    node = fields["nodes"]["items"]["properties"]
    gpu_type = fields["gpu_types"]["items"]["properties"]
    row = fields["throughput"]["oneOf"][1]["items"]["properties"]
    assert fields["now"]["maximum"] == job["arrival"]["maximum"] == data.MAX_TIME_S
    assert job["deadline"]["maximum"] == data.MAX_TIME_S
    assert job["work"]["maximum"] == data.MAX_WORK
    assert (job["weight"]["minimum"], job["weight"]["maximum"]) == (data.MIN_WEIGHT,
                                                                    data.MAX_WEIGHT)
    assert job["num_gpus"]["maximum"] == job["allowed_gpu_counts"]["items"]["maximum"] == \
        row["num_gpus"]["maximum"] == data.MAX_GPUS_PER_JOB
    assert node["num_gpus"]["maximum"] == data.MAX_GPUS_PER_NODE
    assert node["cpus"]["maximum"] == data.MAX_CPUS
    assert node["memory_gb"]["maximum"] == gpu_type["memory_gb"]["maximum"] == \
        data.MAX_MEMORY_GB
    assert gpu_type["price_per_hour"]["maximum"] == data.MAX_PRICE_PER_HOUR
    assert row["throughput"]["maximum"] == data.MAX_THROUGHPUT
    assert row["throughput"]["anyOf"] == [{"const": 0}, {"minimum": data.MIN_THROUGHPUT}]


def _tiny_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((INSTANCES / "tiny.json").read_text())
    return doc


@pytest.mark.parametrize(("value", "accepted"), [
    (0, True), (0.0, True), (1e-9, True), (1e9, True), (5e-324, False), (1e-10, False),
    (1.0000001e9, False)])
def test_throughput_rows_are_zero_or_in_range(tmp_path: Path, value: float,
                                              accepted: bool) -> None:
    doc = _tiny_doc()
    doc["throughput"].append({"job_type": "x", "gpu_type": "k80", "num_gpus": 1,
                              "placement": "packed", "throughput": value})
    (tmp_path / "i.json").write_text(json.dumps(doc))
    if accepted:
        assert len(load_instance(tmp_path / "i.json").jobs) == 3
        return
    with pytest.raises(InputError) as error:
        load_instance(tmp_path / "i.json")
    assert error.value.path == "$.throughput[6].throughput"


def test_deep_nesting_within_the_parser_limit_names_the_path(tmp_path: Path) -> None:
    doc = _tiny_doc()
    doc["generator"] = {"x": json.loads("[" * 70 + "]" * 70)}
    (tmp_path / "deep.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="JSON nested too deeply") as error:
        load_instance(tmp_path / "deep.json")
    assert error.value.path == "$.generator.x" + "[0]" * 62
    assert error.value.file == str(tmp_path / "deep.json")


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + (INSTANCES / "tiny.json").read_bytes())
    assert len(load_instance(path).jobs) == 3


def test_json_table_file_rows_are_checked_like_inline_rows(tmp_path: Path) -> None:
    doc = _tiny_doc()
    rows = doc["throughput"]
    doc["throughput"] = "speeds.json"
    (tmp_path / "inst.json").write_text(json.dumps(doc))
    for table, path, piece in [
        ([{**rows[0], "throughput": 1e-300}, *rows[1:]], "$[0].throughput", "1e-09"),
        ([rows[0], {k: v for k, v in rows[1].items() if k != "placement"}], "$[1]",
         "missing field 'placement'"),
        ({"throughput": [rows[0], {**rows[1], "num_gpus": 10**6}]}, "$.throughput[1].num_gpus",
         "<= 100000"),
    ]:
        (tmp_path / "speeds.json").write_text(json.dumps(table))
        with pytest.raises(InputError) as error:
            load_instance(tmp_path / "inst.json")
        assert error.value.file == str(tmp_path / "speeds.json")
        assert error.value.path == path
        assert piece in str(error.value)
    (tmp_path / "speeds.json").write_text('[{"job_type": "a", "throughput": ' + "7" * 5000
                                          + "}]")
    with pytest.raises(InputError, match=r"\$\[0\].throughput: number too long"):
        load_instance(tmp_path / "inst.json")


def test_csv_table_rows_out_of_range(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    header = "job_type,gpu_type,num_gpus,placement,throughput\n"
    for body, where, piece in [("cnn,v100,1,packed,5e-324\n", "line 2.throughput", "1e-09"),
                               ("cnn,v100,1,packed,1e300\n", "line 2.throughput", "1e+09"),
                               ("cnn,v100,1000000,packed,3\n", "line 2.num_gpus", "100000"),
                               ("cnn,v100," + "9" * 5000 + ",packed,3\n", "line 2", "bad row")]:
        table.write_text(header + body)
        with pytest.raises(InputError) as error:
            read_throughput_table(table)
        assert error.value.path == where
        assert piece in str(error.value)



def test_model_warnings_name_the_jobs_a_model_cannot_run() -> None:
    instance = instance_from_dict(SPREAD_ONLY)
    assert model_warnings(instance, "fifo") == []
    assert model_warnings(instance, "deadline") == [
        "$.jobs[1]: the deadline model cannot run job wide: no packed configuration (all its "
        "GPUs on one node) has throughput > 0; the deadline model runs gangs packed"]
    assert model_warnings(instance, "allox") == [
        "$.jobs[1]: the allox model cannot run job wide: it cannot run packed on one whole "
        "node of any type (allox matches jobs to single GPUs, or whole nodes)"]
    tiny = load_instance(INSTANCES / "tiny.json")
    assert [model_warnings(tiny, m) for m in ("deadline", "allox", "topology")] == [[], [], []]
    with pytest.raises(InputError, match="unknown model"):
        model_warnings(tiny, "magic")


def test_devices_and_pipes_are_refused_without_reading(tmp_path: Path) -> None:
    import os

    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)  # reading it would wait for a writer forever
    for path in (pipe, Path("/dev/zero")):
        with pytest.raises(InputError, match="not a regular file") as error:
            load_instance(path)
        assert error.value.file == str(path)


def test_csv_table_that_is_not_text(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_bytes(b"job_type,gpu_type,num_gpus,placement,throughput\n\xff\xfe,\x00\n")
    with pytest.raises(InputError, match="not a readable CSV table") as error:
        read_throughput_table(table)
    assert error.value.file == str(table)


@pytest.mark.slow
def test_reading_an_instance_skips_the_slow_optional_import_and_restores_it() -> None:
    # In a fresh interpreter: loading an instance validates it with jsonschema, imported
    # without rfc3987_syntax (its 38 grammars took 1 of the 1.2 s of the import); the
    # module is importable again afterwards when it is installed.
    import subprocess
    import sys

    code = (
        "import importlib.util, sys\n"
        "from hetsched.files.instance import load_instance\n"
        f"load_instance({str(INSTANCES / 'medium.json')!r})\n"
        "assert 'jsonschema' in sys.modules\n"
        "assert 'rfc3987_syntax' not in sys.modules\n"
        "if importlib.util.find_spec('rfc3987_syntax') is not None:\n"
        "    import rfc3987_syntax\n"
        "    assert rfc3987_syntax is sys.modules['rfc3987_syntax']\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
