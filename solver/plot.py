"""Plots of schedules. Each function takes an optional matplotlib ``ax`` and returns it,
so plots compose; without one it draws on a new figure (no pyplot, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hetsched.core.records import Instance
from hetsched.core.result import Schedule
from hetsched.files.interconnect import NVLINK_GBPS_PER_LINK, ServerTopology, link_bandwidth


def _fits(ax: Axes, start: float, finish: float, text: str, fontsize: float) -> bool:
    """Whether ``text`` at ``fontsize`` (points) fits inside a bar from ``start`` to
    ``finish`` (s) at the axes' current scale (an estimate: 0.62 em per character)."""
    left, right = ax.transData.transform([(start, 0.0), (finish, 0.0)])[:, 0]
    dpi = ax.figure.dpi if ax.figure is not None else 100.0
    needed = (0.62 * len(text) + 0.6) * fontsize * dpi / 72.0
    return bool(right - left >= needed)


def gantt(instance: Instance, schedule: Schedule, ax: Axes | None = None,
          label_jobs: bool | None = None, model: str | None = None) -> Axes:
    """A Gantt chart: one row per GPU (grouped by node), one bar per job on each of its
    GPUs (each run segment of a preempted job), coloured by job type; a job that misses
    its deadline is hatched; the legend sits beside the chart.

    ``label_jobs`` writes job ids on the bars wide enough to hold them (default: when
    there are at most 60 bars); a bar too short for its label is left unlabelled rather
    than overlapped. An empty schedule is drawn as a note saying so, not as empty axes.
    The title names the instance and ``model`` (the policy that made the schedule), so
    two charts of one instance tell which is which.
    """
    name = (instance.name or "schedule") + (f" under {model}" if model else "")
    gpus = instance.cluster.gpus
    if ax is None:
        figure = Figure(figsize=(11, max(2.5, 0.28 * len(gpus) + 1.2)))
        ax = figure.add_subplot()
    if not len(schedule):
        ax.text(0.5, 0.5, f"empty schedule: none of the {len(instance.jobs)} jobs was "
                "scheduled", transform=ax.transAxes, ha="center", va="center", fontsize=11)
        ax.set_title(f"{name}: no schedule")
        ax.set_xticks([])
        ax.set_yticks([])
        return ax
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
    ax.set_yticks(range(len(gpus)), [f"{g.id} ({g.gpu_type})" for g in gpus], fontsize=7)
    ax.invert_yaxis()
    origin = min(a.start for a in schedule)
    end = max(a.finish for a in schedule)
    ax.set_xlim(origin - 0.01 * (end - origin), end + 0.01 * (end - origin) + 1e-9)
    if label_jobs:  # after the limits are set: a label is drawn only where it fits
        for a in schedule:
            if _fits(ax, a.start, a.finish, a.job, 7):
                ax.text((a.start + a.finish) / 2, row[a.gpus[0]], a.job, ha="center",
                        va="center", fontsize=7, clip_on=True,
                        bbox={"boxstyle": "square,pad=0.1", "facecolor": "white",
                              "edgecolor": "none", "alpha": 0.7})
    ax.set_xlabel("time (s)")
    ax.set_title(f"{name}: {len(schedule.segments())} jobs on {len(gpus)} GPUs")
    handles = [Patch(color=colours[name], label=name) for name in job_types]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                         label="deadline missed"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="job type", title_fontsize=7, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return ax


#: How each PCIe link kind of ``nvidia-smi topo`` is drawn: (colour, line style), so
#: that kinds of similar bandwidth are told apart in grey print too.
PCIE_STYLES: dict[str, tuple[str, Any]] = {
    "PIX": ("C0", "-"), "PXB": ("C1", "--"), "PHB": ("C4", "-."), "NODE": ("C5", ":"),
    "SYS": ("0.45", (0, (1, 2.5)))}
#: Colours of NVLink kinds, darker with more bonded links: NV1, NV2, NV3-6, NV7-12, NV13+.
NVLINK_COLOURS = ("#74c476", "#31a354", "#238b45", "#006d2c", "#00441b")


def _link_style(kind: str) -> tuple[str, Any]:
    """(colour, line style) of a link kind: NVLink solid, a darker green the more links
    it bonds; each PCIe kind its own colour and dash."""
    if kind in PCIE_STYLES:
        return PCIE_STYLES[kind]
    links = round(link_bandwidth(kind) / NVLINK_GBPS_PER_LINK)
    shade = 0 if links <= 1 else 1 if links == 2 else 2 if links <= 6 else \
        3 if links <= 12 else 4
    return NVLINK_COLOURS[shade], "-"


def _link_width(bandwidth: float) -> float:
    """Line width (points) of a link of ``bandwidth`` GB/s: 0.8 (SYS, 6 GB/s) to 4 (300
    GB/s, NVSwitch) on a log scale, so that a full NVLink mesh stays readable."""
    low, high = math.log(6.0), math.log(300.0)
    share = (math.log(max(bandwidth, 1e-9)) - low) / (high - low)
    return 0.8 + 3.2 * min(1.0, max(0.0, share))


def topology_graph(server: ServerTopology, ax: Axes | None = None) -> Axes:
    """A server's GPUs on a circle, joined by one line per GPU pair: each link kind its own
    colour and line style (NVLink solid green, thicker with more links; each PCIe kind
    dashed or dotted in its own colour), widths on a log scale of bandwidth, a legend
    with each kind's bandwidth and pair count; GPUs coloured by NUMA node when the file
    gives their affinity."""
    import networkx as nx
    from matplotlib.lines import Line2D

    if ax is None:
        ax = Figure(figsize=(8.5, 6)).add_subplot()
    graph = nx.Graph()
    graph.add_nodes_from(server.gpus)
    pairs: dict[str, int] = {}
    for i, a in enumerate(server.gpus):
        for b in server.gpus[i + 1 :]:
            kind = server.link(a, b)
            graph.add_edge(a, b, link=kind)
            pairs[kind] = pairs.get(kind, 0) + 1
    kinds = sorted(pairs, key=lambda k: (-link_bandwidth(k), k))
    layout = nx.circular_layout(graph)
    for a, b, attributes in graph.edges(data=True):
        kind = attributes["link"]
        colour, style = _link_style(kind)
        ax.plot([layout[a][0], layout[b][0]], [layout[a][1], layout[b][1]], color=colour,
                linestyle=style, linewidth=_link_width(link_bandwidth(kind)), alpha=0.8,
                zorder=1 if kind.startswith("NV") else 2, solid_capstyle="butt")
    numa = [server.numa_affinity.get(gpu, "") for gpu in server.gpus]
    groups = sorted({n for n in numa if n}, key=lambda n: (len(n), n))
    node_colour = {n: f"C{(index + 6) % 10}" for index, n in enumerate(groups)}
    for name, (x, y) in layout.items():
        ax.scatter([x], [y], s=800, color=node_colour.get(server.numa_affinity.get(name, ""),
                                                          "#1f3b73"),
                   edgecolors="white", linewidths=1.5, zorder=3)
        ax.text(x, y, name.removeprefix("GPU"), ha="center", va="center", color="white",
                zorder=4, fontsize=11, fontweight="bold")
    handles: list[Line2D] = []
    for kind in kinds:
        colour, style = _link_style(kind)
        handles.append(Line2D([], [], color=colour, linestyle=style,
                              linewidth=_link_width(link_bandwidth(kind)),
                              label=f"{kind}: {link_bandwidth(kind):g} GB/s "
                              f"({pairs[kind]} pair{'s' if pairs[kind] != 1 else ''})"))
    for group in groups:
        members = [g.removeprefix("GPU") for g in server.gpus
                   if server.numa_affinity.get(g) == group]
        handles.append(Line2D([], [], marker="o", linestyle="", markersize=11,
                              color=node_colour[group],
                              label=f"NUMA node {group}: GPU {', '.join(members)}"))
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=9,
              title="GPU-to-GPU links" if not groups else "links and NUMA nodes",
              title_fontsize=9, frameon=False)
    ax.set_title(f"{Path(server.source).name}: {server.num_gpus} GPUs, "
                 f"{len(server.nics)} NICs", fontsize=10)
    ax.set_aspect("equal")
    ax.margins(0.12)
    ax.axis("off")
    return ax


def save(ax: Axes, path: str | Path) -> None:
    """Write the figure holding ``ax`` to ``path`` (PNG, SVG or PDF by suffix)."""
    figure = ax.figure
    assert isinstance(figure, Figure)
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.25)  # outer legends too
