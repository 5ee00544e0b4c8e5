"""``hetsched slurm``: hetsched and Slurm. ``hetsched slurm cluster start|stop|status``
runs a local Slurm cluster on this machine (hetsched.slurm.local, docs/slurm.md)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from hetsched.core.errors import InputError
from hetsched.slurm.local import DEFAULT_PORT, DEFAULT_STATE_DIR, LocalCluster, LocalClusterError
from hetsched.slurm.processes import INSTALL_HINT, missing_programs

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
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=None,
              help="Regroup each type's GPUs into nodes of this many (default: the spec's "
              "nodes).")
@_DIR_OPTION
@click.option("--port", type=click.IntRange(min=1024, max=65535), default=DEFAULT_PORT,
              help="slurmctld's port; the nodes take the next ones, one each.")
def start_command(cluster_spec: str, gpus_per_node: int | None, state_dir: Path,
                  port: int) -> None:
    """Start a local Slurm cluster of the --cluster spec's nodes (named TYPE-0, TYPE-1,
    ...) and wait until every node is idle; reuse it if it already runs from --dir with
    the same nodes. Prints the SLURM_CONF line Slurm's commands need."""
    from hetsched.files.cluster_spec import parse_cluster

    _require_slurm()
    cluster = LocalCluster.from_cluster(parse_cluster(cluster_spec),
                                        gpus_per_node=gpus_per_node, state_dir=state_dir,
                                        port=port)
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
