"""Trace readers (hetsched.files.traces): every format's mapping on small files, bad rows, the
shared rules (capped counts, drawn job types, deadlines), and the real Gavel and Philly
traces when the shared data folder is present."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.throughput import AliasedThroughput, Placement, ThroughputTable
from hetsched.files.traces import Trace, openb_cluster, read_trace, write_native
from hetsched.files.traces.base import CAPPED
from hetsched.speeds.fit import throughput_model
from hetsched.speeds.profiles import read_gavel_throughputs
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "traces"
RESNET = "ResNet-50 (batch size 64)"
P = Placement.PACKED

#: A small measured table: ResNet-50 runs on 1-2 GPUs, A3C on 1 GPU only.
TABLE = ThroughputTable.from_rows([
    (RESNET, "v100", 1, P, 10.0), (RESNET, "v100", 2, P, 18.0),
    (RESNET, "k80", 1, P, 2.0), (RESNET, "k80", 2, P, 3.0),
    ("A3C", "v100", 1, P, 5.0), ("A3C", "k80", 1, P, 4.0),
])


def _by_id(trace: Trace) -> dict[str, Job]:
    return {job.id: job for job in trace.jobs}


# --- gavel ---------------------------------------------------------------------------------


def test_gavel_seven_fields_without_a_model_keeps_the_rows_as_they_are() -> None:
    trace = read_trace(DATA / "gavel7.trace", "gavel")
    # Sorted by arrival, shifted so the first (A3C at 50.5 s) is at 0 s, numbered in order.
    assert [(j.id, j.job_type, j.arrival, j.num_gpus, j.work) for j in trace.jobs] == [
        ("0", "A3C", 0.0, 4, 500.0),
        ("1", RESNET, 49.5, 1, 1000.0),
        ("2", RESNET, 149.5, 2, 2000.0),
    ]
    assert all(j.deadline is None and j.weight == 1.0 for j in trace.jobs)
    assert trace.format == "gavel"
    assert trace.source == str(DATA / "gavel7.trace")
    assert trace.notes == ()


def test_gavel_caps_a_count_the_model_cannot_run_and_counts_it() -> None:
    trace = read_trace(DATA / "gavel7.trace", "gavel", throughput=TABLE)
    # A3C runs on 1 GPU only: its 4-GPU row is capped at 1 GPU, work unchanged.
    assert _by_id(trace)["0"].num_gpus == 1
    assert _by_id(trace)["0"].work == 500.0
    assert _by_id(trace)["2"].num_gpus == 2
    assert trace.notes == (
        f"{CAPPED}: 1 jobs",
        "(A3C, 4): 0 steps/s on every GPU type of the throughput model; capped at 1 GPUs: "
        "1 jobs",
    )


def test_gavel_ten_fields_slo_becomes_a_deadline_on_the_fastest_type() -> None:
    trace = read_trace(DATA / "gavel10.trace", "gavel", throughput=TABLE)
    resnet, a3c = trace.jobs
    # ResNet at 0 s, 1000 steps, fastest type v100 at 10 steps/s -> 100 s alone; SLO 1.5.
    assert (resnet.arrival, resnet.weight, resnet.deadline) == (0.0, 2.0, 150.0)
    assert (a3c.arrival, a3c.weight, a3c.deadline, a3c.work) == (30.0, 1.0, None, 400.0)


def test_gavel_slo_without_a_model_is_a_clear_error() -> None:
    with pytest.raises(InputError, match=r"gavel10.trace: line 1: an SLO needs a throughput"):
        read_trace(DATA / "gavel10.trace", "gavel")


def test_gavel_bad_row_names_file_and_line() -> None:
    with pytest.raises(InputError) as info:
        read_trace(DATA / "gavel_bad.trace", "gavel")
    assert info.value.file == str(DATA / "gavel_bad.trace")
    assert info.value.path == "line 2"
    assert "wrong number of tab-separated fields" in str(info.value)


def test_gavel_skip_counts_bad_rows() -> None:
    trace = read_trace(DATA / "gavel_bad.trace", "gavel", on_bad_row="skip")
    assert trace.skipped_rows == 2  # line 2 (5 fields), line 4 (total_steps "many")
    assert [(j.job_type, j.work) for j in trace.jobs] == [(RESNET, 1000.0), ("A3C", 700.0)]


def test_gavel_bad_total_steps_is_reported_with_its_column(tmp_path: Path) -> None:
    lines = (DATA / "gavel_bad.trace").read_text().splitlines()
    path = tmp_path / "t.trace"
    path.write_text("\n".join([lines[0], "", "", lines[3]]) + "\n")  # blank lines count
    with pytest.raises(InputError, match=r"t.trace: line 4\.total_steps: bad total_steps "
                       r"\(got 'many'; expected an integer from 1 to 1e\+12\)"):
        read_trace(path, "gavel")


# --- philly --------------------------------------------------------------------------------


def test_philly_sorts_draws_job_types_and_derives_work() -> None:
    trace = read_trace(DATA / "philly_small.csv", "philly", throughput=TABLE)
    first, second, third = trace.jobs
    # 07:00:00 is the first arrival; 07:01:55 is 115 s later, 08:00:00 3600 s later.
    assert [j.arrival for j in trace.jobs] == [0.0, 115.0, 3600.0]
    # 2 GPUs: only ResNet runs on v100 x 2 (18 steps/s) -> work = 50 s x 18.
    assert (first.job_type, first.num_gpus, first.work) == (RESNET, 2, 900.0)
    # 1 GPU: drawn between A3C (5 steps/s) and ResNet (10 steps/s).
    assert second.work == 100.0 * {"A3C": 5.0, RESNET: 10.0}[second.job_type]
    # 4 GPUs: no job type runs on v100 x 4 -> capped at 2, ResNet, 10 s x 18.
    assert (third.job_type, third.num_gpus, third.work) == (RESNET, 2, 180.0)
    # The virtual cluster is the tenant.
    assert [j.tenant for j in trace.jobs] == ["c1", "c1", "c2"]
    assert "4 GPUs: no job type has throughput > 0 on v100 x 4; capped at 2 GPUs: 1 jobs" \
        in trace.notes


def test_philly_without_a_model_uses_the_catalogue() -> None:
    trace = read_trace(DATA / "philly_small.csv", "philly")
    assert len(trace.jobs) == 3
    assert trace.notes[0].startswith("no throughput model given")
    assert all(j.work > 0 for j in trace.jobs)


def test_philly_bad_rows_fatal_and_skipped() -> None:
    with pytest.raises(InputError, match=r"philly_bad.csv: line 3.timestamp: bad timestamp"):
        read_trace(DATA / "philly_bad.csv", "philly")
    trace = read_trace(DATA / "philly_bad.csv", "philly", on_bad_row="skip", throughput=TABLE)
    assert trace.skipped_rows == 3  # bad timestamp, num_gpus -1, a row with 4 fields
    assert len(trace.jobs) == 2


def _philly_rows(count: int) -> list[str]:
    return [f"2017-10-09 07:{i // 60:02d}:{i % 60:02d},{100 + i}.0,1,{100 + i}.0,c1"
            for i in range(count)]


@pytest.mark.parametrize(("spoil", "problem"), [
    (lambda row: '"' + row, r"not valid CSV \(unexpected end of data\)"),  # never closed
    (lambda row: '"2017"-10' + row[7:], "not valid CSV"),  # text after a closing quote
    (lambda row: row.replace(",1,", ',1",', 1), "bad num_gpus"),  # inside a field
], ids=["unclosed", "after-closing-quote", "inside-a-field"])
def test_a_stray_double_quote_spoils_only_its_own_row(
        tmp_path: Path, spoil: Callable[[str], str], problem: str) -> None:
    # Before, an unclosed quote on line 3 made the csv module read the other 49 rows into
    # one field: skip reported 1 bad row and 1 job of 51, exit 0.
    rows = _philly_rows(51)
    rows[1] = spoil(rows[1])
    path = tmp_path / "q.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(rows) + "\n")
    trace = read_trace(path, "philly", on_bad_row="skip", throughput=TABLE)
    assert (trace.skipped_rows, len(trace.jobs)) == (1, 50)
    # Every other row is a job: arrivals 0 s, 2 s, 3 s, ... 50 s (row i at 07:00:00 + i s).
    assert sorted(job.arrival for job in trace.jobs) == [float(i) for i in range(51) if i != 1]
    with pytest.raises(InputError, match=rf"q.csv: line 3(.num_gpus)?: {problem}"):
        read_trace(path, "philly", throughput=TABLE)


def test_a_stray_quote_in_the_header_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text('"timestamp,duration,num_gpus,gpu_time,cluster\n' +
                    "\n".join(_philly_rows(3)) + "\n")
    with pytest.raises(InputError, match=r"h.csv: line 1: not valid CSV"):
        read_trace(path, "philly", on_bad_row="skip")


def test_native_quoted_commas_still_read_and_line_breaks_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    write_native([Job("a,1", 0.0, "A3C", 1, 10.0, user='x "y"')], path)
    job = read_trace(path, "native").jobs[0]
    assert (job.id, job.user) == ("a,1", 'x "y"')
    with pytest.raises(InputError, match=r"job 'a\\nb'.id: a line break in a field"):
        write_native([Job("a\nb", 0.0, "A3C", 1, 10.0)], path)


def test_same_seed_same_trace_and_another_seed_differs() -> None:
    def read(seed: int) -> Trace:
        return read_trace(DATA / "philly_small.csv", "philly", throughput=TABLE, seed=seed,
                          deadline_fraction=0.5)

    assert read(3) == read(3)
    types = {tuple(j.job_type for j in read(seed).jobs) for seed in range(10)}
    assert len(types) == 2  # the 1-GPU job's type is drawn; the others are forced


# --- helios --------------------------------------------------------------------------------


def test_helios_keeps_gpu_jobs_of_every_state() -> None:
    trace = read_trace(DATA / "helios_small.csv", "helios", throughput=TABLE)
    assert trace.excluded == {"gpu_num 0": 1, "duration 0": 1}
    j4, j1 = trace.jobs
    assert (j4.id, j4.arrival, j4.user, j4.tenant, j4.num_gpus) == ("j4", 0.0, "u3", "vc2", 1)
    assert j1.tenant == "vc1"  # the virtual cluster
    assert (j1.id, j1.arrival, j1.user, j1.num_gpus, j1.job_type, j1.work) == \
        ("j1", 5.0, "u1", 2, RESNET, 60.0 * 18.0)


# --- openb ---------------------------------------------------------------------------------


def test_openb_pods_map_gpu_spec_and_exclude_with_counts() -> None:
    # v100m32 (in p1's gpu_spec) takes the table's v100 speeds; v100m16 is unknown.
    model = AliasedThroughput(TABLE, {"v100m32": "v100"})
    trace = read_trace(DATA / "openb_pods.csv", "openb", throughput=model)
    assert trace.excluded == {"num_gpu 0": 1, "no deletion_time (still running)": 1,
                              "never scheduled": 1}
    p1, p5 = trace.jobs
    assert (p1.id, p1.arrival, p1.allowed_gpu_types) == ("p1", 0.0, ("v100m16", "v100m32"))
    # Runs from scheduled_time 150 to deletion_time 400: 250 s on the reference v100.
    assert p1.work == 250.0 * {"A3C": 5.0, RESNET: 10.0}[p1.job_type]
    assert (p5.id, p5.arrival, p5.allowed_gpu_types, p5.num_gpus) == ("p5", 10.0, None, 1)
    # p5 asks for half a GPU, 16 cores and 1,000 MiB; p1 for a whole one, 8 cores.
    assert (p5.gpu_share, p5.cpus, p5.memory_gb) == (0.5, 16.0, 1000 / 1024)
    assert (p1.gpu_share, p1.cpus, p1.memory_gb) == (None, 8.0, 30000 / 1024)
    assert trace.notes == ()
    rounded = read_trace(DATA / "openb_pods.csv", "openb", throughput=model, gpu_sharing=False)
    assert [job.gpu_share for job in rounded.jobs] == [None, None]
    assert rounded.notes == ("gpu_milli < 1000 (a share of one GPU): counted as one whole "
                             "GPU (GPU sharing off): 1 jobs",)
    # The note counts the jobs kept: with --limit-jobs 1 only p1 (a whole GPU) is.
    assert read_trace(DATA / "openb_pods.csv", "openb", throughput=model, gpu_sharing=False,
                      limit_jobs=1).notes == ()


def test_openb_cluster_reads_gpu_machines() -> None:
    cluster = openb_cluster(DATA / "openb_nodes.csv")
    assert cluster.type_names == ("v100m32", "t4")
    n1, n2 = cluster.nodes
    assert (n1.name, n1.gpu_type, n1.num_gpus, n1.cpus, n1.memory_gb) == \
        ("n1", "v100m32", 8, 96, 768.0)
    assert (n2.name, n2.num_gpus) == ("n2", 2)


# --- native and deadlines ------------------------------------------------------------------


def test_native_round_trip_is_exact(tmp_path: Path) -> None:
    jobs = (
        Job("a", 0.0, RESNET, 2, 1234.5678901234567, deadline=99.1, weight=2.5, user="u",
            allowed_gpu_counts=(1, 2, 4), allowed_gpu_types=("v100", "p100"), tenant="team a"),
        Job("b,with comma", 0.1 + 0.2, "A3C", 1, 1e-3),
    )
    write_native(jobs, tmp_path / "t.csv")
    trace = read_trace(tmp_path / "t.csv", "native")
    assert trace.jobs == jobs
    write_native(trace, tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "t.csv").read_text()
    # The tenant column is written only when some job has one.
    write_native(jobs[1:], tmp_path / "none.csv")
    assert "tenant" not in (tmp_path / "none.csv").read_text()


def test_native_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    write_native([Job("a", 0.0, "A3C", 1, 10.0)], path)
    path.write_text(path.read_text() + "b,5,A3C,1,-3,,1.0,,,\n")
    with pytest.raises(InputError, match=r"t.csv: line 3.work: bad work \(got '-3'"):
        read_trace(path, "native")


def test_synthetic_deadlines_fraction_and_slack() -> None:
    trace = read_trace(DATA / "philly_small.csv", "philly", throughput=TABLE,
                       deadline_fraction=1.0, deadline_slack=(2.0, 2.0))
    for job in trace.jobs:
        fastest = max(TABLE.throughput(job.job_type, g, job.num_gpus, P)
                      for g in ("v100", "k80"))
        assert job.deadline == pytest.approx(job.arrival + 2.0 * job.work / fastest)
    none = read_trace(DATA / "philly_small.csv", "philly", throughput=TABLE,
                      deadline_fraction=0.0)
    assert all(job.deadline is None for job in none.jobs)


def test_limit_jobs_keeps_the_earliest() -> None:
    trace = read_trace(DATA / "philly_small.csv", "philly", throughput=TABLE, limit_jobs=2)
    assert [j.arrival for j in trace.jobs] == [0.0, 115.0]
    assert trace.excluded == {"beyond limit_jobs": 1}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"format": "slurm"}, "unknown trace format"),
    ({"on_bad_row": "ignore"}, "bad on_bad_row"),
    ({"limit_jobs": 0}, "bad limit_jobs"),
    ({"deadline_fraction": 1.5}, "bad deadline_fraction"),
    ({"deadline_slack": (3.0, 2.0)}, "bad deadline_slack"),
])
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"format": "philly", **kwargs}
    with pytest.raises(InputError, match=message):
        read_trace(DATA / "philly_small.csv", **arguments)  # type: ignore[arg-type]


def test_missing_file_and_missing_column(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such trace file"):
        read_trace(tmp_path / "absent.csv", "philly")
    path = tmp_path / "h.csv"
    path.write_text("timestamp,duration\n2017-10-09 07:01:55,1\n")
    with pytest.raises(InputError, match=r"h.csv: line 1: missing column 'num_gpus'"):
        read_trace(path, "philly")


# --- the real traces -----------------------------------------------------------------------


def _capped(trace: Trace) -> int:
    return sum(int(note.rsplit(": ", 1)[1].split()[0]) for note in trace.notes
               if note.startswith(CAPPED))


def test_real_gavel_trace(shared_data: Path) -> None:
    profile = read_gavel_throughputs(shared_data / "gavel" / "simulation_throughputs.json")
    path = shared_data / "gavel" / "traces" / "ee9e8c.trace"
    started = time.perf_counter()
    plain = read_trace(path, "gavel")
    elapsed = time.perf_counter() - started
    measured = read_trace(path, "gavel", throughput=throughput_model(profile, "measured"))
    fitted = read_trace(path, "gavel", throughput=throughput_model(profile, "fitted"))
    print(f"ee9e8c.trace: {len(plain.jobs)} jobs in {elapsed:.3f} s; capped "
          f"{_capped(measured)} (measured table), {_capped(fitted)} (fitted model)")
    assert len(plain.jobs) == len(measured.jobs) == len(fitted.jobs) == 2000
    assert plain.skipped_rows == 0
    # 373 rows (18.7%) name a (job type, count) pair absent from Gavel's measured table:
    # 292 are 1-GPU-only types (A3C, CycleGAN, Recommendation) at 2-20 GPUs, capped at 1;
    # 81 are multi-GPU types at 16, 20 or 32 GPUs (capped at 8) or 7 GPUs (capped at 4).
    # The fitted model runs the multi-GPU types at any count up to 64: only the 292 remain.
    assert _capped(measured) == 373
    assert _capped(fitted) == 292
    assert max(j.num_gpus for j in measured.jobs) == 8


@pytest.mark.slow
def test_real_philly_trace(shared_data: Path) -> None:
    profile = read_gavel_throughputs(shared_data / "gavel" / "simulation_throughputs.json")
    model = throughput_model(profile, "fitted")
    started = time.perf_counter()
    trace = read_trace(shared_data / "philly" / "philly.csv", "philly", throughput=model,
                       deadline_fraction=0.3)
    elapsed = time.perf_counter() - started
    print(f"philly.csv: {len(trace.jobs)} jobs in {elapsed:.2f} s; notes {trace.notes}")
    assert len(trace.jobs) == 82247
    assert trace.skipped_rows == 0
    assert trace.jobs[0].arrival == 0.0
    assert [j.arrival for j in trace.jobs] == sorted(j.arrival for j in trace.jobs)
    assert sum(j.num_gpus == 1 for j in trace.jobs) == 76627
    assert 0.25 < sum(j.deadline is not None for j in trace.jobs) / 82247 < 0.35


# --- absurd values (docs/traces.md; ranges in docs/instance-format.md) --------------------


def _gavel_with(tmp_path: Path, row: str) -> Path:
    path = tmp_path / "t.trace"
    path.write_text((DATA / "gavel7.trace").read_text() + row + "\n")
    return path


def test_gavel_row_with_an_absurd_gpu_count_is_rejected_or_skipped_at_once(
        tmp_path: Path) -> None:
    # 1e8 GPUs: counting down one by one to a count the model runs took minutes and
    # gigabytes; the count is now out of range as soon as the row is read.
    path = _gavel_with(tmp_path, f"{RESNET}\tcmd\t-n\t1\t1000\t300.0\t100000000")
    with pytest.raises(InputError, match=r"t.trace: line 4.scale_factor: bad scale_factor "
                       r"\(got '100000000'; expected an integer from 1 to 100000\)"):
        read_trace(path, "gavel", throughput=TABLE)
    trace = read_trace(path, "gavel", throughput=TABLE, on_bad_row="skip")
    assert (trace.skipped_rows, len(trace.jobs)) == (1, 3)


def test_a_large_accepted_count_is_capped_without_counting_down(tmp_path: Path) -> None:
    # 99,999 GPUs is within range: capped at the table's largest count that runs (2).
    path = _gavel_with(tmp_path, f"{RESNET}\tcmd\t-n\t1\t1000\t300.0\t99999")
    trace = read_trace(path, "gavel", throughput=TABLE)
    assert trace.jobs[-1].num_gpus == 2
    philly = tmp_path / "p.csv"
    philly.write_text((DATA / "philly_small.csv").read_text()
                      + "2017-10-09 09:00:00,10.0,99999,40.0,c2\n"
                      + "2017-10-09 09:00:00,10.0,1e8,40.0,c2\n")
    trace = read_trace(philly, "philly", throughput=TABLE, on_bad_row="skip")
    assert (trace.skipped_rows, [j.num_gpus for j in trace.jobs][-1]) == (1, 2)


def test_known_counts_bound_the_search() -> None:
    from hetsched.core.records import MAX_GPUS_PER_JOB
    from hetsched.core.throughput import PolicyView
    from hetsched.files.traces.rules import Speeds, known_counts

    assert known_counts(TABLE) == (2, 1)
    assert known_counts(PolicyView(TABLE, TABLE)) == (2, 1)

    class Anything:
        def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                       placement: Placement) -> float:
            return 1.0 if num_gpus == 3 else 0.0

    assert known_counts(Anything()) == MAX_GPUS_PER_JOB
    speeds = Speeds(Anything(), ("v100",))
    assert speeds.largest_count("x", 10, None) == 3
    assert list(Speeds(TABLE, ("v100",)).counts_down_from(50_000)) == [2, 1]


@pytest.mark.parametrize(("row", "where", "piece"), [
    ("a,1e11,A3C,1,10.0,,1.0,,,", "line 3.arrival", "from 0 to 1e+10"),
    ("a,0,A3C,1,1e300,,1.0,,,", "line 3.work", "<= 1e+12"),
    ("a,0,A3C,1,10.0,,1e9,,,", "line 3.weight", "from 0.001 to 1000"),
    ("a,0,A3C,1,10.0,1.7e18,1.0,,,", "line 3.deadline", "up to 1e+10"),
    ("a,0,A3C,1,10.0,,1.0,,1|1e8,", "line 3.allowed_gpu_counts", "from 1 to 100000"),
])
def test_native_values_out_of_range(tmp_path: Path, row: str, where: str, piece: str) -> None:
    path = tmp_path / "t.csv"
    write_native([Job("b", 0.0, "A3C", 1, 10.0)], path)
    path.write_text(path.read_text() + row + "\n")
    with pytest.raises(InputError) as error:
        read_trace(path, "native")
    assert error.value.path == where
    assert piece in str(error.value)
    assert len(read_trace(path, "native", on_bad_row="skip").jobs) == 1


def test_native_deadline_before_arrival_names_the_times_of_the_file(tmp_path: Path) -> None:
    # The first arrival (1000 s) becomes 0 s in the trace; the error shows the file's times.
    path = tmp_path / "t.csv"
    write_native([Job("a", 1000.0, "A3C", 1, 10.0)], path)
    path.write_text(path.read_text() + "b,5000.0,A3C,1,10.0,4000.0,1.0,,,\n")
    with pytest.raises(InputError, match=r"t.csv: line 3.deadline: deadline is not after the "
                       r"arrival \(got '4000.0'; expected a time after the arrival 5000.0 s\)"):
        read_trace(path, "native")
    # Unix-epoch times: the file's digits, not 1.7e+09.
    write_native([Job("a", 1_700_000_000.0, "A3C", 1, 10.0)], path)
    path.write_text(path.read_text() + "b,1700000500,A3C,1,10.0,1700000400,1.0,,,\n")
    with pytest.raises(InputError, match=r"t.csv: line 3.deadline: deadline is not after the "
                       r"arrival \(got '1700000400'; expected a time after the arrival "
                       r"1700000500 s\)"):
        read_trace(path, "native")


def test_byte_order_mark_and_pipes(tmp_path: Path) -> None:
    import os

    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (DATA / "philly_small.csv").read_bytes())
    assert len(read_trace(path, "philly", throughput=TABLE).jobs) == 3
    pipe = tmp_path / "pipe.trace"
    os.mkfifo(pipe)  # opening it for reading would wait for a writer forever
    with pytest.raises(InputError, match="not a regular file"):
        read_trace(pipe, "gavel")
