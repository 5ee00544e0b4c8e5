"""Plots of schedules. Each function takes an optional matplotlib ``ax`` and returns it,
so plots compose; without one it draws on a new figure (no pyplot, no display needed)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hetsched.data import Instance
from hetsched.result import Schedule
from hetsched.topology import ServerTopology, link_bandwidth


def gantt(instance: Instance, schedule: Schedule, ax: Axes | None = None,
          label_jobs: bool | None = None) -> Axes:
    """A Gantt chart: one row per GPU (grouped by node), one bar per job on each of its
    GPUs, coloured by job type; a job that misses its deadline is hatched.

    ``label_jobs`` writes job ids on the bars (default: when there are at most 60 jobs).
    """
    gpus = instance.cluster.gpus
    if ax is None:
        figure = Figure(figsize=(11, max(2.5, 0.28 * len(gpus) + 1.2)))
        ax = figure.add_subplot()
    row = {gpu.id: index for index, gpu in enumerate(gpus)}
    job_types = sorted({job.job_type for job in instance.jobs})
    colours = {name: f"C{index % 10}" for index, name in enumerate(job_types)}
    jobs = instance.job_by_id
    if label_jobs is None:
        label_jobs = len(schedule) <= 60
    for a in schedule:
        job = jobs[a.job]
        late = job.deadline is not None and a.finish > job.deadline + 1e-6
        for gid in a.gpus:
            ax.barh(row[gid], a.finish - a.start, left=a.start, height=0.8,
                    color=colours[job.job_type], edgecolor="black", linewidth=0.4,
                    hatch="///" if late else None)
        if label_jobs:
            ax.text((a.start + a.finish) / 2, row[a.gpus[0]], a.job, ha="center", va="center",
                    fontsize=7, clip_on=True)
    ax.set_yticks(range(len(gpus)), [f"{g.id} ({g.gpu_type})" for g in gpus], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(f"{instance.name or 'schedule'}: {len(schedule)} jobs on {len(gpus)} GPUs")
    handles = [Patch(color=colours[name], label=name) for name in job_types]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                         label="deadline missed"))
    ax.legend(handles=handles, fontsize=7, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    return ax


def topology_graph(server: ServerTopology, ax: Axes | None = None) -> Axes:
    """A server's GPUs on a circle, joined by lines as wide as their links are fast
    (NVLink thick and coloured, PCIe thin and grey)."""
    import networkx as nx

    if ax is None:
        ax = Figure(figsize=(6, 6)).add_subplot()
    graph = nx.Graph()
    graph.add_nodes_from(server.gpus)
    for i, a in enumerate(server.gpus):
        for b in server.gpus[i + 1 :]:
            graph.add_edge(a, b, link=server.link(a, b))
    layout = nx.circular_layout(graph)
    for a, b, attributes in graph.edges(data=True):
        kind = attributes["link"]
        bandwidth = link_bandwidth(kind)
        nvlink = kind.startswith("NV")
        ax.plot([layout[a][0], layout[b][0]], [layout[a][1], layout[b][1]],
                color="C2" if nvlink else "0.6", linewidth=0.5 + bandwidth / 12,
                alpha=0.9 if nvlink else 0.5, zorder=1)
    for name, (x, y) in layout.items():
        ax.scatter([x], [y], s=700, color="C0", zorder=2)
        ax.text(x, y, name.removeprefix("GPU"), ha="center", va="center", color="white",
                zorder=3, fontsize=10)
    kinds = sorted({server.link(a, b) for a, b in graph.edges}, key=link_bandwidth)
    ax.set_title(f"{Path(server.source).name}: " + ", ".join(
        f"{k} {link_bandwidth(k):g} GB/s" for k in reversed(kinds)), fontsize=9)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def save(ax: Axes, path: str | Path) -> None:
    """Write the figure holding ``ax`` to ``path`` (PNG, SVG or PDF by suffix)."""
    figure = ax.figure
    assert isinstance(figure, Figure)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
