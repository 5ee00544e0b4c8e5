"""``hetsched compare``: the metrics of several replays side by side (hetsched.bench.compare)."""

from __future__ import annotations

from pathlib import Path

import click

from hetsched.core.outputs import check_output_file, check_plot_file, write_text, writing


@click.command("compare")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(file_okay=True, path_type=Path))
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw the runs' JCT CDFs on one axis (PNG/SVG/PDF).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write the metrics, one row per run, as CSV.")
def compare_command(run_dirs: tuple[Path, ...], plot: Path | None,
                    csv_path: Path | None) -> None:
    """Print the metrics of the replays in RUN_DIRS side by side (folders written by
    hetsched replay --out, or a bench's runs/*): JCTs, makespan, deadlines, utilisation,
    preemptions, each run's average JCT against the first's."""
    from hetsched.bench.compare import (
        comparison_lines,
        comparison_warnings,
        read_runs,
        to_frame,
    )

    if plot is not None:
        check_plot_file(plot)
    if csv_path is not None:
        check_output_file(csv_path, "--csv")
    runs = read_runs(run_dirs)
    for warning in comparison_warnings(runs):
        click.echo(f"warning: {warning}", err=True)
    click.echo("\n".join(comparison_lines(runs)))
    if csv_path is not None:
        write_text(csv_path, to_frame(runs).to_csv(index=False), "--csv")
        click.echo(f"wrote {csv_path}")
    if plot is not None:
        from hetsched import plot as plots
        from hetsched.bench.compare import jct_cdf

        with writing(plot, "--plot", "the plot"):
            plots.save(jct_cdf(runs), plot)
        click.echo(f"wrote {plot}")
