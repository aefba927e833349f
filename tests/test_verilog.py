"""Generated Verilog: lint-clean under verilator -Wall (documented waivers only), compiles under
Icarus and Verilator, and keeps the documented port names."""

import re
from pathlib import Path

import pytest

from deca.cli import main
from deca.hw.generate import generate_cached, top_name
from deca.toolchain import LINT_WAIVERS, ToolError, icarus_compile, verilator_compile, verilator_lint

DESIGNS = [(8, 4), (32, 8), (64, 64)]
#: The default design by default; W = 8, L = 4 (which Icarus and the fast engine compile in the
#: default run) and W = 64, L = 64 (two minutes to generate and lint) under -m slow.
LINTED = [(W, L) if (W, L) == (32, 8) else pytest.param(W, L, marks=pytest.mark.slow) for W, L in DESIGNS]


@pytest.mark.parametrize("W,L", LINTED, ids=[f"W{W}L{L}" for W, L in DESIGNS])
def test_pe_lints_and_compiles(W, L, generated, tmp_path):
    path = generated(W, L)
    top = top_name("pe", W, L)
    assert path.stem == top
    verilator_lint(path, top)
    icarus_compile(path, top, tmp_path / "icarus.vvp")
    assert (tmp_path / "icarus.vvp").stat().st_size > 0


def test_datapath_alone_lints(generated):
    verilator_lint(generated(8, 4, "datapath"), top_name("datapath", 8, 4))


@pytest.mark.slow  # a C++ build (15 s); the PE's Verilator builds compile the same datapath by default
def test_datapath_alone_builds(generated, tmp_path):
    path = generated(8, 4, "datapath")
    top = top_name("datapath", 8, 4)
    verilator_compile(path, top, tmp_path / "obj", build=True)
    assert (tmp_path / "obj" / f"V{top}__ALL.a").is_file()


def header_ports(path, top):
    header = re.search(rf"module {top}\((.*?)\);", path.read_text(), re.S).group(1)
    return {p.strip() for p in header.split(",")}


def stream_ports(name):
    return {f"{name}__{m}" for m in ("payload", "valid", "ready")}


def test_pe_ports_are_stable_and_documented(generated):
    path = generated(32, 8)
    expected = {"clk", "rst", "squash", "cfg__addr", "cfg__wdata", "cfg__we", "cfg__rdata"}
    for name in ("tepl_req__0", "tepl_req__1", "tepl_resp", "mem_req", "mem_resp", "pf_req"):
        expected |= stream_ports(name)
    expected.remove("mem_resp__ready")  # the PE always takes a line response
    names = header_ports(path, "deca_pe_w32_l8")
    assert names == expected
    groups = {n.split("_")[0] for n in names - {"clk", "rst", "squash"}}
    assert groups == {"tepl", "mem", "pf", "cfg"}
    table = path.with_suffix(".ports.md").read_text()
    assert {row.split("|")[1].strip() for row in table.splitlines()[4:]} == expected
    # 48-bit addresses, 16-bit lengths, 8-bit ids; tag bits: log2(16 / 2) for the context's entry, log2(2 x 2) for the context.
    assert ("| tepl_req__0__payload | input | 200 | val_addr [47:0], val_len [63:48], mask_addr [111:64], "
            "mask_len [127:112], scale_addr [175:128], scale_len [191:176], id [199:192] |") in table
    assert "| mem_req__payload | output | 53 | addr [47:0], tag [52:48] |" in table
    assert ("| tepl_resp__payload | output | 530 | data [511:0], id [519:512], row [523:520], last [524:524], "
            "error [525:525], reason [529:526] |") in table


def test_register_map_is_generated_from_the_code(generated):
    from deca.hw.registers import register_table, registers

    path = generated(32, 8)
    text = path.with_suffix(".registers.md").read_text()
    assert register_table(registers(W=32, L=8, tag_bits=4, sqq_log2=9, id_bits=8)) in text
    for name in ("CONFIG", "PREFETCH", "LUT_INDEX", "LUT_DATA", "ERROR", "BUSY_CYCLES", "LINES_PREFETCHED"):
        assert f"| {name} |" in text
    # The documentation shows the same table, for the default design.
    page = (Path(__file__).parents[1] / "docs" / "pe" / "registers.md").read_text()
    assert register_table(registers(W=32, L=8, tag_bits=4, sqq_log2=9, id_bits=8)) in page, \
        "docs/pe/registers.md's register map is out of date: paste build/deca_pe_w32_l8.registers.md (deca generate)"


def test_lint_reports_problems_beyond_the_waivers(tmp_path):
    bad = tmp_path / "bad.v"
    # A blocking assignment in a clocked block (BLKSEQ): a warning no waiver covers.
    bad.write_text("module bad(input clk, input a, output reg q);\n  always @(posedge clk) q = a;\nendmodule\n")
    with pytest.raises(ToolError, match="BLKSEQ"):
        verilator_lint(bad, "bad")
    assert "BLKSEQ" not in LINT_WAIVERS


def test_icarus_reports_syntax_errors(tmp_path):
    bad = tmp_path / "broken.v"
    bad.write_text("module broken(input a);\n  assign = a;\nendmodule\n")
    with pytest.raises(ToolError, match="broken.v"):
        icarus_compile(bad, "broken", tmp_path / "x.vvp")


#: A block alone by default (the PE's own Verilog is linted above); the whole PE, with its register
#: map, under -m slow (two minutes of generation).
@pytest.mark.parametrize("design,tables", [("bf16_scaler", ["ports"]),
                                           pytest.param("pe", ["ports", "registers"], marks=pytest.mark.slow)])
@pytest.mark.parametrize("arith", ["gates", "operators"])
def test_generate_command(design, tables, arith, tmp_path, capsys):
    assert main(["generate", "--design", design, "--W", "8", "--L", "2", "-o", str(tmp_path), "--check",
                 "--arith", arith]) == 0
    out = capsys.readouterr().out
    top = f"deca_{design}_w8_l2"
    assert f"wrote {tmp_path / top}.v" in out and "lint-only -Wall: clean" in out and "iverilog -g2005: compiled" in out
    assert ("instances proven equal to their gates" in out) == (arith == "operators")
    assert all(f"{top}.{table}.md" in out and (tmp_path / f"{top}.{table}.md").is_file() for table in tables)
    assert (tmp_path / f"{top}.v").is_file()


def test_the_verilog_cache_keeps_one_folder_per_arithmetic_style(tmp_path):
    """The default style named or not: one generation (the cocotb tests and the campaigns share it)."""
    gates = generate_cached(8, 2, tmp_path, design="bf16_scaler")
    assert generate_cached(8, 2, tmp_path, design="bf16_scaler", arith="gates") == gates
    operators = generate_cached(8, 2, tmp_path, design="bf16_scaler", arith="operators")
    assert operators.parent != gates.parent and operators.read_text() != gates.read_text()


@pytest.mark.parametrize("args,message", [
    (["--W", "24"], "W must be one of 8, 16, 32, 64"),
    (["--W", "8", "--L", "16"], "exceeds W = 8"),
    (["--L", "3"], "L must be a power of two"),
    (["--loaders", "5"], "loaders must be one of 2, 3, 4"),
])
def test_generate_refuses_impossible_parameters(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "-o", str(tmp_path), *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


# Units: every block alone -----------------------------------------------------------------------

UNIT_NAMES = sorted(set(__import__("deca.hw.units", fromlist=["UNITS"]).UNITS) - {"pe"})


@pytest.mark.parametrize("unit", UNIT_NAMES)
def test_every_unit_generates_alone_and_lints(unit, generated):
    """Each block of the PE is a design of its own: Verilog with its ports, lint-clean."""
    path = generated(8, 4, unit)
    top = top_name(unit, 8, 4)
    verilator_lint(path, top)
    table = path.with_suffix(".ports.md").read_text()
    assert f"# Ports of {top}" in table and "| clk | input | 1 |" in table
    assert not path.with_suffix(".registers.md").exists()  # only the PE has registers


def test_generate_names_the_units_when_asked_for_an_unknown_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "--design", "crossbar", "-o", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown design 'crossbar'" in err and all(name in err for name in ("pe", "loader", "expander", "tout"))
