"""The notebooks in notebooks/ are committed clean; CI executes them with
``pytest --nbmake notebooks/`` (README, .ci/run). These tests only read the files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The four notebooks, in reading order.
EXPECTED = ["01_quickstart.ipynb", "02_throughput_model.ipynb", "03_formulations.ipynb",
            "04_replay_and_benchmark.ipynb"]


def read(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_the_four_notebooks_are_there() -> None:
    # Guards the parametrised tests below against passing on an empty folder.
    assert [path.name for path in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_committed_without_outputs(path: Path) -> None:
    notebook = read(path)
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code, "a notebook without code cells executes nothing"
    dirty = [index for index, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert dirty == [], f"cells with outputs or execution counts: {dirty} (clear them)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_venv_kernel_relative_paths_and_an_opening_text(path: Path) -> None:
    notebook = read(path)
    # nbmake starts the kernel the metadata names; "python3" is the one ipykernel installs
    # into the active environment.
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    source = "".join("".join(cell["source"]) for cell in notebook["cells"])
    assert not re.search(r"[\"'](/work|/home|/tmp|[A-Z]:\\)", source), \
        "paths must be relative to the project (../shared/data beside it)"
    # A story: it opens by saying what it shows and why.
    assert notebook["cells"][0]["cell_type"] == "markdown"


def test_docs_link_every_notebook() -> None:
    docs = (ROOT / "docs" / "notebooks.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\(\.\./notebooks/([^)]+\.ipynb)\)", docs)
    assert sorted(linked) == [path.name for path in NOTEBOOKS]
