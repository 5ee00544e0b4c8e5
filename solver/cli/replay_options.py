"""The options that make a replay's settings, written once for ``replay`` and ``bench``:
their defaults are :class:`~hetsched.core.settings.ReplaySettings`'s, their numbers read
in ASCII digits in the settings' ranges (:class:`~hetsched.cli.options.FloatIn`), and
:func:`replay_settings` turns the values a command received into that record (checked
there, once). ``--seed`` and ``--load`` differ between the commands (one value, or a list
for the bench) and stay theirs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from hetsched.cli.options import FloatIn, IntIn
from hetsched.core.ranges import SEED_RANGE, Range
from hetsched.core.settings import (
    COUNT_RANGE,
    FRACTION_RANGE,
    IDLE_SECONDS_RANGE,
    KNOWLEDGE,
    LEARN,
    LOAD_RANGE,
    MAX_RESTART_PENALTY_S,
    MIN_PERIOD_S,
    ON_BAD_ROW,
    PERIOD_RANGE,
    SPREAD_SPEEDS,
    TIME_LIMIT_RANGE,
    UNKNOWN_GPUS,
    ReplaySettings,
)
from hetsched.core.sharing import COLOCATION_FACTOR_RANGE
from hetsched.registry import BACKENDS

#: The settings a replay runs with when no option says otherwise.
DEFAULTS = ReplaySettings()

#: The types of the numeric options that differ between ``replay`` and ``bench`` (one
#: value, or a list for the bench) or are the bench's own.
SEED_TYPE = IntIn(SEED_RANGE, "bad seed")
LOAD_TYPE = FloatIn(LOAD_RANGE, "bad load")
PARTITIONS_TYPE = IntIn(COUNT_RANGE, "bad partition count")
WORKERS_TYPE = IntIn(COUNT_RANGE, "bad worker count")

#: The click parameters :func:`replay_settings` reads (each command's function takes
#: them as keyword arguments and hands them on whole).
SETTING_PARAMS = ("backend", "interval", "time_limit", "wall_clock", "limit_jobs",
                  "restart_penalty", "start_latency", "on_bad_row", "deadline_fraction",
                  "reference_gpu", "gpu_aliases", "unknown_gpus", "gpu_sharing",
                  "colocation_factor", "decision_timeout", "prices", "spread_speed",
                  "jct_window", "elastic", "knowledge", "learn")


def replay_settings_options(command: Any) -> Any:
    """The options of :data:`SETTING_PARAMS` and ``--throughput`` (the throughput file,
    an input beside the trace), shared by ``replay`` and ``bench`` (docs/traces.md)."""
    for option in reversed((
        click.option("--backend", type=click.Choice(BACKENDS), default=DEFAULTS.backend,
                     help="Solver back-end of the policies that solve a model (default: "
                     "each policy's first)."),
        _number("--interval", PERIOD_RANGE, "bad decision interval", DEFAULTS.interval_s,
                f"Also decide every S seconds (S >= {MIN_PERIOD_S:g}) while jobs run or "
                "wait (besides the policy's own rounds)."),
        _number("--batch", PERIOD_RANGE, "bad decision batch", DEFAULTS.batch_s,
                "Batch the decisions of arrivals and completions: one within S seconds of "
                "the last decision waits for a single decision S seconds after it (the "
                "policy's own rounds still decide). Fewer solves on long traces; the cost "
                "in JCT is measured in docs/traces.md."),
        _number("--time-limit", TIME_LIMIT_RANGE, "bad time limit", DEFAULTS.time_limit_s,
                "Solver limit per decision: deterministic work units (about seconds of one "
                "core; the same replay on any machine), or wall seconds with --wall-clock."),
        click.option("--wall-clock", is_flag=True, default=not DEFAULTS.deterministic,
                     help="Limit solvers by wall time instead of deterministic work (faster "
                     "machines find more; results are no longer byte-identical from run "
                     "to run)."),
        _number("--decision-timeout", TIME_LIMIT_RANGE, "bad decision timeout",
                DEFAULTS.decision_timeout_s,
                "Wall seconds one call of the policy may take (its decide, its hooks); past "
                "it the replay stops as the policy's failure (exit 3), what finished "
                "written."),
        click.option("--limit-jobs", type=IntIn(COUNT_RANGE, "bad job limit"),
                     default=DEFAULTS.limit_jobs, help="Only the N earliest jobs."),
        click.option("--throughput", "throughput_path",
                     type=click.Path(path_type=Path), default=None,
                     help="Profile (Gavel JSON, tidy CSV), fitted model, or Pollux's or "
                     "Sia's measurements folder; default: Gavel's beside a Gavel trace, "
                     "Pollux's or Sia's beside its workload, else the built-in catalogue."),
        _number("--restart-penalty", IDLE_SECONDS_RANGE, "bad restart penalty",
                DEFAULTS.restart_penalty_s, "Seconds without progress after a preemption (0 "
                f"to {MAX_RESTART_PENALTY_S:,.0f})."),
        click.option("--spread-speed", type=click.Choice(SPREAD_SPEEDS),
                     default=DEFAULTS.spread_speed, show_default=True,
                     help="A gang spread over servers runs at its measured spread speed "
                     "(the physics), or at its packed speed wherever its GPUs are (Gavel's "
                     "simulator's assumption: to reproduce its figures)."),
        click.option("--knowledge", type=click.Choice(KNOWLEDGE), default=DEFAULTS.knowledge,
                     show_default=True,
                     help="What the policy may know of each job's work: the trace's truth, "
                     "an estimate from the finished jobs' history (QSSF's rule), or none "
                     "(one guess for every job; a job past half its guess: as long again as "
                     "it ran); the replay, its checks and its figures keep the truth "
                     "(docs/knowledge.md)."),
        click.option("--learn", type=click.Choice(LEARN), default=DEFAULTS.learn,
                     show_default=True,
                     help="The policy plans with throughputs learned from the runs as they "
                     "go, as `hetsched slurm run --learn` does, starting from the throughput "
                     "source, the built-in catalogue or nothing (a job type never seen: a "
                     "bootstrap estimate); the jobs still run at the true speeds. What was "
                     "learned: OUT/learned_throughput.csv (docs/slurm.md). With --elastic: "
                     "off or bootstrap (Sia's: each job type known on one GPU of each GPU "
                     "type, its scaling learned as it runs; docs/elastic.md)."),
        click.option("--prices", default=None, metavar="TYPE=USD,...",
                     help="USD per GPU-hour by GPU type, over the cluster's own (the "
                     "catalogue's for --cluster v100=N: Google Cloud on demand; Gavel's: "
                     "v100=0.74,p100=0.43,k80=0.135): the cost policy's prices and "
                     "summary.json's total_cost_usd."),
        _number("--start-latency", IDLE_SECONDS_RANGE, "bad start latency",
                DEFAULTS.start_latency_s, "Seconds from a decision to start a job to its "
                "first step, GPUs held, at every start (a real scheduler's dispatch latency: "
                "docs/slurm.md measures Slurm's)."),
        click.option("--on-bad-row", type=click.Choice(ON_BAD_ROW),
                     default=DEFAULTS.on_bad_row, show_default=True),
        _number("--deadline-fraction", FRACTION_RANGE, "bad deadline fraction",
                DEFAULTS.deadline_fraction,
                "Give this fraction of jobs a synthetic deadline (docs/traces.md)."),
        click.option("--reference-gpu", default=DEFAULTS.reference_gpu,
                     help="GPU type the durations of philly, helios and openb traces were "
                     "measured on (default: v100 if the throughput model knows it, else the "
                     "cluster's GPU type with the most GPUs that it knows)."),
        click.option("--gpu-alias", "gpu_aliases", default=None,
                     help="CLUSTER_TYPE=MODEL_TYPE[,...]: cluster GPU types that take the "
                     "throughput of a type the model knows, e.g. g3=a100 (summary.json "
                     "records them)."),
        click.option("--unknown-gpus", type=click.Choice(UNKNOWN_GPUS),
                     default=DEFAULTS.unknown_gpus, show_default=True,
                     help="A cluster GPU type the throughput model does not know: an error, "
                     "or its nodes left out (summary.json: dropped_gpus)."),
        click.option("--gpu-sharing/--no-gpu-sharing", default=DEFAULTS.gpu_sharing,
                     show_default=True,
                     help="Jobs may ask for a share of one GPU (openb's gpu_milli); off: "
                     "every share is rounded up to a whole GPU."),
        click.option("--elastic/--no-elastic", default=DEFAULTS.elastic, show_default=True,
                     help="The trace's jobs are elastic: the scheduler chooses each one's "
                     "GPU count, the job its batch size (--format pollux or sia; "
                     "docs/elastic.md)."),
        click.option("--jct-window", default=None, metavar="A:B",
                     help="Also the average JCT of the jobs of arrival rank A to B - 1 "
                     "(avg_jct_window_s; Gavel measures jobs 4000:5000 of a continuous "
                     "trace, in steady state)."),
        _number("--colocation-factor", COLOCATION_FACTOR_RANGE, "bad co-location factor",
                DEFAULTS.colocation_factor, "Speed factor of a job sharing its GPU with "
                "others, where no pair was measured (docs/traces.md, GPU shares)."),
    )):
        command = option(command)
    return command


def _number(flag: str, limits: Range, problem: str, default: float | None,
            text: str) -> Any:
    """A number option in ``limits`` (:class:`~hetsched.cli.options.FloatIn`; ``problem``
    names it in errors)."""
    return click.option(flag, type=FloatIn(limits, problem), default=default,
                        show_default=True, help=text)


def replay_settings(values: Mapping[str, Any], **more: Any) -> ReplaySettings:
    """The settings of the options in ``values`` (a command's keyword arguments, those of
    :data:`SETTING_PARAMS`) and ``more`` (``seed``, ``load``, ``partitions``: the
    command's own)."""
    return ReplaySettings(
        backend=values["backend"], time_limit_s=values["time_limit"],
        deterministic=not values["wall_clock"], interval_s=values["interval"],
        batch_s=values["batch"],
        limit_jobs=values["limit_jobs"], restart_penalty_s=values["restart_penalty"],
        start_latency_s=values["start_latency"],
        on_bad_row=values["on_bad_row"], deadline_fraction=values["deadline_fraction"],
        reference_gpu=values["reference_gpu"], gpu_aliases=values["gpu_aliases"],
        unknown_gpus=values["unknown_gpus"], gpu_sharing=values["gpu_sharing"],
        colocation_factor=values["colocation_factor"],
        decision_timeout_s=values["decision_timeout"],
        prices=values["prices"] if values["prices"] is not None else {},
        spread_speed=values["spread_speed"], jct_window=values["jct_window"],
        elastic=values["elastic"], knowledge=values["knowledge"], learn=values["learn"],
        **more)
