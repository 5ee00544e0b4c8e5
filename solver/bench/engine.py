"""Where a bench's replays run: the :class:`Engine` protocol (engines:
:class:`hetsched.bench.local_engine.LocalEngine`, this process or a pool of worker processes;
:class:`hetsched.bench.ray_engine.RayEngine`, a Ray cluster), the cell a worker runs
(:func:`run_cell`) and :func:`run_cells`, the one loop that runs a bench's cells on any
engine.

A *cell* is one replay of a sweep (a policy, a seed, a load of one trace on one
cluster). Its inputs (the cluster, the throughput model, the jobs of each seed:
:class:`~hetsched.files.replay_inputs.ReplayInputs` and
:class:`~hetsched.files.traces.Trace`) are read
once by the bench and handed to the engine as one mapping; the engine delivers each to
every worker once (the local pool's initializer, Ray's object store), and a cell names
the two it needs by key. A worker returns the replay's summary and files
(:class:`~hetsched.replaying.ReplayResult`); the bench alone writes the output folder.

:func:`run_cells` keeps the engine's slots busy, reports each cell as it finishes,
retries a failed or lost cell once (:data:`ATTEMPTS`) and then reports it as failed;
bad input (:class:`~hetsched.core.errors.InputError`) stops the bench.
:func:`hetsched.bench.engines.make_engine` picks an engine by name and imports Ray's only when
it is chosen, so the local path never imports ``ray``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hetsched.core.errors import InputError
from hetsched.core.settings import ReplaySettings

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from hetsched.files.replay_inputs import ReplayInputs
    from hetsched.files.traces import Trace
    from hetsched.replaying import ReplayResult

log = logging.getLogger(__name__)

#: How many times a cell is tried: a failed or lost cell is retried once, then reported.
ATTEMPTS = 2
#: Seconds between two refreshes of the progress while no cell finishes.
POLL_S = 5.0
#: Seconds an interrupted bench waits for the cells that were running to hand back what
#: they finished (each stops at its next event on Ctrl-C).
DRAIN_S = 60.0


@dataclass(frozen=True)
class Cell:
    """One replay: ``name`` (its run folder, ``<label>-s<seed>-l<load>``), ``label`` (its
    policy as results.csv names it), the bench it belongs to (``bench``, an index), the
    keys of its inputs in the engine's mapping (``inputs``: the
    :class:`~hetsched.files.replay_inputs.ReplayInputs`; ``jobs``: the seed's
    :class:`~hetsched.files.traces.Trace`), the registered policy ``policy`` with its own
    settings ``params``, and the replay's settings (its seed and load among them)."""

    name: str
    label: str
    bench: int
    inputs: str
    jobs: str
    policy: str
    params: tuple[tuple[str, object], ...]
    settings: ReplaySettings
    #: the bench's co-location pairs file (measured on their own), if any
    pairs: Path | None = None

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.settings.seed

    @property
    def load(self) -> float:
        """The run's arrival-rate multiplier."""
        return self.settings.load


#: What runs one cell: the cell, its inputs, its jobs, and an executor for POP's
#: partitions (``None``: solved in turn); :func:`run_cell`, or a test's stand-in.
Runner = Callable[["Cell", "ReplayInputs", "Trace", "Executor | None"], "ReplayResult"]


def run_cell(cell: Cell, inputs: ReplayInputs, trace: Trace,
             executor: Executor | None = None) -> ReplayResult:
    """Replay one cell (in a worker) and return its summary and files."""
    from hetsched.policies.quotas import with_tenants
    from hetsched.replaying import replay_rendered, rolling_policy

    params = dict(cell.params)
    policy = with_tenants(rolling_policy(cell.policy, cell.settings, params=params,
                                         executor=executor), inputs.tenants)
    return replay_rendered(inputs, trace, policy, policy_name=cell.policy,
                           settings=cell.settings, params=params, pairs=cell.pairs)


class WorkerLostError(RuntimeError):
    """A cell whose worker died (killed, out of memory, its machine gone) before it
    handed back a result."""


class EngineSession(Protocol):
    """An engine at work on one bench: cells go in, outcomes come out."""

    @property
    def slots(self) -> int:
        """How many cells to keep running at once (the workers, Ray's CPUs)."""
        ...

    def submit(self, cell: Cell) -> Hashable:
        """Start ``cell``; a handle to wait on."""
        ...

    def wait(self, handles: Collection[Hashable], timeout_s: float
             ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        """The handles among ``handles`` that finished within ``timeout_s`` seconds
        (at least one unless the time ran out), each with its output or its exception
        (:class:`WorkerLostError` for a worker that died)."""
        ...

    def drain(self, handles: Collection[Hashable], timeout_s: float
              ) -> list[tuple[Hashable, ReplayResult | BaseException]]:
        """After an interrupt: what the running ``handles`` hand back within
        ``timeout_s`` seconds (replays stopped by the Ctrl-C come back interrupted);
        the rest are abandoned."""
        ...


class Engine(Protocol):
    """Runs a bench's cells somewhere (:class:`LocalEngine`, Ray's
    :class:`hetsched.bench.ray_engine.RayEngine`)."""

    name: str

    def session(self, inputs: Mapping[str, object],
                cells: int) -> AbstractContextManager[EngineSession]:
        """A session that runs ``cells`` cells on ``inputs`` (delivered to the workers
        once; no more workers are started than there are cells)."""
        ...

    def partition_executor(self) -> AbstractContextManager[Executor | None]:
        """An executor for POP's sub-problems (``hetsched replay --partitions K``), or
        ``None`` to solve them in turn in this process."""
        ...


def likely_longest_first(cells: Sequence[Cell]) -> list[Cell]:
    """``cells`` in the order to start them: those of exact models (a solver at every
    decision: the longest replays by far) first, then by load, highest first (queues and
    decisions grow with it), otherwise as planned. Starting the long ones first keeps
    the engine's slots busy to the end rather than leaving one long replay alone at the
    end (list scheduling, longest first)."""
    from hetsched.registry import is_exact

    return sorted(cells, key=lambda cell: (not is_exact(cell.policy), -cell.load))


def default_workers() -> int:
    """min(2, CPUs): the replays of exact models are CPU-bound."""
    return max(1, min(2, os.cpu_count() or 1))


# --- the loop every engine runs under -----------------------------------------------------


class CellSink(Protocol):
    """What hears about cells as they run: the bench (results.csv, progress)."""

    def running(self, cells: Sequence[Cell]) -> None:
        """The cells running now."""
        ...

    def finished(self, cell: Cell, output: ReplayResult, seconds: float) -> None:
        """A cell that finished (perhaps interrupted: ``output.interrupted``)."""
        ...

    def retrying(self, cell: Cell, error: BaseException) -> None:
        """A cell that failed and is tried again."""
        ...

    def failed(self, cell: Cell, error: BaseException) -> None:
        """A cell that failed on its last attempt."""
        ...


def run_cells(engine: Engine, inputs: Mapping[str, object], cells: Sequence[Cell],
              sink: CellSink) -> bool:
    """Run ``cells`` on ``engine``, keeping its slots busy, in order; tell ``sink`` of
    each as it finishes. A cell that raises (bad input aside) or is lost is tried again
    once, at the head of the queue, then reported failed; an :class:`InputError` stops
    the bench at once. Returns whether it was interrupted (Ctrl-C, SIGTERM, or a replay
    that came back interrupted): the running cells then hand back what they finished
    (:data:`DRAIN_S`), and the queued ones are not started."""
    if not cells:
        return False
    queue = deque(cells)
    started: dict[Hashable, tuple[Cell, float]] = {}
    attempts: Counter[Cell] = Counter()
    interrupted = False

    def settle(done: list[tuple[Hashable, ReplayResult | BaseException]],
               draining: bool = False) -> None:
        nonlocal interrupted
        for handle, outcome in done:
            cell, began = started.pop(handle)
            if isinstance(outcome, BaseException) and draining:
                log.debug("cell %s stopped by the interrupt", cell.name, exc_info=outcome)
                continue  # stopped by the interrupt, not failed: a rerun does it
            if isinstance(outcome, InputError):
                raise outcome
            if isinstance(outcome, BaseException):
                attempts[cell] += 1
                log.debug("cell %s failed", cell.name, exc_info=outcome)
                if attempts[cell] < ATTEMPTS and not interrupted:
                    sink.retrying(cell, outcome)
                    queue.appendleft(cell)
                else:
                    sink.failed(cell, outcome)
                continue
            interrupted = interrupted or outcome.interrupted
            sink.finished(cell, outcome, time.monotonic() - began)

    with engine.session(inputs, len(cells)) as session:
        try:
            while (queue and not interrupted) or started:
                while queue and not interrupted and len(started) < max(1, session.slots):
                    cell = queue.popleft()
                    started[session.submit(cell)] = (cell, time.monotonic())
                sink.running([cell for cell, _ in started.values()])
                settle(session.wait(list(started), POLL_S))
        except KeyboardInterrupt:
            interrupted = True
            # Every replay still running got the Ctrl-C too: keep what they finished.
            with contextlib.suppress(KeyboardInterrupt):
                settle(session.drain(list(started), DRAIN_S), draining=True)
        finally:
            sink.running([])
    return interrupted
