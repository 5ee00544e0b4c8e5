"""``hetsched slurm cluster start|status|stop`` on real daemons, and its bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import exit_code
from tests.slurm.commands import free_port


def test_start_status_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cluster"
    where = ["--dir", str(folder)]
    port = free_port("cli", 2)
    try:
        assert exit_code(["slurm", "cluster", "start", "--cluster", "k80=6",
                           "--gpus-per-node", "3", "--port", str(port), *where]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"started a local Slurm cluster of 2 nodes, 6 GPUs, in {folder}"
        assert out[1].split() == ["node", "GPUs", "CPUs", "memory", "port"]
        assert out[2].split() == ["k80-0", "3", "x", "k80", "24", "96", "GB", str(port + 1)]
        assert out[-1] == f"export SLURM_CONF={folder}/slurm.conf"
        assert exit_code(["slurm", "cluster", "status", *where]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"local Slurm cluster in {folder}: running"
        assert out[2].split()[-1] == "idle"
    finally:
        assert exit_code(["slurm", "cluster", "stop", *where]) == 0
    assert capsys.readouterr().out.startswith(f"stopped the local Slurm cluster in {folder}")
    assert exit_code(["slurm", "cluster", "status", *where]) == 1
    assert f"{folder}: not running" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "pieces"), [
    (["start", "--cluster", "v100=0"], ["--cluster", "GPU counts must be >= 1"]),
    (["start", "--cluster", "v1.00=4"], ["--cluster", "GPU type Slurm cannot take"]),
    (["start", "--cluster", "v100=4", "--gpus-per-node", "0"], ["--gpus-per-node"]),
    (["start", "--cluster", "v100=4", "--port", "80"], ["--port", "80"]),
    (["stop"], ["--dir", "no local cluster there"]),
    (["status"], ["--dir", "no local cluster there"]),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], pieces: list[str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(["slurm", "cluster", *argv, "--dir", str(tmp_path / "none")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    for piece in pieces:
        assert piece in lines[0], lines[0]
    assert not (tmp_path / "none").exists()


def test_missing_slurm_names_the_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # sinfo, sbatch, ... are in /usr/bin
    assert exit_code(["slurm", "cluster", "start", "--cluster", "v100=4", "--dir",
                       str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Slurm programs not found: ")
    assert "apt-get install slurm-wlm munge" in err
