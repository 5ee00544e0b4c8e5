"""The ``hetsched`` command: a thin layer over the library.

Bad input of any kind ends with one line on stderr and exit code 2; a schedule
that fails the independent checker ends with exit code 1.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from hetsched.bench.engines import ENGINES
from hetsched.cli import options as cli_options
from hetsched.cli import run_config
from hetsched.cli.compare_command import compare_command
from hetsched.cli.data_commands import fit_command, generate_command
from hetsched.cli.printing import (
    MODEL_SETTINGS,
    PARAMETER_FLAGS,
    as_typed,
    format_number,
    plan_table,
    summary_lines,
)
from hetsched.cli.replay_options import (
    DEFAULTS,
    LOAD_TYPE,
    PARTITIONS_TYPE,
    SEED_TYPE,
    WORKERS_TYPE,
    replay_settings,
    replay_settings_options,
)
from hetsched.cli.slurm_command import slurm_group
from hetsched.cli.slurm_run_command import slurm_run_command
from hetsched.cli.validate_command import validate_command
from hetsched.core.check import check
from hetsched.core.errors import EXIT_POLICY_FAILED, InputError, PolicyError
from hetsched.core.outputs import check_output_file, check_plot_file, write_text, writing
from hetsched.core.ranges import Range
from hetsched.core.result import Schedule
from hetsched.core.settings import TIME_LIMIT_RANGE
from hetsched.files.instance import load_instance
from hetsched.policies.planner import MAX_THREADS, SolveOptions
from hetsched.registry import BACKENDS, names
from hetsched.solving import PLACEMENTS, solve

log = logging.getLogger("hetsched")

#: The fairness figures a replay with ``--tenants`` prints besides the others
#: (docs/fairness.md).
TENANT_KEYS = ("tenant_jain_index", "quota_violation_gpu_s", "max_rho", "quota_dropped_starts",
               "quota_reclaims")

#: The ranges of ``solve``'s own numbers: the relative gap at which a solver may stop,
#: its threads (:data:`~hetsched.policies.planner.MAX_THREADS`), allox's fairness knob.
GAP_RANGE = Range(0.0, None)
THREADS_RANGE = Range(1, MAX_THREADS, integer=True)
ALPHA_RANGE = Range(0.0, 1.0, low_open=True)


#: A command reached more than this long (s) after the package was imported runs in a
#: long-lived process (tests, a notebook): its budget counts from the command, not the
#: import.
_FRESH_PROCESS_S = 5.0


def _command_start() -> float:
    """When this command started (``time.monotonic``): the package's import in a fresh
    ``hetsched`` process (so start-up counts against ``--time-limit``), else now."""
    from hetsched import STARTED_AT

    now = time.monotonic()
    return STARTED_AT if now - STARTED_AT < _FRESH_PROCESS_S else now


def _solve_arguments(settings: dict[str, Any]) -> tuple[SolveOptions, dict[str, Any]]:
    """The options of ``hetsched solve`` as :func:`hetsched.solve` takes them: the solve
    settings (:class:`SolveOptions`; reads --warm-start), and the model's own given on
    the command line."""
    context = click.get_current_context()
    knobs = {setting: settings[option] for option, (setting, _) in MODEL_SETTINGS.items()
             if context.get_parameter_source(option) is ParameterSource.COMMANDLINE}
    path = settings["warm_start"]
    warm_start = None
    if path is not None:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
            warm_start = Schedule.from_list(document["schedule"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError("cannot read a schedule", path="--warm-start", value=str(path),
                             expected="a result JSON with a 'schedule' list") from exc
    options = SolveOptions(backend=settings["backend"], time_limit_s=settings["time_limit"],
                           gap=settings["gap"], threads=settings["threads"],
                           seed=settings["seed"], warm_start=warm_start)
    return options, knobs


@click.group(context_settings=cli_options.settings())
@click.option("-v", "--verbose", count=True, help=cli_options.VERBOSE_HELP, show_default=False)
@click.option("--debug", is_flag=True, help=cli_options.DEBUG_HELP, show_default=False)
@click.version_option(package_name="hetsched")
@click.pass_context
def cli(ctx: click.Context, verbose: int, debug: bool) -> None:
    """hetsched: schedule deep-learning training jobs on heterogeneous GPU clusters."""
    cli_options.remember_verbosity(ctx, verbose)
    ctx.obj = {"debug": debug}


@cli.command("solve")
@click.argument("instance", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--model", default="fifo", show_default=True,
              help="Policy: " + ", ".join(names()) + " (static models, or rolling policies run "
              "through the simulator; any with -agnostic).")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="Solver back-end (default: the model's first).")
@click.option("--time-limit", type=cli_options.FloatIn(TIME_LIMIT_RANGE, "bad time limit"),
              default=None,
              help="Budget of the whole command in seconds, counted from its start (loading, "
              "model building, every solver stage); default: the model's own (60 s for "
              "deadline, allox and topology; none for fifo).")
@click.option("--gap", type=cli_options.FloatIn(GAP_RANGE, "bad gap"), default=0.0,
              show_default=True, help="Relative gap at which the solver may stop.")
@click.option("--threads", type=cli_options.IntIn(THREADS_RANGE, "bad thread count"),
              default=1, show_default=True, help="Solver threads.")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True,
              help="Solver random seed.")
@click.option("--deadline-objective", type=click.Choice(("missed", "tardiness")),
              default="missed", show_default=True,
              help="deadline model: first objective term.")
@click.option("--alpha", type=cli_options.FloatIn(ALPHA_RANGE, "bad alpha"), default=1.0,
              show_default=True, help="allox: fairness knob (1 = pure completion time).")
@click.option("--placement", type=click.Choice(PLACEMENTS), default="first-fit",
              show_default=True,
              help="GPUs inside a node: lowest free first, or the exact topology-aware model.")
@click.option("--warm-start", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A result JSON (from --out) whose schedule seeds the solver.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the result as JSON to this file.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw the schedule as a Gantt chart per GPU (PNG/SVG/PDF).")
def solve_command(instance: Path, model: str, placement: str, as_json: bool,
                  out: Path | None, plot: Path | None, **settings: Any) -> None:
    """Solve one INSTANCE file and print the plan and its metrics.

    Exit codes: 0 a schedule that passes the checker; 1 checker violations; 2 bad input;
    3 no schedule (the model cannot run the instance, or found nothing in time).
    """
    if out is not None:  # before the work, so that a long solve cannot end in an error
        check_output_file(out, "--out")
    if plot is not None:
        check_plot_file(plot)
    data = load_instance(instance)
    options, knobs = _solve_arguments(settings)
    started = _command_start()
    with cli_options.solve_bar(model, options.time_limit_s, started):
        result = solve(data, model, options, placement=placement, started=started, **knobs)
    violations = check(data, result.schedule, complete=result.is_feasible())
    document: dict[str, Any] = {"instance": str(instance), **result.to_dict(),
                                "violations": [str(v) for v in violations]}
    if out is not None:
        write_text(out, json.dumps(document, indent=1) + "\n", "--out")
    if plot is not None and not len(result.schedule):
        click.echo(f"no schedule to draw: {plot} not written", err=True)
    elif plot is not None:
        from hetsched import plot as plots  # matplotlib is slow to import: only when asked

        with writing(plot, "--plot", "the plot"):
            plots.save(plots.gantt(data, result.schedule, model=result.model), plot)
    if as_json:
        click.echo(json.dumps(document))
    else:
        click.echo(f"instance: {instance} ({len(data.jobs)} jobs, "
                   f"{data.cluster.num_gpus()} GPUs of {len(data.cluster.gpu_types)} types)")
        if len(result.schedule):
            click.echo(plan_table(data, result))
            click.echo()
        click.echo("\n".join(summary_lines(result)))
        verdict = f"{len(violations)} violations" if violations else "OK"
        if not result.is_feasible() and not len(result.schedule):
            verdict = "no schedule to check"
        click.echo(f"checker: {verdict}")
    if violations:
        for violation in violations[:20]:
            click.echo(f"violation: {violation}", err=True)
        sys.exit(1)
    if not result.is_feasible():
        click.echo(f"no schedule: {model} returned {result.status.value}"
                   + (f": {result.message}" if result.message else ""), err=True)
        sys.exit(3)


@cli.group("topology")
def topology_group() -> None:
    """GPU topologies from nvidia-smi topo -m output."""


@topology_group.command("show")
@click.argument("topo_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw the GPU graph, links by bandwidth (PNG/SVG/PDF).")
def topology_show_command(topo_file: Path, plot: Path | None) -> None:
    """Parse TOPO_FILE (the text nvidia-smi topo -m prints) and show its links."""
    from hetsched.files.interconnect import read_topology

    if plot is not None:
        check_plot_file(plot)
    server = read_topology(topo_file)
    click.echo(f"{topo_file}")
    click.echo(server.summary())
    if plot is not None:
        from hetsched import plot as plots

        with writing(plot, "--plot", "the plot"):
            plots.save(plots.topology_graph(server), plot)


@cli.command("replay")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), is_eager=True,
              expose_value=False, callback=run_config.use_config,
              help="A TOML file of settings, one key per option (time-limit = 0.5, trace = "
              "\"...\"); options typed here win. Every replay writes its settings into "
              "--out as run.toml, to repeat it with --config.")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@cli_options.format_option(required=True)
@cli_options.cluster_option(required=True)
@click.option("--policy", default="fifo", show_default=True,
              help="Rolling policy or model: " + ", ".join(names()) + " (any with -agnostic), "
              "or a class of yours: path/to/file.py:Class or module.path:Class "
              "(docs/policies.md).")
@click.option("--seed", type=SEED_TYPE, default=DEFAULTS.seed, show_default=True)
@click.option("--load", type=LOAD_TYPE, default=DEFAULTS.load, show_default=True,
              help="Arrival-rate multiplier (2: arrivals twice as fast).")
@click.option("--partitions", type=PARTITIONS_TYPE, default=DEFAULTS.partitions,
              show_default=True,
              help="gavel, gavel-max-sum: split the LP into K random sub-problems (POP).")
@click.option("--engine", type=click.Choice(tuple(ENGINES)), default="local",
              show_default=True,
              help="Where POP's K sub-problems are solved: in turn here, or as Ray tasks.")
@click.option("--address", default=None,
              help="--engine ray: the Ray cluster (HOST:6379, or auto); default: a local Ray.")
@replay_settings_options
@cli_options.tenants_option(": the policy keeps the quotas, the fairness figures count per "
                            "tenant.")
@cli_options.pairs_option()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
def replay_command(trace: Path, trace_format: str, cluster_spec: str, policy: str,
                   seed: int, load: float, partitions: int, engine: str, address: str | None,
                   out: Path, throughput_path: Path | None, tenants_path: Path | None,
                   pairs_path: Path | None, **options: Any) -> None:
    """Replay TRACE on a cluster under a policy; write summary.json, jobs.csv,
    decisions.csv (the same for the same input) and timing.json (wall clock) into --out,
    a new folder or one a replay wrote (replaced as a whole)."""
    import contextlib
    from concurrent.futures import Executor

    from hetsched.replaying import run_replay

    solving: contextlib.AbstractContextManager[Executor | None] = contextlib.nullcontext()
    if engine != "local" or address is not None:  # (the bench's runner only when asked for)
        from hetsched.bench.runner import make_engine

        if partitions == 1 and engine != "local":
            raise InputError("a replay runs only POP's partitions on an engine",
                             path="--engine", value=engine,
                             expected="--partitions K > 1 with it, or no --engine")
        solving = make_engine(engine, address=address).partition_executor()
    context = click.get_current_context()
    with run_config.located_errors(context, PARAMETER_FLAGS), solving as executor:
        settings = replay_settings(options, seed=seed, load=load, partitions=partitions)
        figures = run_replay(trace, trace_format, cluster_spec, policy, out=out,
                             settings=settings, throughput_path=throughput_path,
                             executor=executor, files=run_config.config_files(context),
                             tenants_path=tenants_path, pairs_path=pairs_path).figures
    for key in ("jobs", "completed", "avg_jct_s", "p95_jct_s", "makespan_s", "deadline_jobs",
                "deadline_met", "utilization", "preemptions", "decisions", "round_s",
                "restart_penalty_s", "fallbacks", "decision_time_p95_s", "wall_time_s",
                *(TENANT_KEYS if tenants_path is not None else ())):
        click.echo(f"{key}: {format_number(figures.get(key))}")
    for name in ("warnings", "notes"):
        items = figures.get(name)
        if isinstance(items, list) and items:
            click.echo(f"{name.removesuffix('s')}: {items[0]}" + (
                f" ({len(items) - 1} more in summary.json)" if len(items) > 1 else ""))
    click.echo(f"wrote {out}/summary.json, jobs.csv, decisions.csv, timing.json, run.toml")
    if figures.get("interrupted"):
        from hetsched.core.interrupts import exit_code

        click.echo(f"interrupted: {figures.get('completed')} of {figures.get('jobs')} jobs "
                   "finished; the metrics cover those only", err=True)
        sys.exit(exit_code())


@cli.command("bench")
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None)
@cli_options.format_option(required=False)
@cli_options.cluster_option(required=False)
@click.option("--policies", default=None,
              help="Comma-separated policies: registered names, or classes of yours "
              "(path/to/file.py:Class, module.path:Class).")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds.")
@click.option("--load", "loads", default="1", show_default=True,
              help="Comma-separated arrival-rate multipliers (2 = twice as many arrivals "
              "per hour).")
@click.option("--workers", type=WORKERS_TYPE, default=None,
              help="Parallel replays (default: min(2, CPUs); with --engine ray --address: "
              "at most this many, default every CPU of the cluster).")
@click.option("--lp-bound/--no-lp-bound", default=True, show_default=True,
              help="Bound the average JCT by the LP relaxation (docs/bench.md).")
@click.option("--spec", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A sweep spec (TOML: traces, formats, clusters, policies with settings, "
              "seeds, loads; docs/bench.md) in place of --trace ... --policies.")
@click.option("--engine", type=click.Choice(tuple(ENGINES)), default="local",
              show_default=True, help="Where the replays run: local processes, or Ray tasks.")
@click.option("--address", default=None,
              help="--engine ray: the Ray cluster (HOST:6379, or auto); default: a local Ray "
              "on this machine.")
@replay_settings_options
@cli_options.tenants_option(", kept around every policy of the bench.")
@cli_options.pairs_option()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
def bench_command(trace: Path | None, trace_format: str | None, cluster_spec: str | None,
                  policies: str | None, seeds: str, loads: str, workers: int | None,
                  lp_bound: bool, spec: Path | None, engine: str, address: str | None,
                  out: Path, throughput_path: Path | None, tenants_path: Path | None,
                  pairs_path: Path | None, **options: Any) -> None:
    """Replay TRACE under every policy x seed x load (or every bench of a --spec); write
    results.csv, report.md and plots into --out (docs/bench.md). Rerunning the same
    command resumes."""
    from hetsched.bench.runner import make_engine
    from hetsched.bench.spec import load_sweep, options_sweep, run_sweep

    if spec is not None:
        _only_how_with_spec()
        sweep = load_sweep(spec)
    else:
        sweep = options_sweep(
            trace=trace, trace_format=trace_format, cluster=cluster_spec, policies=policies,
            seeds=seeds, loads=loads, workers=workers, throughput=throughput_path,
            tenants=tenants_path, pairs=pairs_path, lp_bound=lp_bound,
            replay=replay_settings(options))
    outcomes = run_sweep(sweep, out, engine=make_engine(engine, workers=workers,
                                                        address=address))
    for (name, _), outcome in zip(sweep.benches, outcomes, strict=True):
        click.echo((f"{name}: " if name else "") + f"{outcome.ran} runs done, {outcome.skipped} "
                   f"already in results.csv, {len(outcome.failed)} failed"
                   + (f" ({', '.join(outcome.failed)})" if outcome.failed else ""))
        if outcome.report is not None:
            click.echo(f"wrote {outcome.out}/results.csv, {outcome.report.name}, plots (PNG)")
    if any(outcome.interrupted for outcome in outcomes):
        from hetsched.core.interrupts import exit_code

        sys.exit(exit_code())
    if any(outcome.failed for outcome in outcomes):
        sys.exit(1)


def _only_how_with_spec() -> None:
    """With --spec, the spec says what to run: only --out, --engine, --address and
    --workers (how to run it) may be given beside it."""
    context = click.get_current_context()
    for param in context.command.params:
        if param.name in (None, "spec", "out", "engine", "address", "workers"):
            continue
        if context.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
            flag = max(param.opts, key=len)
            raise InputError("given in the spec file", path=flag,
                             value=context.params.get(param.name),
                             expected="only --out, --engine, --address and --workers beside "
                             "--spec (the spec says what to run)")


for command in (compare_command, fit_command, generate_command, validate_command):
    cli.add_command(command)
slurm_group.add_command(slurm_run_command)
cli.add_command(slurm_group)
cli_options.accept_global_options(cli)  # -v and --debug after the subcommand too


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI, turning bad input into exit code 2 without a traceback."""
    from hetsched.core.interrupts import exit_code, terminate_as_interrupt

    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        with terminate_as_interrupt():  # SIGTERM saves work as Ctrl-C does
            cli.main(args=argv, prog_name="hetsched", standalone_mode=False)
    except KeyboardInterrupt as exc:
        click.echo("aborted", err=True)
        sys.exit(exit_code(exc))
    except InputError as exc:
        click.echo(f"error: {as_typed(exc)}", err=True)
        sys.exit(2)
    except PolicyError as exc:  # what ran until then is written (replay --out)
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_POLICY_FAILED)
    except click.exceptions.Abort as exc:  # click's wrapping of KeyboardInterrupt
        click.echo("aborted", err=True)
        sys.exit(exit_code(exc.__cause__))
    except click.UsageError as exc:  # click's own: an unknown or missing option, a bad value
        # One line, like every other error (click prints usage, a hint and the error on
        # four or more).
        command = exc.ctx.command_path if exc.ctx is not None else "hetsched"
        message = " ".join(exc.format_message().split()).rstrip(".")
        click.echo(f"error: {message} (see {command} --help)", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # a write the commands did not name (a full disk): one line
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or exc}", err=True)
        sys.exit(2)
    except Exception as exc:
        if debug:
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} "
                   "(run with --debug for the traceback)", err=True)
        sys.exit(1)
