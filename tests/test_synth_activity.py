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

DFF, INV, NAND = "DFFHQNx1_ASAP7_75t_R", "INVx1_ASAP7_75t_R", "NAND2x1_ASAP7_75t_R"

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
    # NANDs in place of TINY's inverters: their outputs toggle unlike either input.
    text = TINY.replace(f"{INV} A=q[1] Y=_1_", f"{NAND} A=q[1] B=a Y=_1_").replace(f"{INV} A=r[0] Y=o",
                                                                                   f"{NAND} A=r[0] B=i Y=o")
    design = _design(tmp_path, library, text)
    path = tmp_path / "hand.vcd"
    path.write_text(HAND_VCD)
    rates, estimated = activity.net_rates(design, activity.count_toggles(path))
    cycles = 2.5
    # q[1] and r[0] are traced; y is the sub's o, not traced under that name in either scope.
    assert rates[_net(design, "top", "q[1]")] == pytest.approx(2 / cycles)
    assert rates[_net(design, "top.sub", "r[0]")] == pytest.approx(1 / cycles)
    # Unnamed nets: the module's average per traced bit: top traces clk (5), q (8 in 4 bits), en (1).
    assert rates[_net(design, "top", "_1_")] == pytest.approx((5 + 8 + 1) / 6 / cycles)
    assert rates[_net(design, "top.sub", "o")] == pytest.approx((1 + 2) / 2 / cycles)
    # top.quiet has no scope in the trace: the whole design's average per traced bit.
    assert rates[_net(design, "top.quiet", "_2_")] == pytest.approx((5 + 8 + 1 + 3) / 8 / cycles)
    assert estimated == {_net(design, "top", "_1_"), _net(design, "top.sub", "o"), _net(design, "top.quiet", "_2_")}


def test_rates_across_inverters(tmp_path, library):
    """An inverter's input and output toggle together: a flip-flop's unnamed output in front of an
    inverter to a traced name takes that name's rate, and so does the inverter after a traced net."""
    text = TINY.replace(f".subckt {DFF} CLK=clk D=a QN=q[1]", f".subckt {DFF} CLK=clk D=a QN=_0_\n"
                        f".subckt {INV} A=_0_ Y=q[1]")
    design = _design(tmp_path, library, text)
    path = tmp_path / "hand.vcd"
    path.write_text(HAND_VCD)
    rates, estimated = activity.net_rates(design, activity.count_toggles(path))
    for net in (_net(design, "top", "_0_"), _net(design, "top", "_1_")):
        assert rates[net] == pytest.approx(2 / 2.5) and net not in estimated


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
    # A Verilog wire named $en (Amaranth's $288): BLIF writes it \$en, the trace $en.
    design = _design(tmp_path, library, text.replace(" en", " \\$en").replace("=en", "=\\$en"))
    path.write_text(HAND_VCD.replace(" en $end", " $en $end"))
    duties = activity.net_duties(design, activity.count_toggles(path))
    assert duties[_net(design, "top", "\\$en")] == pytest.approx(20 / 25)


# Memories in flip-flops ---------------------------------------------------------------------------

#: One memory in flip-flops, 8 rows of two bytes each written under its own enable (the SQQ's
#: form), with a registered read (the sub-LUTs'), and a register acc loading with the low byte.
MEMORY = """module memt(input clk, input [1:0] we, input [2:0] wa, input [15:0] wd, input [2:0] ra,
            output reg [15:0] rd, output reg [7:0] acc);
  reg [15:0] m [0:7];
  always @(posedge clk) begin
    if (we[0]) m[wa][7:0] <= wd[7:0];
    if (we[1]) m[wa][15:8] <= wd[15:8];
    if (we[0]) acc <= wd[7:0];
    rd <= m[ra];
  end
endmodule
"""
#: {cycle: (row, data, byte enables)}: row 5 written whole twice (0 -> 0x00ff -> 0x0f0f), row 2's low
#: byte once (0x8001: 0x01 written), row 7 in the last edge's time step (after the edge: no write).
WRITES = {4: (5, 0x00FF, 3), 11: (5, 0x0F0F, 3), 30: (2, 0x8001, 1), 40: (7, 0xFFFF, 3)}


def _memory_vcd(path, writes, cycles=40, seed=0):
    """A trace of MEMORY: ``writes`` {cycle: (row, data, enables)}; on the other cycles we is 0 while
    wa, wd and ra take random values. Inputs change in the rising edge's time step, after the edge,
    though the trace lists them before the clock."""
    rng = np.random.default_rng(seed)
    lines = ["$scope module TOP $end", "$scope module memt $end", "$var wire 1 ! clk $end", "$var wire 2 # we $end",
             "$var wire 3 $ wa [2:0] $end", "$var wire 16 % wd [15:0] $end", "$var wire 3 & ra [2:0] $end",
             "$upscope $end", "$upscope $end", "$enddefinitions $end", "#0", "$dumpvars", "0!", "0#", "b0 $", "b0 %",
             "b0 &", "$end"]
    for c in range(cycles):
        row, data, we = writes.get(c + 1, (int(rng.integers(8)), int(rng.integers(1 << 16)), 0))
        lines += [f"#{10 * c + 5}", f"b{we:b} #", f"b{row:b} $", f"b{data:b} %",
                  f"b{int(rng.integers(8)):b} &", "1!", f"#{10 * c + 10}", "0!"]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """MEMORY mapped (without toggles): its work folder and write ports."""
    from deca.synth import flow

    folder = tmp_path_factory.mktemp("memory")
    (folder / "memt.v").write_text(MEMORY)
    flow.synthesize_file(folder / "memt.v", "memt", folder / "work")
    return folder, *flow.replayed(folder / "work", "memt.v", "memt")


def _mapped(folder, library):
    """MEMORY's mapped netlist as the flow reads it: its words are flip-flops with an inverted output,
    whose nets get their rows' names back (``name_flop_outputs``)."""
    design = sta.Design(read_blif(folder / "work" / "netlist.blif", gates=False), "memt", str, library, sram.fit())
    activity.name_flop_outputs(design.models, folder / "work" / "pregate.il", library)
    return design


def test_write_ports_of_rtlil_signals():
    wires = {"we": (0, 1), "x": (2, 4)}
    assert activity._sigspec("{ \\we [0] 2'10 \\x [4:3] }", wires) == [("x", 3), ("x", 4), 0, 1, ("we", 0)]
    assert activity._sigspec("\\x", wires) == [("x", 2), ("x", 3), ("x", 4), ("x", 5)]


def test_memory_rows_from_replayed_writes(memory, tmp_path, seed):
    """WRITES in 40 cycles: each bit's writes and toggles as written by hand, and nothing for the
    rows never written, though the address and data change every cycle with the enables low."""
    folder, ports, registers = memory
    assert [(p.memory, p.words, p.offset, len(p.data)) for p in ports] == [("m", 8, 0, 16)]
    print(f"seed {seed}")
    _memory_vcd(tmp_path / "m.vcd", WRITES, seed=seed)
    t = activity.count_toggles(tmp_path / "m.vcd", ports=ports, top="memt")
    writes, toggles = t.memories[("TOP", "memt")]["m"]
    assert writes[5] == [2] * 16 and writes[2] == [1] * 8 + [0] * 8
    assert all(writes[r] == [0] * 16 for r in (0, 1, 3, 4, 6, 7))
    assert toggles[5] == [1] * 4 + [2] * 4 + [1] * 4 + [0] * 4
    assert toggles[2] == [1] + [0] * 15
    assert all(toggles[r] == [0] * 16 for r in (0, 1, 3, 4, 6, 7))
    assert activity.Toggles.from_json(t.to_json()) == t


def test_gated_rows_take_their_write_rate(memory, tmp_path, library, seed):
    """In the mapped memory each byte of a row is a clock-gated bank: its gate's enable duty is the
    byte's writes per cycle (0 for one never written, not the default 0.5), each bit's rate its
    toggles per cycle; without the replay the gates have no duty and the bits the module's average."""
    folder, ports, registers = memory
    _memory_vcd(tmp_path / "m.vcd", WRITES, seed=seed)
    t = activity.count_toggles(tmp_path / "m.vcd", ports=ports, top="memt")
    design = _mapped(folder, library)
    lib = design.library.cells
    gates = {}   # (row, byte) -> its gate's enable net
    for _, kind, pins, _ in design.cells:
        if lib[kind].clock_gate:
            _, enable, gated = lib[kind].clock_gate
            pins = dict(pins)
            names = {design.net_name(dict(ps)[lib[k].outputs[0]]) for _, k, ps, _ in design.cells
                     if lib[k].sequential and not lib[k].clock_gate
                     and dict(ps)[next(p for p in lib[k].pins if lib[k].pins[p].clock)] == pins[gated]}
            rows = [activity._ROW_BIT.match(name) for name in names]
            if all(row and row.group(1) == "m" for row in rows):   # not acc's gate
                banks = {(int(row.group(2)), int(row.group(3)) // 8) for row in rows}
                assert len(banks) == 1
                gates[banks.pop()] = pins[enable]
    assert sorted(gates) == [(row, byte) for row in range(8) for byte in (0, 1)]
    duties = activity.net_duties(design, t)
    expected = {(2, 0): 1 / 40, (5, 0): 2 / 40, (5, 1): 2 / 40}
    assert {bank: duties[net] for bank, net in gates.items()} == {b: pytest.approx(expected.get(b, 0.0))
                                                                  for b in gates}
    rates, estimated = activity.net_rates(design, t)
    bit = _net(design, "memt", "m.row[5].q[4]")
    assert rates[bit] == pytest.approx(2 / 40) and bit not in estimated
    assert rates[_net(design, "memt", "m.row[0].q[0]")] == 0.0
    plain = activity.count_toggles(tmp_path / "m.vcd")
    assert not set(gates.values()) & set(activity.net_duties(design, plain))
    assert bit in activity.net_rates(design, plain)[1]


def test_gated_register_takes_its_load_rate(memory, tmp_path, library, seed):
    """acc loads when we[0] is 1 before an edge: at 3 of the 40 edges (WRITES' fourth write comes
    after the last), so its clock gate's duty is 3 / 40, whatever the trace's time at 1 of we."""
    folder, ports, registers = memory
    assert [(r.enable, r.polarity, r.q) for r in registers] == [(("we", 0), 1, tuple(("acc", k) for k in range(8)))]
    _memory_vcd(tmp_path / "m.vcd", WRITES, seed=seed)
    t = activity.count_toggles(tmp_path / "m.vcd", top="memt", registers=registers)
    assert t.loads[("TOP", "memt")] == {"acc": dict.fromkeys(range(8), 3)}
    design = _mapped(folder, library)
    lib = design.library.cells
    acc = _net(design, "memt", "acc[0]")
    kind, pins = next((kind, dict(pins)) for _, kind, pins, _ in design.cells
                      if lib[kind].sequential and acc in dict(pins).values())
    clock = pins[next(pin for pin in pins if pin in lib[kind].pins and lib[kind].pins[pin].clock)]
    index, gate = design.gate_of(clock)
    enable = dict(design.cells[index][2])[gate.clock_gate[1]]
    assert activity.net_duties(design, t)[enable] == pytest.approx(3 / 40)
    assert enable not in activity.net_duties(design, activity.count_toggles(tmp_path / "m.vcd"))


def test_estimated_power_is_what_the_estimates_add(memory, tmp_path, library, seed):
    """The estimated share is the dynamic power that the averaged nets and the gates at the default duty
    add: doubling those rates, or raising that duty from 0.5 to 1, adds exactly it; with the memory
    replayed no gate is at the default, and the report says how much is estimated."""
    from deca.synth import flow, report

    folder, ports, registers = memory
    _memory_vcd(tmp_path / "m.vcd", WRITES, seed=seed)
    design = _mapped(folder, library)
    for t in (activity.count_toggles(tmp_path / "m.vcd"),
              activity.count_toggles(tmp_path / "m.vcd", ports=ports, top="memt", registers=registers)):
        rates, estimated = activity.net_rates(design, t)
        duties = activity.net_duties(design, t)
        nets, gates, defaults = activity.estimated_power(design, cells.POWER_GHZ, rates, estimated, duties)["memt"]
        assert defaults == sum(lib.clock_gate is not None and dict(pins)[lib.clock_gate[1]] not in duties
                               for _, kind, pins, _ in design.cells for lib in [design.library.cells[kind]])

        def dynamic(scale, default):
            return sta.power(design, cells.POWER_GHZ, lambda n: rates[n] * (scale if n in estimated else 1), "",
                             lambda n: duties.get(n, default)).dynamic_mw["memt"]

        assert dynamic(2, 0.5) - dynamic(1, 0.5) == pytest.approx(nets) and nets > 0
        assert dynamic(1, 1.0) - dynamic(1, 0.5) == pytest.approx(gates)
    assert gates == 0.0 and defaults == 0
    (tmp_path / "memt.v").write_text(MEMORY)
    r = flow.synthesize_file(tmp_path / "memt.v", "memt", folder / "work", toggles=t)
    run = r.power["workloads"][0]
    assert run["estimated_mw"]["other"] == pytest.approx([nets, 0.0, 0])
    share = f"{nets:.1f} of {run['dynamic_mw']:.1f} mW dynamic ({nets / run['dynamic_mw']:.0%})"
    assert share in report.format_result(r)


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
