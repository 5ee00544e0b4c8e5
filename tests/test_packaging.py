"""Packaging: the ortools/highspy import-order trap, ``python -m hetsched``, shipped schema."""

from __future__ import annotations

import configparser
import itertools
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from tests.helpers import ROOT


def python_c(code: str, timeout_s: float, cwd: Path | None = None
             ) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in a fresh interpreter (this one's executable), its output
    captured as text."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout_s, cwd=cwd)


def setup_cfg() -> configparser.ConfigParser:
    """The project's setup.cfg, read."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


@pytest.mark.slow
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
    done = python_c(code, 120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok 1.14"), done.stdout


#: Solver packages that load native libraries: ortools bundles HiGHS and SCIP, highspy
#: and pyscipopt bring their own.
SOLVER_MODULES = ("ortools.sat.python.cp_model", "ortools.linear_solver.pywraplp", "highspy",
                  "pyscipopt")


@pytest.mark.slow
@pytest.mark.parametrize("order", list(itertools.permutations(SOLVER_MODULES)),
                         ids=lambda order: "-".join(m.split(".")[-1] for m in order))
def test_solver_packages_import_and_solve_in_any_order(order: tuple[str, ...]) -> None:
    # pyscipopt ships SCIP 10 while ortools links its own SCIP and HiGHS: each order in a
    # fresh process, then one tiny solve with each library.
    pytest.importorskip("pyscipopt")
    code = (
        f"import importlib\nfor name in {order!r}: importlib.import_module(name)\n"
        "import highspy, pyscipopt\n"
        "from ortools.sat.python import cp_model\n"
        "from ortools.linear_solver import pywraplp\n"
        "h = highspy.Highs(); h.setOptionValue('output_flag', False)\n"
        "x = h.addVariable(0, 4); h.maximize(x)\n"
        "s = pyscipopt.Model(); s.hideOutput(); y = s.addVar(ub=3, vtype='I')\n"
        "s.setObjective(y, 'maximize'); s.optimize()\n"
        "c = cp_model.CpModel(); z = c.new_int_var(0, 5, 'z'); c.maximize(z)\n"
        "cs = cp_model.CpSolver(); cs.solve(c)\n"
        "lp = pywraplp.Solver.CreateSolver('SCIP'); v = lp.IntVar(0, 2, 'v')\n"
        "lp.Maximize(v); lp.Solve()\n"
        "print('ok', h.version(), h.getInfo().objective_function_value, s.getObjVal(),\n"
        "      cs.objective_value, v.solution_value())\n"
    )
    done = python_c(code, 120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "1.14.0", "4.0", "3.0", "5.0", "2.0"], done.stdout


def test_cbcbox_binary_runs() -> None:
    cbcbox = pytest.importorskip("cbcbox")
    done = subprocess.run([cbcbox.cbc_bin_path(), "-quit"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "COIN-OR Branch and Cut" in done.stdout


@pytest.mark.slow
def test_mip_engines_are_imported_only_when_asked_for() -> None:
    code = (
        "import sys\n"
        "from hetsched.formulations.mip import MatrixModel, solve_mip, available_engines\n"
        "print(sorted(m for m in ('highspy', 'pyscipopt', 'cbcbox', 'pulp')"
        " if m in sys.modules), available_engines())\n"
    )
    done = python_c(code, 60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] ('highs', 'cbc', 'scip')", done.stdout


def test_pulp_sees_cbc_and_highs() -> None:
    done = python_c("import pulp; print(pulp.listSolvers(onlyAvailable=True))", 120)
    # CBC is PuLP's bundled binary (formulations/pulp_backend.py runs every MILP).
    assert "PULP_CBC_CMD" in done.stdout, done.stdout + done.stderr
    assert "HiGHS" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_python_dash_m_solver_works_like_hetsched() -> None:
    done = subprocess.run([sys.executable, "-m", "hetsched", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    for command in ("solve", "validate", "generate"):
        assert command in done.stdout


def test_schema_is_shipped_inside_the_package() -> None:
    text = resources.files("hetsched").joinpath("schema/instance.schema.json").read_text()
    schema = json.loads(text)
    assert set(schema["required"]) == {"gpu_types", "nodes", "jobs"}
    # Throughput comes inline/as a table, or from a fitted model file.
    assert schema["oneOf"] == [{"required": ["throughput"]}, {"required": ["throughput_model"]}]


@pytest.mark.slow
def test_solver_package_does_not_import_pulp_or_ortools() -> None:
    # Only formulations/ may import the solver libraries; importing the core package and
    # running the FIFO policy must not load them.
    code = (
        "import sys, hetsched; from hetsched.cli.main import main; "
        "print(any(m.split('.')[0] in ('pulp', 'ortools') for m in sys.modules))"
    )
    done = python_c(code, 60)
    assert done.stdout.strip() == "False", done.stdout + done.stderr


@pytest.mark.slow
def test_only_hetsched_is_importable_outside_the_checkout(tmp_path: Path) -> None:
    # The distribution installs one import name; solver/ and formulations/ are its source
    # folders (setup.cfg package_dir), not packages of their own. Run from an empty
    # directory so the checkout is not on sys.path.
    code = (
        "import importlib.util, hetsched, hetsched.formulations.deadline as d\n"
        "print(hetsched.__version__, d.__name__)\n"
        "print([importlib.util.find_spec(n) is None for n in ('solver', 'formulations')])\n"
    )
    done = python_c(code, 60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["0.1.0 hetsched.formulations.deadline",
                                           "[True, True]"]


def test_setup_cfg_lists_every_source_package() -> None:
    # setup.cfg names the packages one by one (package_dir maps hetsched onto solver/ and
    # hetsched.formulations onto formulations/, which find: cannot follow); a new folder
    # with an __init__.py must be added there or it would be missing from the wheel.
    on_disk = {"hetsched" + ("." + ".".join(p.parent.relative_to(ROOT / "solver").parts)
                             if p.parent != ROOT / "solver" else "")
               for p in (ROOT / "solver").rglob("__init__.py")
               if "formulations" not in p.relative_to(ROOT / "solver").parts} | {"hetsched"}
    on_disk |= {"hetsched.formulations" + "".join("." + part for part in
                                                p.parent.relative_to(ROOT / "formulations").parts)
                for p in (ROOT / "formulations").rglob("__init__.py")}
    config = setup_cfg()
    listed = set(config["options"]["packages"].split())
    assert listed == on_disk
    assert config["options"]["package_dir"].split() == [
        "hetsched", "=", "solver", "hetsched.formulations", "=", "formulations"]


def test_every_module_has_a_layer() -> None:
    # .importlinter's layers contract covers the modules it names; a new top-level module
    # must be given a layer there, or nothing would stop it importing upwards.
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    layers = config["importlinter:contract:layers"]["layers"].split("\n")
    named = {name.strip() for layer in layers for part in layer.split("|")
             for name in part.split(":") if name.strip()}
    on_disk = {"hetsched." + (p.stem if p.is_file() else p.name)
               for p in (ROOT / "solver").iterdir()
               if (p.suffix == ".py" and p.stem != "__init__")
               or (p.is_dir() and (p / "__init__.py").exists())}
    assert named == on_disk


def test_no_import_cycles() -> None:
    # Layers point down (lint-imports); within a layer no two modules import each other,
    # even inside functions (grimp sees every import statement).
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (dev extra)")
    graph = grimp.build_graph("hetsched")
    edges = {(module, imported) for module in graph.modules
             for imported in graph.find_modules_directly_imported_by(module)
             if imported.startswith("hetsched")}
    import networkx as nx

    cycles = [sorted(c) for c in nx.strongly_connected_components(nx.DiGraph(list(edges)))
              if len(c) > 1]
    assert cycles == []


def test_license_citation_and_python_version_agree_with_setup_cfg() -> None:
    # The licence setup.cfg declares is the LICENSE file's; CITATION.cff cites the version
    # setup.cfg builds; the README states the Python versions python_requires allows.
    config = setup_cfg()
    assert config["metadata"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert "cff-version: 1.2.0" in citation
    assert f"\nversion: {config['metadata']['version']}\n" in citation
    assert "license: MIT" in citation
    minimum = config["options"]["python_requires"].removeprefix(">=")
    assert f"Python {minimum} or newer" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_dev_extra_opens_runs_and_clears_the_notebooks() -> None:
    # docs/notebooks.md: "jupyter lab notebooks/" and "jupyter nbconvert --clear-output"
    # work from .[dev] with nothing else to install; tqdm draws widgets with ipywidgets.
    config = setup_cfg()
    dev = {line.split(">")[0].split("<")[0].split("=")[0].strip()
           for line in config["options.extras_require"]["dev"].splitlines()
           if line.strip() and not line.strip().startswith("#")}
    assert {"jupyterlab", "nbconvert", "ipykernel", "nbmake", "ipywidgets"} <= dev
    required = config["options"]["install_requires"]
    assert "tqdm>=" in required
    assert 'tomli>=1.1; python_version < "3.11"' in required
