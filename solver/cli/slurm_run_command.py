"""``hetsched slurm run``: the agent (hetsched.slurm.agent) driving a live Slurm cluster
with a registered rolling policy, until its stop condition or Ctrl-C, then its files."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from types import FrameType

import click

from hetsched.cli.options import FloatIn, IntIn, tenants_option
from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_TIME_S, Range
from hetsched.core.settings import (
    COUNT_RANGE,
    DECISION_TIMEOUT_S,
    KNOWLEDGE,
    TIME_LIMIT_RANGE,
)
from hetsched.slurm.local import DEFAULT_STATE_DIR
from hetsched.slurm.source import LEARN_PRIORS

log = logging.getLogger("hetsched")

#: Exit codes of an agent stopped by a signal (as ``hetsched replay``).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
#: Exit code of an agent whose slurmctld stayed silent past the retry budget (files written).
EXIT_SLURM_SILENT = 1

#: Wall seconds between readings of the cluster, as
#: :class:`~hetsched.slurm.agent.AgentSettings` checks them.
POLL_RANGE = Range(0.01, 60.0, noun="seconds")
#: Wall seconds with nothing managed before the agent stops (0: at the first such reading).
IDLE_EXIT_RANGE = Range(0.0, MAX_TIME_S, noun="seconds")


@click.command("run")
@click.option("--policy", "policy_name", required=True,
              help="A registered rolling policy (hetsched.names()) or path/file.py:Class.")
@click.option("--partition", default="gpu", show_default=True,
              help="The partition whose jobs the agent manages.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Where jobs.csv, decisions.csv, summary.json and events.jsonl go; an agent "
              "restarted on the same folder carries on from its events.jsonl.")
@click.option("--cluster-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A local cluster's folder (hetsched slurm cluster start --dir); default: "
              f"$SLURM_CONF if set, else {DEFAULT_STATE_DIR} if a cluster runs there.")
@click.option("--throughput", "throughput_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Throughput profile or fitted model the policy plans with "
              "(default: the built-in catalogue; the same file as `slurm submit`'s).")
@click.option("--checkpoints", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The training emulator's checkpoint folder (`slurm submit`'s, "
              "CLUSTER_DIR/checkpoints by default when --cluster-dir is given): what ran, "
              "exactly, for jobs.csv and the checker.")
@click.option("--handover", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder the nodes' epilogs watch: the agent writes a file per job whose "
              "GPUs it has decided on, and the epilog ends (default: a local cluster's "
              "CLUSTER_DIR/handover; docs/slurm.md, \"Handing GPUs over\").")
@click.option("--gpu-types", "type_order", default=None,
              help="The cluster's GPU types in order, v100,p100,k80 (the type preference "
              "of FIFO-like policies; a replay takes it from --cluster's order); default: "
              "a local cluster's spec order with --cluster-dir, else by name.")
@click.option("--learn", type=click.Choice(LEARN_PRIORS), default="off", show_default=True,
              help="Learn throughputs from the jobs' reports as they run, starting from the "
              "throughput source, the built-in catalogue or nothing (a job type never seen "
              "starts from a bootstrap estimate); the policy plans with what was learned, "
              "written to OUT/learned_throughput.csv.")
@click.option("--knowledge", type=click.Choice(KNOWLEDGE), default="truth", show_default=True,
              help="What the policy may know of each job's work, as hetsched replay's "
              "option: the metadata's steps, an estimate from the jobs seen to complete "
              "(QSSF's history rule), or none (docs/knowledge.md).")
@tenants_option(": kept around the policy (jobs name their tenant in their metadata), and "
                "the fairness figures count per tenant.")
@click.option("--poll", "poll_s", type=FloatIn(POLL_RANGE, "bad poll interval"), default=0.25,
              show_default=True,
              help="Wall seconds between readings of the cluster.")
@click.option("--stop-after", type=IntIn(COUNT_RANGE, "bad job count"), default=None,
              help="Stop once this many managed jobs have ended.")
@click.option("--idle-exit", "idle_exit_s", type=FloatIn(IDLE_EXIT_RANGE, "bad idle time"),
              default=None,
              help="Stop after this many wall seconds with no managed job pending or running.")
@click.option("--decision-timeout", "decision_timeout_s",
              type=FloatIn(TIME_LIMIT_RANGE, "bad decision timeout"),
              default=DECISION_TIMEOUT_S, show_default=True,
              help="Wall seconds one call of the policy may take (its decide, its hooks); "
              "past it the call is logged as the policy's failure and nothing that runs "
              "changes.")
def slurm_run_command(policy_name: str, partition: str, out: Path, cluster_dir: Path | None,
                      throughput_path: Path | None, checkpoints: Path | None,
                      handover: Path | None, type_order: str | None, learn: str,
                      knowledge: str, tenants_path: Path | None, poll_s: float,
                      stop_after: int | None, idle_exit_s: float | None,
                      decision_timeout_s: float | None) -> None:
    """Schedule the managed jobs of a live Slurm cluster with a rolling policy: jobs
    submitted held with hetsched metadata in their comment (docs/slurm.md); every other
    job is left to Slurm and its GPUs are never given away. Ctrl-C or SIGTERM writes the
    files and exits (130/143); so does a slurmctld silent for 10 minutes of retries (exit
    1)."""
    from hetsched.files.replay_inputs import throughputs
    from hetsched.files.tenants import read_tenants
    from hetsched.knowledge.view import knowledge_view
    from hetsched.policies.quotas import with_tenants
    from hetsched.replaying import rolling_policy
    from hetsched.slurm.agent import Agent, AgentSettings
    from hetsched.slurm.agent_lock import agent_lock
    from hetsched.slurm.control import SlurmControl, SlurmUnreachableError
    from hetsched.slurm.history import History
    from hetsched.slurm.learning import reports_for
    from hetsched.slurm.live import SlurmCluster
    from hetsched.slurm.source import source_for_run

    settings = AgentSettings(poll_s=poll_s, stop_after=stop_after, idle_exit_s=idle_exit_s,
                             decision_timeout_s=decision_timeout_s)
    tenants = read_tenants(tenants_path) if tenants_path is not None else None
    policy = with_tenants(rolling_policy(policy_name), tenants)
    if out.exists() and not out.is_dir():
        raise InputError("not a folder", path="--out", value=str(out), expected="a folder")
    source = source_for_run(cluster_dir, throughput_path)  # submit's, or a refusal
    env = _slurm_env(cluster_dir)
    control = SlurmControl(env=env)
    order: list[str] = [t for t in (type_order or "").split(",") if t]
    if not order and cluster_dir is not None and (cluster_dir / "local-cluster.json").is_file():
        from hetsched.slurm.local import LocalCluster

        order = [node.name for node in LocalCluster.load(cluster_dir).nodes]
    local_handover = Path(env.get("SLURM_CONF", "/nonexistent")).parent / "handover"
    if handover is None and local_handover.is_dir():  # a local cluster's
        handover = local_handover
    if handover is not None and not handover.is_dir():
        raise InputError("no such folder", path="--handover", value=str(handover),
                         expected="the folder the nodes' epilogs watch")
    with agent_lock(env.get("SLURM_CONF", "/etc/slurm/slurm.conf"), partition):
        live = SlurmCluster(control, partition, order, handover=handover)
        try:
            first = live.read()
        except SlurmUnreachableError as exc:
            raise InputError(str(exc), path="--cluster-dir", value=str(cluster_dir or ""),
                             expected="a running Slurm cluster") from None
        speeds = throughputs(first.cluster, source)
        history = History(out / "events.jsonl")
        if checkpoints is None and cluster_dir is not None:
            checkpoints = cluster_dir / "checkpoints"
        reports = reports_for(checkpoints, learn, first.cluster, speeds.model)
        agent = Agent(live, policy, speeds.model, history, settings, truth=speeds.truth,
                      reports=reports,
                      knowledge=knowledge_view(knowledge, first.cluster, speeds.model))
        log.info("agent: policy %s on %d nodes (%d GPUs), partition %s", policy_name,
                 len(first.cluster.nodes), len(first.cluster.gpus), partition)
        code = 0
        began = time.monotonic()
        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            agent.run()
            click.echo(f"stopped: {agent.stopped_because}", err=True)
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        except _TerminatedError:
            code = EXIT_TERMINATED
        except SlurmUnreachableError as exc:
            log.error("agent stopped: %s", exc)
            code = EXIT_SLURM_SILENT
        finally:
            signal.signal(signal.SIGTERM, previous)
            history.close()
        learned = reports.learned if reports is not None else None
        if learned is not None:
            learned.write_csv(out / "learned_throughput.csv")
        summary = history.write(out, policy=policy_name, truth=speeds.truth,
                                wall_s=time.monotonic() - began,
                                checkpoints=checkpoints, tenants=tenants,
                                figures={**policy.figures(),
                                         **agent.recovery.figures(),
                                         "knowledge": knowledge,
                                         **({"estimates": agent.knowledge.accuracy()}
                                            if agent.knowledge is not None else {}),
                                         **({"work_guesses": agent.hidden_accuracy()}
                                            if agent.hidden_accuracy() else {}),
                                         **({"learned_keys": len(learned.rows())}
                                            if learned is not None else {})}) \
            if history.cluster else {}
        click.echo(f"{summary.get('completed', 0)} of {summary.get('jobs', 0)} jobs completed; "
                   f"wrote {out}/summary.json, jobs.csv, decisions.csv", err=True)
        if code:
            raise SystemExit(code)


class _TerminatedError(Exception):
    """SIGTERM arrived."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise _TerminatedError


def _slurm_env(cluster_dir: Path | None) -> dict[str, str]:
    """The environment of Slurm's commands: a local cluster's SLURM_CONF, or this
    process's (a real cluster's /etc/slurm)."""
    env = dict(os.environ)
    if cluster_dir is not None:
        conf = cluster_dir / "slurm.conf"
        if not conf.is_file():
            raise InputError("no slurm.conf in the cluster folder", path="--cluster-dir",
                             value=str(cluster_dir), expected="a folder of `hetsched slurm "
                             "cluster start --dir`")
        env["SLURM_CONF"] = str(conf)
    elif "SLURM_CONF" not in env and (DEFAULT_STATE_DIR / "slurm.conf").is_file():
        env["SLURM_CONF"] = str(DEFAULT_STATE_DIR / "slurm.conf")
    return env
