"""Switching activity from a simulation (deca.synth.activity): toggle counts and their mapping onto nets.

Expected values come from independent references: toggle counts of a hand-written VCD counted by
hand, of a random VCD by a plain loop over its bits, rates by hand from those counts. The power
from a known activity is checked against the liberty text in test_synth_cells.py.
"""

import json

import numpy as np
import pytest

from deca.cli import main
from deca.synth import activity, cells, sram, sta
from deca.synth.liberty import read
from deca.synth.netlist import find, read_blif

DFF, INV = "DFFHQNx1_ASAP7_75t_R", "INVx1_ASAP7_75t_R"

#: A clock, a 4-bit q at the design's top and a 2-bit r in its submodule sub, under cocotb's TOP.
#: q: 0000 -> 0101 -> 0110 -> 0011 -> xxxx (0): bit 0 toggles 4 times, bit 1 twice, bit 2 twice,
#: bit 3 never. r: 00 -> 11 -> 01: bit 0 once, bit 1 twice. en: 0 -> 1 once; the initial values in
#: $dumpvars are no toggles. clk: 5 toggles, 2.5 cycles.
HAND_VCD = """$date today $end
$timescale 1ps $end
$scope module TOP $end
$var wire 1 ! clk $end
$scope module top $end
$var wire 1 ! clk $end
$var wire 4 " q [3:0] $end
$var wire 1 # en $end
$scope module sub $end
$var wire 2 $ r [1:0] $end
$upscope $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
$dumpvars
0!
b0000 "
0#
b00 $
$end
#5
1!
b101 "
1#
#10
0!
#15
1!
b0110 "
b11 $
#20
0!
b0011 "
#25
1!
bxxxx "
b01 $
"""


def test_toggle_counts_of_a_hand_written_vcd(tmp_path):
    path = tmp_path / "hand.vcd"
    path.write_text(HAND_VCD)
    t = activity.count_toggles(path)
    assert t.cycles == 2.5
    top = ("TOP", "top")
    assert t.signals[top]["q"] == (0, [4, 2, 2, 0])
    assert t.signals[top]["en"] == (0, [1])
    assert t.signals[top + ("sub",)]["r"] == (0, [1, 2])
    # The share of the trace's time (#0 to #25) a one-bit signal is 1: en from #5, clk 5 to 10 and 15
    # to 20; none for the buses.
    assert t.high[top]["en"] == {0: pytest.approx(20 / 25)} and t.high[top]["clk"] == {0: pytest.approx(10 / 25)}
    assert "q" not in t.high[top] and "r" not in t.high.get(top + ("sub",), {})
    assert t.scope_of("top") == top
    assert activity.Toggles.from_json(t.to_json()) == t


def test_toggle_counts_of_a_random_vcd_equal_a_plain_loop(tmp_path, seed):
    """A 70-bit bus and a scalar changing at random: every bit's toggles counted bit by bit."""
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    width, steps = 70, 400
    values = [rng.integers(0, 2, width) for _ in range(steps)]
    for v in values[::7]:
        v[:] = values[0]   # some steps change nothing
    flags = rng.integers(0, 2, steps)
    lines = ["$scope module top $end", "$var wire 1 ! clk $end", f"$var wire {width} % bus [{width + 9}:10] $end",
             "$var wire 1 & f $end", "$upscope $end", "$enddefinitions $end"]
    for i in range(steps):
        lines += [f"#{i * 10}", f"{i % 2}!", "b" + "".join(str(b) for b in values[i][::-1]) + " %", f"{flags[i]}&"]
    path = tmp_path / "random.vcd"
    path.write_text("\n".join(lines) + "\n")
    expected = [sum(int(values[i][b] != values[i - 1][b]) for i in range(1, steps)) for b in range(width)]
    t = activity.count_toggles(path)
    assert t.signals[("top",)]["bus"] == (10, expected)
    assert t.signals[("top",)]["f"] == (0, [sum(int(flags[i] != flags[i - 1]) for i in range(1, steps))])
    assert t.cycles == (steps - 1) / 2


# Mapping onto a netlist ---------------------------------------------------------------------------

#: top: a flip-flop whose output is the traced q[1], an inverter driving an unnamed net; its
#: submodule top.sub: a flip-flop on r[0] and an inverter on an unnamed net; top.quiet: nothing traced.
TINY = f""".model top
.inputs clk a
.outputs y
.subckt {DFF} CLK=clk D=a QN=q[1]
.subckt {INV} A=q[1] Y=_1_
.subckt top.sub clk=clk i=_1_ o=y
.subckt top.quiet clk=clk i=a
.end
.model top.sub
.inputs clk i
.outputs o
.subckt {DFF} CLK=clk D=i QN=r[0]
.subckt {INV} A=r[0] Y=o
.end
.model top.quiet
.inputs clk i
.outputs
.subckt {INV} A=i Y=_2_
.end
"""


@pytest.fixture(scope="module")
def library():
    return read(cells.ASAP7_LIBERTIES)


def _design(tmp_path, library, text=TINY):
    (tmp_path / "tiny.blif").write_text(text)
    return sta.Design(read_blif(tmp_path / "tiny.blif", gates=False), "top", lambda m: m, library, sram.fit())


def _net(design, module, name):
    base = dict(design.placed)[module]
    return find(design.parent, base + design.models[module].nets[name])


def test_rates_by_name_and_module_average(tmp_path, library):
    design = _design(tmp_path, library)
    path = tmp_path / "hand.vcd"
    path.write_text(HAND_VCD)
    rates, named = activity.net_rates(design, activity.count_toggles(path))
    cycles = 2.5
    # q[1] and r[0] are traced; y is the sub's o, not traced under that name in either scope.
    assert rates[_net(design, "top", "q[1]")] == pytest.approx(2 / cycles)
    assert rates[_net(design, "top.sub", "r[0]")] == pytest.approx(1 / cycles)
    # Unnamed nets: the module's average per traced bit: top traces clk (5), q (8 in 4 bits), en (1).
    assert rates[_net(design, "top", "_1_")] == pytest.approx((5 + 8 + 1) / 6 / cycles)
    assert rates[_net(design, "top.sub", "o")] == pytest.approx((1 + 2) / 2 / cycles)
    # top.quiet has no scope in the trace: the whole design's average per traced bit.
    assert rates[_net(design, "top.quiet", "_2_")] == pytest.approx((5 + 8 + 1 + 3) / 8 / cycles)
    assert named == pytest.approx(2 / 5)


def test_duties_of_traced_one_bit_nets(tmp_path, library):
    """A net named like a traced one-bit signal gets its share of time at 1 (a clock gate's enable);
    the bits of buses and untraced nets get none (the power takes its default for them)."""
    text = TINY.replace(".inputs clk a\n", ".inputs clk a en\n").replace(
        ".subckt top.quiet", f".subckt {INV} A=en Y=_3_\n.subckt top.quiet")
    design = _design(tmp_path, library, text)
    path = tmp_path / "hand.vcd"
    path.write_text(HAND_VCD)
    duties = activity.net_duties(design, activity.count_toggles(path))
    assert duties == {_net(design, "top", "en"): pytest.approx(20 / 25), _net(design, "top", "clk"): pytest.approx(0.4)}


# Bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("content,message", [
    (None, "cannot read the trace"),
    ("$scope module top $end\n$var wire 1 ! clk $end\n", "is not a VCD file"),
    ("$scope module top $end\n$var wire 1 ! a $end\n$upscope $end\n$enddefinitions $end\n#0\n0!\n#1\n1!\n",
     "no clock 'clk' that toggles"),
])
def test_bad_trace_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "t.vcd"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as e:
        main(["synth", "--design", "datapath", "--W", "8", "--L", "2", "--vcd", str(path), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_trace_of_another_design_is_refused(tmp_path, capsys):
    """A VCD whose scopes do not hold the design's top module: refused before any synthesis."""
    path = tmp_path / "other.vcd"
    path.write_text(HAND_VCD)
    with pytest.raises(SystemExit) as e:
        main(["synth", "--design", "datapath", "--W", "8", "--L", "2", "--vcd", str(path), "--out", str(tmp_path),
              "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "has no scope of design deca_datapath_w8_l2" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "work" / "deca_datapath_w8_l2" / "front.il").exists()


@pytest.mark.parametrize("args,message", [
    (["--activity", "bf9@0.5"], "--activity takes scheme@density"),
    (["--activity", "bf8@1.5"], "--activity takes scheme@density"),
    (["--activity", "every"], "--activity takes scheme@density with a scheme of"),
    (["--activity", "--activity-tiles", "0"], "--activity-tiles must be a positive number"),
    (["--activity", "--vcd", "x.vcd"], "not both"),
    (["--activity", "--tech", "generic"], "--tech generic does not compute"),
    (["--vcd", "x.vcd", "--sweep"], "a sweep takes --activity WORKLOAD"),
])
def test_bad_activity_options(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        main(["synth", *args, "--out", str(tmp_path), "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_workload_trace_of_the_pe(tmp_path, monkeypatch):
    """A few tiles on the smallest PE on Verilator: the trace's clock counts the measured cycles,
    the PE's registers toggle, and the counts are cached by the Verilog and the workload."""
    from deca.hw.generate import generate, top_name
    from deca.sim.measure import trace

    top = top_name("pe", 8, 4)
    verilog = generate(8, 4, tmp_path / "v")
    workload = activity.Workload(tiles=4)
    t = activity.workload_toggles(verilog, top, 8, 4, workload, tmp_path / "activity")
    record = next((tmp_path / "activity" / "records").glob("*.json"))
    # The trace also holds the reset and the LUTs' configuration before the measured cycles.
    assert t.cycles >= json.loads(record.read_text())["cycles"] > 0
    root = t.scope_of(top)
    assert sum(sum(c) for _, c in t.signals[root].values()) > 0
    assert "bf8@0.5 tepl, 4 tiles" in t.workload

    def no_simulation(*args, **kwargs):
        raise AssertionError("the cached counts were not used")

    monkeypatch.setattr(trace, "record_trace", no_simulation)
    assert activity.workload_toggles(verilog, top, 8, 4, workload, tmp_path / "activity") == t


# Several workloads --------------------------------------------------------------------------------

COUNTER = """module counter(input clk, input rst, input en, output reg [7:0] q);
  always @(posedge clk) if (rst) q <= 8'd0; else if (en) q <= q + 8'd1;
endmodule
"""


def _counter_vcd(path, every, cycles=64):
    """A trace of COUNTER counting on one cycle in ``every``."""
    lines = ["$scope module TOP $end", "$scope module counter $end", "$var wire 1 ! clk $end",
             "$var wire 1 # en $end", '$var wire 8 " q [7:0] $end', "$upscope $end", "$upscope $end",
             "$enddefinitions $end", "#0", "$dumpvars", "0!", "0#", 'b0 "', "$end"]
    q = 0
    for c in range(cycles):
        en = c % every == 0
        q = (q + en) % 256
        lines += [f"#{10 * c + 5}", "1!", f"{int(en)}#", f'b{q:b} "', f"#{10 * c + 10}", "0!"]
    path.write_text("\n".join(lines) + "\n")
    return activity.count_toggles(path)


def test_power_of_several_workloads_and_their_maximum(tmp_path):
    """Two traces of one counter, counting every cycle and every eighth: each workload's power per
    block is what its trace alone gives, the blocks' table is the busier one's, the maximum row the
    per-block maximum, the vectorless row the vectorless figure."""
    from deca.synth import flow, report

    (tmp_path / "counter.v").write_text(COUNTER)
    busy, idle = _counter_vcd(tmp_path / "busy.vcd", 1), _counter_vcd(tmp_path / "idle.vcd", 8)
    work = tmp_path / "work"
    both = flow.synthesize_file(tmp_path / "counter.v", "counter", work, toggles=[idle, busy])
    alone = [flow.synthesize_file(tmp_path / "counter.v", "counter", work, toggles=t) for t in (idle, busy)]
    runs = both.power["workloads"]
    assert [w["workload"] for w in runs] == [idle.workload, busy.workload]
    for run, single in zip(runs, alone):
        assert run["blocks_mw"] == pytest.approx({b: s.power_mw for b, s in single.blocks.items()})
    assert alone[1].total.power_mw > alone[0].total.power_mw
    assert both.total.power_mw == pytest.approx(alone[1].total.power_mw)
    assert both.power["workload"] == busy.workload
    rows = report.workload_power_rows(both)
    assert [r["activity"] for r in rows[:2]] == [idle.workload, busy.workload]
    assert rows[2]["activity"] == "maximum per block"
    for block in both.blocks:
        assert rows[2][block] == pytest.approx(max(s.blocks[block].power_mw for s in alone))
        assert rows[3][block] == pytest.approx(both.blocks[block].leakage_mw + both.blocks[block].vectorless_dynamic_mw)
    text = report.format_result(both)
    assert "power per block and workload" in text and "maximum per block" in text


def test_activity_without_a_workload_runs_every_workload_of_deca_run(tmp_path, monkeypatch):
    """--activity alone (or 'all') asks for each of deca run's workloads in the chosen mode."""
    from deca.errors import UsageError
    from deca.sim.measure.cli import RUN_WORKLOADS
    from deca.synth import cli

    asked = []

    def synthesize(*args):
        asked.append(args[7])
        raise UsageError("stop here")

    monkeypatch.setattr(cli, "synthesize", synthesize)
    for extra in ([], ["all"], ["bf16@0.5"]):
        with pytest.raises(SystemExit):
            main(["synth", "--W", "8", "--L", "4", "--activity", *extra, "--activity-mode", "store",
                  "--out", str(tmp_path)])
    assert [[w.name for w in a] for a in asked] == [list(RUN_WORKLOADS), list(RUN_WORKLOADS), ["bf16@0.5"]]
    assert {w.mode for a in asked for w in a} == {"store"}
