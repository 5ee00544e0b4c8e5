"""The tenants file (hetsched.files.tenants): a good one, bad ones named by JSON path, and
``hetsched replay --tenants``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.tenants import NO_QUOTA, Quota, Tenant, TenantTable
from hetsched.files.tenants import read_tenants
from tests.helpers import ROOT, exits_2

GOOD = {"tenants": [
    {"name": "vision", "weight": 2,
     "quotas": {"v100": {"nominal": 8, "borrowing_limit": 4}, "k80": {"nominal": 4}}},
    {"name": "speech"}]}


def write(folder: Path, document: object) -> Path:
    path = folder / "tenants.json"
    path.write_text(json.dumps(document))
    return path


def test_a_good_file(tmp_path: Path) -> None:
    table = read_tenants(write(tmp_path, GOOD))
    vision = table.get("vision")
    assert vision.weight == 2.0
    assert vision.quota("v100") == Quota(8, 4)
    assert vision.quota("v100").most == 12
    assert vision.quota("k80").most == float("inf")  # no borrowing limit
    assert vision.quota("p100") == NO_QUOTA
    assert table.get("speech") == Tenant("speech")
    assert table.get("unknown") == Tenant("unknown")  # weight 1, no quota
    assert table.weights() == {"vision": 2.0, "speech": 1.0}


@pytest.mark.parametrize(("document", "path", "piece"), [
    ({"tenant": []}, "$", "not a tenants document"),
    ({"tenants": {}}, "$.tenants", "not a list"),
    ({"tenants": [{"weight": 1}]}, "$.tenants[0]", "not a tenant"),
    ({"tenants": [{"name": "a", "weight": 0}]}, "$.tenants[0].weight", "bad weight"),
    ({"tenants": [{"name": ""}]}, "$.tenants[0].name", "tenant name"),
    ({"tenants": [{"name": "a", "quotas": {"v100": {"nominal": -1}}}]},
     "$.tenants[0].quotas.v100.nominal", "bad nominal"),
    ({"tenants": [{"name": "a", "quotas": {"v100": {"nominal": 2.5}}}]},
     "$.tenants[0].quotas.v100.nominal", "bad nominal"),
    ({"tenants": [{"name": "a", "quotas": {"v100": {"borrow": 2}}}]},
     "$.tenants[0].quotas.v100", "not a quota"),
    ({"tenants": [{"name": "a"}, {"name": "a"}]}, "$.tenants[1].name", "named twice"),
])
def test_bad_files_name_the_place(tmp_path: Path, document: object, path: str,
                                  piece: str) -> None:
    with pytest.raises(InputError) as error:
        read_tenants(write(tmp_path, document))
    assert error.value.path == path
    assert piece in str(error.value)
    assert "tenants.json" in str(error.value)


def test_a_table_in_python() -> None:
    table = TenantTable((Tenant("a", 1.5, {"v100": Quota(2, 0)}),))
    assert table.get("a").quota("v100").most == 2
    with pytest.raises(InputError, match="bad borrowing_limit"):
        Quota(1, -2)


def test_replay_with_tenants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hetsched.cli.main import main

    trace = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
    tenants = write(tmp_path, {"tenants": [{"name": "c1", "weight": 2},
                                           {"name": "c2", "quotas": {"v100": {"nominal": 4}}}]})
    main(["replay", str(trace), "--format", "philly", "--cluster", "v100=4,k80=4",
          "--policy", "fifo", "--tenants", str(tenants), "--out", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["quota_violation_gpu_s"] == 0.0  # nobody waits on this small trace
    # Jain's index of the GPU-seconds in jobs.csv, c1's halved by its weight.
    used = {"c1": 0.0, "c2": 0.0}
    with (tmp_path / "out" / "jobs.csv").open() as handle:
        for row in csv.DictReader(handle):
            used[row["tenant"]] += float(row["gpu_seconds"])
    x = [used["c1"] / 2, used["c2"]]
    jain = sum(x) ** 2 / (2 * (x[0] ** 2 + x[1] ** 2))
    assert summary["tenant_jain_index"] == pytest.approx(jain)
    assert summary["tenant_jain_index"] < 1
    assert "tenants" in (tmp_path / "out" / "run.toml").read_text()
    bad = write(tmp_path, {"tenants": [{"name": "c1", "weight": -1}]})
    err = exits_2(["replay", str(trace), "--format", "philly", "--cluster", "v100=4,k80=4",
                   "--policy", "fifo", "--tenants", str(bad), "--out", str(tmp_path / "x")],
                  capsys)
    assert "$.tenants[0].weight" in err


def test_a_quota_must_name_a_gpu_type_of_the_cluster() -> None:
    table = TenantTable((Tenant("a", quotas={"v100": Quota(2)}),
                         Tenant("b", quotas={"V100": Quota(1)})))
    table.check_cluster(("v100", "V100"))  # (names are compared as written)
    with pytest.raises(InputError) as error:
        table.check_cluster(("v100", "k80"), "t.json")
    assert str(error.value) == "t.json: $.tenants[1].quotas.V100: quota on a GPU type the " \
        "cluster lacks (got 'V100'; expected one of v100, k80 (the cluster's is 'v100': names " \
        "are compared as written))"
    with pytest.raises(InputError) as error:
        TenantTable((Tenant("a", quotas={"h100": Quota(2)}),)).check_cluster(("v100", "k80"))
    assert str(error.value) == "$.tenants[0].quotas.h100: quota on a GPU type the cluster " \
        "lacks (got 'h100'; expected one of v100, k80)"


@pytest.mark.parametrize("command", ["replay", "bench"])
@pytest.mark.parametrize(("gpu_type", "hint"), [
    ("h100", ""), ("V100", " (the cluster's is 'v100': names are compared as written)")])
def test_replay_and_bench_refuse_a_quota_on_a_type_the_cluster_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, gpu_type: str,
        hint: str) -> None:
    # Once the quota was kept and never granted: the tenant waited on GPUs that do not
    # exist, silently.
    trace = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
    tenants = write(tmp_path, {"tenants": [
        {"name": "c1", "quotas": {"v100": {"nominal": 2}}},
        {"name": "c2", "quotas": {gpu_type: {"nominal": 4}}}]})
    out = tmp_path / "out"
    head = [command, str(trace)] if command == "replay" else [
        command, "--trace", str(trace), "--policies", "fifo"]
    err = exits_2([*head, "--format", "philly", "--cluster", "v100=4,k80=4", "--tenants",
                   str(tenants), "--out", str(out)], capsys)
    assert err == f"error: {tenants}: $.tenants[1].quotas.{gpu_type}: quota on a GPU type " \
        f"the cluster lacks (got '{gpu_type}'; expected one of v100, k80{hint})\n"
    assert not out.exists()
