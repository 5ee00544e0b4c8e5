"""One throughput source for ``slurm submit`` and ``slurm run`` (hetsched.slurm.source):
the agent reads what submit recorded, and refuses another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.slurm.source import CATALOGUE, SOURCE_FILE, record_source, source_for_run

NEEDS_SLURM = False  # (tests/slurm/conftest.py)


def test_the_agent_reads_the_source_submit_recorded(tmp_path: Path) -> None:
    table = tmp_path / "gavel.json"
    record_source(tmp_path, table, tmp_path / "trace.txt")
    assert json.loads((tmp_path / SOURCE_FILE).read_text())["throughput"] == str(table)
    assert source_for_run(tmp_path, None) == table  # omitted: submit's
    assert source_for_run(tmp_path, table) == table  # the same: fine
    with pytest.raises(InputError, match="slurm submit ran this cluster's jobs with "
                       f"throughputs from {table}") as raised:
        source_for_run(tmp_path, tmp_path / "other.csv")
    assert raised.value.path == "--throughput"


def test_the_catalogue_is_a_source_too_and_no_record_changes_nothing(tmp_path: Path) -> None:
    record_source(tmp_path, None, tmp_path / "trace.csv")
    assert json.loads((tmp_path / SOURCE_FILE).read_text())["throughput"] == CATALOGUE
    assert source_for_run(tmp_path, None) is None
    with pytest.raises(InputError, match="built-in catalogue"):
        source_for_run(tmp_path, tmp_path / "gavel.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert source_for_run(empty, tmp_path / "x.csv") == tmp_path / "x.csv"
    assert source_for_run(None, None) is None


def test_a_damaged_record_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / SOURCE_FILE).write_text("{not json")
    with pytest.raises(InputError, match="not a record of slurm submit's throughput source"):
        source_for_run(tmp_path, None)
