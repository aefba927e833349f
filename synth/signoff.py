"""What OpenSTA needs to time the mapped design: an SDC for the clock and the I/O budgets, and a
liberty cell of each SRAM macro's own shape (name ``deca_macro_<words>x<width>``: its pins as Yosys's
$mem_v2 names them, bit by bit; clock to read data the model's access time, its inputs' setup the
model's setup time, its area the model's area of that shape)."""

from .memories import CELLS

CLOCK = "clk"
#: Clock and input transition, as deca.synth.sta assumes them.
SLEW_PS = 20.0


def sdc(period_ps, clock=CLOCK):
    """The constraints of deca.synth.sta: a ``period_ps`` clock on port ``clock``, inputs arriving and
    outputs needed with half a period to spare."""
    if not period_ps > 0:
        raise ValueError(f"the SDC clock period must be positive, got {period_ps} ps")
    half = period_ps / 2
    return "\n".join([f"create_clock -name {clock} -period {period_ps:g} [get_ports {clock}]",
                      f"set_clock_transition {SLEW_PS:g} [get_clocks {clock}]",
                      f"set_input_delay {half:g} -clock {clock} [all_inputs -no_clocks]",
                      f"set_output_delay {half:g} -clock {clock} [all_outputs]",
                      f"set_input_transition {SLEW_PS:g} [all_inputs -no_clocks]", ""])


def _pin(name, direction, lines=(), clock=False, cap=0.0):
    body = [f"      direction : {direction};"] + (["      clock : true;"] if clock else [])
    if direction == "input":
        body.append(f"      capacitance : {cap:g};")
    return [f"    pin({name}) {{", *body, *lines, "    }"]


def macro_liberty(macros, model, name="deca_macros"):
    """A liberty library (ps, fF) with one cell per distinct macro of ``macros`` (the report's macro
    dicts: words, width, kind, copies, area, and ``pins``: the $mem_v2 pin names it has)."""
    out = [f"library({name}) {{", '  time_unit : "1ps";', '  voltage_unit : "1V";', '  current_unit : "1mA";',
           "  capacitive_load_unit(1, ff);", '  leakage_power_unit : "1nW";', "  nom_voltage : 0.7;",
           "  nom_temperature : 25;", "  nom_process : 1;",
           *(f"  {kind}_threshold_pct_{edge} : {pct};" for edge in ("rise", "fall")
             for kind, pct in (("input", 50), ("output", 50), ("slew_lower", 10), ("slew_upper", 90)))]
    seen = set()
    for m in macros:
        if m["kind"] == CELLS:
            continue
        cell = f"deca_macro_{m['words']}x{m['width']}"
        if cell in seen:
            continue
        seen.add(cell)
        out += [f"  cell({cell}) {{", f"    area : {m['area'] / m['copies']:.3f};"]
        for pin in sorted(m["pins"]):
            base = pin.split("[")[0]
            if base in ("RD_CLK", "WR_CLK"):
                out += _pin(liberty_pin(pin), "input", clock=True)
            elif base == "RD_DATA":
                related = "RD_CLK" if any(p.startswith("RD_CLK") for p in m["pins"]) else "WR_CLK"
                out += _pin(liberty_pin(pin), "output", [
                    "      timing() {", f"        related_pin : \"{liberty_pin(related + '[0]')}\";",
                    "        timing_type : rising_edge;",
                    f"        cell_rise(scalar) {{ values(\"{model.access_ps:g}\"); }}",
                    f"        cell_fall(scalar) {{ values(\"{model.access_ps:g}\"); }}",
                    f"        rise_transition(scalar) {{ values(\"{SLEW_PS:g}\"); }}",
                    f"        fall_transition(scalar) {{ values(\"{SLEW_PS:g}\"); }}", "      }"])
            else:
                related = "RD_CLK" if base.startswith("RD_") else "WR_CLK"
                if not any(p.startswith(related) for p in m["pins"]):
                    related = "WR_CLK" if related == "RD_CLK" else "RD_CLK"
                out += _pin(liberty_pin(pin), "input", [
                    "      timing() {", f"        related_pin : \"{liberty_pin(related + '[0]')}\";",
                    "        timing_type : setup_rising;",
                    f"        rise_constraint(scalar) {{ values(\"{model.setup_ps:g}\"); }}",
                    f"        fall_constraint(scalar) {{ values(\"{model.setup_ps:g}\"); }}", "      }"],
                    cap=model.input_cap_ff)
        out.append("  }")
    return "\n".join(out + ["}", ""])


def liberty_pin(pin):
    """A $mem_v2 pin bit (``RD_ADDR[3]``) as a scalar liberty pin name (``RD_ADDR_3``)."""
    base, _, bit = pin.partition("[")
    return f"{base}_{bit.rstrip(']') or 0}"
