"""hetsched and Slurm: a local Slurm cluster for tests and newcomers
(:class:`~hetsched.slurm.local.LocalCluster`, docs/slurm.md)."""

from hetsched.slurm.config import SlurmNode
from hetsched.slurm.local import LocalCluster, LocalClusterError

__all__ = ["LocalCluster", "LocalClusterError", "SlurmNode"]
