"""A bench's inputs read once, before its runs (:func:`prefetch`): the inputs every run
shares and the trace of each seed, as :class:`hetsched.bench.settings.BenchSettings` says
(a sweep spec's check reads them before anything is written, and the bench uses them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hetsched.core.settings import ReplaySettings

if TYPE_CHECKING:
    from hetsched.files.replay_inputs import ReplayInputs
    from hetsched.files.traces import Trace

__all__ = ["Prefetched", "prefetch"]


@dataclass(frozen=True)
class Prefetched:
    """A bench's inputs read before it starts (:func:`prefetch`): the inputs its runs
    share and the trace as each seed reads it."""

    inputs: ReplayInputs
    traces: Mapping[int, Trace]


def prefetch(trace: Path, trace_format: str, cluster: str, replay: ReplaySettings,
             seeds: Sequence[int], *, throughput: Path | None = None,
             tenants: Path | None = None, pairs: Path | None = None) -> Prefetched:
    """Read a bench's inputs as its runs will (``replay_inputs``, and ``read_jobs`` for
    each of ``seeds``, :mod:`hetsched.files.replay_inputs`): the fields of
    :class:`~hetsched.bench.settings.BenchSettings` of the same names. An
    :class:`~hetsched.core.errors.InputError` if any is bad."""
    from hetsched.files.replay_inputs import read_jobs, replay_inputs

    inputs = replay_inputs(trace, trace_format, cluster, throughput_path=throughput,
                           settings=replay, tenants_path=tenants, pairs_path=pairs)
    return Prefetched(inputs, {seed: read_jobs(inputs, replay.replace(seed=seed, load=1.0))
                               for seed in seeds})
