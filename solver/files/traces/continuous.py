"""Continuous traces as Gavel's simulator draws them (format ``continuous``): the file is
a small JSON document that says how many jobs to draw and how fast they come, and the
jobs are drawn with the read's seed, so a bench's seeds give the different traces
Gavel's sweeps run (``--seeds``), and its loads scale the arrival rate::

    {"jobs": 6000, "rate_per_hour": 1, "gpus": "single"}

Drawn as Gavel's OSDI'20 evaluation describes its continuous traces ("continuous-single"
with ``"gpus": "single"``, "continuous-multiple" with ``"multi"``; the distributions of
Gavel's ``scheduler/utils.py``, derived there from Microsoft's Philly trace), in this
project's own code:

* arrivals: a Poisson process of ``rate_per_hour`` jobs per hour (exponential gaps);
* durations: ``10^x`` minutes, ``x`` uniform on [1.5, 3] with probability 0.8 and on
  [3, 4] with probability 0.2;
* GPUs: 1 (``single``); or 1, 2, 4 or 8 with probabilities 0.7, 0.1, 0.15 and 0.05
  (``multi``);
* job type: drawn uniformly among the throughput model's job types that run at the
  job's GPU count, and the duration turned into steps on the reference GPU (a V100) at
  that count, packed: the shared rules of every trace without job types
  (docs/traces.md), which are Gavel's (``num_steps = duration x throughput on a V100``).

Gavel measures the average JCT of jobs 4,000 to 5,000 of such a stream, in steady state;
``--jct-window 4000:5000`` gives the same figure (``avg_jct_window_s``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hetsched.core.errors import InputError
from hetsched.core.json_files import read_json
from hetsched.files.traces.base import Options, Reading, Row, Trace
from hetsched.files.traces.rules import build_trace

#: The most jobs one file may ask for.
MAX_JOBS = 1_000_000
#: GPU counts of ``multi`` and their probabilities (Gavel's Philly-derived distribution).
MULTI_GPUS = ((1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05))
#: The keys of the document.
KEYS = ("jobs", "rate_per_hour", "gpus")


def read_continuous(path: Path, options: Options) -> Trace:
    """Draw the jobs the document ``path`` describes (module notes) with ``options.seed``."""
    reading = Reading(path, "continuous", options)
    jobs, rate, gpus = _document(read_json(path), str(path))
    rng = np.random.default_rng(np.random.SeedSequence([options.seed, 0x6A7E1]))
    arrivals = np.cumsum(rng.exponential(3600.0 / rate, size=jobs))
    arrivals -= arrivals[0]
    long = rng.random(jobs) >= 0.8
    exponent = np.where(long, rng.uniform(3.0, 4.0, size=jobs),
                        rng.uniform(1.5, 3.0, size=jobs))
    durations = 60.0 * 10.0 ** exponent
    if gpus == "multi":
        counts = np.array([count for count, _ in MULTI_GPUS])
        chance = np.array([p for _, p in MULTI_GPUS])
        sizes = rng.choice(counts, size=jobs, p=chance)
    else:
        sizes = np.ones(jobs, dtype=np.int64)
    rows = [Row(index + 2, float(arrivals[index]), int(sizes[index]),
                duration=float(durations[index]), id=str(index))
            for index in range(jobs)]
    return build_trace(reading, rows)


def _document(document: Any, file: str) -> tuple[int, float, str]:
    """The jobs, rate and GPU distribution of a parsed document."""
    if not isinstance(document, dict) or not set(document) <= set(KEYS) or \
            not {"jobs", "rate_per_hour"} <= set(document):
        raise InputError("not a continuous trace", file=file, path="$", value=document,
                         expected='{"jobs": N, "rate_per_hour": R, "gpus": "single" or '
                         '"multi"} ("gpus" optional: "single")')
    jobs, rate = document["jobs"], document["rate_per_hour"]
    gpus = document.get("gpus", "single")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise InputError("bad number of jobs", file=file, path="$.jobs", value=jobs,
                         expected=f"an integer from 1 to {MAX_JOBS:,}")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or \
            not 1e-6 <= rate <= 1e6:
        raise InputError("bad rate", file=file, path="$.rate_per_hour", value=rate,
                         expected="jobs per hour, from 1e-6 to 1e6")
    if gpus not in ("single", "multi"):
        raise InputError("bad GPU distribution", file=file, path="$.gpus", value=gpus,
                         expected='"single" (1 GPU each) or "multi" (1, 2, 4 or 8)')
    return jobs, float(rate), gpus
