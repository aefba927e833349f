"""The signoff inputs: the SDC's period and budgets, and macro liberty cells OpenSTA reads back."""

import shutil
import subprocess

import pytest

from deca.synth import signoff, sram


def test_sdc_period_and_half_period_budgets():
    text = signoff.sdc(400)
    assert "create_clock -name clk -period 400 [get_ports clk]" in text
    assert "set_input_delay 200 -clock clk [all_inputs -no_clocks]" in text
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
