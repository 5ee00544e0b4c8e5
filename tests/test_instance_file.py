"""Instance files: round trips, throughput tables by path, and reproducible examples."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest

from solver.cli import main
from solver.errors import InputError
from solver.instance_file import (
    instance_to_dict,
    load_instance,
    read_throughput_table,
    save_instance,
    schema,
    write_throughput_csv,
)
from solver.throughput import Placement
from tests.conftest import INSTANCES

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
