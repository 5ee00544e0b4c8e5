"""docs/data.md stays true: every sample trace is listed, and its commands on them run."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from hetsched.cli.main import main
from tests.helpers import ROOT

DOC = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")


def test_every_sample_trace_is_listed() -> None:
    listed = set(re.findall(r"`([a-z0-9_]+\.(?:trace|csv|json))`", DOC))
    on_disk = {p.name for p in (ROOT / "tests" / "data" / "traces").iterdir()}
    assert on_disk <= listed


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC, flags=re.DOTALL)
    lines = " ".join(block.replace("\\\n", " ") for block in blocks).split("hetsched ")
    return [shlex.split(line) for line in lines if line.startswith("replay tests/data/")]


@pytest.mark.parametrize("args", _commands(), ids=lambda args: Path(args[1]).name)
def test_the_sample_commands_run(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [*args[: args.index("--out")], "--out", str(out)]
    main([args[0], str(ROOT / args[1]), *args[2:]])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] > 0


def test_the_sample_commands_were_found() -> None:
    assert len(_commands()) == 3
