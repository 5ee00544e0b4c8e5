"""The bench's engines by the name ``--engine`` takes (:data:`ENGINES`):
:func:`make_engine` builds one, and imports Ray's only when it is chosen, so the local
path never imports ``ray``."""

from __future__ import annotations

from collections.abc import Callable

from hetsched.bench.engine import Engine, default_workers
from hetsched.bench.local_engine import LocalEngine
from hetsched.core.errors import InputError

__all__ = ["ENGINES", "make_engine"]


def _local_engine(workers: int | None, address: str | None) -> Engine:
    if address is not None:
        raise InputError("an address is for the ray engine", path="address", value=address,
                         expected="no --address, or --engine ray")
    return LocalEngine(workers or default_workers())


def _ray_engine(workers: int | None, address: str | None) -> Engine:
    try:  # only now: the local path never imports ray
        from hetsched.bench.ray_engine import RayEngine
    except ImportError as exc:
        raise InputError("ray is not installed", path="engine", value="ray",
                         expected='pip install -e ".[ray]" (or --engine local)') from exc
    return RayEngine(address=address, workers=workers)


#: The engines by the name ``--engine`` takes: (workers, address) -> engine.
ENGINES: dict[str, Callable[[int | None, str | None], Engine]] = {
    "local": _local_engine, "ray": _ray_engine}


def make_engine(name: str, *, workers: int | None = None,
                address: str | None = None) -> Engine:
    """The engine called ``name`` (:data:`ENGINES`): ``local`` with ``workers`` processes
    (default min(2, CPUs)), or ``ray`` on the cluster at ``address`` (none: a local Ray on
    this machine with ``workers`` CPUs, default min(2, CPUs)). An unknown name, an
    address for the local engine, or Ray not installed is an :class:`InputError`."""
    if name not in ENGINES:
        raise InputError("unknown engine", path="engine", value=name,
                         expected="one of " + ", ".join(ENGINES))
    return ENGINES[name](workers, address)
