"""``deca sweep`` and ``deca run`` up to the simulator: the design grid over W, L and loader counts,
the points' keys, argument errors, and the tables and report made from the records (the campaign's
runs replaced by plausible records, so nothing is built or simulated)."""

import csv
import json
from types import SimpleNamespace

import pytest

from deca.cli import main
from deca.hw.generate import top_name
from deca.sim.measure import campaign as campaign_module
from deca.sim.measure.campaign import Campaign, designs
from deca.sim.measure.point import Point, _stream_bytes
from deca.sim.measure.records import COLUMNS, write_record


def fake_record(point, system):
    """A record of ``point`` with every COLUMNS key; more loaders, fewer cycles (plausible, not measured)."""
    scheme, _, density = point.workload.partition("@")
    cycles_per_tile = 60.0 / point.loaders
    return dict.fromkeys(COLUMNS, 0) | {
        "key": point.key, "W": point.W, "L": point.L, "loaders": point.loaders, "workload": point.workload,
        "scheme": scheme, "density": float(density), "mode": point.mode, "tiles": 8, "cycles": 8 * cycles_per_tile,
        "cycles_per_tile": cycles_per_tile, "vops": 128, "bubbles": 8, "bpv_measured": 0.0625,
        "bpv_analytic": 0.0625, "bytes_per_tile": 90.0, "util_mem": 0.5, "util_tmul": 0.5, "util_deca": 0.5,
        "tflops": 10.0 / cycles_per_tile, "predicted_cycles_per_tile": 20.0, "predicted_bound": "MEM",
        "system": system}


@pytest.fixture
def runs(monkeypatch, tmp_path):
    """The points each campaign was asked to measure; the runs return fake records."""
    asked = []

    def run(self, points, sim="verilator", jobs=2, log=print, engine="python", cluster=None, cache=None):
        asked.append(list(points))
        return [fake_record(p, self.settings["system"]) for p in points]

    monkeypatch.setattr(campaign_module.Campaign, "run", run)
    monkeypatch.chdir(tmp_path)  # no out/baseline here: the reports compare with no measured software
    return asked


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_point_keys_name_a_loader_count_other_than_the_papers():
    assert Point(32, 8, "bf8@0.05", "tepl").key == "W32L8-bf8@0.05-tepl"
    assert Point(32, 8, "bf8@0.05", "tepl", 2).key == "W32L8-bf8@0.05-tepl"
    assert Point(32, 8, "bf8@0.05", "tepl", 3).key == "W32L8ld3-bf8@0.05-tepl"
    assert Point(8, 4, "/x/layer.deca", "store", 4).key == "W8L4ld4-layer-store"
    assert Point(32, 8, "bf8@1", "tepl", 4).as_dict()["loaders"] == 4


def test_stream_bytes_count_shared_spans_once_and_each_line_once():
    """Two requests sharing a scale block, streams overlapping a line, an empty stream: 64 + 64 + 10
    bytes on lines 0, 1 and 10."""
    def request(val, mask, scale):
        return SimpleNamespace(meta={f"{s}_{f}": v for s, span in zip(("val", "mask", "scale"), (val, mask, scale))
                                     for f, v in zip(("addr", "len"), span)})

    requests = [request((0, 64), (200, 0), (640, 10)), request((32, 64), (200, 0), (640, 10))]
    assert _stream_bytes(requests) == (138, 3)
    assert _stream_bytes([request((5, 0), (7, 0), (9, 0))]) == (0, 0)


def test_the_design_grid_is_W_x_L_x_loaders():
    valid, skipped = designs([8, 32], [4, 16], [2, 3])
    assert valid == [(8, 4, 2), (8, 4, 3), (32, 4, 2), (32, 4, 3), (32, 16, 2), (32, 16, 3)]
    assert [(W, L) for W, L, _ in skipped] == [(8, 16)]
    assert designs([32], [8])[0] == [(32, 8, 2)]


def test_sweep_over_loaders_measures_every_design_and_reports_the_counts(runs, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--W", "32", "--L", "8", "--loaders", "2,3,4,3", "--schemes", "bf8",
                 "--densities", "0.05,0.2", "--out", str(out)]) == 0
    (points,) = runs
    # Each count once, in the order given; every point a key of its own.
    assert [(p.W, p.L, p.loaders, p.workload) for p in points] == [
        (32, 8, n, w) for n in (2, 3, 4) for w in ("bf8@0.05", "bf8@0.2")]
    assert len({p.key for p in points}) == 6
    text = capsys.readouterr().out
    assert "deca sweep: 3 designs with 2, 3, 4 loaders x 2 workloads x 1 modes = 6 points" in text
    summary_header = next(line for line in text.splitlines() if line.split()[:3] == ["W", "L", "loaders"])
    assert "cycles/tile" in summary_header
    rows = read_csv(out / "results.csv")
    assert [(r["loaders"], r["cycles_per_tile"]) for r in rows] == [
        (str(n), str(60.0 / n)) for n in (2, 3, 4) for _ in range(2)]
    assert [r["loaders"] for r in json.loads((out / "results.json").read_text())] == [2, 2, 3, 3, 4, 4]
    report = (out / "report.md").read_text()
    assert report.startswith("# DECA PE sweep over W x L x loaders on verilator")
    assert "| W | L | loaders | workload |" in report
    # The designs table: the 3- and 4-loader designs against the paper's W = 32, L = 8 with 2.
    assert "| 32 | 8 | 3 | 2 | 20.0 | 1.500x |" in report and "| 32 | 8 | 4 | 2 | 15.0 | 2.000x |" in report


def test_sweep_with_one_loader_count_keeps_todays_tables(runs, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--W", "32", "--L", "8", "--loaders", "3", "--schemes", "bf8", "--densities", "0.05",
                 "--out", str(out)]) == 0
    (points,) = runs
    assert [p.key for p in points] == ["W32L8ld3-bf8@0.05-tepl"]
    text = capsys.readouterr().out
    assert "1 designs with 3 loaders x 1 workloads" in text
    assert "| W | L | workload |" in (out / "report.md").read_text()


@pytest.mark.parametrize("argv,message", [
    (["sweep", "--loaders", "2,5"], "loaders must be one of 2, 3, 4 (TEPL ports"),
    (["sweep", "--loaders", "1"], "got 1"),
    (["sweep", "--loaders", "2,x"], "expected comma-separated ints, got '2,x'"),
    (["run", "--loaders", "5"], "loaders must be one of 2, 3, 4"),
    (["run", "--loaders", "2,3"], "invalid int value: '2,3'"),
])
def test_bad_loader_counts_exit_2_with_one_line(runs, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"deca {argv[0]}: error: ") and message in last
    assert runs == []


# The campaign's workers, with the Verilog generation and the simulator replaced (module level: the
# worker processes find them by name).


def fake_generate(W, L, loaders, cache=None, storage=None, engine="python"):
    return f"/fake/{top_name('pe', W, L, loaders)}.v"


def fake_simulator(sim, sources, top, test_module, module_dir, *, params, run_name, seed):
    """What the testbench would be given: a record per point naming the design it ran on."""
    for fields in params["points"]:
        write_record(params["out"], {"key": Point(**fields).key, "loaders": params["loaders"], "top": top,
                                     "verilog": sources[0]})


def test_a_campaign_builds_and_runs_each_loader_count_apart(monkeypatch, tmp_path):
    monkeypatch.setattr(campaign_module, "_generate", fake_generate)
    monkeypatch.setattr(campaign_module, "run", fake_simulator)
    points = [Point(8, 4, w, "tepl", n) for n in (2, 3, 4) for w in ("bf8@0.5", "bf8@0.05")]
    settings = {"system": {}, "tiles": 4, "seed": 1, "sim": "verilator", "code": "test"}
    records = Campaign(tmp_path, settings).run(points, jobs=2, log=lambda *a: None, engine="python")
    tops = {2: "deca_pe_w8_l4", 3: "deca_pe_w8_l4_ld3", 4: "deca_pe_w8_l4_ld4"}
    assert [(r["key"], r["loaders"], r["top"], r["verilog"]) for r in records] == [
        (p.key, p.loaders, tops[p.loaders], f"/fake/{tops[p.loaders]}.v") for p in points]
