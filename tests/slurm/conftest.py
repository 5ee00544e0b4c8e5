"""The local Slurm cluster the tests of this folder talk to: real daemons, no mocks.

One cluster for the session (``v100=8,k80=4`` in nodes of 4 GPUs: ``v100-0``,
``v100-1``, ``k80-0``); tests that start and stop clusters of their own use other ports
(``commands.free_port``). Every test here skips, with the reason, when Slurm and MUNGE are
not installed (``apt-get install slurm-wlm munge``; .ci/run installs them) or the tests
do not run as root, except in the modules that set ``NEEDS_SLURM = False`` (unit tests of
the Slurm code that need no daemon: metadata, the emulator's arithmetic, sbatch's
arguments).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hetsched.slurm.local import LocalCluster
from tests.slurm.commands import free_port, run_slurm, running, skip_reason


@pytest.fixture(autouse=True)
def _slurm_installed(request: pytest.FixtureRequest) -> None:
    if not getattr(request.module, "NEEDS_SLURM", True):
        return  # a module of unit tests (NEEDS_SLURM = False): runs anywhere
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The session's running cluster: v100-0, v100-1 (4 V100 each), k80-0 (4 K80)."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with running(LocalCluster.from_gpus({"v100": 8, "k80": 4}, gpus_per_node=4,
                                        state_dir=tmp_path_factory.mktemp("slurm"),
                                        port=free_port("session", 3))) as cluster:
        yield cluster


@pytest.fixture
def cluster(slurm_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The session's cluster, its queue emptied after the test."""
    yield slurm_cluster
    run_slurm(slurm_cluster, "scancel", f"--partition={slurm_cluster.partition}")
