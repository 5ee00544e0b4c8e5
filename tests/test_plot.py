"""The Gantt chart draws one bar per (job, GPU) and hatches late jobs."""

from __future__ import annotations

from pathlib import Path

from hetsched import solve
from hetsched.core.result import Schedule
from hetsched.files.instance import load_instance
from hetsched.plot import gantt, save
from hetsched.policies.fifo import fifo_schedule
from tests.helpers import INSTANCES


def test_gantt_bars_match_the_schedule(tmp_path: Path) -> None:
    instance = load_instance(INSTANCES / "small.json")
    schedule = fifo_schedule(instance)
    ax = gantt(instance, schedule)
    bars = ax.patches
    assert len(bars) == sum(len(a.gpus) for a in schedule)
    late = {a.job for a in schedule
            if (d := instance.job_by_id[a.job].deadline) is not None and a.finish > d}
    # FIFO misses exactly one deadline on small.json: j16, a 4-GPU rnn-lm gang that first
    # fit puts on the K80 node (8,650 s there), finishing 689 s after its deadline.
    assert late == {"j16"}
    assert sum(1 for bar in bars if bar.get_hatch()) == 4
    assert len(ax.get_yticklabels()) == instance.cluster.num_gpus()
    save(ax, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"


def test_gantt_labels_never_overlap_and_short_bars_stay_unlabelled() -> None:
    # srtf on congested.json preempts: run segments of a few seconds sit beside long ones.
    # Every label drawn lies inside its bar, and no two labels overlap.
    import itertools

    from hetsched.solving import solve

    instance = load_instance(INSTANCES / "congested.json")
    schedule = solve(instance, model="srtf").schedule
    ax = gantt(instance, schedule, label_jobs=True)
    figure = ax.figure
    assert figure is not None
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    labels = [text for text in ax.texts if text.get_text()]
    boxes = [text.get_window_extent(renderer) for text in labels]
    assert 0 < len(labels) < len(schedule)  # some bars are too short for their id
    for first, second in itertools.combinations(boxes, 2):
        assert not first.overlaps(second)
    for text, box in zip(labels, boxes, strict=True):
        segment = next(a for a in schedule if a.job == text.get_text()
                       and a.start <= text.get_position()[0] <= a.finish)
        left, right = ax.transData.transform([(segment.start, 0), (segment.finish, 0)])[:, 0]
        assert left <= box.x0 <= box.x1 <= right


def test_an_empty_schedule_says_so() -> None:
    from hetsched.core.result import Schedule

    instance = load_instance(INSTANCES / "small.json")
    ax = gantt(instance, Schedule())
    assert not ax.patches
    assert [t.get_text() for t in ax.texts] == [
        "empty schedule: none of the 20 jobs was scheduled"]


def _legend(ax: object) -> list[str]:
    legend = ax.get_legend()  # type: ignore[attr-defined]
    return [text.get_text() for text in legend.get_texts()]


def test_topology_plot_has_a_legend_and_tells_link_kinds_apart(shared_data: Path) -> None:
    from hetsched.files.interconnect import read_topology
    from hetsched.plot import _link_style, _link_width, topology_graph

    folder = shared_data / "topology"
    a100 = topology_graph(read_topology(folder / "dgx-a100.nvidia-smi-topo.txt"))
    assert _legend(a100) == ["NV12: 300 GB/s (28 pairs)", "NUMA node 1: GPU 2, 3",
                             "NUMA node 3: GPU 0, 1", "NUMA node 5: GPU 6, 7",
                             "NUMA node 7: GPU 4, 5"]
    assert {line.get_linewidth() for line in a100.lines} == {4.0}  # not a solid blob
    pcie = topology_graph(read_topology(folder / "dgx1-v100-pcie-only.nvidia-smi-topo-mp.txt"))
    assert _legend(pcie)[:3] == ["PIX: 12 GB/s (4 pairs)", "PHB: 9 GB/s (8 pairs)",
                                 "SYS: 6 GB/s (16 pairs)"]
    styles = {kind: _link_style(kind) for kind in ("PIX", "PXB", "PHB", "NODE", "SYS")}
    assert len({colour for colour, _ in styles.values()}) == 5
    assert len({str(dash) for _, dash in styles.values()}) == 5
    dgx1 = topology_graph(read_topology(folder / "dgx1-v100.nvidia-smi-topo.txt"))
    assert _legend(dgx1) == ["NV2: 50 GB/s (8 pairs)", "NV1: 25 GB/s (8 pairs)",
                             "SYS: 6 GB/s (12 pairs)"]
    assert _link_style("NV2") != _link_style("NV1")
    assert _link_width(6.0) == 0.8
    assert _link_width(25.0) < _link_width(50.0) < _link_width(300.0) == 4.0


def test_the_title_names_the_model() -> None:
    # Every chart was titled with the instance only, so fifo.png and
    # deadline.png looked the same.
    instance = load_instance(INSTANCES / "tiny.json")
    schedule = solve(instance, model="fifo").schedule
    assert gantt(instance, schedule, model="fifo").get_title() == \
        "tiny under fifo: 3 jobs on 2 GPUs"
    assert gantt(instance, Schedule(), model="deadline").get_title() == \
        "tiny under deadline: no schedule"
