"""A bench's inputs read once, before its runs (:func:`prefetch`): the inputs every run
shares and the trace of each seed, as :class:`hetsched.bench.runner.BenchSettings` says
(a sweep spec's check reads them before anything is written, and the bench uses them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetsched.bench.runner import BenchSettings
    from hetsched.files.replay_inputs import ReplayInputs
    from hetsched.files.traces import Trace

__all__ = ["Prefetched", "prefetch"]


@dataclass(frozen=True)
class Prefetched:
    """A bench's inputs read before it starts (:func:`prefetch`): the inputs its runs
    share and the trace as each seed reads it."""

    inputs: ReplayInputs
    traces: Mapping[int, Trace]


def prefetch(settings: BenchSettings) -> Prefetched:
    """Read the inputs of ``settings`` as its runs will (:func:`replay_inputs`, and
    :func:`read_jobs` for each seed): an :class:`InputError` if any is bad."""
    from hetsched.files.replay_inputs import read_jobs, replay_inputs

    inputs = replay_inputs(settings.trace, settings.trace_format, settings.cluster,
                           throughput_path=settings.throughput, settings=settings.replay,
                           tenants_path=settings.tenants, pairs_path=settings.pairs)
    return Prefetched(inputs, {seed: read_jobs(inputs, settings.run_settings(seed, 1.0))
                               for seed in settings.seeds})
