"""A behavioural DECA PE in Python behind the ``deca.sim.bench.bus`` Bus protocol, and helpers that run
it through the Harness without a simulator (shared by test_harness.py and test_system.py)."""

from collections import deque

from deca.golden import FormatError, decompress_tile
from deca.hw.layouts import LINE_BYTES, ErrorReason
from deca.sim.bench.cores import CoreModel
from deca.sim.bench.harness import Harness
from deca.sim.bench.memory import MemoryModel
from deca.sim.bench.ports import PePorts
from deca.sim.bench.scoreboard import Scoreboard


class _Tepl:
    def __init__(self, rid, meta):
        self.id, self.meta = rid, meta
        self.lines, self.rows, self.error = {}, None, None


class FakePE:
    """A PE in Python behind the Bus protocol: checks metadata, reads every line of a tile's streams,
    decompresses with the golden model and completes in request order; a squash aborts everything.
    It prefetches the line after each value stream. ``corrupt``: flip a bit of that row of the
    first tile. ``stuck``: a squash leaves loader 1 busy."""

    def __init__(self, config, ports, corrupt=None, stuck=False):
        self.config, self.ports, self.corrupt, self.stuck = config, ports, corrupt, stuck
        self.inputs, self.out = dict.fromkeys(ports.inputs, 0), {}
        self.loaders, self.order = [None] * ports.loaders, deque()
        self.reads, self.prefetches = deque(), deque()  # (tepl, line address) to request; line addresses
        self.tags = {}  # tag -> (tepl, line address) at the memory; a squash leaves them stale
        self.row = 0

    def set(self, name, value):
        self.inputs[name] = int(value)

    def get(self, name):
        return self.out[name]

    async def settle(self):
        p, out = self.ports, dict.fromkeys(self.ports.outputs, 0)
        for i, loader in enumerate(self.loaders):
            out[f"tepl_req__{i}__ready"] = int(loader is None)
        free = set(range(1 << p.tag_bits)) - set(self.tags)
        if self.reads and free:  # like the PE, no request while every tag is at the memory
            self.tag = min(free)
            out["mem_req__valid"] = 1
            out["mem_req__payload"] = p.mem_req.pack({"addr": self.reads[0][1], "tag": self.tag})
        if self.prefetches:
            out["pf_req__valid"], out["pf_req__payload"] = 1, p.pf_req.pack({"addr": self.prefetches[0]})
        head = self.order[0] if self.order else None
        if head is not None and head.error is not None:
            out["tepl_resp__valid"] = 1
            out["tepl_resp__payload"] = p.tepl_resp.pack({"id": head.id, "last": 1, "error": 1, "reason": head.error})
        elif head is not None and head.rows is not None:
            out["tepl_resp__valid"] = 1
            out["tepl_resp__payload"] = p.tepl_resp.pack({"id": head.id, "row": self.row, "last": int(self.row == 15),
                                                          "data": head.rows[self.row]})
        self.out = out

    async def tick(self):
        p, i, out = self.ports, self.inputs, self.out
        if i["mem_resp__valid"]:
            resp = p.mem_resp.unpack(i["mem_resp__payload"])
            tepl, addr = self.tags.pop(resp["tag"])
            tepl.lines[addr] = resp["data"].to_bytes(LINE_BYTES, "little")
            self._finish(tepl)
        if out["mem_req__valid"] and i["mem_req__ready"]:
            self.tags[self.tag] = self.reads.popleft()
        if out["pf_req__valid"] and i["pf_req__ready"]:
            self.prefetches.popleft()
        if i["squash"]:
            self.loaders, self.order, self.row = [None, self.loaders[1] if self.stuck else None], deque(), 0
            self.reads.clear()
            return
        if out["tepl_resp__valid"] and i["tepl_resp__ready"]:
            self.row += 1
            if out["tepl_resp__payload"] >> p.tepl_resp.offset("last") & 1:
                done = self.order.popleft()
                self.loaders[self.loaders.index(done)] = None
                self.row = 0
        port = next((k for k in range(p.loaders) if i[f"tepl_req__{k}__valid"] and out[f"tepl_req__{k}__ready"]), None)
        if port is not None:
            self._accept(port, p.tepl_req.unpack(i[f"tepl_req__{port}__payload"]))

    def _accept(self, port, req):
        tepl = self.loaders[port] = _Tepl(req["id"], req)
        self.order.append(tepl)
        cfg, streams = self.config, [(req[f"{s}_addr"], req[f"{s}_len"]) for s in ("mask", "scale", "val")]
        if any(addr + length > 1 << self.ports.addr_bits for addr, length in streams):
            tepl.error = ErrorReason.ADDR_WRAP
        elif req["mask_len"] != cfg.mask_stream_len:
            tepl.error = ErrorReason.MASK_LEN
        elif req["scale_len"] != cfg.scale_stream_len:
            tepl.error = ErrorReason.SCALE_LEN
        else:
            self.reads.extend((tepl, line) for addr, length in streams if length
                              for line in range(addr & -LINE_BYTES, addr + length, LINE_BYTES))
            self.prefetches.append((req["val_addr"] + req["val_len"]) & -LINE_BYTES)
            self._finish(tepl)

    def _finish(self, tepl):
        if tepl not in self.loaders or any(t is tepl for t, _ in self.reads) \
                or any(t is tepl for t, _ in self.tags.values()):
            return
        def read(stream):
            addr, length = tepl.meta[f"{stream}_addr"], tepl.meta[f"{stream}_len"]
            return bytes(tepl.lines[a & -LINE_BYTES][a % LINE_BYTES] for a in range(addr, addr + length))

        try:
            tile = decompress_tile(read("val"), read("mask"), read("scale"), self.config)
        except FormatError:
            tepl.error = ErrorReason.VALUE_LEN
            return
        tepl.rows = [int.from_bytes(row.astype("<u2").tobytes(), "little") for row in tile]
        if self.corrupt is not None:
            tepl.rows[self.corrupt] ^= 1
            self.corrupt = None



def drive(coroutine):
    """Run a coroutine that only awaits fake buses (which never suspend)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine suspended")


def run_fake(batch, rng, pe_kwargs=None, core_kwargs=None, memory_kwargs=None, core=CoreModel, scoreboard=None,
             watch=None, run_kwargs=None):
    """Run ``batch`` on a FakePE through the Harness (``Harness.run`` keyword arguments ``run_kwargs``);
    returns the Harness.

    ``core``: the core class or factory, called as ``core(requests, rng, **core_kwargs)``;
    ``scoreboard``: a Scoreboard (default a fresh one); ``watch``: called as ``watch(harness, cycle)``
    at the start of every cycle, right after the core's ``start_cycle``.
    """
    ports = PePorts()
    harness = Harness(core(batch.requests, rng, **(core_kwargs or {})),
                      MemoryModel(batch.image, batch.base, rng, **(memory_kwargs or {})),
                      Scoreboard() if scoreboard is None else scoreboard, ports)
    if watch is not None:
        start_cycle = harness.core.start_cycle

        def watched(cycle):
            start_cycle(cycle)
            watch(harness, cycle)

        harness.core.start_cycle = watched
    drive(harness.run(FakePE(batch.config, ports, **(pe_kwargs or {})), **(run_kwargs or {})))
    return harness
