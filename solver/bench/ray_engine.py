"""Ray's engine for ``hetsched bench --engine ray`` (and ``replay --engine ray``'s POP
partitions): each cell is a Ray task on the cluster at ``--address`` (none: a local
Ray on this machine).

Imported only when the ray engine is chosen (:func:`hetsched.bench.engines.make_engine`):
the local path never imports ``ray``. The bench's inputs (the cluster, the throughput
model, the jobs of each seed) are put in Ray's object store once and every task gets
them by reference; a task returns the replay's summary and files, which the bench
writes, so the workers need the package but neither the data files nor the output
folder. Tasks are not retried by Ray (``max_retries=0``): the bench's loop retries a
failed or lost cell once (:func:`hetsched.bench.engine.run_cells`). POP's sub-problems
are Ray tasks too (:class:`RayPartitionExecutor`), nested in a cell's task.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from hetsched.bench.engine import (
    Cell,
    EngineSession,
    Runner,
    WorkerLostError,
    default_workers,
    run_cell,
)
from hetsched.core.errors import InputError
from hetsched.files.replay_inputs import ReplayInputs
from hetsched.files.traces import Trace
from hetsched.replaying import ReplayResult

log = logging.getLogger(__name__)

#: Seconds to wait for a TCP connection to ``--address`` before calling it unreachable
#: (``ray.init`` itself retries for minutes).
CONNECT_S = 5.0
#: Ray runs its workers at nice 15 unless this says otherwise: a local Ray started for
#: the bench runs them at the bench's own priority, as the local engine's workers; on a
#: shared machine they would otherwise yield to every other process (deadline replays of
#: 200 jobs took 130-260 s at nice 15 beside other users' jobs, 17-35 s in the stored
#: local bench).
NICENESS = "RAY_worker_niceness"


def _cell_task(runner: Runner, cell: Cell, inputs: ReplayInputs, trace: Trace) -> ReplayResult:
    """One cell in a Ray worker (``inputs`` and ``trace`` come from the object store)."""
    return runner(cell, inputs, trace, RayPartitionExecutor())


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a Ray worker."""
    return fn(*args)


#: The Ray tasks: a cell is not retried by Ray (the bench's loop retries it once, and
#: reports it); a partition, a pure function, is run again if its worker is lost.
_CELL_TASK: Any = ray.remote(max_retries=0)(_cell_task)
_CALL: Any = ray.remote(max_retries=1)(_call)


class RayPartitionExecutor(Executor):
    """A :class:`~concurrent.futures.Executor` whose calls are Ray tasks: POP's
    sub-problems (:class:`hetsched.formulations.gavel.PartitionedSolver` calls ``map``).
    ``map`` waits with ``ray.get``, which lends the waiting task's CPU to the
    sub-problems, so a cell's task waiting for its partitions never starves them."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """``fn(*args, **kwargs)`` as a Ray task."""
        if kwargs:
            return _CALL.remote(_with_keywords, fn, args, kwargs).future()  # type: ignore[no-any-return]
        return _CALL.remote(fn, *args).future()  # type: ignore[no-any-return]

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any],
            timeout: float | None = None, chunksize: int = 1) -> Iterator[Any]:
        """``fn`` over the arguments, one Ray task each, side by side; the results in
        order."""
        refs = [_CALL.remote(fn, *args) for args in zip(*iterables, strict=False)]
        return iter(ray.get(refs, timeout=timeout))


def _with_keywords(fn: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


class RayEngine:
    """Cells as Ray tasks on the cluster at ``address`` (``auto``: the one started on this
    machine with ``ray start``; ``None``: a local Ray of ``workers`` CPUs, started for the
    bench and stopped after it). With an address, ``workers`` caps the cells running at
    once (default: every CPU of the cluster). ``runner`` runs a cell (:func:`run_cell`;
    tests pass a stand-in)."""

    name = "ray"

    def __init__(self, *, address: str | None = None, workers: int | None = None,
                 runner: Runner = run_cell) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 1):
            raise InputError("bad worker count", path="workers", value=workers,
                             expected="an integer >= 1")
        self.address = address
        self.workers = workers
        self.runner = runner

    @contextlib.contextmanager
    def connected(self) -> Iterator[None]:
        """Ray initialised for the block: the running Ray if there is one (a test's, a
        notebook's), else the cluster at the address or a new local Ray (its workers at
        nice 0 unless ``RAY_worker_niceness`` says otherwise), shut down after.
        ``ray.init`` takes SIGTERM for itself; the bench's handler (SIGTERM stops the
        bench as Ctrl-C does) is put back."""
        if ray.is_initialized():
            yield
            return
        if self.address is not None:
            _check_reachable(self.address)
        handler = signal.getsignal(signal.SIGTERM)
        niceness = os.environ.get(NICENESS)
        if self.address is None and niceness is None:
            os.environ[NICENESS] = "0"  # read by the raylet this init starts
        try:
            ray.init(address=self.address,
                     num_cpus=None if self.address else self.workers or default_workers(),
                     include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:  # e.g. auto: no cluster
            raise InputError(f"cannot start or join Ray ({exc})", path="address",
                             value=self.address or "a local Ray",
                             expected="a running cluster (ray start --head) at this address"
                             ) from None
        finally:
            if niceness is None:
                os.environ.pop(NICENESS, None)
            with contextlib.suppress(ValueError, TypeError):  # not the main thread
                signal.signal(signal.SIGTERM, handler)
        try:
            yield
        finally:
            ray.shutdown()

    @contextlib.contextmanager
    def session(self, inputs: Mapping[str, object], cells: int) -> Iterator[EngineSession]:
        """Ray connected, the inputs put in the object store once."""
        with self.connected():
            refs = {key: ray.put(value) for key, value in inputs.items()}
            session = _RaySession(refs, self.runner,
                                  self.workers if self.address is not None else None)
            try:
                yield session
            finally:
                session.cancel_all()

    @contextlib.contextmanager
    def partition_executor(self) -> Iterator[Executor | None]:
        """POP's sub-problems as Ray tasks (Ray connected for the block)."""
        with self.connected():
            yield RayPartitionExecutor()


def _check_reachable(address: str) -> None:
    """A clear error, at once, for a ``host:port`` nobody listens on (``auto`` and
    ``ray://`` addresses are left to Ray)."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError("bad Ray address", path="address", value=address,
                         expected="HOST:PORT of the head node (e.g. 10.0.0.1:6379), or auto")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        raise InputError(f"cannot reach Ray ({exc.strerror or exc})", path="address",
                         value=address, expected="the address ray start --head printed "
                         "(HOST:6379), reachable from here") from None


class _RaySession:
    """Cells as Ray tasks; ``cap`` limits how many run at once (none: the cluster's
    CPUs)."""

    def __init__(self, refs: Mapping[str, ray.ObjectRef[Any]], runner: Runner,
                 cap: int | None) -> None:
        self.refs = refs
        self.runner = runner
        self.cap = cap
        self._running: set[ray.ObjectRef[Any]] = set()

    @property
    def slots(self) -> int:
        """The cluster's CPUs now (nodes may join or leave), at most ``cap``."""
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        return cpus if self.cap is None else min(cpus, self.cap)

    def submit(self, cell: Cell) -> Hashable:
        ref = _CELL_TASK.remote(self.runner, cell, self.refs[cell.inputs],
                                self.refs[cell.jobs])
        self._running.add(ref)
        return ref  # type: ignore[no-any-return]

    def wait(self, handles: Collection[Hashable], timeout_s: float
             ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        refs: list[ray.ObjectRef[Any]] = list(handles)
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready and rest:  # every other one that is done too
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready = [*ready, *more]
        return [(ref, self._outcome(ref)) for ref in ready]

    def _outcome(self, ref: ray.ObjectRef[Any]) -> ReplayResult | BaseException:
        self._running.discard(ref)
        try:
            output: ReplayResult = ray.get(ref)
            return output
        except RayTaskError as exc:  # the task raised: its own exception
            cause = exc.cause
            return cause if isinstance(cause, Exception) else exc
        except RayError as exc:  # the worker or its node died, the result was lost
            return WorkerLostError(f"{type(exc).__name__}: {exc}")

    def drain(self, handles: Collection[Hashable], timeout_s: float
              ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        """What is done already; the rest are cancelled (Ray's workers do not see the
        terminal's Ctrl-C, so nothing more would come back but whole replays)."""
        refs: list[ray.ObjectRef[Any]] = list(handles)
        if not refs:
            return []
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        done = [(ref, self._outcome(ref)) for ref in ready]
        self.cancel_all()
        return done

    def cancel_all(self) -> None:
        """Cancel the tasks still running (an interrupt, an error in the bench)."""
        for ref in self._running:
            with contextlib.suppress(RayError, ValueError, TypeError):
                ray.cancel(ref, force=True)
        self._running.clear()
