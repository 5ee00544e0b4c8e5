"""Profile readers: Gavel's throughput JSON (tuple-literal keys, never eval), the tidy CSV
profile and its writer, and clear errors for malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.speeds.profiles import (
    Profile,
    ProfilePoint,
    batch_size_of,
    family_of,
    read_gavel_throughputs,
    read_profile,
    read_profile_csv,
    write_profile_csv,
)
from tests.helpers import raises_input_error

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD

#: A Gavel-format file in miniature: two worker types, a 1-GPU and a 2-GPU job key,
#: one co-location pair and one pair that cannot share ([0, 0]).
GAVEL = {
    "v100": {
        "('ResNet-50 (batch size 64)', 1)": {
            "null": 4.5,
            "('A3C', 1)": [3.0, 6.0],
            "('ResNet-50 (batch size 64)', 1)": [0, 0],
        },
        "('ResNet-50 (batch size 64)', 2)": {"null": 8.0},
        "('A3C', 1)": {"null": 7.25},
    },
    "v100_unconsolidated": {
        "('ResNet-50 (batch size 64)', 1)": {"null": 4.5},
        "('ResNet-50 (batch size 64)', 2)": {"null": 6.5},
    },
}


def write_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_gavel_reader_maps_worker_types_keys_and_pairs(tmp_path: Path) -> None:
    profile = read_gavel_throughputs(write_json(tmp_path / "gavel.json", GAVEL))
    assert profile.rows() == [
        ("A3C", "v100", 1, PACKED, 7.25),
        ("ResNet-50 (batch size 64)", "v100", 1, PACKED, 4.5),
        ("ResNet-50 (batch size 64)", "v100", 1, SPREAD, 4.5),
        ("ResNet-50 (batch size 64)", "v100", 2, PACKED, 8.0),
        ("ResNet-50 (batch size 64)", "v100", 2, SPREAD, 6.5),
    ]
    assert profile.family["ResNet-50 (batch size 64)"] == "ResNet-50"
    assert profile.batch_size["ResNet-50 (batch size 64)"] == 64
    assert profile.family["A3C"] == "A3C"
    assert profile.batch_size["A3C"] is None
    pairs = sorted((c.other_job_type, c.throughput, c.other_throughput)
                   for c in profile.colocations)
    assert pairs == [("A3C", 3.0, 6.0), ("ResNet-50 (batch size 64)", 0.0, 0.0)]
    assert profile.kind == "gavel"
    assert len(profile.sha256) == 64
    assert profile.table().throughput("A3C", "v100", 1, PACKED) == 7.25


def test_gavel_keys_are_literals_never_evaluated(tmp_path: Path) -> None:
    marker = tmp_path / "evaluated"
    doc = {"v100": {f"__import__('pathlib').Path({str(marker)!r}).touch()": {"null": 1.0}}}
    with pytest.raises(InputError, match="bad job key") as caught:
        read_gavel_throughputs(write_json(tmp_path / "evil.json", doc))
    assert not marker.exists()
    assert "a Python tuple literal" in str(caught.value)
    assert "evil.json" in str(caught.value)


@pytest.mark.parametrize(("key", "value", "problem", "where"), [
    ("('A', 1.5)", {"null": 1.0}, "bad job key", "$['v100']"),
    ("('A',)", {"null": 1.0}, "bad job key", "$['v100']"),
    ("('', 1)", {"null": 1.0}, "bad job key", "$['v100']"),
    ("('A', 0)", {"null": 1.0}, "bad job key", "$['v100']"),
    ("('A', 1)", {"('B', 1)": [1.0, 2.0]}, "missing isolated throughput", "\"('A', 1)\""),
    ("('A', 1)", {"null": -2.0}, "bad throughput", ".null"),
    ("('A', 1)", {"null": "fast"}, "bad throughput", ".null"),
    ("('A', 1)", {"null": 1.0, "('B', 1)": [1.0]}, "bad co-location pair", "('B', 1)"),
])
def test_bad_gavel_content_names_the_place(tmp_path: Path, key: str, value: object,
                                           problem: str, where: str) -> None:
    path = write_json(tmp_path / "bad.json", {"v100": {key: value}})
    raises_input_error(lambda: read_gavel_throughputs(path), str(path), [problem, where])


def test_gavel_reader_rejects_a_list(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a Gavel throughput file"):
        read_gavel_throughputs(write_json(tmp_path / "list.json", [1, 2]))


def test_family_and_batch_size_come_from_the_name() -> None:
    assert family_of("LM (batch size 20)") == "LM"
    assert batch_size_of("LM (batch size 20)") == 20
    assert family_of("resnet50") == "resnet50"
    assert batch_size_of("resnet50") is None


def test_csv_round_trip_keeps_batch_size_and_family(tmp_path: Path) -> None:
    profile = Profile((
        ProfilePoint("bert-large", "a100", 1, PACKED, 3.5, batch_size=32, family="bert"),
        ProfilePoint("bert-large", "a100", 4, SPREAD, 10.25, batch_size=32, family="bert"),
        ProfilePoint("LM (batch size 5)", "k80", 2, PACKED, 0.0),
    ))
    path = tmp_path / "profile.csv"
    write_profile_csv(profile, path)
    again = read_profile(path)
    assert again.rows() == profile.rows()
    assert dict(again.family) == {"bert-large": "bert", "LM (batch size 5)": "LM"}
    assert dict(again.batch_size) == {"bert-large": 32, "LM (batch size 5)": 5}
    assert again.kind == "csv"
    assert path.read_text().splitlines()[0] == \
        "job_type,gpu_type,num_gpus,placement,throughput,batch_size,family"


def test_csv_needs_only_the_five_columns(tmp_path: Path) -> None:
    path = tmp_path / "minimal.csv"
    path.write_text("gpu_type,job_type,num_gpus,placement,throughput,comment\n"
                    "v100,rnn,1,packed,12.5,first run\nv100,rnn,2,spread,20,\n")
    profile = read_profile_csv(path)
    assert profile.rows() == [("rnn", "v100", 1, PACKED, 12.5), ("rnn", "v100", 2, SPREAD, 20.0)]
    assert profile.family["rnn"] == "rnn"


HEADER = "job_type,gpu_type,num_gpus,placement,throughput\n"


@pytest.mark.parametrize(("text", "pieces"), [
    ("job_type,gpu_type,num_gpus,throughput\nrnn,v100,1,2\n",
     ["line 1", "missing column 'placement'"]),
    (HEADER + "rnn,v100,one,packed,2\n", ["line 2.num_gpus", "'one'", "an integer >= 1"]),
    (HEADER + "rnn,v100,1,packed,2\nrnn,v100,0,packed,2\n", ["line 3", "bad GPU count", "got 0"]),
    (HEADER + "rnn,v100,1,packed,fast\n", ["line 2.throughput", "'fast'"]),
    (HEADER + "rnn,v100,1,packed,-1\n", ["line 2", "bad throughput", "-1.0", ">= 0"]),
    (HEADER + "rnn,v100,1,packed,nan\n", ["line 2", "bad throughput", "nan"]),
    (HEADER + "rnn,v100,2,diagonal,3\n", ["line 2.placement", "'diagonal'", "packed or spread"]),
    (HEADER + ",v100,1,packed,3\n", ["line 2", "empty job_type"]),
    (HEADER + "rnn,v100,1,packed,3\nrnn,v100,1,packed,4\n",
     ["line 3", "duplicate measurement", "the first is line 2"]),
    (HEADER, ["the profile has no measurements"]),
    ("job_type,gpu_type,num_gpus,placement,throughput,batch_size\nrnn,v100,1,packed,3,big\n",
     ["line 2.batch_size", "'big'"]),
])
def test_bad_csv_names_file_line_and_value(tmp_path: Path, text: str,
                                           pieces: list[str]) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    raises_input_error(lambda: read_profile(path), str(path), pieces)


def test_one_job_type_cannot_have_two_families() -> None:
    with pytest.raises(InputError, match="two families"):
        Profile((ProfilePoint("rnn", "v100", 1, PACKED, 1.0, family="a"),
                 ProfilePoint("rnn", "k80", 1, PACKED, 1.0, family="b")))


def test_unknown_profile_suffix_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown profile format"):
        read_profile(tmp_path / "profile.xlsx")
    with pytest.raises(InputError, match="no such profile file"):
        read_profile(tmp_path / "absent.csv")
    with pytest.raises(InputError, match="no such file"):
        read_profile(tmp_path / "absent.json")


def test_real_gavel_table(shared_data: Path) -> None:
    profile = read_gavel_throughputs(shared_data / "gavel" / "simulation_throughputs.json")
    assert len(profile.job_types) == 26
    assert profile.gpu_types == ("k80", "p100", "v100")
    assert len(profile) == 492
    recommendation = [profile.by_key[("Recommendation (batch size 512)", g, 1, PACKED)].throughput
                      for g in ("k80", "p100", "v100")]
    assert [round(x, 1) for x in recommendation] == [32.9, 48.9, 23.3]
    single = {job for job in profile.job_types
              if all(p.num_gpus == 1 for p in profile.points if p.job_type == job)}
    assert single == {"A3C", "CycleGAN", *(f"Recommendation (batch size {b})"
                                           for b in (512, 1024, 2048, 4096, 8192))}
    assert {p.num_gpus for p in profile.points} == {1, 2, 4, 8}
    # ResNet-50 at batch size 128 cannot run on several K80s of one server.
    assert profile.by_key[("ResNet-50 (batch size 128)", "k80", 2, PACKED)].throughput == 0.0
    assert len(profile.colocations) > 10_000
    assert any(c.throughput == 0 and c.other_throughput == 0 for c in profile.colocations)
