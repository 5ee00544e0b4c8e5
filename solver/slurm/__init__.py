"""hetsched and Slurm: a local Slurm cluster for tests and newcomers
(:class:`~hetsched.slurm.local.LocalCluster`, docs/slurm.md)."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hetsched.slurm.config import SlurmNode
    from hetsched.slurm.local import LocalCluster, LocalClusterError


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (the training emulator, a module of this
    package started at every run of every job, needs none of them)."""
    import importlib

    modules = {"SlurmNode": "hetsched.slurm.config", "LocalCluster": "hetsched.slurm.local",
               "LocalClusterError": "hetsched.slurm.local"}
    if name not in modules:
        raise AttributeError(f"module 'hetsched.slurm' has no attribute {name!r}")
    return getattr(importlib.import_module(modules[name]), name)

__all__ = ["LocalCluster", "LocalClusterError", "SlurmNode"]
