"""The Gantt chart draws one bar per (job, GPU) and hatches late jobs."""

from __future__ import annotations

from pathlib import Path

from hetsched.instance_file import load_instance
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
