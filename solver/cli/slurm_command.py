"""``hetsched slurm``: hetsched and Slurm. ``hetsched slurm cluster start|stop|status``
runs a local Slurm cluster on this machine (hetsched.slurm.local); ``hetsched slurm
submit`` submits a trace's jobs to it, each running the training emulator
(hetsched.slurm.submit, hetsched.slurm.emulator; docs/slurm.md) or, with ``--script``, a
training script that reports through hetsched.job."""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click

from hetsched.cli.options import FloatIn, IntIn, format_option
from hetsched.core.errors import InputError
from hetsched.core.ranges import GPUS_PER_NODE_RANGE, Range
from hetsched.core.settings import (
    COUNT_RANGE,
    IDLE_SECONDS_RANGE,
    RESTART_PENALTY_S,
    ReplaySettings,
)
from hetsched.slurm.config import EPILOG_S
from hetsched.slurm.local import DEFAULT_PORT, DEFAULT_STATE_DIR, LocalCluster, LocalClusterError
from hetsched.slurm.metadata import MAX_SPEEDUP
from hetsched.slurm.processes import INSTALL_HINT, missing_programs

#: slurmctld's port (the nodes take the next ones): an unprivileged one.
PORT_RANGE = Range(1024, 65535, integer=True)
#: The longest wait of a node's epilog for the agent (s), as
#: :class:`~hetsched.slurm.local.LocalCluster` checks it (0: no epilog).
EPILOG_RANGE = Range(0.0, 60.0, noun="seconds")
#: Trace seconds per wall second (:data:`~hetsched.slurm.metadata.MAX_SPEEDUP`).
SPEEDUP_RANGE = Range(0.0, MAX_SPEEDUP, low_open=True)

_DIR_OPTION = click.option(
    "--dir", "state_dir", type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_STATE_DIR, help="The cluster's folder: configuration, state, logs.")


@click.group("slurm")
def slurm_group() -> None:
    """hetsched and Slurm (docs/slurm.md)."""


@slurm_group.group("cluster")
def cluster_group() -> None:
    """A local Slurm cluster on this machine, as root: munged, slurmctld and one slurmd
    per node, typed GPUs on placeholder device files (for tests and for trying hetsched
    on Slurm)."""


@cluster_group.command("start")
@click.option("--cluster", "cluster_spec", required=True,
              help="v100=8,k80=4 (nodes of 4 GPUs; TYPE=NxPER for other sizes), a cluster "
              "JSON, openb:NODE_LIST.csv or pai:MACHINES.csv (at most 64 nodes).")
@click.option("--gpus-per-node", type=IntIn(GPUS_PER_NODE_RANGE, "bad GPUs per node"),
              default=None,
              help="Regroup each type's GPUs into nodes of this many (default: the spec's "
              "nodes).")
@_DIR_OPTION
@click.option("--port", type=IntIn(PORT_RANGE, "bad port"), default=DEFAULT_PORT,
              help="slurmctld's port; the nodes take the next ones, one each.")
@click.option("--epilog", "epilog_s", type=FloatIn(EPILOG_RANGE, "bad epilog length"),
              default=EPILOG_S, show_default=True,
              help="The longest (s) each node's epilog waits for the agent's hand-over "
              "file: the agent hands a job's GPUs to the next during it (0: no epilog).")
def start_command(cluster_spec: str, gpus_per_node: int | None, state_dir: Path,
                  port: int, epilog_s: float) -> None:
    """Start a local Slurm cluster of the --cluster spec's nodes (named TYPE-0, TYPE-1,
    ...) and wait until every node is idle; reuse it if it already runs from --dir with
    the same nodes. Prints the SLURM_CONF line Slurm's commands need."""
    from hetsched.files.cluster_spec import parse_cluster

    _require_slurm()
    cluster = LocalCluster.from_cluster(parse_cluster(cluster_spec),
                                        gpus_per_node=gpus_per_node, state_dir=state_dir,
                                        port=port, epilog_s=epilog_s)
    with _cluster_errors():
        started = cluster.start()
    gpus = sum(node.gpus for node in cluster.nodes)
    click.echo(f"{'started' if started else 'already running:'} a local Slurm cluster of "
               f"{len(cluster.nodes)} nodes, {gpus} GPUs, in {cluster.state_dir}")
    click.echo(_node_table(cluster))
    click.echo(f"logs: {cluster.log_dir}; stop it: hetsched slurm cluster stop --dir "
               f"{cluster.state_dir}")
    click.echo(f"export SLURM_CONF={cluster.conf_path}")


@cluster_group.command("stop")
@_DIR_OPTION
def stop_command(state_dir: Path) -> None:
    """Cancel the jobs of the local cluster in --dir and stop its daemons (files and logs
    stay)."""
    cluster = LocalCluster.load(state_dir)
    running = any(pid is not None for pid in cluster.daemon_pids().values())
    with _cluster_errors():
        cluster.stop()
    click.echo(f"{'stopped' if running else 'nothing ran:'} the local Slurm cluster in "
               f"{cluster.state_dir} (logs in {cluster.log_dir})")


@cluster_group.command("status")
@_DIR_OPTION
def status_command(state_dir: Path) -> None:
    """Show the daemons and nodes of the local cluster in --dir. Exit code 0 if every
    daemon runs, 1 if not."""
    cluster = LocalCluster.load(state_dir)
    pids = cluster.daemon_pids()
    down = [name for name, pid in pids.items() if pid is None]
    verdict = "running" if not down else "not running" if len(down) == len(pids) else \
        f"partly running (not: {', '.join(down)})"
    click.echo(f"local Slurm cluster in {cluster.state_dir}: {verdict}")
    states = cluster.node_states() if pids["slurmctld"] is not None else {}
    click.echo(_node_table(cluster, states if states else None))
    click.echo(f"export SLURM_CONF={cluster.conf_path}")
    if down:
        sys.exit(1)


@slurm_group.command("submit")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@format_option(required=True)
@click.option("--cluster-dir", type=click.Path(file_okay=False, path_type=Path),
              default=DEFAULT_STATE_DIR,
              help="The local cluster's folder: its nodes are the cluster the trace is read "
              "for, its SLURM_CONF the Slurm submitted to.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where checkpoints/, logs/ and submitted.csv go (default: --cluster-dir).")
@click.option("--partition", default=None, help="Slurm partition (default: the local "
              "cluster's, gpu).")
@click.option("--speedup", type=FloatIn(SPEEDUP_RANGE, "bad speedup"),
              default=1.0, help="X: trace seconds per wall second (arrivals and the "
              "emulated training run X times faster).")
@click.option("--limit-jobs", type=IntIn(COUNT_RANGE, "bad job limit"), default=None,
              help="Only the N earliest jobs.")
@click.option("--throughput", "throughput_path",
              type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Profile (Gavel JSON, tidy CSV) or fitted model, as replay's; default: "
              "Gavel's beside a Gavel trace, else the built-in catalogue.")
@click.option("--restart-penalty", type=FloatIn(IDLE_SECONDS_RANGE, "bad restart penalty"),
              default=RESTART_PENALTY_S, help="Trace seconds without progress after a "
              "requeue.")
@click.option("--slurm-schedules", is_flag=True,
              help="Submit the jobs not held, each asking for its GPU count of any type, "
              "for Slurm's own scheduler (the anchor; no agent touches them).")
@click.option("--script", "script", default=None, metavar="'FILE [ARGS...]'",
              help="Run this training script as each job instead of the emulator (shell "
              "words; a .py file runs under this Python): it reports its steps and stops on "
              "SIGTERM through hetsched.job, told its folder and its job's work (steps) in "
              "the environment (docs/slurm.md, \"Real jobs: hetsched.job\").")
@click.option("--hide-work", is_flag=True,
              help="Leave each job's work (steps) out of its comment: the job is told it in "
              "its environment, the agent schedules it on a guess from the jobs it saw "
              "complete (docs/slurm.md, \"Jobs that do not say their steps\").")
def submit_command(trace: Path, trace_format: str, cluster_dir: Path, state_dir: Path | None,
                   partition: str | None, speedup: float, limit_jobs: int | None,
                   throughput_path: Path | None, restart_penalty: float,
                   slurm_schedules: bool, script: str | None, hide_work: bool) -> None:
    """Submit TRACE's jobs to the local Slurm cluster at their arrival times divided by
    --speedup, each running hetsched's training emulator (or --script); held for the
    agent (hetsched slurm run) unless --slurm-schedules. Writes STATE/submitted.csv as it
    goes."""
    from hetsched.core.bars import ProgressBar
    from hetsched.core.interrupts import exit_code
    from hetsched.slurm import submit
    from hetsched.slurm.source import record_source

    command = submit.script_command(script) if script is not None else ()
    cluster = LocalCluster.load(cluster_dir)
    submit.check_partition(cluster, partition or cluster.partition)
    settings = ReplaySettings(limit_jobs=limit_jobs, restart_penalty_s=restart_penalty)
    plan = submit.prepare(trace, trace_format, cluster, speedup=speedup, settings=settings,
                          throughput_path=throughput_path, partition=partition,
                          state_dir=state_dir, slurm_schedules=slurm_schedules,
                          command=command, hide_work=hide_work)
    if not slurm_schedules:  # the agent reads the same throughputs (slurm.source)
        record_source(cluster_dir, plan.throughput_path, trace)
    first, last = plan.metas[0], plan.metas[-1]
    click.echo(f"submitting {len(plan.metas)} jobs to partition {plan.partition} "
               f"({'Slurm schedules them' if slurm_schedules else 'held for the agent'}): "
               f"trace time 0 = Unix {first.origin:.3f}, speedup {speedup:g}, the last "
               f"in {last.unix_time(last.job.arrival) - time.time():,.1f} s")
    if command:
        click.echo(f"each job runs {shlex.join(command)}")
    with ProgressBar(len(plan.metas), desc="submit", unit="job") as bar:
        def progress(done: int, total: int, following: float) -> None:
            wait = following - time.time()
            bar.update_to(done, "" if math.isinf(following) else f"next in {wait:,.1f} s",
                          force=True)

        try:
            outcome = submit.submit(plan, cluster.env(), progress=progress)
        except RuntimeError as error:
            done = len(submit.submitted_rows(plan.submitted_csv))
            raise click.ClickException(f"{error} (submitted {done} of {len(plan.metas)} "
                                       f"jobs, in {plan.submitted_csv})") from None
    ids = list(outcome.slurm_ids.values())
    where = f"Slurm jobs {ids[0]} to {ids[-1]}" if ids else "none"
    click.echo(f"submitted {len(ids)} of {outcome.total} jobs ({where}); wrote "
               f"{plan.submitted_csv}; checkpoints in {plan.checkpoints}, logs in {plan.logs}")
    if outcome.interrupted:
        click.echo(f"interrupted: submitted {len(ids)} of {outcome.total} jobs", err=True)
        sys.exit(exit_code())


def _require_slurm() -> None:
    """Bad input unless Slurm's and MUNGE's programs are installed and we are root."""
    missing = missing_programs()
    if missing:
        raise InputError(f"Slurm programs not found: {', '.join(missing)} (install them as "
                         f"root: {INSTALL_HINT})")
    if os.geteuid() != 0:
        raise InputError("a local Slurm cluster runs as root (SlurmUser=root, its own "
                         "munged); run this command as root")


def _node_table(cluster: LocalCluster, states: dict[str, str] | None = None) -> str:
    """One line per node: name, GPUs, CPUs, memory, port (and state, if given)."""
    rows = [("node", "GPUs", "CPUs", "memory", "port", *(("state",) if states else ()))]
    for index, node in enumerate(cluster.nodes):
        rows.append((node.name, f"{node.gpus} x {node.gpu_type}", str(node.cpus),
                     f"{node.memory_mb / 1024:g} GB", str(cluster.node_port(index)),
                     *((states.get(node.name, "absent"),) if states else ())))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                         strict=True)).rstrip()
                     for row in rows)


@contextlib.contextmanager
def _cluster_errors() -> Iterator[None]:
    """A LocalClusterError as one line (exit 1), the daemons' last log lines above it."""
    try:
        yield
    except LocalClusterError as error:
        if error.log_tail:
            click.echo(error.log_tail, err=True)
        raise click.ClickException(error.problem) from None
