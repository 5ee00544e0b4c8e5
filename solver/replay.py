"""Replaying a trace: throughput sources, policies by name, progress on a terminal."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from solver.errors import InputError
from solver.rolling import ModelPolicy, RollingFifo, RollingPolicy
from solver.throughput import Placement, ThroughputModel, ThroughputTable

#: Rolling policies implemented natively; every other name goes to a static model.
NATIVE = {"fifo": RollingFifo}


def rolling_policy(name: str, *, backend: str | None = None, time_limit_s: float | None = 5.0,
                   seed: int = 0) -> RollingPolicy:
    """The rolling policy called ``name``: a native one, or a static model
    (``solver.policies``) solved at every decision point."""
    if name in NATIVE:
        return NATIVE[name]()
    from solver.policies import available

    if name not in available():
        raise InputError("unknown policy", path="--policy", value=name,
                         expected="one of " + ", ".join(sorted({*NATIVE, *available()})))
    return ModelPolicy(name, backend=backend, time_limit_s=time_limit_s, seed=seed)


def catalogue_table(gpu_types: list[str]) -> ThroughputTable:
    """Throughput of the built-in catalogue (solver.generate) on ``gpu_types``."""
    from solver.generate import GPU_TYPES, JOB_CLASSES

    unknown = [t for t in gpu_types if t not in GPU_TYPES]
    if unknown:
        raise InputError("GPU type not in the built-in catalogue", path="--cluster",
                         value=unknown[0], expected="one of " + ", ".join(GPU_TYPES)
                         + ", or give --throughput")
    rows = []
    for name, job_class in JOB_CLASSES.items():
        for gpu_type in gpu_types:
            for count in (1, 2, 4, 8, 16, 32, 64):
                for placement in Placement:
                    if placement is Placement.SPREAD and count == 1:
                        continue
                    speed = job_class.throughput(gpu_type, count, placement)
                    if speed > 0:
                        rows.append((name, gpu_type, count, placement, speed))
    return ThroughputTable.from_rows(rows)


def throughput_pair(path: Path) -> tuple[ThroughputModel, ThroughputModel]:
    """``(measured, fitted)`` from a profile (Gavel JSON or tidy CSV) or a fitted model
    file: the simulator's ground truth and the policies' view."""
    from solver.profiles import read_profile
    from solver.speed_model import FORMAT, load_model, throughput_model

    if not path.is_file():
        raise InputError("no such throughput file", file=str(path), path="--throughput")
    if path.suffix.lower() == ".json" and f'"{FORMAT}"' in path.read_text(
            encoding="utf-8", errors="replace")[:2000]:
        fitted = load_model(path)
        return throughput_model(fitted, mode="measured"), fitted
    profile = read_profile(path)
    return throughput_model(profile, mode="measured"), throughput_model(profile, mode="fitted")


class Progress:
    """One status line on a terminal (jobs done, simulated time, decisions), refreshed at
    most every 0.2 s; silent when the stream is not a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.enabled = self.stream.isatty()
        self.last = 0.0

    def __call__(self, done: int, total: int, now: float, decisions: int) -> None:
        """Report progress (called by the simulator after each decision)."""
        if not self.enabled:
            return
        clock = time.monotonic()
        if clock - self.last < 0.2 and done < total:
            return
        self.last = clock
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} jobs, "
                          f"t = {now / 3600:,.1f} h, {decisions} decisions")
        self.stream.flush()

    def close(self) -> None:
        """End the status line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
