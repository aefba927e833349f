"""Generated Verilog: lint-clean under verilator -Wall (documented waivers only), compiles under
Icarus and Verilator, and keeps the documented port names."""

import re

import pytest

from deca.cli import main
from deca.hw.generate import generate, top_name
from deca.toolchain import LINT_WAIVERS, ToolError, icarus_compile, verilator_compile, verilator_lint

DESIGNS = [(8, 4), (32, 8), (64, 64)]


@pytest.fixture(scope="module")
def verilog(tmp_path_factory):
    out = tmp_path_factory.mktemp("verilog")
    return {(W, L): generate(W, L, out) for W, L in DESIGNS}


@pytest.mark.parametrize("W,L", DESIGNS, ids=[f"W{W}L{L}" for W, L in DESIGNS])
def test_lint_and_compile(W, L, verilog, tmp_path):
    path = verilog[W, L]
    top = top_name("datapath", W, L)
    assert path.stem == top
    verilator_lint(path, top)
    icarus_compile(path, top, tmp_path / "icarus.vvp")
    # Full C++ build for the smallest design; Verilation (Verilator's own compile) for the others.
    verilator_compile(path, top, tmp_path / "obj", build=(W, L) == (8, 4))
    assert (tmp_path / "icarus.vvp").stat().st_size > 0
    assert (tmp_path / "obj" / f"V{top}.h").is_file()


def test_ports_are_stable_and_documented(verilog):
    path = verilog[32, 8]
    header = re.search(r"module deca_datapath_w32_l8\((.*?)\);", path.read_text(), re.S).group(1)
    names = {p.strip() for p in header.split(",")}
    expected = {"clk", "rst", "cfg__q", "cfg__sparse", "cfg__scale_format", "cfg__scale_group", "cfg__lut_we",
                "cfg__lut_addr", "cfg__lut_data"}
    expected |= {f"{s}__{m}" for s in ("tiles", "values", "scales", "out") for m in ("payload", "valid", "ready")}
    assert names == expected
    table = path.with_suffix(".ports.md").read_text()
    assert {row.split("|")[1].strip() for row in table.splitlines()[4:]} == expected
    assert "| values__payload | input | 519 | data [511:0], nbytes [518:512] |" in table
    assert "| out__payload | output | 513 | data [511:0], last [512:512] |" in table


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


def test_generate_command(tmp_path, capsys):
    assert main(["generate", "--W", "8", "--L", "2", "-o", str(tmp_path), "--check"]) == 0
    out = capsys.readouterr().out
    assert "deca_datapath_w8_l2.v" in out and "lint-only -Wall: clean" in out
    assert (tmp_path / "deca_datapath_w8_l2.v").is_file()


@pytest.mark.parametrize("args,message", [
    (["--W", "24"], "W must be one of 8, 16, 32, 64"),
    (["--W", "8", "--L", "16"], "exceeds W = 8"),
    (["--L", "3"], "L must be a power of two"),
])
def test_generate_refuses_impossible_parameters(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "-o", str(tmp_path), *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
