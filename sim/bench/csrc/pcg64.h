// NumPy's Generator(PCG64) stream, draw for draw: the fast engine's models draw the same numbers as
// the Python models on the same np.random.Generator, whose state goes in and comes back out.
// Follows numpy/random/src/pcg64/pcg64.h (pcg64_next64, pcg64_next32) and
// numpy/random/src/distributions/distributions.c (next_double, random_bounded_uint64 with a
// range below 2^32: buffered_bounded_lemire_uint32 on next_uint32).
#pragma once
#include <cstdint>

struct Pcg64 {
    unsigned __int128 state, inc;
    bool has_uint32;  // next_uint32 hands out the high half of the last 64-bit draw first
    uint32_t uinteger;

    uint64_t next64() {  // pcg_setseq_128_step_r, then pcg_output_xsl_rr_128_64 of the new state
        static const unsigned __int128 mult =
            ((unsigned __int128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL;
        state = state * mult + inc;
        uint64_t value = (uint64_t)(state >> 64) ^ (uint64_t)state;
        unsigned rot = (unsigned)(state >> 122);
        return (value >> rot) | (value << ((64 - rot) & 63));
    }

    uint32_t next32() {
        if (has_uint32) {
            has_uint32 = false;
            return uinteger;
        }
        uint64_t next = next64();
        has_uint32 = true;
        uinteger = (uint32_t)(next >> 32);
        return (uint32_t)next;
    }

    // Generator.random()
    double random() { return (double)(next64() >> 11) * (1.0 / 9007199254740992.0); }

    // Generator.integers(lo, hi) for int64 bounds with hi - lo - 1 < 2^32 - 1 (Lemire's rejection).
    int64_t integers(int64_t lo, int64_t hi) {
        uint32_t rng = (uint32_t)(hi - lo - 1);
        if (rng == 0) return lo;
        uint32_t rng_excl = rng + 1;
        uint64_t m = (uint64_t)next32() * rng_excl;
        uint32_t leftover = (uint32_t)m;
        if (leftover < rng_excl) {
            uint32_t threshold = (UINT32_MAX - rng) % rng_excl;
            while (leftover < threshold) {
                m = (uint64_t)next32() * rng_excl;
                leftover = (uint32_t)m;
            }
        }
        return lo + (int64_t)(m >> 32);
    }
};

#ifdef PCG64_DRAWS
// For the test against NumPy: ops[i] < 0 draws random(), else integers(lo[i], hi[i]); out[i] gets
// the draw (integers as doubles, exact below 2^53); state: {state hi, lo, inc hi, lo, has, uinteger}.
extern "C" void pcg64_draws(uint64_t* st, const int64_t* lo, const int64_t* hi, long n, double* out) {
    Pcg64 g{((unsigned __int128)st[0] << 64) | st[1], ((unsigned __int128)st[2] << 64) | st[3], st[4] != 0,
            (uint32_t)st[5]};
    for (long i = 0; i < n; i++) out[i] = lo[i] < 0 ? g.random() : (double)g.integers(lo[i], hi[i]);
    st[0] = (uint64_t)(g.state >> 64), st[1] = (uint64_t)g.state, st[4] = g.has_uint32, st[5] = g.uinteger;
}
#endif
