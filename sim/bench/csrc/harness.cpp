// The fast measurement engine: the Harness run loop of sim/bench/harness.py with the core models of
// sim/bench/cores.py (TeplCore, StoreFenceCore), the MemoryModel of sim/bench/memory.py and the
// control part of the Scoreboard of sim/bench/scoreboard.py, around the Verilated PE, in one C++
// loop. The Python models are the specification: every rule here is a port of one of theirs (each
// part names the Python it follows), the random draws come in the same order from the same
// Generator(PCG64) stream (pcg64.h), and the messages are theirs, word for word.
//
// Built per design by deca.sim.bench.engine, which generates ports.h (the PE's ports) and drives
// this library through ctypes: the Bus primitives (set, get, settle, tick) for resets and register
// access, and deca_run for a whole Harness run. The tile data of every beat comes back to Python,
// which checks it against the golden tiles in bulk.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <deque>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "Vpe.h"
#include "Vpe___024root.h"
#include "pcg64.h"
#include "ports.h"
#include "verilated.h"

using u128 = unsigned __int128;

// Two phases of the Verilated model's eval (Verilator 5's scheduler; the library links with -z defs,
// so a Verilator that names them otherwise fails the build, not a run).
bool Vpe___024root___eval_phase__act(Vpe___024root* vlSelf);
bool Vpe___024root___eval_phase__nba(Vpe___024root* vlSelf);

namespace {

// ---- ports: any width, as little-endian 32-bit words (a payload is its flat bit vector) ----
struct Port {
    const char* name;
    int kind;  // bytes of a scalar port (1, 2, 4, 8), or 0 for VlWide
    int words;
    void* ptr;
};
Port make_port(const char* n, CData& v) { return {n, 1, 1, &v}; }
Port make_port(const char* n, SData& v) { return {n, 2, 1, &v}; }
Port make_port(const char* n, IData& v) { return {n, 4, 1, &v}; }
Port make_port(const char* n, QData& v) { return {n, 8, 2, &v}; }
template <std::size_t N> Port make_port(const char* n, VlWide<N>& v) { return {n, 0, (int)N, v.data()}; }

void port_set(const Port& p, const uint32_t* w) {
    uint64_t v = w[0] | (p.words > 1 ? (uint64_t)w[1] << 32 : 0);
    switch (p.kind) {
        case 1: *(CData*)p.ptr = (CData)v; break;
        case 2: *(SData*)p.ptr = (SData)v; break;
        case 4: *(IData*)p.ptr = (IData)v; break;
        case 8: *(QData*)p.ptr = (QData)v; break;
        default: std::memcpy(p.ptr, w, 4 * p.words);
    }
}
void port_get(const Port& p, uint32_t* w) {
    uint64_t v = 0;
    switch (p.kind) {
        case 1: v = *(CData*)p.ptr; break;
        case 2: v = *(SData*)p.ptr; break;
        case 4: v = *(IData*)p.ptr; break;
        case 8: v = *(QData*)p.ptr; break;
        default: std::memcpy(w, p.ptr, 4 * p.words); return;
    }
    w[0] = (uint32_t)v;
    if (p.words > 1) w[1] = (uint32_t)(v >> 32);
}
void port_set64(const Port& p, uint64_t v) {
    uint32_t w[2] = {(uint32_t)v, (uint32_t)(v >> 32)};
    port_set(p, w);
}
uint64_t port_get64(const Port& p) {
    uint32_t w[2] = {0, 0};
    port_get(p, w);
    return w[0] | (uint64_t)w[1] << 32;
}

// Bit fields of a payload (ports.py Packer): a field of up to 64 bits at a bit offset.
uint64_t field_get(const uint32_t* w, int off, int width) {
    uint64_t v = 0;
    for (int got = 0; got < width;) {  // word by word
        int bit = off + got, take = std::min(32 - bit % 32, width - got);
        uint64_t mask = take == 32 ? 0xFFFFFFFFull : (1ull << take) - 1;
        v |= (w[bit / 32] >> (bit % 32) & mask) << got;
        got += take;
    }
    return v;
}
void field_set(uint32_t* w, int off, int width, uint64_t v) {
    for (int put = 0; put < width;) {
        int bit = off + put, take = std::min(32 - bit % 32, width - put);
        uint32_t mask = (uint32_t)((take == 32 ? 0xFFFFFFFFull : (1ull << take) - 1) << (bit % 32));
        w[bit / 32] = (w[bit / 32] & ~mask) | ((uint32_t)(v >> put << (bit % 32)) & mask);
        put += take;
    }
}
void bytes_get(const uint32_t* w, int off, int nbytes, uint8_t* out) {  // a field of whole bytes
    if (off % 32 == 0) {
        std::memcpy(out, w + off / 32, nbytes);
        return;
    }
    for (int b = 0; b < nbytes; b++) out[b] = (uint8_t)field_get(w, off + 8 * b, 8);
}
void bytes_set(uint32_t* w, int off, int nbytes, const uint8_t* in) {
    if (off % 32 == 0) {
        std::memcpy(w + off / 32, in, nbytes);
        return;
    }
    for (int b = 0; b < nbytes; b++) field_set(w, off + 8 * b, 8, in[b]);
}

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%#llx", (unsigned long long)v);
    return v ? buf : "0x0";
}

struct Failure {  // one of deca.sim.bench.bus's CheckFailures: status names which
    int status;
    std::string message;
};
enum { OK = 0, HANG = 1, MISMATCH = 2, PROTOCOL = 3 };

}  // namespace

// ---- what Python hands over (deca.sim.bench.engine mirrors these structs) ----
// Coverage events (deca.sim.bench.engine.EVENTS, in this order): scalar events, then an error
// completion's reason x the port its TEPL came in on, then a squash's phase x the TEPLs in flight.
enum Event { EV_REORDER, EV_OUT_OF_ORDER = EV_REORDER + 4, EV_PF_HIT, EV_PF_LATE, EV_PF_WASTED, EV_REQ_FULL,
             EV_MEM_STALL, EV_RESP_STALL, EV_ERROR_PORT, EV_SQUASH = EV_ERROR_PORT + 8 * 4,
             N_EVENTS = EV_SQUASH + 4 * 9 };
enum SquashPhase { SQ_IDLE, SQ_PRESENTED, SQ_BEFORE_DATA, SQ_MID_TILE };
extern "C" {
struct RunSpec {
    int64_t n_requests, req_words;
    const uint32_t* req_payloads;  // tepl_req payloads without the id, req_words each
    const int32_t* req_error;      // the ErrorReason a request must fail with, or -1 for a tile
    const char* labels;            // one per line
    const char* reasons;           // ErrorReason names by value, one per line (empty: no such value)
    int32_t mode;                  // 0: TeplCore, 1: StoreFenceCore
    int32_t loaders, id_bits, tile_rows;
    double resp_backpressure, squash_prob, reissue;
    int64_t n_squash_at;
    const int64_t* squash_at;
    int64_t tmul_cycles, link_latency, queue;
    const uint8_t* image;
    int64_t image_len;
    uint64_t base;
    int64_t miss_lo, miss_hi, hit_lo, hit_hi;
    int32_t limited, reorder;       // limited: the channel starts a line every line_num / line_den cycles
    uint64_t line_num_hi, line_num_lo, line_den;
    double req_backpressure, pf_backpressure;
    int64_t watchdog, max_cycles, reissue_cycles;  // max_cycles < 0: no limit
    // (offset, width) of tepl_req.id; tepl_resp id, row, error, reason, last, data; mem_req addr,
    // tag; mem_resp tag, data; pf_req addr
    int32_t fields[24];
    uint64_t rng[6];  // PCG64 state hi, lo, inc hi, lo, has_uint32, uinteger; the final state on return
};

struct RunResult {
    int64_t status;
    const char* message;
    int64_t cycle, last_handshake, busy_cycles, backpressure_cycles, tiles, errors, squash_cycles, tmul_busy;
    int64_t lines_demanded, lines_prefetched, lines_fetched;
    uint64_t channel_free_hi, channel_free_lo;  // numerator over line_den
    int64_t n_completions;
    const int64_t* completions;  // (id, request) pairs in completion order
    int64_t n_delivered;
    const int64_t* delivered;
    int64_t n_dropped;
    const int64_t* dropped;
    int64_t n_prefetches;
    const uint64_t* prefetches;
    int64_t n_beats, beat_bytes;
    const int64_t* beats;  // (request, row, cycle, id) of every data beat taken
    const uint8_t* beat_data;
    int64_t events[N_EVENTS];  // coverage events, counted (deca.sim.bench.engine.EVENTS names them)
};
}

namespace {

enum { F_REQ_ID, F_RESP_ID, F_RESP_ROW, F_RESP_ERROR, F_RESP_REASON, F_RESP_LAST, F_RESP_DATA, F_MREQ_ADDR,
       F_MREQ_TAG, F_MRESP_TAG, F_MRESP_DATA, F_PF_ADDR };

std::vector<std::string> lines_of(const char* text) {
    std::vector<std::string> out;
    std::string line;
    std::istringstream in(text);
    while (std::getline(in, line)) out.push_back(line);
    return out;
}

// ---- scoreboard.py Scoreboard: order, rows, last flags and error beats; the data goes to Python ----
struct Scoreboard {
    struct Entry { int64_t id, req, row; };
    std::deque<Entry> inflight;
    std::unordered_map<int64_t, std::string> gone;
    std::vector<int64_t> completions;
    const std::vector<std::string>* labels;

    void accept(int64_t rid, int64_t req) {
        inflight.push_back({rid, req, 0});
        gone.erase(rid);
    }
    std::vector<int64_t> abort() {
        std::vector<int64_t> aborted;
        for (auto& e : inflight) {
            gone[e.id] = "aborted by a squash (" + (*labels)[e.req] + ")";
            aborted.push_back(e.req);
        }
        inflight.clear();
        return aborted;
    }
    std::string gone_why(int64_t rid) {
        auto it = gone.find(rid);
        return it == gone.end() ? "never issued" : it->second;
    }
    std::string stale(int64_t rid) {  // Scoreboard._stale
        if (inflight.empty()) return "has an id not in flight, " + gone_why(rid) + "; nothing is in flight";
        auto& first = inflight.front();
        std::string order = "request id " + std::to_string(first.id) + " (" + (*labels)[first.req] +
                            ") was accepted first and is not complete";
        for (auto& e : inflight)
            if (e.id == rid) return "is out of order: it belongs to " + (*labels)[e.req] + ", but " + order;
        return "has an id not in flight, " + gone_why(rid) + "; " + order;
    }
    std::string summary() {
        std::string s;
        for (auto& e : inflight)
            s += (s.empty() ? "" : ", ") + std::string("id ") + std::to_string(e.id) + " " + (*labels)[e.req] +
                 " (next row " + std::to_string(e.row) + ")";
        return "in flight: " + (s.empty() ? "none" : s);
    }
};

// ---- memory.py MemoryModel ----
struct Memory {
    const RunSpec* s;
    Pcg64* rng;
    uint64_t base, end;
    u128 line_num = 0, channel_free = 0;  // times in units of 1 / line_den cycles
    uint64_t den = 1;
    std::unordered_map<uint64_t, int64_t> in_l2;
    struct Read { int64_t due; uint64_t tag, addr; };
    std::vector<Read> outstanding;
    int64_t offered = -1;
    int64_t lines_demanded = 0, lines_prefetched = 0, lines_fetched = 0;
    std::vector<uint64_t> prefetches;
    std::unordered_set<uint64_t> prefetched, demanded;
    int64_t* events;

    void init(const RunSpec* spec, Pcg64* g) {
        s = spec, rng = g, base = spec->base, end = spec->base + spec->image_len;
        if (spec->limited) line_num = (u128)spec->line_num_hi << 64 | spec->line_num_lo, den = spec->line_den;
    }
    int64_t latency(int64_t lo, int64_t hi) { return lo == hi ? lo : rng->integers(lo, hi + 1); }  // _latency
    int64_t fetch(uint64_t addr, int64_t cycle) {  // _fetch
        u128 start = std::max((u128)cycle * den, channel_free);
        if (s->limited) channel_free = start + line_num;
        lines_fetched++;
        int64_t arrival = (int64_t)((start + den - 1) / den) + latency(s->miss_lo, s->miss_hi);
        in_l2[addr] = arrival;
        return arrival;
    }
    bool ready(double backpressure) { return !(backpressure && rng->random() < backpressure); }  // _ready
    void check_line(uint64_t addr, const char* what) {  // _check_line
        if (addr % 64) throw Failure{PROTOCOL, std::string("PE ") + what + " address " + hex(addr) +
                                                   " is not a multiple of 64"};
    }
    void demand(uint64_t addr, uint64_t tag, int64_t cycle) {
        check_line(addr, "read");
        if (addr + 64 <= base || addr >= end)
            throw Failure{PROTOCOL, "PE read line " + hex(addr) + " outside the image [" + hex(base) + ", " +
                                        hex(end) + ")"};
        for (auto& r : outstanding)
            if (r.tag == tag)
                throw Failure{PROTOCOL, "PE reused tag " + std::to_string(tag) + " (line " + hex(addr) +
                                            ") while a read with that tag is outstanding"};
        int64_t due;
        auto it = in_l2.find(addr);
        if (prefetched.count(addr) && !demanded.count(addr)) events[arrived_by(addr, cycle) ? EV_PF_HIT : EV_PF_LATE]++;
        demanded.insert(addr);
        if (it != in_l2.end()) {
            int64_t arrived = it->second;
            due = std::max(arrived, cycle + latency(s->hit_lo, s->hit_hi));
        } else {
            due = fetch(addr, cycle);
        }
        outstanding.push_back({due, tag, addr});
        lines_demanded++;
    }
    bool arrived_by(uint64_t addr, int64_t cycle) {
        auto it = in_l2.find(addr);
        return it != in_l2.end() && it->second <= cycle;
    }
    int64_t wasted() {  // prefetched lines no read asked for
        int64_t n = 0;
        for (uint64_t a : prefetched) n += !demanded.count(a);
        return n;
    }
    void prefetch(uint64_t addr, int64_t cycle) {
        check_line(addr, "prefetch");
        if (!demanded.count(addr)) prefetched.insert(addr);
        if (!in_l2.count(addr)) fetch(addr, cycle);
        prefetches.push_back(addr);
        lines_prefetched++;
    }
    void line(uint64_t addr, uint8_t* out) {  // line: garbage (_garbage) outside the image
        for (uint64_t a = addr; a < addr + 64; a++)
            out[a - addr] = a >= base && a < end ? s->image[a - base] : (uint8_t)((a * 0x9D + 0x5B) & 0xFF);
    }
    bool offer(int64_t cycle) {  // offer: whether a response goes out; which one is `offered`
        offered = -1;
        if (s->reorder) {
            std::vector<int64_t> due;
            for (size_t i = 0; i < outstanding.size(); i++)
                if (outstanding[i].due <= cycle) due.push_back(i);
            if (!due.empty()) offered = due.size() > 1 ? due[rng->integers(0, due.size())] : due[0];
            if (!due.empty()) {
                events[EV_REORDER + (due.size() >= 8 ? 3 : due.size() >= 4 ? 2 : due.size() >= 2 ? 1 : 0)]++;
                events[EV_OUT_OF_ORDER] += offered != 0;
            }
        } else if (!outstanding.empty() && outstanding[0].due <= cycle) {
            offered = 0;
        }
        return offered >= 0;
    }
    void take() {
        outstanding.erase(outstanding.begin() + offered);
        offered = -1;
    }
    std::string summary() {
        std::string s;
        for (auto& r : outstanding)
            s += (s.empty() ? "" : ", ") + std::string("tag ") + std::to_string(r.tag) + " line " + hex(r.addr) +
                 " due " + std::to_string(r.due);
        return std::to_string(outstanding.size()) + " memory reads outstanding" + (s.empty() ? "" : ": " + s);
    }
};

// ---- cores.py CoreModel, _GemmCore, TeplCore and StoreFenceCore (requests are indices) ----
struct Core {
    const RunSpec* s;
    Pcg64* rng;
    int64_t n, id_limit, next_id = 0, cycle = 0;
    std::set<int64_t> squash_at;
    std::deque<int64_t> pending;
    std::vector<std::pair<int64_t, int64_t>> ports;  // (id, request) presented, request -1: none
    std::vector<int64_t> delivered, dropped, arrive, issue_at;
    std::vector<char> accepted, is_dropped, port_free;  // _GemmCore.free (cores.py's docstring)
    int64_t busy_cycles = 0, backpressure_cycles = 0, tiles = 0, errors = 0, squash_cycles = 0, tmul_busy = 0;
    int64_t reissues = 0;
    // TeplCore
    std::deque<int64_t> program, tmul_order;
    int64_t queued = 0, tmul_free = 0;
    // StoreFenceCore: its program (a Python generator) as a resumable step machine
    int64_t loading = -1, k = 0, wait = 0, step = 0;
    bool finished = false;

    void init(const RunSpec* spec, Pcg64* g) {
        s = spec, rng = g, n = spec->n_requests, id_limit = int64_t(1) << spec->id_bits;
        squash_at.insert(spec->squash_at, spec->squash_at + spec->n_squash_at);
        ports.assign(spec->loaders, {0, -1});
        port_free.assign(spec->loaders, 1);
        arrive.assign(n, -1);
        issue_at.assign(n, 0);
        accepted.assign(n, 0);
        is_dropped.assign(n, 0);
        for (int64_t i = 0; i < n; i++) program.push_back(i), tmul_order.push_back(i);
    }
    bool tepl() const { return s->mode == 0; }
    bool any_port() const {
        for (auto& p : ports)
            if (p.second >= 0) return true;
        return false;
    }
    bool done() const {
        if (!tepl()) return finished;
        return pending.empty() && !any_port() && program.empty() && tmul_order.empty() && cycle >= tmul_free;
    }
    void start_cycle(int64_t c) {  // _GemmCore.start_cycle
        cycle = c;
        if (tepl()) advance_tepl();
        else if (!finished) advance_store();
        fill_ports();
    }
    void fill_ports() {  // _GemmCore.fill_ports; may_issue: TeplCore's issue_at, always for StoreFenceCore
        for (size_t p = 0; p < ports.size(); p++)
            if (ports[p].second < 0 && port_free[p] && !pending.empty() &&
                (!tepl() || issue_at[pending.front()] <= cycle)) {
                ports[p] = {next_id, pending.front()};
                pending.pop_front();
                next_id = (next_id + 1) % id_limit;
            }
    }
    void advance_tepl() {  // TeplCore.advance
        while (!tmul_order.empty() && cycle >= tmul_free) {
            int64_t head = tmul_order.front();
            if (is_dropped[head]) {  // a wrong-path TEPL: nothing to multiply
                tmul_order.pop_front();
                queued--;
                continue;
            }
            if (arrive[head] < 0 || arrive[head] > cycle) break;
            tmul_order.pop_front();
            queued--;
            tmul_free = cycle + s->tmul_cycles;
            tmul_busy += s->tmul_cycles;
        }
        while (!program.empty() && queued < s->queue) {
            int64_t r = program.front();
            program.pop_front();
            queued++;
            issue_at[r] = cycle + s->link_latency;
            pending.push_back(r);
        }
    }
    // StoreFenceCore._program, one resume per cycle: `wait` counts the yields of a _delay still to
    // come, `step` is where the generator stands.
    enum { TOP, LOAD_TRAVEL, LOAD_WAIT, TILE_TRAVEL, TCOMP, STORE, STORE_TRAVEL, STORE_WAIT, FENCE, NEXT };
    void advance_store() {
        for (;;) {
            switch (step) {
                case TOP:
                    if (k == n + 2) {
                        finished = true;
                        return;
                    }
                    if (k >= 2) {
                        wait = s->link_latency;  // the tile load reaches DECA
                        step = LOAD_TRAVEL;
                    } else {
                        step = STORE;
                    }
                    break;
                case LOAD_TRAVEL:
                    if (wait > 0) return (void)wait--;
                    loading = k - 2;
                    step = LOAD_WAIT;
                    break;
                case LOAD_WAIT:
                    if (arrive[k - 2] < 0) return;
                    loading = -1;
                    wait = arrive[k - 2] - cycle;  // the tile travels back
                    step = TILE_TRAVEL;
                    break;
                case TILE_TRAVEL:
                    if (wait > 0) return (void)wait--;
                    tmul_busy += s->tmul_cycles;
                    wait = s->tmul_cycles;  // TComp; the store waits for it at the ROB head
                    step = TCOMP;
                    break;
                case TCOMP:
                    if (wait > 0) return (void)wait--;
                    step = STORE;
                    break;
                case STORE:
                    if (k < n) {
                        wait = s->link_latency;  // the store reaches the loader
                        step = STORE_TRAVEL;
                    } else {
                        step = NEXT;
                    }
                    break;
                case STORE_TRAVEL:
                    if (wait > 0) return (void)wait--;
                    pending.push_back(k);
                    step = STORE_WAIT;
                    break;
                case STORE_WAIT:
                    if (!accepted[k]) return;
                    wait = s->link_latency;  // the fence waits for the store's acknowledgement
                    step = FENCE;
                    break;
                case FENCE:
                    if (wait > 0) return (void)wait--;
                    step = NEXT;
                    break;
                case NEXT:
                    k++;
                    step = TOP;
                    break;
            }
        }
    }
    bool squash_now(int64_t c, bool in_flight) {  // CoreModel.squash_now
        return squash_at.count(c) || (in_flight && s->squash_prob && rng->random() < s->squash_prob);
    }
    bool resp_ready() {  // CoreModel.resp_ready; StoreFenceCore: only while a tile load is at DECA
        if (!tepl() && loading < 0) return false;
        return !(s->resp_backpressure && rng->random() < s->resp_backpressure);
    }
    std::pair<int64_t, int64_t> accept(int p) {  // _GemmCore.accept
        auto slot = ports[p];
        ports[p] = {0, -1};
        accepted[slot.second] = 1;
        return slot;
    }
    void completed(int64_t r) {  // _GemmCore.completed
        if (s->req_error[r] >= 0) {
            errors++;
        } else {
            tiles++;
            delivered.push_back(r);
        }
        arrive[r] = cycle + 1 + s->link_latency;  // the last beat is taken at the end of this cycle
    }
    void squash(std::vector<int64_t> aborted) {  // TeplCore.squash, _GemmCore.squash, CoreModel.squash
        port_free.assign(port_free.size(), 1);
        for (auto& p : ports)
            if (p.second >= 0) aborted.push_back(p.second);
        std::sort(aborted.begin(), aborted.end());
        ports.assign(ports.size(), {0, -1});
        squash_cycles++;
        std::vector<int64_t> reissued;
        for (int64_t r : aborted) {
            if (rng->random() < s->reissue) {
                reissued.push_back(r);
            } else {
                dropped.push_back(r);
                is_dropped[r] = 1;
            }
        }
        pending.insert(pending.begin(), reissued.begin(), reissued.end());
        reissues += reissued.size();
        if (tepl())
            for (int64_t r : aborted) issue_at[r] = cycle + s->link_latency;  // a reissued TEPL travels again
    }
};

}  // namespace

// ---- the engine: one Verilated PE and the ports by name ----
struct Engine {
    VerilatedContext ctx;
    Vpe* top;
    std::vector<Port> ports;
    std::unordered_map<std::string, int> index;
    // what deca_run hands back, kept until the next run
    RunResult result;
    std::string message;
    std::vector<int64_t> completions, delivered, dropped, beats;
    std::vector<uint64_t> prefetches;
    std::vector<uint8_t> beat_data;
    std::vector<int> accepted_port;
    std::vector<int64_t> event_counts = std::vector<int64_t>(N_EVENTS);

    Engine() {
        top = new Vpe{&ctx};
#define DECA_PORT(name, member) ports.push_back(make_port(#name, top->member));
        DECA_PORTS(DECA_PORT)
#undef DECA_PORT
        for (size_t i = 0; i < ports.size(); i++) index[ports[i].name] = i;
        top->eval();
    }
    ~Engine() {
        top->final();
        delete top;
    }
    const Port& port(const std::string& name) { return ports[index.at(name)]; }
    // The rising edge, where this cycle's handshakes happen, and the next cycle's start: a whole
    // eval, as the inputs Python set may not have been settled.
    void tick() {
        top->clk = 1;
        top->eval();
        clock_low();
        top->eval();
    }
    // deca_run's rising edge, right after the settle of the same inputs: only the clocked phases of
    // Verilator's eval (act, nba), not its input-combinational region first. That region is a
    // function of the inputs and the state, which the settle left as they are, so it would compute
    // the same values again; it is a quarter of a cycle's time. (The PE reads its clock only as an
    // edge, never as data.) The clock goes low again unevaluated: the PE has no falling-edge logic,
    // so the next cycle's settle evaluates it, one eval per cycle fewer.
    void rise() {
        top->clk = 1;
        do {
            while (Vpe___024root___eval_phase__act(top->rootp)) {}
        } while (Vpe___024root___eval_phase__nba(top->rootp));
        clock_low();
    }
    void clock_low() {
        ctx.timeInc(1);
        top->clk = 0;
        ctx.timeInc(1);
    }
    void run(RunSpec* s);
};

void Engine::run(RunSpec* s) {
    const int32_t* f = s->fields;
    auto off = [f](int field) { return f[2 * field]; };
    auto width = [f](int field) { return f[2 * field + 1]; };
    std::vector<std::string> labels = lines_of(s->labels), reasons = lines_of(s->reasons);
    auto reason = [&](uint64_t v) {  // scoreboard.py _reason
        return v < reasons.size() && !reasons[v].empty() ? reasons[v] : "invalid reason " + std::to_string(v);
    };
    Pcg64 rng{(u128)s->rng[0] << 64 | s->rng[1], (u128)s->rng[2] << 64 | s->rng[3], s->rng[4] != 0,
              (uint32_t)s->rng[5]};
    Core core;
    core.init(s, &rng);
    Memory memory;
    memory.init(s, &rng);
    std::fill(event_counts.begin(), event_counts.end(), 0);
    int64_t* events = event_counts.data();
    memory.events = events;
    accepted_port.assign(s->n_requests, 0);
    Scoreboard board;
    board.labels = &labels;

    std::vector<const Port*> req_valid, req_ready, req_payload;
    for (int p = 0; p < s->loaders; p++) {
        std::string prefix = "tepl_req__" + std::to_string(p) + "__";
        req_valid.push_back(&port(prefix + "valid"));
        req_ready.push_back(&port(prefix + "ready"));
        req_payload.push_back(&port(prefix + "payload"));
    }
    const Port &squash_port = port("squash"), &resp_valid = port("tepl_resp__valid"),
               &resp_ready = port("tepl_resp__ready"), &resp_payload = port("tepl_resp__payload"),
               &mreq_valid = port("mem_req__valid"), &mreq_ready = port("mem_req__ready"),
               &mreq_payload = port("mem_req__payload"), &mresp_valid = port("mem_resp__valid"),
               &mresp_payload = port("mem_resp__payload"), &pf_valid = port("pf_req__valid"),
               &pf_ready = port("pf_req__ready"), &pf_payload = port("pf_req__payload");
    std::vector<uint32_t> word(64), resp(resp_payload.words), mreq(mreq_payload.words), pf(pf_payload.words),
        mresp(mresp_payload.words);
    const int beat_bytes = width(F_RESP_DATA) / 8;
    std::vector<uint8_t> data(beat_bytes), line(64);

    completions.clear(), delivered.clear(), dropped.clear(), beats.clear(), prefetches.clear(), beat_data.clear();
    int64_t cycle = 0, last_handshake = 0, last_active = 0;  // Harness.last_active
    bool after_squash = false, squash_before = false;
    int64_t status = OK;
    message.clear();
    try {
        bool finished = false;
        while (!finished) {  // Harness.run
            int64_t budget = s->max_cycles < 0 ? -1 : s->max_cycles + s->reissue_cycles * core.reissues;
            if (cycle - last_active > s->watchdog || (budget >= 0 && cycle >= budget)) {  // Harness.summary
                std::string presented;
                for (size_t p = 0; p < core.ports.size(); p++)
                    if (core.ports[p].second >= 0)
                        presented += (presented.empty() ? "" : ", ") + std::string("port ") + std::to_string(p) +
                                     ": id " + std::to_string(core.ports[p].first) + " " +
                                     labels[core.ports[p].second];
                std::string why = cycle - last_active <= s->watchdog
                                      ? "the run took more than " + std::to_string(budget) + " cycles"
                                      : "no handshake and no memory read outstanding for " +
                                            std::to_string(s->watchdog) + " cycles";
                throw Failure{HANG, "cycle " + std::to_string(cycle) + ": " + why + "\nlast handshake in cycle " +
                                        std::to_string(last_handshake) + "\n" + board.summary() + "\npresented: " +
                                        (presented.empty() ? "none" : presented) + "\npending: " +
                                        std::to_string(core.pending.size()) + " requests, dropped: " +
                                        std::to_string(core.dropped.size()) + "\n" + memory.summary()};
            }
            // RequestPorts.drive
            core.start_cycle(cycle);
            bool squash = core.squash_now(cycle, !board.inflight.empty());
            for (int p = 0; p < s->loaders; p++) {
                auto slot = core.ports[p];
                port_set64(*req_valid[p], slot.second >= 0);
                if (slot.second >= 0) {
                    std::memcpy(word.data(), s->req_payloads + slot.second * s->req_words, 4 * s->req_words);
                    field_set(word.data(), off(F_REQ_ID), width(F_REQ_ID), slot.first);
                    port_set(*req_payload[p], word.data());
                }
            }
            port_set64(squash_port, squash);
            // CompletionPort.drive
            bool ready = core.resp_ready();
            port_set64(resp_ready, ready);
            // MemoryPorts.drive
            bool mem_ready = memory.ready(s->req_backpressure), pf_ready_now = memory.ready(s->pf_backpressure);
            bool offer = memory.offer(cycle);
            port_set64(mreq_ready, mem_ready);
            port_set64(pf_ready, pf_ready_now);
            port_set64(mresp_valid, offer);
            if (offer) {
                std::fill(mresp.begin(), mresp.end(), 0);
                field_set(mresp.data(), off(F_MRESP_TAG), width(F_MRESP_TAG), memory.outstanding[memory.offered].tag);
                memory.line(memory.outstanding[memory.offered].addr, line.data());
                bytes_set(mresp.data(), off(F_MRESP_DATA), 64, line.data());
                port_set(mresp_payload, mresp.data());
            }
            top->eval();  // settle
            core.busy_cycles += !board.inflight.empty();
            bool handshake = false;
            if (squash) {  // RequestPorts.squash
                int phase = board.inflight.empty() ? SQ_IDLE : board.inflight.front().row ? SQ_MID_TILE : SQ_BEFORE_DATA;
                if (phase == SQ_IDLE && core.any_port()) phase = SQ_PRESENTED;
                events[EV_SQUASH + 9 * phase + std::min<int64_t>(board.inflight.size(), 8)]++;
                core.squash(board.abort());
                after_squash = true;
                handshake = true;
            } else {
                if (after_squash) {  // RequestPorts.check_idle
                    after_squash = false;
                    std::string readys;
                    bool idle = true;
                    for (int p = 0; p < s->loaders; p++) {
                        uint64_t r = port_get64(*req_ready[p]);
                        readys += (p ? ", " : "") + std::to_string(r);
                        idle &= r != 0;
                    }
                    if (!idle)
                        throw Failure{PROTOCOL, "cycle " + std::to_string(cycle) +
                                                    ": the PE is not idle the cycle after a squash (tepl_req ready = (" +
                                                    readys + (s->loaders == 1 ? ",))" : "))")};
                }
                // CompletionPort.observe
                if (port_get64(resp_valid)) {
                    if (!ready) {
                        core.backpressure_cycles++;
                        events[EV_RESP_STALL]++;
                    } else {  // Scoreboard.beat
                        port_get(resp_payload, resp.data());
                        int64_t rid = field_get(resp.data(), off(F_RESP_ID), width(F_RESP_ID));
                        int64_t row = field_get(resp.data(), off(F_RESP_ROW), width(F_RESP_ROW));
                        bool error = field_get(resp.data(), off(F_RESP_ERROR), width(F_RESP_ERROR));
                        uint64_t why = field_get(resp.data(), off(F_RESP_REASON), width(F_RESP_REASON));
                        bool last = field_get(resp.data(), off(F_RESP_LAST), width(F_RESP_LAST));
                        bytes_get(resp.data(), off(F_RESP_DATA), beat_bytes, data.data());
                        if (board.inflight.empty() || board.inflight.front().id != rid)
                            throw Failure{MISMATCH, "cycle " + std::to_string(cycle) + ": completion beat (id " +
                                                        std::to_string(rid) + ", row " + std::to_string(row) + ") " +
                                                        board.stale(rid)};
                        auto& head = board.inflight.front();
                        int64_t req = head.req;
                        std::string where = "cycle " + std::to_string(cycle) + ": " + labels[req] + " (id " +
                                            std::to_string(rid) + ")";
                        bool complete = true;
                        if (s->req_error[req] >= 0) {
                            std::string want = reason(s->req_error[req]);
                            if (!error)
                                throw Failure{MISMATCH, where + ": expected error " + want + ", got data row " +
                                                            std::to_string(row)};
                            bool zero = true;
                            for (uint8_t b : data) zero &= b == 0;
                            events[EV_ERROR_PORT + 4 * std::min<int64_t>(why, 7) + std::min(accepted_port[req], 3)]++;
                            if ((int64_t)why != s->req_error[req] || !last || !zero) {
                                std::string value;  // the data as Python's {:#x}
                                for (int b = beat_bytes - 1; b >= 0; b--) {
                                    char two[3];
                                    std::snprintf(two, sizeof two, "%02x", data[b]);
                                    value += two;
                                }
                                value.erase(0, std::min(value.find_first_not_of('0'), value.size() - 1));
                                throw Failure{MISMATCH, where + ": expected a single error beat with reason " + want +
                                                            ", last=1 and data 0; got reason " + reason(why) +
                                                            ", last=" + std::to_string(last) + ", data 0x" + value};
                            }
                        } else if (error) {
                            throw Failure{MISMATCH, where + ": expected tile data, got error " + reason(why) +
                                                        " at row " + std::to_string(head.row)};
                        } else {
                            if (row != head.row)
                                throw Failure{MISMATCH, where + ": got row " + std::to_string(row) +
                                                            ", expected row " + std::to_string(head.row)};
                            if (last != (row == s->tile_rows - 1))
                                throw Failure{MISMATCH, where + ": row " + std::to_string(row) + " has last=" +
                                                            std::to_string(last)};
                            // The data is compared with the golden tile in Python, after the run.
                            beats.insert(beats.end(), {req, row, cycle, rid});
                            beat_data.insert(beat_data.end(), data.begin(), data.end());
                            head.row = row + 1;
                            complete = last;
                        }
                        if (complete) {
                            board.inflight.pop_front();
                            board.gone[rid] = "already completed (" + labels[req] + ")";
                            completions.insert(completions.end(), {rid, req});
                            core.completed(req);
                        }
                    }
                    handshake |= ready;
                }
                // RequestPorts.observe: one request per cycle at most, the lowest port wins; _GemmCore.saw_ready
                int taken = -1;
                for (int p = 0; p < s->loaders; p++)
                    if (core.ports[p].second >= 0 && port_get64(*req_ready[p])) {
                        taken = p;
                        break;
                    }
                for (int p = 0; p < s->loaders; p++) core.port_free[p] = port_get64(*req_ready[p]) && p != taken;
                if (taken < 0 && core.any_port()) events[EV_REQ_FULL]++;
                if (taken >= 0) {
                    accepted_port[core.ports[taken].second] = taken;
                    auto slot = core.accept(taken);
                    board.accept(slot.first, slot.second);
                    handshake = true;
                }
            }
            // MemoryPorts.observe
            bool mem_valid = port_get64(mreq_valid), pf_valid_now = port_get64(pf_valid);
            events[EV_MEM_STALL] += mem_valid && !mem_ready;
            if (mem_valid && mem_ready) {
                port_get(mreq_payload, mreq.data());
                memory.demand(field_get(mreq.data(), off(F_MREQ_ADDR), width(F_MREQ_ADDR)),
                              field_get(mreq.data(), off(F_MREQ_TAG), width(F_MREQ_TAG)), cycle);
                handshake = true;
            }
            if (pf_valid_now && pf_ready_now) {
                port_get(pf_payload, pf.data());
                memory.prefetch(field_get(pf.data(), off(F_PF_ADDR), width(F_PF_ADDR)), cycle);
                handshake = true;
            }
            if (offer) {
                memory.take();
                handshake = true;
            }
            if (handshake) last_handshake = cycle;
            if (handshake || !memory.outstanding.empty()) last_active = cycle;
            finished = core.done() && board.inflight.empty() && memory.outstanding.empty() && !mem_valid &&
                       !pf_valid_now && !squash && !squash_before;  // Harness.run: a squash's stale reads
            squash_before = squash;
            rise();
            cycle++;
        }
    } catch (const Failure& failure) {
        status = failure.status;
        message = failure.message;
    }
    top->eval();
    events[EV_PF_WASTED] = memory.wasted();
    s->rng[0] = (uint64_t)(rng.state >> 64), s->rng[1] = (uint64_t)rng.state;
    s->rng[4] = rng.has_uint32, s->rng[5] = rng.uinteger;
    delivered = core.delivered;
    dropped = core.dropped;
    prefetches = memory.prefetches;
    result = {status, message.c_str(), cycle, last_handshake, core.busy_cycles, core.backpressure_cycles, core.tiles,
              core.errors, core.squash_cycles, core.tmul_busy, memory.lines_demanded, memory.lines_prefetched,
              memory.lines_fetched, (uint64_t)(memory.channel_free >> 64), (uint64_t)memory.channel_free,
              (int64_t)completions.size() / 2, completions.data(), (int64_t)delivered.size(), delivered.data(),
              (int64_t)dropped.size(), dropped.data(), (int64_t)prefetches.size(), prefetches.data(),
              (int64_t)beats.size() / 4, beat_bytes, beats.data(), beat_data.data()};
    std::copy(event_counts.begin(), event_counts.end(), result.events);
}

// ---- the C interface (ctypes) ----
extern "C" {
void* deca_new() { return new Engine; }
void deca_free(void* e) { delete (Engine*)e; }
int deca_port_count(void* e) { return ((Engine*)e)->ports.size(); }
const char* deca_port_name(void* e, int i) { return ((Engine*)e)->ports[i].name; }
int deca_port_words(void* e, int i) { return ((Engine*)e)->ports[i].words; }
void deca_set(void* e, int i, const uint32_t* words) { port_set(((Engine*)e)->ports[i], words); }
void deca_get(void* e, int i, uint32_t* words) { port_get(((Engine*)e)->ports[i], words); }
void deca_settle(void* e) { ((Engine*)e)->top->eval(); }
void deca_tick(void* e) { ((Engine*)e)->tick(); }
const RunResult* deca_run(void* e, RunSpec* s) {
    ((Engine*)e)->run(s);
    return &((Engine*)e)->result;
}
}
