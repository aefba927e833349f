"""``--cluster``: deca sweep and deca synth --sweep on a real Dask LocalCluster of two worker
processes over TCP on the loopback address, against the same runs done locally; a worker killed
mid-sweep, a task that raises, and the bad input (no scheduler, local:0, workers without deca)."""

import json
import os
import signal
import socket
import sys
import threading
import time

import pytest

from deca.cli import main
from deca.sim.measure.campaign import Campaign, CampaignError, code_digest
from deca.sim.measure.point import Point
from deca.sim.measure.records import first_difference
from deca.sim.bench.system import system

distributed = pytest.importorskip("distributed")

#: W = 8, L = 4: the design the default measurement tests build already.
POINTS = [Point(8, 4, f"{scheme}@{density}", "tepl") for scheme in ("bf8", "mxfp4") for density in (1, 0.5)]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  protocol="tcp", dashboard_address=":0") as cluster:
        yield cluster


def campaign(out, seed=1, tiles=8):
    settings = {"system": system("spr-hbm").as_dict(), "tiles": tiles, "seed": seed, "sim": "verilator", "code": code_digest()}
    return Campaign(out, settings)


def run(out, log=print, points=POINTS, **where):
    return campaign(out).run(points, log=log, engine="fast", **where)


def test_a_sweep_on_the_cluster_gives_the_local_records(cluster, tmp_path, capsys):
    local = run(tmp_path / "local", jobs=2)
    remote = run(tmp_path / "cluster", cluster=cluster.scheduler_address)
    assert first_difference(local, remote, ("the local run", "the cluster run")) is None
    err = capsys.readouterr().out
    assert f"4 to measure on the Dask cluster {cluster.scheduler_address}" in err
    assert "[####################] 4/4" in err and "0 tasks rerun after losing a worker" in err
    # The client wrote each record; a second run finds them all and measures nothing.
    assert run(tmp_path / "cluster", cluster=cluster.scheduler_address) == remote
    assert "4 of 4 points already in" in capsys.readouterr().out


def test_a_worker_killed_mid_sweep_has_its_point_rerun(cluster, tmp_path):
    points = [Point(8, 4, f"bf8@{density}", "tepl") for density in (1, 0.5, 0.2, 0.05)]
    local = run(tmp_path / "local", points=points, jobs=1)
    lines, outcome = [], {}

    def sweep():
        try:
            outcome["records"] = run(tmp_path / "cluster", log=lines.append, points=points,
                                     cluster=cluster.scheduler_address)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = e

    thread = threading.Thread(target=sweep)
    thread.start()
    with distributed.Client(cluster.scheduler_address) as client:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            busy = [worker for worker, keys in client.processing().items() if keys]
            if busy:
                break
            time.sleep(0.05)
        assert busy, "no task reached a worker"
        (pid,) = client.run(os.getpid, workers=busy[:1]).values()
        os.kill(pid, signal.SIGKILL)  # that worker process only; its nanny starts a new one
    thread.join(180)
    assert "error" not in outcome, outcome.get("error")
    assert first_difference(local, outcome["records"], ("the local run", "the cluster run")) is None
    rerun = [line for line in lines if "rerun after losing a worker" in line]
    assert rerun and not rerun[0].startswith("0 "), lines


def test_a_task_that_raises_fails_the_run_once_with_its_reason(cluster, tmp_path):
    lines = []
    with pytest.raises(CampaignError) as error:
        # W = 12 is no design: the worker's generator refuses it.
        run(tmp_path, log=lines.append, points=[Point(12, 4, "bf8@1", "tepl")], cluster=cluster.scheduler_address)
    message = str(error.value)
    assert "points failed on the cluster" in message and "W12L4-bf8@1-tepl" in message
    assert message.count("W must be one of 8, 16, 32, 64") == 1
    assert "0 tasks rerun after losing a worker" in lines


@pytest.mark.slow  # two syntheses of a unit: a minute on 2 busy cores
def test_a_unit_synthesis_on_the_cluster_gives_the_local_result(cluster, tmp_path, capsys):
    def synth(name, *where):
        out = tmp_path / name
        assert main(["synth", "--sweep", "--design", "tag_table", "--W", "8", "--L", "4", "--tech", "generic",
                     "--out", str(out), "--work-dir", str(tmp_path / f"work-{name}"), *where]) == 0
        return json.loads((out / "synth.json").read_text())

    local, remote = synth("local", "--jobs", "1"), synth("cluster", "--cluster", cluster.scheduler_address)
    # Every field but the seconds Yosys took.
    (a,), (b,) = local.pop("results"), remote.pop("results")
    assert a.pop("seconds") > 0 and b.pop("seconds") > 0
    assert a == b and local == remote
    # The client cached the result: the same sweep again is not synthesized anywhere.
    (cached,) = (tmp_path / "cluster" / "cache").glob("deca_tag_table_w8_l4-*.json")
    assert json.loads(cached.read_text())["total"] == b["total"]


def test_a_verify_on_the_cluster_gives_the_local_record(cluster, tmp_path, capsys):
    def verify(name, *where):
        out = tmp_path / name
        main(["verify", "--W", "8", "--L", "4", "--tiles", "120", "--block-tiles", "40", "--seed", "7", "--out", str(out),
              *where])
        (report,) = out.glob("verify-*.json")
        return {k: v for k, v in json.loads(report.read_text()).items()
                if k not in ("command", "wall_seconds", "cpu_seconds")}

    local, remote = verify("local", "--jobs", "1"), verify("cluster", "--cluster", cluster.scheduler_address)
    assert local["requests"] == 120 and local["blocks"] == [0, 1, 2]
    assert local == remote
    assert "0 tasks rerun after losing a worker" in capsys.readouterr().out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SWEEP, SYNTH, VERIFY = (["sweep", "--W", "8", "--L", "4"], ["synth", "--sweep", "--W", "8", "--L", "4"],
                        ["verify", "--W", "8", "--L", "4"])


@pytest.mark.parametrize("command, address, message", [
    *((command, "local:0", "--cluster local:N takes a positive number of worker processes, got 'local:0'")
      for command in (SWEEP, SYNTH, VERIFY)),
    (SYNTH, "somewhere", "--cluster takes a scheduler address like tcp://host:8786 or local:N, got 'somewhere'"),
    (SWEEP, "tcp://127.0.0.1:PORT", "no Dask scheduler answers at tcp://127.0.0.1:PORT within 5 s"),
])
def test_bad_cluster_input_exits_2_with_one_line(tmp_path, capsys, command, address, message):
    port = str(_free_port())
    start = time.monotonic()
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--out", str(tmp_path), "--cluster", address.replace("PORT", port)])
    assert exit_.value.code == 2 and time.monotonic() - start < 10
    err = capsys.readouterr().err.strip().splitlines()
    # The error is the last line, one line, after at most the line saying what was to be run.
    assert err[-1].startswith(f"deca {command[0]}: error: {message.replace('PORT', port)}"), err
    assert len(err) <= 2 and "Traceback" not in "".join(err)


BLOCK_DECA = """
import sys

class NoDeca:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "deca":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoDeca())
"""


def test_workers_without_the_project_are_refused_by_name(tmp_path, capsys):
    preload = tmp_path / "no_deca.py"
    preload.write_text(BLOCK_DECA)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0", preload=[str(preload)]) as cluster:
        with pytest.raises(SystemExit) as exit_:
            main(["sweep", "--W", "8", "--L", "4", "--schemes", "bf8", "--densities", "1", "--out",
                  str(tmp_path / "out"), "--cluster", cluster.scheduler_address])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("deca sweep: error: 1 of 1 Dask workers lack the deca package"), err
    assert "No module named 'deca" in err[-1] and "bash scripts/setup.sh" in err[-1] and len(err) == 2


def test_the_default_path_does_not_import_dask(tmp_path):
    # A fresh interpreter: the sweep's CLI and campaign modules, as the local run loads them.
    import subprocess

    code = ("import sys; import deca.sim.measure.campaign, deca.synth.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
