"""``hetsched generate`` and ``hetsched fit``: the commands that make data files (a
synthetic instance, a fitted throughput model or step models)."""

from __future__ import annotations

from pathlib import Path

import click

from hetsched.cli.options import FloatIn, IntIn
from hetsched.core.outputs import check_output_file, check_plot_file, writing
from hetsched.core.ranges import DURATION_RANGE, GPUS_PER_NODE_RANGE, Range
from hetsched.core.settings import FRACTION_RANGE
from hetsched.files.generate import (
    MAX_JOBS,
    MAX_MEAN_INTERARRIVAL_S,
    GeneratorSettings,
    generate,
    parse_gpu_counts,
)
from hetsched.files.instance import save_instance


@click.command("generate")
@click.option("--jobs", "num_jobs", type=IntIn(Range(1, MAX_JOBS, integer=True), "bad job count"),
              required=True, help="Number of jobs.")
@click.option("--gpus", required=True, help="GPUs per type, e.g. v100=8,p100=4,k80=4.")
@click.option("--seed", type=IntIn(Range(0, 2**64 - 1, integer=True), "bad seed"), default=0,
              show_default=True, help="Seed of the draws (numpy's: 64 bits).")
@click.option("--gpus-per-node", type=IntIn(GPUS_PER_NODE_RANGE, "bad GPUs per node"),
              default=4, show_default=True)
@click.option("--mean-interarrival", default=120.0, show_default=True,
              type=FloatIn(Range(0.0, MAX_MEAN_INTERARRIVAL_S, low_open=True, noun="seconds"),
                           "bad mean interarrival"),
              help="Mean time between arrivals (s), exponential.")
@click.option("--median-duration", type=FloatIn(DURATION_RANGE, "bad median duration"),
              default=1800.0, show_default=True,
              help="Median duration on the requested V100 gang (s), log-normal.")
@click.option("--deadline-fraction", type=FloatIn(FRACTION_RANGE, "bad deadline fraction"),
              default=0.3, show_default=True)
@click.option("--elastic-fraction", type=FloatIn(FRACTION_RANGE, "bad elastic fraction"),
              default=0.2, show_default=True,
              help="Fraction of jobs that may run with half or twice their gang.")
@click.option("--name", default=None, help="Instance name (default: the file's stem).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def generate_command(num_jobs: int, gpus: str, seed: int, gpus_per_node: int,
                     mean_interarrival: float, median_duration: float, deadline_fraction: float,
                     elastic_fraction: float, name: str | None, output: Path) -> None:
    """Write a synthetic instance drawn from the built-in catalogue."""
    check_output_file(output, "--output")
    settings = GeneratorSettings(
        jobs=num_jobs, gpus=parse_gpu_counts(gpus), seed=seed, gpus_per_node=gpus_per_node,
        mean_interarrival_s=mean_interarrival, median_duration_s=median_duration,
        deadline_fraction=deadline_fraction, elastic_fraction=elastic_fraction,
    )
    instance = generate(settings).replace(name=name or output.stem)
    command = (f"hetsched generate --jobs {num_jobs} --gpus {gpus} --seed {seed} "
               f"--gpus-per-node {gpus_per_node} --mean-interarrival {mean_interarrival:g} "
               f"--median-duration {median_duration:g} --deadline-fraction "
               f"{deadline_fraction:g} --elastic-fraction {elastic_fraction:g} -o {output}")
    with writing(output, "--output"):
        save_instance(instance, output, comment=f"made by: {command}",
                      generator=settings.as_dict())
    click.echo(f"wrote {output}: {len(instance.jobs)} jobs, {instance.cluster.num_gpus()} GPUs "
               f"in {len(instance.cluster.nodes)} nodes (seed {seed})")


@click.command("fit")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the fitted model (JSON) here (required for throughput profiles).")
@click.option("--report", is_flag=True,
              help="Print the leave-one-out accuracy (median and p90 APE, worst 10 points); "
              "for step profiles, the extrapolation from one node to several.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a residual plot (PNG) of the leave-one-out predictions.")
def fit_command(profile: Path, output: Path | None, report: bool, plot: Path | None) -> None:
    """Fit the throughput model to a measured PROFILE (Gavel's JSON or a tidy CSV), or the
    step model to step times (a folder of Pollux's measurements, or a tidy CSV with
    step_time columns; docs/elastic.md)."""
    from hetsched.speeds.step_profiles import has_step_columns

    if has_step_columns(profile):
        if plot is not None:
            raise click.UsageError("--plot draws the leave-one-out of throughput profiles; "
                                   "a step profile has --report")
        _fit_steps(profile, output, report)
        return
    if output is None:
        raise click.UsageError("Missing option '-o' / '--output'.")
    _fit_throughput(profile, output, report, plot)


def _fit_steps(profile: Path, output: Path | None, report: bool) -> None:
    """``hetsched fit`` of a step profile: the step models, their extrapolation figures."""
    from dataclasses import replace

    from hetsched.core.errors import InputError
    from hetsched.speeds.step_extrapolation import extrapolate, fit_step_models, report_lines
    from hetsched.speeds.step_model_file import save_step_models
    from hetsched.speeds.step_profiles import read_step_rows

    if output is not None:
        check_output_file(output, "--output")
    rows = read_step_rows(profile)
    try:
        extrapolation = extrapolate(rows)
    except InputError as exc:
        extrapolation = None
        reason = exc.problem
    models = fit_step_models(rows, extrapolation)
    bases = ", ".join(f"{sum(m.cross_node == basis for m in models.models)} {basis}"
                      for basis in ("measured", "calibrated", "pollux-rule"))
    click.echo(f"{len(models.models)} step models from {len(rows)} rows (across nodes: "
               f"{bases})")
    if output is not None:
        with writing(output, "--output"):
            save_step_models(models, output, str(profile), extrapolation)
        click.echo(f"wrote {output}")
    if report:
        if extrapolation is None:
            click.echo(f"no extrapolation figures: {reason}")
        else:
            baseline = extrapolate(rows, "pollux-rule")
            ratio_only = extrapolate([replace(row, model_parameters=None) for row in rows]) \
                if any(row.model_parameters is not None for row in rows) else None
            click.echo("\n".join(report_lines(extrapolation, baseline,
                                              ratio_only=ratio_only)))


def _fit_throughput(profile: Path, output: Path, report: bool, plot: Path | None) -> None:
    """``hetsched fit`` of a throughput profile (Gavel's JSON or a tidy CSV)."""
    from hetsched.speeds.fit import fit_throughput_model
    from hetsched.speeds.leave_one_out import (
        held_out_keys,
        leave_one_out,
        plot_residuals,
        report_lines,
    )
    from hetsched.speeds.model_file import save_model
    from hetsched.speeds.profiles import read_profile

    check_output_file(output, "--output")
    if plot is not None:
        check_plot_file(plot)
    data = read_profile(profile)
    model = fit_throughput_model(data)
    with writing(output, "--output"):
        save_model(model, output)
    kinds = ", ".join(f"{count} {kind}" for kind, count in model.summary().items())
    assert model.diagnostics is not None
    click.echo(f"wrote {output}: {len(model.job_types)} job types x {len(model.gpu_types)} "
               f"GPU types x 2 placements ({kinds}) from {len(data)} measurements in "
               f"{model.diagnostics.fit_time_s:.3f} s")
    if report or plot is not None:
        from hetsched.core.bars import ProgressBar

        with ProgressBar(len(held_out_keys(data)), desc="leave-one-out", unit="fit") as bar:
            loo = leave_one_out(data, model.settings, progress=lambda done, _: bar.update_to(
                done))
        if report:
            click.echo("\n".join(report_lines(loo)))
        if plot is not None:
            with writing(plot, "--plot", "the plot"):
                plot_residuals(loo, plot)
            click.echo(f"wrote {plot}")
