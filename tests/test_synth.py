"""The generic-CMOS synthesis flow (deca.synth, ``--tech generic``): Yosys transistors, flip-flops,
memory bits and logic depth per block, the cache, error reporting, the CLI, the reports, and (slow)
sweeps and ECP5 place and route. The standard-cell flow is tests/test_synth_cells.py.

Expected values are independent of the flow: static CMOS transistor counts per gate, the paper's
LUT array size (L big LUTs of 256 BF16 entries), monotonic growth, and the paper's block names.
"""

import argparse
import csv
import json
import re

import matplotlib
import pytest

matplotlib.use("Agg")

from deca.errors import UsageError  # noqa: E402
from deca.golden.format import LUT_ENTRIES  # noqa: E402
from deca.hw.params import ParameterError  # noqa: E402
from deca.synth import cells, flow, fpga, stats  # noqa: E402
from deca.synth.blocks import block_of  # noqa: E402
from deca.synth.cli import add_synth_parser  # noqa: E402
from deca.synth.dse import area_dse, load_measured  # noqa: E402
from deca.synth.report import format_fpga, format_result, paper_split, plot_breakdown  # noqa: E402
from deca.synth.tools import run_yosys  # noqa: E402
from deca.toolchain import ToolError  # noqa: E402

DESIGN = "datapath"
#: Transistors of static CMOS gates: 2-input NAND and NOR 4, inverter 2, a D flip-flop 16 (two
#: latches of two transmission gates and two inverters each).
CMOS_TRANSISTORS = {"$_NAND_": 4, "$_NOR_": 4, "$_NOT_": 2, "$_DFF_P_": 16}
BF16_BITS = 16
#: The blocks the datapath has; the PE adds loaders and queues and TOut.
DATAPATH_BLOCKS = ("LUT array", "popcount/prefix sum", "crossbar expander", "scaler")
GENERIC = cells.technology("generic")


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("synth")


@pytest.fixture(scope="module")
def results(synth_dir):
    """(8, 2), the smallest datapath with more than one LUT, through synthesize() with a cache."""
    return {(8, 2): flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache", tech=GENERIC)}


def _parser():
    p = argparse.ArgumentParser(prog="deca")
    add_synth_parser(p.add_subparsers(dest="command", required=True))
    return p


# The flow on the datapath -------------------------------------------------------------------------


def test_whole_design_numbers(results):
    r = results[8, 2]
    assert r.top == "deca_datapath_w8_l2" and (r.W, r.L, r.design) == (8, 2, DESIGN)
    assert r.total.transistors > 0 and r.total.flip_flops > 0 and r.total.depth > 0
    # Mapped to CMOS gates and plain flip-flops only, priced as static CMOS.
    assert set(r.total.cells) <= set(CMOS_TRANSISTORS)
    assert r.total.transistors == sum(CMOS_TRANSISTORS[t] * n for t, n in r.total.cells.items())
    assert r.total.flip_flops == r.total.cells["$_DFF_P_"]
    # Memory bits are counted before memories become flip-flops: the LUT array's L big LUTs of
    # 256 BF16 entries.
    assert r.total.memory_bits == 2 * LUT_ENTRIES * BF16_BITS


def test_blocks_partition_the_design(results):
    """The blocks cover the design exactly (tolerance: none), each block's depth is at
    most the whole design's, and the LUT array holds all the memory."""
    r = results[8, 2]
    for name in DATAPATH_BLOCKS:
        assert r.blocks[name].transistors > 0 and r.blocks[name].num_cells > 0 and r.blocks[name].depth > 0, name
    assert sum(b.transistors for b in r.blocks.values()) == r.total.transistors
    assert sum(b.num_cells for b in r.blocks.values()) == r.total.num_cells
    assert sum(b.flip_flops for b in r.blocks.values()) == r.total.flip_flops
    assert r.blocks["LUT array"].memory_bits == r.total.memory_bits
    assert max(b.depth for b in r.blocks.values()) <= r.total.depth
    # A block alone is wrapped in registers (RegisteredPorts): its own modules sit under "inner";
    # the LUT array's are its module, the slices of its code and choice registers (``hold``), the
    # copies of its read enable (``enable``) and of its mode flags, and its lanes' source selects.
    luts = "deca_datapath_w8_l2.inner.pipeline.dequant.luts"
    modules = r.blocks["LUT array"].modules
    assert modules[0] == luts and modules[1:], modules
    assert all(name.startswith(tuple(f"{luts}.{part}" for part in ("codes", "choices", "lut", "mode", "lane")))
               for name in modules[1:]), modules
    assert any(name.startswith(luts + ".lut") for name in modules[1:]), modules
    assert paper_split(r)["loaders, queues, TOut"] == 0  # the datapath has no loaders
    assert sum(paper_split(r).values()) == pytest.approx(1)


@pytest.mark.slow  # Yosys on the flattened netlist (20 s); tests/test_synth_netlist.py checks the depths on small ones
def test_depth_is_yosys_ltp_on_the_flattened_netlist(results, synth_dir):
    """The depths computed from the hierarchical netlist equal Yosys's own ``ltp -noff`` on that
    netlist flattened, for the whole design and with each block's modules selected."""
    r = results[8, 2]
    work = synth_dir / "work" / r.top
    names = list(r.blocks)
    script = [f"read_blif {flow.NETLIST}", f"hierarchy -top {r.top}",
              *(f"setattr -set deca_block {i} {module}/*" for i, name in enumerate(names)
                for module in r.blocks[name].modules),
              "flatten", "tee -q -o ltp.txt ltp -noff",
              *(f"tee -q -o ltp_{i}.txt ltp -noff a:deca_block={i}" for i in range(len(names)))]
    (work / "ltp.ys").write_text("\n".join(script) + "\n")
    run_yosys("ltp.ys", work, "the ltp cross-check")

    def ltp(name):
        return int(re.search(r"Longest topological path in \S+ \(length=(-?\d+)\)", (work / name).read_text()).group(1))

    assert ltp("ltp.txt") == r.total.depth
    assert {name: ltp(f"ltp_{i}.txt") for i, name in enumerate(names)} == {n: b.depth for n, b in r.blocks.items()}


def test_module_instantiated_twice_counts_twice():
    """Per-module numbers from a hierarchical ``stat``: a module's own cells exclude its
    submodules, and a module the design holds twice counts twice."""
    stat = {"modules": {
        "\\top": {"num_cells_by_type": {"$_NAND_": 1, "mid": 2}, "estimated_num_transistors": "24"},
        "\\mid": {"num_cells_by_type": {"$_NOT_": 1, "leaf": 1}, "estimated_num_transistors": "10"},
        "\\leaf": {"num_cells_by_type": {"$_NOR_": 2}, "estimated_num_transistors": "8"}}}
    own, children = stats._module_stats(stat)
    assert own == {"top": ({"$_NAND_": 1}, 4), "mid": ({"$_NOT_": 1}, 2), "leaf": ({"$_NOR_": 2}, 8)}
    assert stats._instances("top", children) == {"top": 1, "mid": 2, "leaf": 2}


def test_result_is_json_serializable(results):
    r = results[8, 2]
    back = flow.SynthResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r


def test_cache_is_hit_without_running_yosys(results, synth_dir, monkeypatch):
    def no_yosys(*args):
        raise AssertionError("Yosys ran although the result is cached")

    monkeypatch.setattr(flow, "run_yosys", no_yosys)
    again = flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache", tech=GENERIC)
    assert again == results[8, 2]
    # Other Verilog, other key: a changed file is synthesized again.
    changed = synth_dir / "changed" / "deca_datapath_w8_l2.v"
    changed.parent.mkdir()
    original = synth_dir / "work" / "deca_datapath_w8_l2" / "deca_datapath_w8_l2.v"
    changed.write_text(original.read_text() + "\n// edit\n")
    with pytest.raises(AssertionError, match="Yosys ran"):
        flow.synthesize_file(changed, "deca_datapath_w8_l2", changed.parent, cache_dir=synth_dir / "cache",
                             tech=GENERIC)
    # The same Verilog through changed flow code: synthesized again too.
    code = synth_dir / "changed" / "flow_code.py"
    code.write_text("# a change\n")
    monkeypatch.setattr(flow, "FLOW_SOURCES", (*flow.FLOW_SOURCES, code))
    with pytest.raises(AssertionError, match="Yosys ran"):
        flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache", tech=GENERIC)


def test_report_text(results):
    text = format_result(results[8, 2])
    for needle in ("deca_datapath_w8_l2", "whole design", *DATAPATH_BLOCKS, "section 7.4", "NAND"):
        assert needle in text


#: nextpnr-ecp5's log of a design that needs more LUTs than the device has (from the (8, 4) PE
#: before its queues were banked), cut to the lines that matter.
TOO_BIG_LOG = """\
Info: Device utilisation:
Info: \t              DP16KD:       0/    208     0%
Info: \t          MULT18X18D:      14/    156     8%
Info: \t          TRELLIS_FF:   39259/  83640    46%
Info: \t        TRELLIS_COMB:  180808/  83640   216%
Info: \t        TRELLIS_RAMW:     576/  10455     5%

ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'TRELLIS_COMB'
"""


@pytest.mark.parametrize("log,fits", [(TOO_BIG_LOG, False), (TOO_BIG_LOG.replace("180808/", " 80808/"), None)])
def test_fpga_design_too_big_is_a_result_not_an_error(tmp_path, monkeypatch, log, fits):
    """A placement failure for lack of LUTs is reported as "does not fit" with what the design
    needs; a failure with every resource within the device stays an error."""
    def nextpnr(args, cwd, what):
        (cwd / "nextpnr.log").write_text(log)
        raise ToolError(f"{what} failed")

    monkeypatch.setattr(fpga, "run_yosys", lambda *args: None)
    monkeypatch.setattr(fpga, "run_nextpnr_ecp5", nextpnr)
    if fits is None:
        with pytest.raises(ToolError, match="place and route of x.v"):
            fpga.run_fpga(tmp_path, "x.v", "x", "x.v")
        return
    f = fpga.run_fpga(tmp_path, "x.v", "x", "x.v")
    assert (f.fits, f.fmax_mhz) == (False, None)
    assert (f.luts, f.ffs, f.bram, f.dsp, f.lutram) == (180808, 39259, 0, 14, 576)
    assert f.over() == {"luts": (180808, 83640)}
    assert "does not fit, so not placed: needs 216% of the LUT4/carry cells" in format_fpga(f)
    assert "39,259 FFs of 83,640 (47%)" in format_fpga(f)


# Errors -------------------------------------------------------------------------------------------


def test_broken_verilog_names_file_and_yosys_message(tmp_path):
    bad = tmp_path / "broken.v"
    bad.write_text("module broken(input a);\n  assign = a;\nendmodule\n")
    with pytest.raises(ToolError, match=r"(?s)broken\.v.*syntax error"):
        flow.synthesize_file(bad, "broken", tmp_path / "work")


def test_missing_verilog_names_file(tmp_path):
    with pytest.raises(ToolError, match="missing.v"):
        flow.synthesize_file(tmp_path / "missing.v", "missing", tmp_path / "work")


def test_wrong_top_module(tmp_path):
    ok = tmp_path / "ok.v"
    ok.write_text("module ok(input a, output b);\n  assign b = a;\nendmodule\n")
    with pytest.raises(ToolError, match=r"(?s)ok\.v.*nothere"):
        flow.synthesize_file(ok, "nothere", tmp_path / "work")


@pytest.mark.parametrize("argv,message", [
    (["--W", "8", "--L", "16"], "exceeds W = 8"),
    (["--W", "12", "--L", "4"], "W must be one of"),
    (["--W", "32", "--L", "3"], "power of two"),
])
def test_cli_rejects_impossible_designs(argv, message, tmp_path):
    args = _parser().parse_args(["synth", *argv, "--out", str(tmp_path)])
    with pytest.raises(ParameterError, match=message):
        args.func(args)


def test_cli_sweep_with_nothing_valid(tmp_path, capsys):
    from deca.cli import UsageError

    args = _parser().parse_args(["synth", "--sweep", "--W", "8", "--L", "16,32", "--out", str(tmp_path)])
    with pytest.raises(UsageError, match="no \\(W, L\\)"):
        args.func(args)
    assert "skipping W=8, L=16" in capsys.readouterr().out


# The CLI sweep, from the cache --------------------------------------------------------------------


def test_cli_sweep_writes_reports(results, synth_dir, tmp_path, capsys):
    measured = tmp_path / "measured"
    measured.mkdir()
    # Two workloads of a deca sweep on (8, 2); the design's measured throughput is their geometric mean.
    records = [{"W": 8, "L": 2, "loaders": 2, "mode": "tepl", "workload": w, "cycles_per_tile": c, "tflops": t}
               for w, c, t in (("bf8@1", 100.0, 12.5), ("bf8@0.5", 25.0, 50.0))]
    (measured / "results.json").write_text(json.dumps(records))
    out = tmp_path / "out"
    args = _parser().parse_args(["synth", "--sweep", "--tech", "generic", "--design", DESIGN, "--W", "8", "--L", "2,16",
                                 "--work-dir", str(synth_dir / "work"), "--cache", str(synth_dir / "cache"),
                                 "--out", str(out), "--measured", str(measured)])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "skipping W=8, L=16" in text and "Roof-Surface's choice" in text
    with open(out / "synth.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["W"], row["L"], row["loaders"]) == ("8", "2", "2")
    assert int(row["transistors"]) == results[8, 2].total.transistors
    assert float(row["measured_tflops"]) == pytest.approx(25.0)
    doc = json.loads((out / "synth.json").read_text())
    assert doc["dse"]["best_throughput_per_area"] == [8, 2, 2]
    for png in ("area_depth.png", "throughput_per_area.png"):
        assert (out / png).read_bytes().startswith(b"\x89PNG")
    assert not (out / "breakdown.png").exists()  # the paper's split is for (32, 8)


def test_measured_folder_that_is_not_a_sweep_is_refused(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps([{"W": 8, "L": 4}]))
    with pytest.raises(ValueError, match="results.json is not a deca sweep result"):
        load_measured(tmp_path)


def test_cli_measured_folder_absent(results, synth_dir, tmp_path, capsys):
    args = _parser().parse_args(["synth", "--sweep", "--tech", "generic", "--design", DESIGN, "--W", "8", "--L", "2",
                                 "--work-dir", str(synth_dir / "work"), "--cache", str(synth_dir / "cache"),
                                 "--out", str(tmp_path), "--measured", str(tmp_path / "nothing")])
    assert args.func(args) == 0
    assert "absent" in capsys.readouterr().out


def test_throughput_per_area_uses_transistors_as_cost(results, tmp_path):
    dse = area_dse(list(results.values()))
    assert {(p.W, p.L): p.cost for p in dse.points} == {wl: r.total.transistors for wl, r in results.items()}
    assert dse.unit == "transistors" and dse.per_area == "M transistors"
    per_area = {(r["W"], r["L"]): r["tflops_per_area"] for r in dse.rows()}
    assert (dse.best.W, dse.best.L) == max(per_area, key=per_area.get)
    assert plot_breakdown(results[8, 2], tmp_path / "b.png").read_bytes().startswith(b"\x89PNG")


# Small pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize("module,block", [
    ("top", "other"),
    ("top.pipeline.dequant.luts", "LUT array"),
    ("top.pipeline.dequant.unpacker", "other"),
    ("top.pipeline.dequant", "other"),
    ("top.window", "popcount/prefix sum"),
    ("top.loader0.window", "popcount/prefix sum"),
    ("top.loader1.popcount", "popcount/prefix sum"),
    ("top.loader1.sqq", "loaders and queues"),
    ("top.loader0", "loaders and queues"),
    ("top.prefetcher", "loaders and queues"),
    ("top.pipeline.expander", "crossbar expander"),
    ("top.pipeline.scaler.lane3", "scaler"),
    ("top.tout", "TOut"),
    ("top.regs", "other"),
])
def test_block_table(module, block):
    assert block_of(module, "top") == block


# Slow: bigger designs and place and route --------------------------------------------------------


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Synthesize (W, L) on demand, each once per module."""
    work = tmp_path_factory.mktemp("sweep")
    done = {}

    def get(W, L):
        if (W, L) not in done:
            done[W, L] = flow.synthesize(W, L, DESIGN, work, cache_dir=work / "cache", tech=GENERIC)
        return done[W, L]
    return get


@pytest.mark.slow
def test_area_grows_with_L_and_W(sweep):
    area = {wl: sweep(*wl).total.transistors for wl in ((8, 2), (8, 4), (16, 4))}
    assert area[8, 2] < area[8, 4] < area[16, 4]
    luts = {wl: sweep(*wl).blocks["LUT array"].transistors for wl in ((8, 2), (8, 4))}
    assert luts[8, 2] < luts[8, 4]
    assert sweep(8, 2).total.memory_bits == 2 * LUT_ENTRIES * BF16_BITS


@pytest.mark.slow
def test_area_grows_with_L_at_W32(sweep):
    area = [sweep(32, L).total.transistors for L in (1, 2, 4, 8, 16, 32)]
    assert area == sorted(area) and len(set(area)) == len(area), area


@pytest.mark.slow
def test_area_grows_with_W_at_L8(sweep):
    area = [sweep(W, 8).total.transistors for W in (8, 16, 32, 64)]
    assert area == sorted(area) and len(set(area)) == len(area), area


@pytest.mark.slow
def test_fpga_place_and_route(tmp_path):
    r = flow.synthesize(8, 4, DESIGN, tmp_path, fpga=True, tech=GENERIC)
    f = r.fpga
    assert f.fits and f.luts > 0 and f.ffs > 0 and f.fmax_mhz > 0 and not f.over()
    assert f.available["luts"] == 83640  # the LFE5U-85F's 84k LUT4s
    # The scaler's multipliers are radix-4 partial products in carry-save logic, pipelined for the
    # ASIC's cycle: no DSP block is inferred for them.
    assert f.dsp == 0
    assert f.device == fpga.FPGA_DEVICE


def test_the_default_sweep_is_the_fourteen_designs_deca_sweep_measures(capsys):
    from deca.sim.measure.cli import SWEEP_L, SWEEP_W
    from deca.synth.cli import _grid

    grid = _grid(SWEEP_W, SWEEP_L)
    assert grid == [(W, L, 2) for W in (8, 16, 32, 64) for L in (4, 8, 16, 32, 64) if L <= W] and len(grid) == 14
    assert "skipping W=8, L=16" in capsys.readouterr().out


# Loader counts, without Yosys (the generic mapping replaced by fixed numbers) -----------------------

LOADER_DESIGN = "tout"  # one TOut buffer per loader: its Verilog differs with the loader count


def fake_transistors(top):
    """Numbers of the replaced mapping, different per design: 1000 x the loader count in the name."""
    return 1000 * int(top.rpartition("_ld")[2]) if "_ld" in top else 2000


@pytest.fixture
def fake_asic(monkeypatch):
    """flow.run_asic replaced: records the tops it maps and returns fixed numbers for them."""
    mapped = []

    def run_asic(work, verilog, top, source):
        mapped.append(top)
        n = fake_transistors(top)
        total = stats.BlockStats(cells={}, flip_flops=0, memory_bits=0, modules=[top], transistors=n, depth=7)
        return total, {"TOut": total}, 0.0

    monkeypatch.setattr(flow, "run_asic", run_asic)
    return mapped


def test_the_cache_keeps_loader_counts_apart(tmp_path, fake_asic):
    def synth(loaders):
        return flow.synthesize(8, 4, LOADER_DESIGN, tmp_path / "work", cache_dir=tmp_path / "cache", tech=GENERIC,
                               loaders=loaders)

    two, three = synth(2), synth(3)
    assert fake_asic == ["deca_tout_w8_l4", "deca_tout_w8_l4_ld3"]
    assert (two.loaders, two.total.transistors) == (2, 2000) and (three.loaders, three.total.transistors) == (3, 3000)
    assert two.verilog_sha256 != three.verilog_sha256
    assert synth(3) == three and synth(2) == two and len(fake_asic) == 2  # both from the cache
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2
    assert "tout, W=8, L=4, 3 loaders" in format_result(three)
    with pytest.raises(ParameterError, match="loaders must be one of 2, 3, 4"):
        synth(5)


@pytest.mark.parametrize("argv,error,message", [
    (["--loaders", "5"], ParameterError, "loaders must be one of 2, 3, 4"),
    (["--sweep", "--loaders", "2,1"], ParameterError, "got 1"),
    (["--loaders", "2,3"], UsageError, "give one --W, one --L and one --loaders, or --sweep for several"),
])
def test_cli_refuses_bad_loader_counts(argv, error, message, tmp_path, fake_asic):
    args = _parser().parse_args(["synth", "--tech", "generic", "--design", LOADER_DESIGN, "--W", "8", "--L", "4",
                                 *argv, "--out", str(tmp_path)])
    with pytest.raises(error, match=message):
        args.func(args)
    assert fake_asic == []


def test_loader_list_parses_and_bad_text_exits_2(capsys):
    assert _parser().parse_args(["synth", "--loaders", "2,4"]).loaders == [2, 4]
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(["synth", "--loaders", "2,three"])
    assert e.value.code == 2 and "expected comma-separated ints, got '2,three'" in capsys.readouterr().err


def test_the_sweep_grid_has_every_loader_count(capsys):
    from deca.synth.cli import _grid

    assert _grid([8, 32], [8], [2, 4]) == [(8, 8, 2), (8, 8, 4), (32, 8, 2), (32, 8, 4)]
    assert _grid([8], [4, 16], [3]) == [(8, 4, 3)]
    assert capsys.readouterr().out == "skipping W=8, L=16: more LUTs than elements per vOp\n"


def fake_result(W, L, loaders, transistors):
    total = stats.BlockStats(cells={}, flip_flops=0, memory_bits=0, modules=[], transistors=transistors, depth=1)
    return flow.SynthResult(top=f"deca_pe_w{W}_l{L}_ld{loaders}", design="pe", W=W, L=L, verilog_sha256="0",
                            total=total, blocks={}, seconds=0.0, loaders=loaders)


def measured_folder(folder, tflops):
    """A deca sweep results.json: two workloads per design of ``tflops`` {(W, L, loaders): (a, b)}."""
    folder.mkdir()
    records = [{"W": W, "L": L, "loaders": n, "mode": "tepl", "workload": w, "cycles_per_tile": 100 / t, "tflops": t}
               for (W, L, n), pair in tflops.items() for w, t in zip(("bf8@0.5", "bf8@0.05"), pair)]
    (folder / "results.json").write_text(json.dumps(records))
    return folder


def test_measured_throughput_joins_by_loader_count(tmp_path):
    measured = load_measured(measured_folder(tmp_path / "m", {(8, 4, 2): (4.0, 9.0), (8, 4, 3): (8.0, 18.0)}))
    assert measured == {(8, 4, 2): pytest.approx(6.0), (8, 4, 3): pytest.approx(12.0)}  # sqrt(4*9), sqrt(8*18)
    results = [fake_result(8, 4, 2, 2_000_000), fake_result(8, 4, 3, 3_000_000), fake_result(8, 4, 4, 4_000_000)]
    dse = area_dse(results, measured=measured)
    rows = {(r["W"], r["L"], r["loaders"]): r for r in dse.rows()}
    assert rows[8, 4, 2]["measured_per_area"] == pytest.approx(6.0 / 2)   # TFLOPS per M transistors
    assert rows[8, 4, 3]["measured_per_area"] == pytest.approx(12.0 / 3)
    assert rows[8, 4, 4]["measured_tflops"] is None   # not measured
    # The model has no loaders: one prediction, three costs; the fewest loaders are the cheapest.
    assert len({r["tflops"] for r in rows.values()}) == 1
    assert dse.best.design == (8, 4, 2) and dse.best_measured == (8, 4, 3)
    assert dse.chosen is None or dse.chosen.design == (8, 4, 2)


def test_cli_sweep_over_loaders_from_the_cache(tmp_path, fake_asic, capsys):
    """The sweep's workers find every design in the cache the in-process flow filled (no Yosys there)."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    for loaders in (2, 3):
        flow.synthesize(8, 4, LOADER_DESIGN, work, cache_dir=cache, tech=GENERIC, loaders=loaders)
    measured = measured_folder(tmp_path / "m", {(8, 4, 2): (1.0, 1.0), (8, 4, 3): (3.0, 3.0), (8, 4, 4): (5.0, 5.0)})
    out = tmp_path / "out"
    args = _parser().parse_args(["synth", "--sweep", "--tech", "generic", "--design", LOADER_DESIGN, "--W", "8",
                                 "--L", "4", "--loaders", "2,3", "--work-dir", str(work), "--cache", str(cache),
                                 "--out", str(out), "--measured", str(measured)])
    assert args.func(args) == 0
    assert len(fake_asic) == 2  # only the two runs above
    text = capsys.readouterr().out
    assert "W=8 L=4 loaders=3: 3,000 transistors" in text and "measured throughput: 3 designs" in text
    assert "highest measured throughput per area: {W=8, L=4, 3 loaders}" in text
    with open(out / "synth.csv", newline="") as f:
        rows = [(r["loaders"], r["top"], r["transistors"], float(r["measured_tflops"])) for r in csv.DictReader(f)]
    assert rows == [("2", "deca_tout_w8_l4", "2000", pytest.approx(1.0)),
                    ("3", "deca_tout_w8_l4_ld3", "3000", pytest.approx(3.0))]
    doc = json.loads((out / "synth.json").read_text())
    assert doc["dse"]["best_measured_throughput_per_area"] == [8, 4, 3]
    assert [r["loaders"] for r in doc["results"]] == [2, 3]
    for png in ("area_depth.png", "throughput_per_area.png"):
        assert (out / png).read_bytes().startswith(b"\x89PNG")
