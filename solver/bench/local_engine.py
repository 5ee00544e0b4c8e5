"""The local engine: a bench's cells in this process, or in worker processes forked by
multiprocessing's fork server that die with the bench (:mod:`hetsched.bench.workers`)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Collection, Hashable, Iterator, Mapping
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from hetsched.bench.engine import Cell, EngineSession, Runner, WorkerLostError, run_cell
from hetsched.core.errors import InputError

if TYPE_CHECKING:
    from hetsched.replaying import ReplayResult


class LocalEngine:
    """Cells in this process (one worker) or in ``workers`` processes forked by
    multiprocessing's fork server, which die with the bench (:mod:`hetsched.bench.workers`).
    ``runner`` runs a cell (:func:`run_cell`; a module-level function, since the pool
    pickles it)."""

    name = "local"

    def __init__(self, workers: int = 1, runner: Runner = run_cell) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError("bad worker count", path="workers", value=workers,
                             expected="an integer >= 1")
        self.workers = workers
        self.runner = runner

    @contextlib.contextmanager
    def session(self, inputs: Mapping[str, object], cells: int) -> Iterator[EngineSession]:
        """In this process with one worker or one cell, else a process pool of at most
        ``cells`` workers (see the class)."""
        if self.workers == 1 or cells <= 1:
            yield _SerialSession(inputs, self.runner)
            return
        pool = _PoolSession(inputs, self.runner, min(self.workers, cells))
        try:
            yield pool
        finally:
            pool.close()

    @contextlib.contextmanager
    def partition_executor(self) -> Iterator[Executor | None]:
        """None: POP's sub-problems are solved in turn, warm-started, in this process."""
        yield None


class _SerialSession:
    """Cells one at a time in this process, each run when it is waited for."""

    slots = 1

    def __init__(self, inputs: Mapping[str, object], runner: Runner) -> None:
        self.inputs = inputs
        self.runner = runner
        self._cells: dict[int, Cell] = {}

    def submit(self, cell: Cell) -> Hashable:
        handle = len(self._cells)
        self._cells[handle] = cell
        return handle

    def wait(self, handles: Collection[Hashable], timeout_s: float
             ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        handle = next(iter(handles))
        cell = self._cells.pop(handle)  # type: ignore[call-overload]
        return [(handle, _run(self.runner, cell, self.inputs))]

    def drain(self, handles: Collection[Hashable], timeout_s: float
              ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        return []  # the cell that was running raised the interrupt: nothing came back


def _run(runner: Runner, cell: Cell, inputs: Mapping[str, object]
         ) -> ReplayResult | BaseException:
    """The runner's output, or the exception it raised (an interrupt propagates)."""
    try:
        return runner(cell, inputs[cell.inputs], inputs[cell.jobs],  # type: ignore[arg-type]
                      None)
    except Exception as exc:
        return exc


#: The inputs of a pool worker, installed once by the pool's initializer.
_WORKER_INPUTS: dict[str, object] = {}


def _start_worker(bench_pid: int, inputs: Mapping[str, object]) -> None:
    """The pool's initializer: tie the worker to the bench, keep the inputs."""
    from hetsched.bench.workers import guard_worker

    guard_worker(bench_pid)
    _WORKER_INPUTS.clear()
    _WORKER_INPUTS.update(inputs)


def _pool_cell(runner: Runner, cell: Cell) -> ReplayResult:
    """One cell in a pool worker, on the inputs its initializer installed."""
    return runner(cell, _WORKER_INPUTS[cell.inputs], _WORKER_INPUTS[cell.jobs],  # type: ignore[arg-type]
                  None)


class _PoolSession:
    """Cells in a process pool; a worker that dies loses its cell (:class:`WorkerLostError`)
    and the pool is started again for the cells after it."""

    def __init__(self, inputs: Mapping[str, object], runner: Runner, workers: int) -> None:
        self.inputs = dict(inputs)
        self.runner = runner
        self.slots = workers
        self._pool: ProcessPoolExecutor | None = None
        #: the pool each running cell went to (a broken pool is dropped only once)
        self._owner: dict[Future[ReplayResult], ProcessPoolExecutor] = {}

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # Fresh processes (not fork: the parent may hold solver thread pools); the
            # fork server imports the replay once, and every worker forks from it.
            if sys.platform == "win32":
                context = multiprocessing.get_context("spawn")
            else:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(
                    ["hetsched.bench.engine", "hetsched.replaying", "hetsched.simulate.simulator",
                     "hetsched.files.traces", "hetsched.core.bounds", "hetsched.bench.workers"])
            self._pool = ProcessPoolExecutor(
                max_workers=self.slots, mp_context=context, initializer=_start_worker,
                initargs=(os.getpid(), self.inputs))
        return self._pool

    def submit(self, cell: Cell) -> Hashable:
        pool = self._executor()
        try:
            future = pool.submit(_pool_cell, self.runner, cell)
        except BrokenProcessPool:  # a worker died since the last wait: a new pool
            self._discard(pool)
            pool = self._executor()
            future = pool.submit(_pool_cell, self.runner, cell)
        self._owner[future] = pool
        return future

    def _discard(self, pool: ProcessPoolExecutor | None) -> None:
        """Drop a broken pool (its cells come back lost) if it is still the one in use;
        the next cell starts a new one."""
        if pool is not None and pool is self._pool:
            pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def wait(self, handles: Collection[Hashable], timeout_s: float
             ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        futures: list[Future[ReplayResult]] = list(handles)  # type: ignore[arg-type]
        done, _ = wait(futures, timeout=timeout_s, return_when=FIRST_COMPLETED)
        return [(future, self._outcome(future)) for future in done]

    def _outcome(self, future: Future[ReplayResult]) -> ReplayResult | BaseException:
        pool = self._owner.pop(future, None)
        try:
            return future.result()
        except (BrokenProcessPool, CancelledError) as exc:
            # A worker died (killed, out of memory): every cell in its pool is lost with
            # it; a new pool takes the cells that are tried again.
            self._discard(pool)
            return WorkerLostError(f"a worker process died ({exc or type(exc).__name__})")
        except Exception as exc:
            return exc

    def drain(self, handles: Collection[Hashable], timeout_s: float
              ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        futures: list[Future[ReplayResult]] = list(handles)  # type: ignore[arg-type]
        done, _ = wait(futures, timeout=timeout_s)
        return [(future, self._outcome(future)) for future in futures if future in done]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
