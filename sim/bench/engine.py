"""The fast measurement engine: the Harness loop, the core and memory models and the Scoreboard's
control in C++ around the Verilated PE (``csrc/harness.cpp``), one call per run instead of a
cocotb round trip per cycle.

The Python models stay the specification: the C++ is a port of ``Harness.run``, ``TeplCore``,
``StoreFenceCore`` and ``MemoryModel``, draws the same random numbers from the same NumPy
Generator (its PCG64 state goes in and comes back), and its results are written back into the
Python model objects, so ``Bench.check_counters`` and ``deca.sim.measure.point.record`` read them
as after a Python run. Every completion beat's data comes back and is checked against the golden
tiles in bulk.

``build(verilog, top, ports)`` Verilates and compiles the PE once per Verilog and compiler
(``build/engine/<top>-<compiler>-<hash>``; ``compiler()`` picks clang++ where installed) and links
the harness with it into a shared library, once per harness source; ``VerilatorBus`` is the
``Bus`` of ``deca.sim.bench.bus`` on it (resets and register access stay in Python);
``FastHarness`` is the ``Harness`` whose ``run`` is the C++ loop.
"""

import ctypes
import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from importlib.metadata import version
from pathlib import Path

import numpy as np

from deca.golden.format import TILE_ROWS
from deca.hw.layouts import ErrorReason
from deca.toolchain import BUILD_WAIVERS, VERILATOR_BUILD_ARGS, verilator_env, verilator_root

from .bus import Hang, Mismatch, ProtocolError, drive_idle
from .cores import StoreFenceCore, TeplCore
from .harness import WATCHDOG_CYCLES, Harness
from .runner import BUILD_ROOT
from .scoreboard import row_mismatch
from .stimulus import TileRows

CSRC = Path(__file__).with_name("csrc")
SOURCES = (CSRC / "harness.cpp", CSRC / "pcg64.h")
ENGINE_ROOT = BUILD_ROOT.parent / "engine"
#: The engine's C++ compilers by preference ($DECA_ENGINE_CXX names another): the Verilated W = 32,
#: L = 8 PE compiled by clang++ 14 ran 1.4x the cycles per CPU second of g++ 12's, both at -O2, and
#: compiled in 33 s against 80 s (docs/engine.md).
ENGINE_CXX = ("clang++", "c++")
#: The Verilated model's hot code (OPT_FAST; with g++ -Os runs 25% slower, -O3 or profile-guided no faster) and
#: Verilator's runtime (OPT_GLOBAL); its run-once code (OPT_SLOW) stays unoptimized, which compiles
#: faster. -fPIC: it goes into a shared library.
MODEL_MAKEFLAGS = ("OPT_FAST=-O2", "OPT_GLOBAL=-O2")
MODEL_CFLAGS = ("-fPIC",)
#: The Verilated model's 32-bit popcount (Verilator's VL_COUNTONES_I: shifts and adds) rewritten to the
#: compiler's builtin, the same value and type: the PE counts mask bits with it (1,408 calls in the
#: W = 32, L = 8 model; the loop 1.11x the cycles per CPU second, docs/engine.md). One instruction
#: with -mpopcnt (``popcount_flags``), else the compiler's own shifts and adds.
POPCOUNT = ("VL_COUNTONES_I(", "(IData)__builtin_popcount(")
#: Verilator's definition the rewrite stands in for (verilated_funcs.h): IData in, IData out. Another
#: Verilator without it fails the build rather than silently keeping its own popcount.
POPCOUNT_DEFINITION = re.compile(r"static inline IData VL_COUNTONES_I\(IData \w+\)")
#: A Verilog identifier as Yosys writes it: plain, or escaped (a backslash, up to a space).
_ID = r"(?:\\\S+ |\w+)"
#: One lane of a memory write port with a write granularity, as Yosys writes it:
#: ``if (EN [i]) MEM[ADDR][hi:lo] <= DATA[hi:lo];`` (the address one level of brackets deep).
_LANE = re.compile(rf"    if \(({_ID})\[(\d+)\]\)\n      ({_ID})\[((?:[^\[\]\n]|\[[^\[\]\n]*\])+)\]"
                   rf"\[(\d+):(\d+)\] <= ({_ID}\[\d+:\d+\]);\n")
_WRITE_PORT = re.compile(rf"  always @\(posedge ({_ID})\) begin\n((?:{_LANE.pattern})+)  end\n")
_MODULE = re.compile(r"^module .*?^endmodule\n", re.S | re.M)


def _merged_port(port, module):
    """The write port ``port`` (a _WRITE_PORT match) as one read-modify-write of the whole word under
    ``|EN``, or None where that would not be the same: lanes with different enables or addresses,
    lanes that do not tile the word, a memory written anywhere else in ``module``."""
    lanes = _LANE.findall(port.group(2))
    en, mem, addr = lanes[0][0], lanes[0][2], lanes[0][3]
    if any((l[0], l[2], l[3]) != (en, mem, addr) for l in lanes):
        return None
    width = re.search(rf"reg \[(\d+):0\] {re.escape(mem)}\s*\[", module)
    lanes.sort(key=lambda lane: -int(lane[5]))
    bounds = [(int(hi), int(lo)) for *_, hi, lo, _ in lanes]
    tiled = all(lo == next_hi + 1 for (_, lo), (next_hi, _) in zip(bounds, bounds[1:])) and bounds[-1][1] == 0
    writes = len(re.findall(rf"^\s*{re.escape(mem)}\[.*<=", module, re.M))
    if not (width and tiled and bounds[0][0] == int(width.group(1)) and writes == len(lanes)):
        return None
    mask = "{" + ", ".join(f"{{{hi - lo + 1}{{{en}[{i}]}}}}" for (hi, lo), (_, i, *_) in zip(bounds, lanes)) + "}"
    data = "{" + ", ".join(lane[6] for lane in lanes) + "}"
    return (f"  always @(posedge {port.group(1)}) begin\n    if (|{en})\n"
            f"      {mem}[{addr}] <= ({mem}[{addr}] & ~{mask}) | ({data} & {mask});\n  end\n")


def merge_write_lanes(verilog):
    """(``verilog`` with each memory write port of several lanes (a write granularity) written as one
    read-modify-write of the word when any lane is enabled, how many ports it merged).

    The same memory contents cycle by cycle (``_merged_port`` keeps a port as it is unless its lanes
    share one enable vector and address, tile the word and are the memory's only writes), but
    Verilator's model tests one enable a cycle instead of one per lane, and sets no delayed-update
    flag per lane: with the SQQ's 8 x 128 byte lanes, the W = 64, L = 16 model ran ``deca verify``
    0.9x as fast (docs/engine.md)."""
    merged = 0

    def module(match):
        def port(m):
            nonlocal merged
            new = _merged_port(m, match.group(0))
            merged += new is not None
            return new or m.group(0)
        return _WRITE_PORT.sub(port, match.group(0))

    return _MODULE.sub(module, verilog), merged


#: The harness, compiled and linked with the model's archives; -z defs: an unresolved symbol fails the build.
CXXFLAGS = ("-O2", "-fPIC", "-std=c++17", "-shared", "-Wl,-Bsymbolic", "-Wl,-z,defs")
#: What verilated.mk defines for the model's objects, which the harness includes the headers of.
VERILATOR_DEFINES = ("-DVERILATOR=1", "-DVM_COVERAGE=0", "-DVM_SC=0", "-DVM_TIMING=0", "-DVM_TRACE=0",
                     "-DVM_TRACE_FST=0", "-DVM_TRACE_VCD=0", "-DVM_TRACE_SAIF=0")
_MODEL_DONE = "model.done"  # written last, so an interrupted model build is never linked


class EngineBuildError(RuntimeError):
    """Verilating or compiling the fast engine failed."""


def _digest(*parts):
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else Path(part).read_bytes())
    return digest.hexdigest()[:12]


def _ports_header(ports):
    names = ("clk", "rst", *ports.inputs, *ports.outputs)
    # Verilator's C++ name of a port: each "__" of the Verilog name is "___05F".
    return ("// The PE's ports, generated by deca.sim.bench.engine.\n#define DECA_PORTS(X) "
            + " ".join(f"X({name}, {name.replace('__', '___05F')})" for name in names) + "\n")


def _first_error(log):
    """The compiler's or Verilator's first error line of a build log."""
    for line in log.splitlines():
        if re.search(r"\berror:|%Error", line):
            return line.strip()
    return log.strip().splitlines()[-1] if log.strip() else "no output"


def _step(cmd, top, log):
    """Run one build step, its output to ``log``; EngineBuildError naming the first error if it fails."""
    proc = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise EngineBuildError(f"building the fast engine of {top} failed: "
                               f"{_first_error(proc.stdout + proc.stderr)} (log {log})")


def compiler():
    """(path, first line of its ``--version``) of the C++ compiler that builds the engine: $DECA_ENGINE_CXX,
    else the first of ``ENGINE_CXX`` installed."""
    wanted = os.environ.get("DECA_ENGINE_CXX")
    for name in [wanted] if wanted else ENGINE_CXX:
        path = shutil.which(name)
        if path:
            proc = subprocess.run([path, "--version"], capture_output=True, text=True)
            if proc.returncode == 0 and proc.stdout.strip():
                return path, proc.stdout.splitlines()[0]
    if wanted:
        raise EngineBuildError(f"DECA_ENGINE_CXX={wanted}: no such C++ compiler (its --version does not run)")
    raise EngineBuildError("no C++ compiler for the fast engine: install clang (sudo apt-get install clang) or g++")


def popcount_flags(machine=None, cpuinfo=Path("/proc/cpuinfo")):
    """(model C flags, which popcount the build uses): -mpopcnt on an x86-64 CPU whose flags (Linux's
    /proc/cpuinfo) list popcnt, none elsewhere (the builtin then compiles to shifts and adds)."""
    machine = machine or platform.machine()
    if machine not in ("x86_64", "AMD64"):
        return (), f"builtin popcount without -mpopcnt ({machine} is not x86-64)"
    try:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("flags")), [])
    except OSError:
        return (), f"builtin popcount without -mpopcnt (no {cpuinfo} to find the CPU's popcnt in)"
    if "popcnt" not in flags:
        return (), "builtin popcount without -mpopcnt (this x86-64 CPU has no popcnt)"
    return ("-mpopcnt",), "builtin popcount with -mpopcnt (x86-64, the CPU has popcnt)"


def _rewrite_popcount(obj, root):
    """POPCOUNT applied to the Verilated C++ in ``obj``; how many calls it rewrote."""
    header = root / "include" / "verilated_funcs.h"
    if not POPCOUNT_DEFINITION.search(header.read_text()):
        raise EngineBuildError(f"{header} has no 'IData VL_COUNTONES_I(IData)' to rewrite to the builtin "
                               "popcount: check POPCOUNT in sim/bench/engine.py against this Verilator")
    rewritten = 0
    for source in obj.glob("Vpe*.cpp"):
        text = source.read_text()
        if POPCOUNT[0] in text:
            rewritten += text.count(POPCOUNT[0])
            source.write_text(text.replace(*POPCOUNT))
    return rewritten


def build(verilog, top, ports, build_root=ENGINE_ROOT, jobs=2):
    """The fast engine's library for the PE ``top`` in ``verilog``, built unless already there.

    Two steps: the Verilated model, compiled into archives once per Verilog
    (``<top>-<compiler>-<hash>/obj``, older folders of the top and compiler removed; minutes), then
    the harness compiled and linked with them into one library per harness source (seconds), so a
    changed harness recompiles only itself. Both with ``compiler()``, whose version is in both keys."""
    cxx, cxx_version = compiler()
    popcnt, popcount_path = popcount_flags()
    cflags = (*MODEL_CFLAGS, *popcnt)
    tools = repr((top, MODEL_MAKEFLAGS, cflags, POPCOUNT, BUILD_WAIVERS, version("verilator"),
                  cxx_version)).encode()
    # Folders named by compiler too: switching compilers (bench_engine.py --compilers) keeps both builds.
    stem = f"{top}-{Path(cxx).name}"
    model, merged = merge_write_lanes(Path(verilog).read_text())  # keyed by what Verilator reads
    bdir = Path(build_root) / f"{stem}-{_digest(tools, model.encode())}"
    lib = bdir / f"libdeca_engine-{_digest(repr((CXXFLAGS, cxx_version)).encode(), *SOURCES)}.so"
    # clang++ does not inline the atomics of Verilator's runtime that g++ does: libatomic has them.
    libs = ("-latomic",) if "clang" in cxx_version else ()
    bdir.parent.mkdir(parents=True, exist_ok=True)
    with open(bdir.parent / f"{top}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.is_file():
            return lib
        for stale in bdir.parent.glob(f"{stem}-*"):
            if stale != bdir:
                shutil.rmtree(stale, ignore_errors=True)
        bdir.mkdir(exist_ok=True)
        obj, root = bdir / "obj", verilator_root()
        if not (bdir / _MODEL_DONE).is_file():
            # Its Verilog's write lanes merged, Verilated, its C++ rewritten (POPCOUNT), then compiled as
            # Verilator's --build would.
            source = bdir / Path(verilog).name if merged else verilog  # errors name the file Verilator read
            if merged:
                source.write_text(model)
            _step([str(root / "bin" / "verilator"), "--cc", *(f"-Wno-{w}" for w in BUILD_WAIVERS),
                   "-CFLAGS", " ".join(cflags), "--top-module", top, "--prefix", "Vpe", "-Mdir", str(obj),
                   str(source)], top, bdir / "model.log")
            rewritten = _rewrite_popcount(obj, root)
            print(f"building the fast engine of {top} with {cxx_version}: {merged} memory write ports merged, "
                  f"{popcount_path}, {rewritten} calls rewritten", file=sys.stderr, flush=True)
            make_args = VERILATOR_BUILD_ARGS[1::2]  # the values of its -MAKEFLAGS options
            _step(["make", "-C", str(obj), "-f", "Vpe.mk", "-j", str(jobs), *make_args, *MODEL_MAKEFLAGS,
                   f"CXX={cxx}", f"LINK={cxx}"], top, bdir / "make.log")
            (bdir / _MODEL_DONE).write_text(f"{verilog}\n")
        (bdir / "ports.h").write_text(_ports_header(ports))
        tmp = bdir / f".{lib.name}.tmp"  # renamed when complete: an interrupted build is never loaded
        _step([cxx, *CXXFLAGS, *VERILATOR_DEFINES, *(f"-I{d}" for d in (obj, root / "include",
                                                                        root / "include" / "vltstd", CSRC, bdir)),
               "-o", str(tmp), str(SOURCES[0]), str(obj / "libVpe.a"), str(obj / "libverilated.a"), *libs,
               "-pthread"], top, bdir / "harness.log")
        tmp.replace(lib)
    return lib


def _events():
    """The coverage events the C++ loop counts (its ``enum Event``, in order): the due memory responses
    when one is chosen out of order (1, 2-3, 4-7, 8 or more), a response other than the oldest, a
    demand read of a prefetched line that had arrived (hit) or not yet (late), prefetched lines never
    read (wasted), cycles a TEPL waited with no port ready (the loaders full), a line read held by
    mem_req.ready, a completion beat held by tepl_resp.ready (TOut full); an error completion's reason
    x the port its TEPL came in on; a squash's phase x the TEPLs in flight (0 .. 8 or more)."""
    names = [f"reorder_depth_{d}" for d in ("1", "2-3", "4-7", "8+")]
    names += ["out_of_order", "prefetch_hit", "prefetch_late", "prefetch_wasted", "loaders_full", "mem_req_stall",
              "tout_full"]
    names += [f"error_{reason}_port_{port}" for reason in range(8) for port in range(4)]
    names += [f"squash_{phase}_inflight_{n}" for phase in SQUASH_PHASES for n in range(9)]
    return tuple(names)


#: A squash's phase: nothing in flight or presented, a TEPL presented and none accepted, the oldest
#: in flight before its first row, in the middle of its rows.
SQUASH_PHASES = ("idle", "presented", "before_data", "mid_tile")
EVENTS = _events()
N_EVENTS = len(EVENTS)


class _RunSpec(ctypes.Structure):
    _fields_ = [(name, kind) for kind, names in [
        (ctypes.c_int64, "n_requests req_words"), (ctypes.POINTER(ctypes.c_uint32), "req_payloads"),
        (ctypes.POINTER(ctypes.c_int32), "req_error"), (ctypes.c_char_p, "labels reasons"),
        (ctypes.c_int32, "mode loaders id_bits tile_rows"),
        (ctypes.c_double, "resp_backpressure squash_prob reissue"), (ctypes.c_int64, "n_squash_at"),
        (ctypes.POINTER(ctypes.c_int64), "squash_at"), (ctypes.c_int64, "tmul_cycles link_latency queue"),
        (ctypes.POINTER(ctypes.c_uint8), "image"), (ctypes.c_int64, "image_len"), (ctypes.c_uint64, "base"),
        (ctypes.c_int64, "miss_lo miss_hi hit_lo hit_hi"), (ctypes.c_int32, "limited reorder"),
        (ctypes.c_uint64, "line_num_hi line_num_lo line_den"), (ctypes.c_double, "req_backpressure pf_backpressure"),
        (ctypes.c_int64, "watchdog max_cycles reissue_cycles"), (ctypes.c_int32 * 24, "fields"),
        (ctypes.c_uint64 * 6, "rng"),
    ] for name in names.split()]


_I64 = ctypes.POINTER(ctypes.c_int64)


class _RunResult(ctypes.Structure):
    _fields_ = [(name, kind) for kind, names in [
        (ctypes.c_int64, "status"), (ctypes.c_char_p, "message"),
        (ctypes.c_int64, "cycle last_handshake busy_cycles backpressure_cycles tiles errors squash_cycles tmul_busy "
                         "lines_demanded lines_prefetched lines_fetched"),
        (ctypes.c_uint64, "channel_free_hi channel_free_lo"),
        (ctypes.c_int64, "n_completions"), (_I64, "completions"), (ctypes.c_int64, "n_delivered"),
        (_I64, "delivered"), (ctypes.c_int64, "n_dropped"), (_I64, "dropped"), (ctypes.c_int64, "n_prefetches"),
        (ctypes.POINTER(ctypes.c_uint64), "prefetches"), (ctypes.c_int64, "n_beats beat_bytes"), (_I64, "beats"),
        (ctypes.POINTER(ctypes.c_uint8), "beat_data"),
    ] for name in names.split()] + [("events", ctypes.c_int64 * N_EVENTS)]


_FAILURES = {1: Hang, 2: Mismatch, 3: ProtocolError}
_MASK64 = (1 << 64) - 1


def _array(pointer, count, dtype, width=1):
    if not count:
        return np.zeros((0, width) if width > 1 else 0, dtype)
    # Copied out through bytes: numpy's as_array would make a ctypes array type per length, kept for good.
    source = np.dtype(pointer._type_)
    flat = np.frombuffer(ctypes.string_at(pointer, count * width * source.itemsize), source).astype(dtype)
    return flat.reshape(count, width) if width > 1 else flat


def _pcg64_state(rng):
    st = rng.bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise ValueError(f"the fast engine draws from PCG64 only, not {st['bit_generator']}")
    s, inc = st["state"]["state"], st["state"]["inc"]
    return [s >> 64, s & _MASK64, inc >> 64, inc & _MASK64, st["has_uint32"], st["uinteger"]]


def _set_pcg64_state(rng, words):
    st = rng.bit_generator.state
    st["state"] = {"state": words[0] << 64 | words[1], "inc": words[2] << 64 | words[3]}
    st["has_uint32"], st["uinteger"] = int(words[4]), int(words[5])
    rng.bit_generator.state = st


class VerilatorBus:
    """The ``Bus`` on the fast engine's Verilated PE (``lib``: its library path); at the start of a
    cycle after one clock edge, as ``deca.sim.bench.cocotb_bus.start`` leaves the cocotb bus."""

    def __init__(self, lib):
        self.lib = ctypes.CDLL(str(lib))
        self.lib.deca_new.restype = ctypes.c_void_p
        self.lib.deca_port_name.restype = ctypes.c_char_p
        self.lib.deca_run.restype = ctypes.POINTER(_RunResult)
        for name in ("deca_free", "deca_port_count", "deca_port_name", "deca_port_words", "deca_set", "deca_get",
                     "deca_settle", "deca_tick", "deca_run"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p, *{
                "deca_port_name": [ctypes.c_int], "deca_port_words": [ctypes.c_int],
                "deca_set": [ctypes.c_int, ctypes.c_void_p], "deca_get": [ctypes.c_int, ctypes.c_void_p],
                "deca_run": [ctypes.POINTER(_RunSpec)]}.get(name, [])]
        self.handle = ctypes.c_void_p(self.lib.deca_new())
        self.ports = {}
        for i in range(self.lib.deca_port_count(self.handle)):
            words = self.lib.deca_port_words(self.handle, i)
            self.ports[self.lib.deca_port_name(self.handle, i).decode()] = (i, words, (ctypes.c_uint32 * words)())
        self.lib.deca_tick(self.handle)

    def close(self):
        if self.handle:
            self.lib.deca_free(self.handle)
            self.handle = None

    def set(self, name, value):
        i, words, buf = self.ports[name]
        value = int(value)
        for w in range(words):
            buf[w] = value >> 32 * w & 0xFFFFFFFF
        self.lib.deca_set(self.handle, i, buf)

    def get(self, name):
        i, words, buf = self.ports[name]
        self.lib.deca_get(self.handle, i, buf)
        return sum(buf[w] << 32 * w for w in range(words))

    async def settle(self):
        self.lib.deca_settle(self.handle)

    async def tick(self):
        self.lib.deca_tick(self.handle)

    def run(self, spec):
        return self.lib.deca_run(self.handle, ctypes.byref(spec)).contents


class FastHarness(Harness):
    """The Harness whose run is the C++ loop (on a ``VerilatorBus``); the same results afterwards."""

    async def run(self, bus, max_cycles=None, watchdog=None, reissue_cycles=0):
        core, memory, ports = self.core, self.memory, self.ports
        if type(core) not in (TeplCore, StoreFenceCore):
            raise ValueError(f"the fast engine runs TeplCore and StoreFenceCore, not {type(core).__name__}")
        if core.rng is not memory.rng:
            raise ValueError("the fast engine draws the core's and the memory's numbers from one generator")
        requests = core.requests
        words = -(-ports.tepl_req.width // 32)
        payloads = np.frombuffer(b"".join(r.payload.to_bytes(4 * words, "little") for r in requests),
                                 np.uint32).copy()
        errors = np.array([r.expected.value if isinstance(r.expected, ErrorReason) else -1 for r in requests],
                          np.int32)
        squash_at = np.array(sorted(core.squash_at), np.int64)
        image = np.frombuffer(memory.image, np.uint8)
        line_time = memory._line_time or Fraction(0)
        reasons = "\n".join(next((r.name for r in ErrorReason if r.value == v), "")
                            for v in range(max(r.value for r in ErrorReason) + 1))
        packers = [(ports.tepl_req, "id"), *((ports.tepl_resp, f) for f in ("id", "row", "error", "reason", "last",
                                                                             "data")),
                   (ports.mem_req, "addr"), (ports.mem_req, "tag"), (ports.mem_resp, "tag"), (ports.mem_resp, "data"),
                   (ports.pf_req, "addr")]
        fields = [v for packer, name in packers for v in (packer.offset(name), packer.field_width(name))]
        spec = _RunSpec(
            n_requests=len(requests), req_words=words,
            req_payloads=payloads.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
            req_error=errors.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            labels="\n".join(r.label for r in requests).encode(), reasons=reasons.encode(),
            mode=0 if isinstance(core, TeplCore) else 1, loaders=len(core.ports), id_bits=core.id_limit.bit_length() - 1,
            tile_rows=TILE_ROWS, resp_backpressure=core.resp_backpressure, squash_prob=core.squash_prob,
            reissue=core.reissue, n_squash_at=len(squash_at), squash_at=squash_at.ctypes.data_as(_I64),
            tmul_cycles=core.tmul_cycles, link_latency=core.link_latency, queue=getattr(core, "queue", 0),
            image=image.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), image_len=len(image), base=memory.base,
            miss_lo=memory.miss_latency[0], miss_hi=memory.miss_latency[1], hit_lo=memory.hit_latency[0],
            hit_hi=memory.hit_latency[1], limited=memory._line_time is not None, reorder=memory.reorder,
            line_num_hi=line_time.numerator >> 64, line_num_lo=line_time.numerator & _MASK64,
            line_den=line_time.denominator, req_backpressure=memory.req_backpressure,
            pf_backpressure=memory.pf_backpressure, watchdog=watchdog or WATCHDOG_CYCLES,
            max_cycles=-1 if max_cycles is None else max_cycles, reissue_cycles=reissue_cycles,
            fields=(ctypes.c_int32 * 24)(*fields),
            rng=(ctypes.c_uint64 * 6)(*_pcg64_state(core.rng)))
        if line_time.numerator >> 127 or line_time.denominator >> 64:
            raise ValueError(f"the fast engine cannot time a channel line of {line_time} cycles")
        result = bus.run(spec)
        _set_pcg64_state(core.rng, list(spec.rng))
        self._take(result, line_time)
        drive_idle(bus, ports.inputs)
        self._check_data(result)
        if result.status:
            raise _FAILURES[result.status](result.message.decode())

    def _take(self, res, line_time):
        """Write the C++ run's outcome into the Python models, as a Python run leaves them."""
        core, memory, requests = self.core, self.memory, self.core.requests
        self.cycle, self.last_handshake = res.cycle, res.last_handshake
        for name in ("busy_cycles", "backpressure_cycles", "tiles", "errors", "squash_cycles", "tmul_busy"):
            setattr(core, name, getattr(res, name))
        core.delivered = [requests[i] for i in _array(res.delivered, res.n_delivered, np.int64)]
        core.dropped = [requests[i] for i in _array(res.dropped, res.n_dropped, np.int64)]
        for name in ("lines_demanded", "lines_prefetched", "lines_fetched"):
            setattr(memory, name, getattr(res, name))
        if memory._line_time is not None:
            memory.channel_free = Fraction(res.channel_free_hi << 64 | res.channel_free_lo, line_time.denominator)
        memory.prefetches = [int(a) for a in _array(res.prefetches, res.n_prefetches, np.uint64)]
        self.events = dict(zip(EVENTS, (int(v) for v in res.events)))
        self.scoreboard.completions = [(rid, requests[i])
                                       for rid, i in _array(res.completions, res.n_completions, np.int64, 2).tolist()]

    def _check_data(self, res):
        """Every data beat against its golden tile row, in bulk; the first wrong one fails as the Scoreboard would."""
        if not res.n_beats:
            return
        beats = _array(res.beats, res.n_beats, np.int64, 4)
        got = _array(res.beat_data, res.n_beats, np.uint8, res.beat_bytes)
        requests = self.core.requests
        used = np.unique(beats[:, 0])
        rows = np.stack([_row_bytes(requests[i].expected, res.beat_bytes) for i in used])
        want = rows[np.searchsorted(used, beats[:, 0]), beats[:, 1]]
        wrong = np.flatnonzero((got != want).any(axis=1))
        if len(wrong):
            req, row, cycle, rid = (int(v) for v in beats[wrong[0]])
            raise Mismatch(row_mismatch(f"cycle {cycle}: {requests[req].label} (id {rid})", row,
                                        int.from_bytes(got[wrong[0]].tobytes(), "little"),
                                        int.from_bytes(want[wrong[0]].tobytes(), "little")))


def _row_bytes(expected, width):
    """A request's golden rows as a (16, ``width``) uint8 array: a ``TileRows``' own, else from the ints."""
    if isinstance(expected, TileRows) and expected.data.shape[1] == width:
        return expected.data
    return np.frombuffer(b"".join(row.to_bytes(width, "little") for row in expected), np.uint8).reshape(TILE_ROWS, width)
