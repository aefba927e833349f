"""The signoff inputs: the SDC's period and budgets, and macro liberty cells OpenSTA reads back."""

import json
import shutil
import subprocess

import pytest

from deca.cli import main
from deca.synth import report, signoff, sram
from deca.synth.flow import SynthResult
from deca.toolchain import ToolError


def test_sdc_period_and_half_period_budgets():
    text = signoff.sdc(400)
    assert "create_clock -name clk -period 400 [get_ports clk]" in text
    assert "set_input_delay 200 -clock clk [delete_from_list [all_inputs] [get_ports clk]]" in text
    assert "set_output_delay 200 -clock clk [all_outputs]" in text


@pytest.mark.parametrize("period", [0, -400])
def test_sdc_period_must_be_positive(period):
    with pytest.raises(ValueError, match=f"the SDC clock period must be positive, got {period} ps"):
        signoff.sdc(period)


MACRO = {"words": 64, "width": 2, "kind": "1rw", "copies": 1, "area": 1140.0,
         "pins": ["RD_CLK[0]", "WR_CLK[0]", "RD_ADDR[0]", "RD_ADDR[1]", "WR_ADDR[0]", "WR_ADDR[1]", "WR_DATA[0]",
                  "WR_DATA[1]", "WR_EN[0]", "RD_DATA[0]", "RD_DATA[1]"]}


@pytest.mark.skipif(shutil.which("sta") is None,
                    reason="OpenSTA (sta) is not installed (scripts/bootstrap.sh installs it)")
def test_macro_liberty_read_back_by_opensta(tmp_path):
    model = sram.fit()
    (tmp_path / "macros.lib").write_text(signoff.macro_liberty([MACRO, {**MACRO, "kind": "cells"}], model))
    (tmp_path / "run.tcl").write_text("\n".join([
        "read_liberty macros.lib",
        "report_lib_cell deca_macros/deca_macro_64x2", "exit", ""]))
    run = subprocess.run(["sta", "-no_splash", "-exit", "run.tcl"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    out = run.stdout + run.stderr
    print(out)
    assert "Error" not in out and "Warning" not in out and "Cell deca_macro_64x2" in out
    assert "area : 1140.000;" in (tmp_path / "macros.lib").read_text()
    for pin in MACRO["pins"]:
        assert signoff.liberty_pin(pin) in out


@pytest.mark.skipif(shutil.which("sta") is None,
                    reason="OpenSTA (sta) is not installed (scripts/bootstrap.sh installs it)")
def test_opensta_times_paths_out_of_and_into_a_macro(tmp_path):
    """A flip-flop fed by a macro's read data gets it the access time after the clock; a macro input
    fed by an input port must arrive the macro's setup time before the next edge."""
    import gzip

    from deca.synth import cells

    model = sram.fit()
    (tmp_path / "macros.lib").write_text(signoff.macro_liberty([MACRO], model))
    seq = next(p for p in cells.ASAP7_LIBERTIES if "SEQ" in p.name)
    (tmp_path / "seq.lib").write_bytes(gzip.decompress(seq.read_bytes()) if seq.suffix == ".gz" else seq.read_bytes())
    pins = ", ".join(f".{signoff.liberty_pin(p)}({'clk' if 'CLK' in p else 'd' if p == 'RD_DATA[0]' else 'a'})"
                     for p in MACRO["pins"] if p != "RD_DATA[1]")
    (tmp_path / "top.v").write_text("\n".join([
        "module top(input clk, input a, output y);", "  wire d;", f"  deca_macro_64x2 m ({pins});",
        "  DFFHQNx1_ASAP7_75t_R f (.CLK(clk), .D(d), .QN(y));", "endmodule", ""]))
    (tmp_path / "run.tcl").write_text("\n".join([
        "read_liberty seq.lib", "read_liberty macros.lib", "read_verilog top.v", "link_design top",
        "create_clock -name clk -period 400 [get_ports clk]", "set_input_delay 200 -clock clk [get_ports a]",
        "report_checks -to [get_pins f/D] -digits 1", "report_checks -to [get_pins m/RD_ADDR_0] -digits 1", "exit", ""]))
    run = subprocess.run(["sta", "-no_splash", "-exit", "run.tcl"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    out = run.stdout + run.stderr
    print(out)
    lines = [line.split() for line in out.splitlines()]
    access, setup = f"{model.access_ps:.1f}", f"{model.setup_ps:.1f}"
    assert [access, access, "^", "m/RD_DATA_0", "(deca_macro_64x2)"] in lines
    assert [f"-{setup}", f"{400 - model.setup_ps:.1f}", "library", "setup", "time"] in lines


# OpenSTA on a synthesized unit ------------------------------------------------------------------

needs_sta = pytest.mark.skipif(shutil.which("sta") is None,
                               reason="OpenSTA (sta) is not installed (scripts/bootstrap.sh installs it)")


@needs_sta
def test_signoff_of_a_unit_agrees_with_our_sta(tmp_path, capsys):
    """``deca synth --signoff`` on one BF16 multiplier with registers on its ports (795 ps of logic):
    OpenSTA's worst register-to-register path, taken from its slack, within 1% of deca.synth.sta's.
    Both follow the same NLDM tables edge by edge (on hand netlists they agree to 0.001 ps,
    test_synth_cells.py); on this mapped netlist ours is 1.3 ps (0.2%) longer: OpenSTA propagates
    the constants tied to the adder's inputs and disables the arcs they block, ours times those
    paths too. One delay missed or counted twice on the path is 10 to 40 ps, 1.3 to 5%."""
    main(["synth", "--design", "bf16_scaler", "--W", "8", "--L", "2", "--signoff", "--out", str(tmp_path / "out"),
          "--work-dir", str(tmp_path / "work")])
    text = capsys.readouterr().out
    work = tmp_path / "work" / "deca_bf16_scaler_w8_l2"
    result = SynthResult.from_dict(json.loads(next((tmp_path / "out" / "cache").glob("*.json")).read_text()))
    s, t = result.signoff, result.timing
    log = (work / "signoff.log").read_text()
    print(text, log, sep="\n")
    assert "Error" not in log and s["warnings"] == 0
    clk = s["groups"]["clk"]
    assert s["critical_ps"] == pytest.approx(400 - clk["slack_ps"])
    assert s["critical_ps"] == pytest.approx(t["critical_ps"], rel=0.01)
    assert s["critical_diff"] == pytest.approx(s["critical_ps"] / t["critical_ps"] - 1)
    assert s["wns_ps"] == pytest.approx(min(g["slack_ps"] for g in s["groups"].values()))
    # Input to register and register to output: a flip-flop on each side, the same clock-to-Q arc.
    assert s["io_ps"] == pytest.approx(t["io_ps"], rel=0.01)
    # Both paths run between the port registers of the multiplier: operand in, product out.
    assert clk["start"].startswith("port_") and clk["end"].startswith("result[")
    assert t["path"][0]["net"].startswith("port_") and t["path"][-1]["net"].startswith("result[")
    assert f"OpenSTA {s['version']} signoff" in text and f"from {clk['start']} to {clk['end']}" in text
    # A sweep's row (deca synth --sweep --signoff) carries OpenSTA's path beside ours.
    row = report.sweep_rows([result])[0]
    assert (row["signoff_ps"], row["signoff_diff"]) == (s["critical_ps"], s["critical_diff"])
    assert "OpenSTA ps" in report.format_sweep([result])


def test_parse_of_an_opensta_report():
    """The worst path of each group, from a report in OpenSTA 2.0's format (abridged)."""
    def path(start, end, group, arrival, required):
        return (f"Startpoint: {start} (rising edge-triggered flip-flop clocked by clk)\nEndpoint: {end} "
                f"(output port clocked by clk)\nPath Group: {group}\nPath Type: max\n\n"
                f"  {arrival:.3f}   data arrival time\n\n {required:.3f}  {required:.3f}   library setup time\n"
                f"         {required:.3f}   data required time\n-----\n"
                f"  {required - arrival:.3f}   slack ({'MET' if required >= arrival else 'VIOLATED'})\n\n")

    # A long name's kind goes to the next line.
    text = (path("a[0]", "b", "in2reg", 250.0, 390.0) + path("q", "y[1]", "reg2out", 80.0, 200.0)
            + path("x\n           ", "z\n         ", "clk", 420.0, 398.0) + "wns -22.000\ntns -30.500\n")
    s = signoff.parse(text, 400)
    assert s["groups"]["clk"] == {"start": "x", "start_kind": "rising edge-triggered flip-flop clocked by clk",
                                  "end": "z", "end_kind": "output port clocked by clk", "arrival_ps": 420.0,
                                  "required_ps": 398.0, "slack_ps": -22.0}
    assert s["critical_ps"] == 422.0 and s["io_ps"] == 200.0 - 120.0 and s["through_ps"] == 0.0
    assert s["period_ps"] == 422.0 and (s["wns_ps"], s["tns_ps"]) == (-22.0, -30.5)
    with pytest.raises(ToolError, match="OpenSTA reported no register-to-register path"):
        signoff.parse(path("a[0]", "b", "in2reg", 250.0, 390.0), 400)


@pytest.mark.parametrize("args,message", [
    (["--signoff"], "--signoff runs OpenSTA, but there is no 'sta' on PATH"),
    (["--signoff", "--tech", "generic"], "--signoff times standard cells"),
])
def test_bad_signoff_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, args, message):
    """Refused before any synthesis; OpenSTA missing is simulated by a PATH without it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as e:
        main(["synth", "--design", "bf16_scaler", "--W", "8", "--L", "2", *args, "--out", str(tmp_path / "out"),
              "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "work").exists()


@needs_sta
def test_buffer_trees_are_real_buffers_opensta_times_alike(tmp_path):
    """One flip-flop driving 300 inverters, far beyond its max_capacitance: deca.synth.sta times the
    net through a buffer tree, netlist.v carries that tree as buffers, and OpenSTA's register-to-
    register path through them is ours within 1% (ours assumes equal shares of the load)."""
    from deca.synth import cells, sta
    from deca.synth.liberty import read
    from deca.synth.netlist import read_blif

    dff, inv, n = "DFFHQNx1_ASAP7_75t_R", "INVx1_ASAP7_75t_R", 300
    lines = [".model top", ".inputs clk a", ".outputs y", f".subckt {dff} CLK=clk D=a QN=q"]
    lines += [f".subckt {inv} A=q Y=x{i}" for i in range(n)]
    lines += [f".subckt {dff} CLK=clk D=x{i} QN=r{i}" for i in range(n)]
    lines += [f".subckt {inv} A=r0 Y=y", ".end", ""]
    (tmp_path / "top.blif").write_text("\n".join(lines))
    design = sta.Design(read_blif(tmp_path / "top.blif", gates=False), "top", str, read(cells.ASAP7_LIBERTIES),
                        sram.fit())
    assert design.trees
    timing = sta.timing(design)
    s = _signoff(tmp_path, design, timing, [])
    text = (tmp_path / signoff.NETLIST_V).read_text()
    print((tmp_path / "signoff.log").read_text())
    print(f"OpenSTA {s['critical_ps']:.2f} ps, ours {timing.critical_ps:.2f} ps through {len(design.trees)} trees")
    assert text.count(design.buffer.name) == sum(design.tree_buffers(net) for net in design.trees)
    assert s["critical_ps"] == pytest.approx(timing.critical_ps, rel=0.01)


def _signoff(work, design, timing, macros):
    """``signoff.run`` on ``design`` in ``work``: the ASAP7 liberties, the SDC at 400 ps and the
    liberty of ``macros`` (macro dicts, as deca.synth.cells._macro_list makes them) written there."""
    import gzip

    from deca.synth import cells

    libs = []
    for path in cells.ASAP7_LIBERTIES:
        libs.append(path.name.removesuffix(".gz"))
        (work / libs[-1]).write_bytes(gzip.decompress(path.read_bytes()))
    (work / signoff.SDC).write_text(signoff.sdc(400))
    (work / signoff.MACROS_LIB).write_text(signoff.macro_liberty(macros, sram.fit()))
    return signoff.run(work, design, libs, 400, timing)


@needs_sta
@pytest.mark.parametrize("drives", ["data", "address"])
def test_every_macro_pin_loads_its_net_as_opensta_counts_it(tmp_path, drives):
    """A flip-flop drives the sixteen write-data pins of one 1rw macro (80 fF, over its 46 fF
    max_capacitance: a buffer tree), or its six address bits, each a read and a write address pin on
    one net but one pin of the macro (30 fF, the read address has no capacitance of its own), and an
    inverter into a second flip-flop: deca.synth.sta counts every pin as OpenSTA does, so the two
    critical paths through that load agree (within 1% through a tree: ours assumes equal shares)."""
    from deca.synth import cells, sta
    from deca.synth.liberty import read
    from deca.synth.netlist import read_blif

    dff, inv = "DFFHQNx1_ASAP7_75t_R", "INVx1_ASAP7_75t_R"
    model = sram.fit()
    words, width, abits = 64, 16, 6
    data = {f"WR_DATA[{i}]": "q" if drives == "data" else "e" for i in range(width)}
    address = {f"{port}[{i}]": "q" if drives == "address" else f"a{i}" for port in ("RD_ADDR", "WR_ADDR")
               for i in range(abits)}
    pins = {"RD_CLK[0]": "clk", "WR_CLK[0]": "clk", **address, **data, **{f"WR_EN[{i}]": "e" for i in range(width)}}
    lines = [".model top", ".inputs clk e " + " ".join(f"a{i}" for i in range(abits)), ".outputs y",
             f".subckt {dff} CLK=clk D=y QN=q", f".subckt {inv} A=q Y=x", f".subckt {dff} CLK=clk D=x QN=y",
             ".subckt $mem_v2 " + " ".join(f"{pin}={net}" for pin, net in pins.items()),
             f".param SIZE {words:b}", f".param WIDTH {width:b}", ".end", ""]
    (tmp_path / "top.blif").write_text("\n".join(lines))
    design = sta.Design(read_blif(tmp_path / "top.blif", gates=False), "top", str, read(cells.ASAP7_LIBERTIES),
                        model)
    q = next(net for net in design.driver if design.net_name(net) == "q")
    pin_count = width if drives == "data" else abits
    inverter = read(cells.ASAP7_LIBERTIES).cells[inv].pins["A"].capacitance
    assert design.load[q] == pytest.approx(pin_count * model.input_cap_ff + inverter)
    assert (q in design.trees) == (drives == "data")
    timing = sta.timing(design)
    macro = {"words": words, "width": width, "kind": "1rw", "copies": 1, "area": 1000.0, "pins": list(pins)}
    s = _signoff(tmp_path, design, timing, [macro])
    print((tmp_path / "signoff.log").read_text())
    print(f"OpenSTA {s['critical_ps']:.3f} ps, ours {timing.critical_ps:.3f} ps")
    assert s["warnings"] == 0
    assert s["critical_ps"] == pytest.approx(timing.critical_ps, rel=0.01 if design.trees else 1e-4)
