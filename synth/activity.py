"""Switching activity from a simulation: toggles of every traced signal bit in a VCD, mapped onto
the nets of the mapped netlist.

A net whose name (``name`` or ``name[bit]`` in its module) is a traced signal of the matching
scope gets that bit's toggle rate: flip-flop outputs and ports keep their RTL names through
Yosys. Every other net (the logic ABC made) gets the average toggle rate per bit of the traced
signals of the module instance that drives it, or of the whole design where a module traced none.
Rates are toggles per clock cycle over the whole trace (cycles: half the clock's toggles).

Counting runs once over the file, one step per value change: each signal keeps its per-bit
counts as bit planes (plane k holds bit k of every bit's count), so adding a change is a
carry-save addition of the XOR of old and new value, whatever the signal's width. x and z read as 0.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from deca.hw.params import LOADERS

from .netlist import find

#: The design's clock in the trace (cocotb drives the PE's ``clk``).
CLOCK = "clk"
_BIT = re.compile(r"^(.*)\[(\d+)\]$")


class ActivityError(ValueError):
    """The trace cannot be read, or is not of this design."""


@dataclass
class Toggles:
    """Toggle counts of one trace: ``signals`` maps a scope (tuple of scope names from the root) to
    {signal name: (lowest bit index, [toggles of each bit])}."""

    cycles: float
    signals: dict
    source: str = ""
    workload: str = ""    # what ran, for the report
    #: {scope: {name: {bit: share of the trace's time at 1}}} of its one-bit signals (a clock gate's
    #: enable).
    high: dict = field(default_factory=dict)

    def to_json(self):
        return json.dumps({"cycles": self.cycles, "source": self.source, "workload": self.workload,
                           "signals": [[list(scope), name, lsb, counts] for scope, sigs in self.signals.items()
                                       for name, (lsb, counts) in sigs.items()],
                           "high": [[list(scope), name, bit, share] for scope, sigs in self.high.items()
                                    for name, bits in sigs.items() for bit, share in bits.items()]})

    @classmethod
    def from_json(cls, text):
        d = json.loads(text)
        signals, high = {}, {}
        for scope, name, lsb, counts in d["signals"]:
            signals.setdefault(tuple(scope), {})[name] = (lsb, counts)
        for scope, name, bit, share in d.get("high", ()):
            high.setdefault(tuple(scope), {}).setdefault(name, {})[bit] = share
        return cls(d["cycles"], signals, d["source"], d["workload"], high)

    def scope_of(self, top):
        """The scope of design ``top`` (the shortest path ending in a scope named ``top``)."""
        found = sorted((s for s in self.signals if s and s[-1] == top), key=len)
        if not found:
            # A scope holding only subscopes is not a key: look at the prefixes too.
            found = sorted({s[:i + 1] for s in self.signals for i, n in enumerate(s) if n == top}, key=len)
        if not found:
            tops = sorted({".".join(s[:2]) for s in self.signals})[:5]
            raise ActivityError(f"the trace {self.source} has no scope of design {top} (its scopes: "
                                f"{', '.join(tops) or 'none'})")
        return found[0]


def _value(text):
    # x and z count as 0: a bit that leaves x after reset is not a toggle of the logic.
    return int(text.translate(_XZ), 2) if text else 0


_XZ = str.maketrans("xXzZuUwW-", "000000000")


def _definitions(f, source):
    """Read the header up to $enddefinitions: {id code: [(scope, name, lsb, width)]}."""
    ids, scope = {}, []
    for line in f:
        words = line.split()
        if not words:
            continue
        while words[-1] != "$end" and words[0] in ("$var", "$scope"):
            more = f.readline()
            if not more:
                break
            words += more.split()
        key = words[0]
        if key == "$scope":
            scope.append(words[2])
        elif key == "$upscope":
            scope.pop()
        elif key == "$var":
            width, code, name = int(words[2]), words[3], words[4]
            lsb = 0
            rest = words[5:-1]
            if rest and rest[0].startswith("["):
                lo = rest[0].strip("[]").split(":")[-1]
                lsb = int(lo) if lo.lstrip("-").isdigit() else 0
            else:
                m = _BIT.match(name)
                if m and width == 1:
                    name, lsb = m.group(1), int(m.group(2))
            ids.setdefault(code, []).append((tuple(scope), name, lsb, width))
        elif key == "$enddefinitions":
            return ids
    raise ActivityError(f"{source} is not a VCD file (no $enddefinitions in it)")


def count_toggles(path, clock=CLOCK):
    """Toggles of every bit of every signal in the VCD file ``path``; the first value of a signal
    (from $dumpvars or its first change) is its start, not a toggle."""
    path = Path(path)
    try:
        f = open(path, errors="replace")
    except OSError as e:
        raise ActivityError(f"cannot read the trace {path}: {e.strerror}") from None
    with f:
        ids = _definitions(f, path)
        single = {code for code, variables in ids.items() if all(v[3] == 1 for v in variables)}
        prev, planes = {}, {}
        # One-bit signals: the time each spent at 1, and when it last changed.
        now, start, high, since = 0, None, {}, {}
        for line in f:
            c = line[0] if line else ""
            if c in "01xzXZ":
                code, text = line[1:].rstrip("\n\r "), c
            elif c in "bB":
                text, _, code = line[1:].rstrip("\n\r ").partition(" ")
            elif c == "#":
                now = int(line[1:])
                start = now if start is None else start
                continue
            else:
                continue   # $dumpvars/$end, real values, comments
            new = _value(text)
            old = prev.get(code)
            prev[code] = new
            if code in single:
                if old:
                    high[code] = high.get(code, 0) + now - since[code]
                since[code] = now
            if old is None:
                continue
            carry = old ^ new
            if carry:
                pl = planes.setdefault(code, [])
                k = 0
                while carry:
                    if k == len(pl):
                        pl.append(0)
                    x = pl[k]
                    pl[k] = x ^ carry
                    carry &= x
                    k += 1
    signals, clock_toggles, shares = {}, None, {}
    span = now - (start or 0)
    for code, variables in ids.items():
        pl = planes.get(code, [])
        if code in single and span > 0:
            at_one = high.get(code, 0) + (now - since[code] if prev.get(code) else 0)
            for scope, name, lsb, _ in variables:
                shares.setdefault(scope, {}).setdefault(name, {})[lsb] = at_one / span
        for scope, name, lsb, width in variables:
            counts = [sum(((plane >> i) & 1) << k for k, plane in enumerate(pl)) for i in range(width)]
            signals.setdefault(scope, {})[name] = (lsb, counts)
            if name == clock and width == 1 and (clock_toggles is None or len(scope) < clock_toggles[0]):
                clock_toggles = (len(scope), counts[0])
    if not signals:
        raise ActivityError(f"the trace {path} has no signals")
    if clock_toggles is None or clock_toggles[1] < 2:
        raise ActivityError(f"the trace {path} has no clock {clock!r} that toggles")
    return Toggles(clock_toggles[1] / 2, signals, str(path), f"the trace {path}", shares)


def net_rates(design, toggles):
    """({global net: toggles per cycle} for every net a cell drives, the share of those nets matched
    by name). ``design``: a ``deca.synth.sta.Design``."""
    top = design.top
    root = toggles.scope_of(top)
    cycles = toggles.cycles
    total_bits = total_toggles = 0
    named, average = {}, {}
    for name, base in design.placed:
        below = name.removeprefix(top).lstrip(".")
        scope = root + tuple(below.split(".")) if below else root
        sigs = toggles.signals.get(scope, {})
        bits = sum(len(c) for _, c in sigs.values())
        count = sum(sum(c) for _, c in sigs.values())
        total_bits, total_toggles = total_bits + bits, total_toggles + count
        average[name] = count / bits / cycles if bits else None
        for net, index in design.models[name].nets.items():
            m = _BIT.match(net)
            signal, bit = (m.group(1), int(m.group(2))) if m else (net, 0)
            if signal in sigs:
                lsb, counts = sigs[signal]
                if 0 <= bit - lsb < len(counts):
                    named[find(design.parent, base + index)] = counts[bit - lsb] / cycles
    if not total_bits:
        raise ActivityError(f"the trace {toggles.source} has no signals in the scopes of design {top}")
    design_average = total_toggles / total_bits / cycles
    rates, matched = {}, 0
    for net, (index, _) in design.driver.items():
        if net in named:
            rates[net] = named[net]
            matched += 1
        else:
            module = design.cells[index][0]
            rates[net] = average[module] if average[module] is not None else design_average
    return rates, matched / max(1, len(design.driver))


def net_duties(design, toggles):
    """{global net: share of the trace's time at 1} of the nets named like a traced one-bit signal
    (a clock gate's enable, where it kept an RTL name). ``design``: a ``deca.synth.sta.Design``."""
    root, duties = toggles.scope_of(design.top), {}
    for name, base in design.placed:
        below = name.removeprefix(design.top).lstrip(".")
        high = toggles.high.get(root + tuple(below.split(".")) if below else root, {})
        for net, index in design.models[name].nets.items():
            m = _BIT.match(net)
            signal, bit = (m.group(1), int(m.group(2))) if m else (net, 0)
            if bit in high.get(signal, {}):
                duties[find(design.parent, base + index)] = high[signal][bit]
    return duties


@dataclass(frozen=True)
class Workload:
    """A measured workload whose trace gives the activity (``deca synth --activity``)."""

    name: str = "bf8@0.5"
    mode: str = "tepl"
    tiles: int = 256
    seed: int = 1

    @property
    def key(self):
        return f"{self.name}-{self.mode}-{self.tiles}t-s{self.seed}"


def workload_toggles(verilog, top, W, L, workload, cache_dir, loaders=LOADERS, storage=None):
    """The toggles of the PE (W, L, ``loaders``, ``storage``) of the Verilog file ``verilog`` running ``workload``
    on Verilator: cached in ``cache_dir`` by the Verilog and the workload (the counts, not the VCD, which can be
    gigabytes and is deleted once counted)."""
    verilog, cache_dir = Path(verilog), Path(cache_dir)
    digest = hashlib.sha256(verilog.read_bytes()).hexdigest()[:16]
    cached = cache_dir / f"{top}-{digest}-{workload.key}.json"
    if cached.is_file():
        return Toggles.from_json(cached.read_text())
    from deca.sim.measure.trace import record_trace

    vcd, record = record_trace(verilog, top, W, L, workload.name, workload.mode, workload.tiles, workload.seed,
                               cache_dir / "records", loaders, storage)
    toggles = count_toggles(vcd)
    toggles.source = f"Verilator, {top}"
    toggles.workload = (f"{workload.name} {workload.mode}, {workload.tiles} tiles, seed {workload.seed}: "
                        f"{record['cycles_per_tile']:.1f} cycles per tile")
    cached.parent.mkdir(parents=True, exist_ok=True)
    part = cached.with_suffix(".part")
    part.write_text(toggles.to_json())
    part.replace(cached)
    vcd.unlink()
    return toggles
