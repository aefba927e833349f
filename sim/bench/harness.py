"""The run loop: a core model and a memory model drive the PE through its top-level ports, cycle by
cycle, and a Scoreboard checks every completion.

Each group of ports has an agent (a driver and a monitor in one, as in cocotb's testbenches):
``RequestPorts`` (tepl_req and squash, from the core), ``CompletionPort`` (tepl_resp, to the
core) and ``MemoryPorts`` (mem_req, mem_resp, pf_req, to the memory). The loop stays in lockstep,
as cycle-exact counting needs: every cycle each agent drives its inputs, the bus settles, every
output is read once, each agent takes the handshakes of the coming edge, and the clock ticks.
The agents are called in a fixed order, which fixes the order of the random draws of the models
and so makes a run reproducible from its seed.
"""

from .bus import Hang, ProtocolError, drive_idle, read_outputs

#: Cycles without any handshake and without a memory read outstanding before the watchdog fires. A read
#: the memory owes keeps a run alive however long it takes: behind a narrow channel's queue (prefetched
#: lines, up to the prefetch degree's tiles ahead) it comes far more than a latency after its request,
#: and the PE rightly waits for it.
WATCHDOG_CYCLES = 3000


class RequestPorts:
    """The core's TEPLs on the tepl_req ports, and its squashes."""

    def __init__(self, core, scoreboard, ports):
        self.core, self.scoreboard, self.names = core, scoreboard, ports.tepl_req_ports
        for request in core.requests:
            request.payload = ports.tepl_req.pack(request.meta)
        self._id_shift = ports.tepl_req.offset("id")
        self.after_squash = False

    def drive(self, bus, cycle):
        """Present the core's requests; returns whether the core squashes in this cycle."""
        core = self.core
        core.start_cycle(cycle)
        squash = core.squash_now(cycle, bool(self.scoreboard.inflight))
        for names, slot in zip(self.names, core.ports):
            bus.set(names["valid"], slot is not None)
            if slot is not None:
                bus.set(names["payload"], slot[1].payload | slot[0] << self._id_shift)
        bus.set("squash", squash)
        return squash

    def squash(self):
        self.core.squash(self.scoreboard.abort())
        self.after_squash = True
        return True

    def check_idle(self, out, cycle):
        """Every loader is idle the cycle after a squash: every port is ready."""
        if not self.after_squash:
            return
        self.after_squash = False
        ready = [out[names["ready"]] for names in self.names]
        if not all(ready):
            raise ProtocolError(f"cycle {cycle}: the PE is not idle the cycle after a squash "
                                f"(tepl_req ready = {tuple(ready)})")

    def observe(self, out):
        """One request per cycle at most, the lowest port wins; returns whether one was accepted."""
        core = self.core
        ready = [bool(out[names["ready"]]) for names in self.names]
        port = next((p for p in range(len(ready)) if core.ports[p] is not None and ready[p]), None)
        core.saw_ready(ready, port)
        if port is None:
            return False
        self.scoreboard.accept(*core.accept(port))
        return True


class CompletionPort:
    """The core's side of tepl_resp: back-pressure, and every beat to the Scoreboard."""

    def __init__(self, core, scoreboard, ports):
        self.core, self.scoreboard, self.packer = core, scoreboard, ports.tepl_resp
        self.ready = False

    def drive(self, bus):
        self.ready = self.core.resp_ready()
        bus.set("tepl_resp__ready", self.ready)

    def observe(self, out, cycle):
        """Returns whether a beat was taken."""
        if not out["tepl_resp__valid"]:
            return False
        if not self.ready:
            self.core.backpressure_cycles += 1
            return False
        done = self.scoreboard.beat(self.packer.unpack(out["tepl_resp__payload"]), cycle)
        if done is not None:
            self.core.completed(done)
        return True


class MemoryPorts:
    """The memory's side of mem_req, mem_resp (always ready in the PE) and pf_req."""

    def __init__(self, memory, ports):
        self.memory, self.ports = memory, ports
        self.offer = None
        self.mem_ready = self.pf_ready = False

    def drive(self, bus, cycle):
        memory = self.memory
        self.mem_ready, self.pf_ready = memory.request_ready(), memory.prefetch_ready()
        self.offer = memory.offer(cycle)
        bus.set("mem_req__ready", self.mem_ready)
        bus.set("pf_req__ready", self.pf_ready)
        bus.set("mem_resp__valid", self.offer is not None)
        if self.offer is not None:
            bus.set("mem_resp__payload", self.ports.mem_resp.pack({"tag": self.offer[0], "data": self.offer[1]}))

    def observe(self, out, cycle):
        """Returns whether any handshake happened."""
        memory, handshake = self.memory, False
        if out["mem_req__valid"] and self.mem_ready:
            read = self.ports.mem_req.unpack(out["mem_req__payload"])
            memory.demand(read["addr"], read["tag"], cycle)
            handshake = True
        if out["pf_req__valid"] and self.pf_ready:
            memory.prefetch(self.ports.pf_req.unpack(out["pf_req__payload"])["addr"], cycle)
            handshake = True
        if self.offer is not None:
            memory.take()
            handshake = True
        return handshake

    def quiet(self, out):
        return not self.memory.outstanding and not out["mem_req__valid"] and not out["pf_req__valid"]


class Harness:
    """Runs a core model and a MemoryModel against the PE, checking completions with a Scoreboard."""

    def __init__(self, core, memory, scoreboard, ports):
        self.core, self.memory, self.scoreboard, self.ports = core, memory, scoreboard, ports
        self.requests = RequestPorts(core, scoreboard, ports)
        self.completions = CompletionPort(core, scoreboard, ports)
        self.memory_ports = MemoryPorts(memory, ports)
        self.cycle = 0  # cycles run so far
        self.last_handshake = 0
        self.last_active = 0  # the last cycle with a handshake or a memory read outstanding

    def observed_counters(self):
        """The PE counters whose value the models know exactly."""
        core, memory = self.core, self.memory
        return {"BUSY_CYCLES": core.busy_cycles, "BACKPRESSURE_CYCLES": core.backpressure_cycles, "TILES": core.tiles,
                "ERRORS": core.errors, "SQUASHES": core.squash_cycles, "LINES_DEMANDED": memory.lines_demanded,
                "LINES_PREFETCHED": memory.lines_prefetched}

    def summary(self, why):
        core = self.core
        presented = ", ".join(f"port {p}: id {slot[0]} {slot[1].label}" for p, slot in enumerate(core.ports) if slot)
        return "\n".join([f"cycle {self.cycle}: {why}", f"last handshake in cycle {self.last_handshake}",
                          self.scoreboard.summary(), f"presented: {presented or 'none'}",
                          f"pending: {len(core.pending)} requests, dropped: {len(core.dropped)}",
                          self.memory.summary()])

    async def run(self, bus, max_cycles=None, watchdog=None, reissue_cycles=0):
        """Run until every request completed or was dropped and memory is quiet; inputs are idle afterwards.

        ``watchdog``: cycles without any handshake and without a memory read outstanding before
        ``Hang`` (default ``WATCHDOG_CYCLES``); ``max_cycles``: a limit on the whole run, raised by
        ``reissue_cycles`` for every request the core reissues after a squash (the PE runs it again).
        """
        watchdog = watchdog or WATCHDOG_CYCLES
        start = self.cycle
        finished = squash_before = False
        while not finished:
            cycle = self.cycle
            if cycle - self.last_active > watchdog:
                raise Hang(self.summary(f"no handshake and no memory read outstanding for {watchdog} cycles"))
            budget = None if max_cycles is None else max_cycles + reissue_cycles * self.core.reissues
            if budget is not None and cycle - start >= budget:
                raise Hang(self.summary(f"the run took more than {budget} cycles"))
            squash = self.requests.drive(bus, cycle)
            self.completions.drive(bus)
            self.memory_ports.drive(bus, cycle)
            await bus.settle()
            out = read_outputs(bus, self.ports.outputs, cycle)
            self.core.busy_cycles += bool(self.scoreboard.inflight)
            if squash:
                handshake = self.requests.squash()
            else:
                self.requests.check_idle(out, cycle)
                handshake = self.completions.observe(out, cycle)
                handshake |= self.requests.observe(out)
            handshake |= self.memory_ports.observe(out, cycle)
            if handshake:
                self.last_handshake = cycle
            if handshake or self.memory.outstanding:
                self.last_active = cycle
            # A squash leaves the line reads of aborted tiles inside the PE, to go out (stale) within a
            # cycle of a quiet one: the run ends only with two cycles free of squashes.
            finished = (self.core.done and not self.scoreboard.inflight and self.memory_ports.quiet(out)
                        and not squash and not squash_before)
            squash_before = squash
            await bus.tick()
            self.cycle += 1
        drive_idle(bus, self.ports.inputs)
