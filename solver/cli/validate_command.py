"""``hetsched validate``: instances, traces, node lists, clusters, profiles checked without
running them. Registered on the ``hetsched`` group by :mod:`hetsched.cli.main`."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

import click

from hetsched.cli.printing import as_typed
from hetsched.core.errors import InputError
from hetsched.files.instance import load_instance
from hetsched.files.validate import FILE_FORMATS, check_file
from hetsched.registry import entry, model_warnings, names


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "file_format", default="instance", show_default=True,
              type=click.Choice(FILE_FORMATS),
              help="What the files are: instances, traces, node lists, cluster JSON or "
              "profiles (tidy CSV, Gavel JSON; step times: a tidy CSV with step_time or a "
              "folder of Pollux's measurements).")
@click.option("--model", default=None,
              help="Instances: also warn about jobs this model cannot run: "
              + ", ".join(names()) + ".")
@click.option("--cluster", "cluster_spec", default=None,
              help="Traces: check them as a replay on this cluster would read them.")
@click.option("--throughput", "throughput_path", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Traces, node lists, clusters: the throughput model to check against.")
@click.option("--reference-gpu", default=None, help="Traces: as for replay.")
@click.option("--gpu-alias", "gpu_aliases", default=None, help="As for replay: g3=a100.")
def validate_command(files: tuple[Path, ...], file_format: str, model: str | None,
                     cluster_spec: str | None, throughput_path: Path | None,
                     reference_gpu: str | None, gpu_aliases: str | None) -> None:
    """Check FILES (instances by default; --format for traces, node lists, profiles)
    without running them: one line per file.

    Exit codes: 0 all valid; 2 some file is bad; 3 all valid, with warnings on stderr
    (--model cannot run a job; GPUs of a type no throughput covers).
    """
    from hetsched.core.settings import parse_gpu_aliases

    if model is not None:
        if file_format != "instance":
            raise InputError("--model checks instances only", path="--model", value=model,
                             expected="--format instance")
        entry(model, "--model")
    aliases = parse_gpu_aliases(gpu_aliases)
    bad = warned = 0
    for path in files:
        try:
            verdict = check_file(path, file_format, cluster_spec=cluster_spec,
                                 throughput_path=throughput_path, reference_gpu=reference_gpu,
                                 gpu_aliases=aliases)
            warnings = list(verdict.warnings)
            if model is not None:
                warnings += model_warnings(load_instance(path), model)
        except InputError as exc:
            bad += 1
            click.echo(f"error: {as_typed(exc)}", err=True)
            continue
        click.echo(f"{path}: {verdict.summary}")
        for note in grouped_notes(verdict.notes):
            click.echo(f"  note: {note}")
        for warning in warnings:
            click.echo(f"warning: {path}: {warning}", err=True)
        warned += bool(warnings)
    if bad:
        sys.exit(2)
    if warned:
        sys.exit(3)


#: A trace reader's note on one (job type, GPU count) pair whose count was capped.
_CAPPED_PAIR = re.compile(r"^\((.+), (\d+)\): 0 steps/s on every GPU type of the throughput "
                          r"model; capped at (\d+) GPUs: (\d+) jobs$")


def grouped_notes(notes: Iterable[str]) -> list[str]:
    """The notes of a file, the per-pair GPU-count caps of a trace (one note per job type
    and count: 53 on Gavel's ee9e8c) grouped by the count they were capped at, each group
    with its pairs and jobs counted and its three largest pairs named; the others as they
    are, most jobs first."""
    groups: dict[int, list[tuple[int, str]]] = {}
    rest: list[str] = []
    for note in notes:
        match = _CAPPED_PAIR.match(note)
        if match is None:
            rest.append(note)
            continue
        job_type, count, capped, jobs = match.groups()
        groups.setdefault(int(capped), []).append((int(jobs), f"{job_type} x {count}"))
    lines = sorted(rest, key=lambda note: -_jobs_of(note))
    for capped, pairs in sorted(groups.items()):
        pairs.sort(key=lambda pair: (-pair[0], pair[1]))
        largest = ", ".join(f"{name}: {jobs}" for jobs, name in pairs[:3])
        lines.append(f"capped at {capped} GPU{'s' if capped != 1 else ''}: "
                     f"{sum(jobs for jobs, _ in pairs)} jobs of {len(pairs)} (job type, GPU "
                     f"count) pairs with 0 steps/s on every GPU type (most: {largest})")
    return lines


def _jobs_of(note: str) -> int:
    """The job count a note ends with (``...: 373 jobs``), 0 without one."""
    head, _, tail = note.rpartition(": ")
    number = tail.removesuffix(" jobs")
    return int(number) if head and number.isascii() and number.isdigit() else 0
