"""Packaging: the ortools/highspy import-order trap, ``python -m solver``, shipped schema."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import pytest


@pytest.mark.parametrize(
    ("first", "second"), [("ortools.sat.python.cp_model", "highspy"),
                      ("highspy", "ortools.sat.python.cp_model")],
)
def test_ortools_and_highspy_import_in_both_orders(first: str, second: str) -> None:
    # ortools 9.15 bundles its own HiGHS; highspy 1.15 has another ABI and whichever
    # loads second fails with "undefined symbol". Each order runs in a fresh process
    # because a module is loaded only once per interpreter.
    code = (
        f"import importlib; importlib.import_module('{first}'); "
        f"importlib.import_module('{second}'); "
        "import highspy; h = highspy.Highs(); print('ok', h.version())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok 1.14"), done.stdout


def test_pulp_sees_cbc_and_highs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import pulp; print(pulp.listSolvers(onlyAvailable=True))"],
        capture_output=True, text=True, timeout=120,
    )
    # CBC is PuLP's bundled binary (formulations/pulp_backend.py runs every MILP).
    assert "PULP_CBC_CMD" in done.stdout, done.stdout + done.stderr
    assert "HiGHS" in done.stdout, done.stdout + done.stderr


def test_python_dash_m_solver_works_like_hetsched() -> None:
    done = subprocess.run([sys.executable, "-m", "solver", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    for command in ("solve", "validate", "generate"):
        assert command in done.stdout


def test_schema_is_shipped_inside_the_package() -> None:
    text = resources.files("solver").joinpath("schema/instance.schema.json").read_text()
    schema = json.loads(text)
    assert set(schema["required"]) == {"gpu_types", "nodes", "jobs"}
    # Throughput comes inline/as a table, or from a fitted model file.
    assert schema["oneOf"] == [{"required": ["throughput"]}, {"required": ["throughput_model"]}]


def test_solver_package_does_not_import_pulp_or_ortools() -> None:
    # Only formulations/ may import the solver libraries; importing the core package and
    # running the FIFO policy must not load them.
    code = (
        "import sys, solver; from solver.cli import main; "
        "print(any(m.split('.')[0] in ('pulp', 'ortools') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
