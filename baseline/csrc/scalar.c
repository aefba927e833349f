/* The portable scalar path of deca_decode (its own translation unit, so that it builds in
 * parallel with the others). */
#include "common.h"

/* One element at a time, branch-free where the data decides: the code read from the stream at bit
 * bp with one 8-byte load and a shift (the streams are padded, so reads past a stream's end stay in
 * the buffer), a LUT entry, the scaling, one 16-bit store. build.py compiles this file without
 * auto-vectorization, so that it measures scalar code (GCC would turn dense loops into AVX-512
 * gathers, which measured slower here). Sparse elements read the code at bp
 * whether stored or not, advance bp only when stored and zero the value when not. E8M0 scales
 * add to the exponent (tiles whose scales could overflow, underflow or are NaN take e8m0_mul);
 * BF16 and E4M3 scales multiply in float32 and round by scale_mul's rules (round_product). Q <= 4
 * tiles with at least as many stored elements as scaled entries scale the 2^Q LUT entries once per
 * scale group instead, so that an element is a code, a load and a store. It counts no slow tiles. */
#define SCALAR_INLINE static inline __attribute__((always_inline))

/* scale_mul of LUT entry v (DAZ already applied for Q <= 8) by its group's scale: E8M0 k = (x - 127)
 * << 7 or code x, float scale f; ``fast``: the tile's scales make no NaN, overflow or product below
 * 2^-126 with any entry, so the exponent add and the plain rounding are exact. */
SCALAR_INLINE uint16_t scale_value(uint16_t v, int q, int fmt, int fast, uint16_t k, int x, float f) {
    if (fmt == SCALE_E8M0) return fast ? (uint16_t)(v + (k & -(uint16_t)((v & 0x7F80) != 0))) : e8m0_mul(v, x);
    if (fmt == SCALE_NONE) return v;
    const float p = (q == 16 ? bf16_daz(v) : bits_f32((uint32_t)v << 16)) * f;
    const uint32_t b = f32_bits(p);
    return fast ? (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1)) >> 16) : round_product(p);
}

/* The rows of one tile; ``check``: look for codes beyond the LUT; ``fast``: see scale_value;
 * ``pre``: tab holds each scale group's scaled LUT (2^Q entries per group; the caller passes
 * SCALE_NONE, so elements are not scaled again). Returns nonzero for a code beyond the LUT. */
SCALAR_INLINE uint32_t scalar_rows(const uint8_t *vals, const uint8_t *mask, const uint8_t *sc, uint16_t *o, int64_t rs,
                                   const uint16_t *tab, int lut_size, int g, const uint16_t *k7, const float *sf,
                                   const int q, const int sparse, const int fmt, const int check, const int fast,
                                   const int pre) {
    const uint64_t qmask = (1ull << q) - 1;
    uint64_t bp = 0;
    uint32_t bad = 0;
    for (int r = 0; r < 16; r++) {
        const uint32_t m = sparse ? load_le32(mask + 4 * r) : 0xFFFFFFFFu;
        for (int h = 0; h < 2; h++) {
            const int s = g == 32 ? r : 2 * r + h;
            const uint16_t *lut = pre ? tab + (s << q) : tab;
            const uint16_t k = fmt == SCALE_E8M0 ? k7[s] : 0;
            const float f = fmt == SCALE_BF16 || fmt == SCALE_E4M3 ? sf[s] : 0;
            const int x = fmt == SCALE_E8M0 ? sc[s] : 0;
            /* Dense Q <= 4: the half row's 16 codes are one 64-bit word. */
            uint64_t word = !sparse && q <= 4 ? load_le64(vals + (2 * r + h) * 2 * q) : 0;
            for (int c = 16 * h; c < 16 * h + 16; c++) {
                const uint32_t bit = (m >> c) & 1;
                uint32_t code;
                if (!sparse && q <= 4) code = (uint32_t)((word >> (q * (c - 16 * h))) & qmask);
                else {
                    code = (uint32_t)((load_le64(vals + (bp >> 3)) >> (bp & 7)) & qmask);
                    bp += sparse ? (uint32_t)q & -bit : (uint32_t)q;
                }
                if (check) bad |= bit & (code >= (uint32_t)lut_size);
                uint16_t v = q == 16 ? (uint16_t)code : lut[code];
                v = scale_value(v, q, fmt, fast, k, x, f);
                if (sparse) v &= (uint16_t)-bit;
                o[r * rs + c] = v;
            }
        }
    }
    return bad;
}

SCALAR_INLINE int64_t scalar_tiles(const deca_args *a, const int q, const int sparse, const int fmt) {
    const deca_cfg *cfg = a->cfg;
    const int64_t ntiles = a->ntiles, tile_cols = a->tile_cols, rs = a->row_stride;
    const uint8_t *const values = a->values, *const masks = a->masks, *const scales = a->scales;
    const int64_t *const val_off = a->val_off, *const block_of_tile = a->block_of_tile;
    uint16_t *const out = a->out;
    const int g = cfg->scale_group, lut_size = cfg->lut_size, nscales = 512 / g;
    const int scale_len = fmt == SCALE_NONE ? 0 : nscales * (fmt == SCALE_BF16 ? 2 : 1);
    const int check_codes = q <= 8 && lut_size < (1 << q);
    uint16_t lut[256];  /* read as zero-exponent = zero when scaled (the scaler's DAZ) */
    for (int i = 0; i < 256; i++)
        lut[i] = fmt == SCALE_NONE || (cfg->lut[i] & 0x7F80) ? cfg->lut[i] : cfg->lut[i] & 0x8000;
    int safe_lo = 1, safe_hi = 0;
    if (fmt == SCALE_E8M0 && q <= 8) e8m0_safe_range(cfg, &safe_lo, &safe_hi);
    const float vmin = q <= 8 ? lut_min_magnitude(cfg) : -1;  /* Q = 16: any value, never fast */
    uint16_t tab[512];  /* per scale group its scaled LUT (``pre``) */
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *vals = values + val_off[t];
        const uint8_t *mask = sparse ? masks + 64 * t : NULL;
        const uint8_t *sc = fmt ? scales + block_of_tile[t] * scale_len : NULL;
        const int n = check_stream(cfg, vals, val_off[t + 1] - val_off[t], mask);
        if (n < 0) return t + 1;
        uint16_t *o = tile_out(out, t, tile_cols, rs);
        float sf[32];
        uint16_t k7[32];
        int fast = fmt == SCALE_E8M0 || vmin >= 0;
        for (int s = 0; fmt != SCALE_NONE && s < nscales; s++) {
            if (fmt == SCALE_E8M0) {
                k7[s] = (uint16_t)((sc[s] - 127) << 7);
                fast &= sc[s] >= safe_lo && sc[s] <= safe_hi;
            } else {
                /* no product with a LUT entry (DAZ, zero or >= vmin) is NaN or nonzero below 2^-126 */
                const float a = __builtin_fabsf(sf[s] = scale_float(sc, fmt, s));
                fast &= a < __builtin_inff() && (a == 0 || a * vmin >= 0x1p-126f);
            }
        }
        /* Scaling the LUT per group costs nscales << Q products, scaling the elements n. */
        const int pre = fmt != SCALE_NONE && q <= 4 && nscales << q <= n;
        if (pre) {
            for (int s = 0; s < nscales; s++)
                for (int c = 0; c < 1 << q; c++)
                    tab[s << q | c] = scale_value(lut[c], q, fmt, fast, k7[s], sc[s], sf[s]);
        }
#define ROWS(CHECK, FAST, PRE) scalar_rows(vals, mask, sc, o, rs, PRE ? tab : lut, lut_size, g, k7, sf, q, sparse, \
                                           PRE ? SCALE_NONE : fmt, CHECK, FAST, PRE)
        const int plain = fmt == SCALE_NONE || fast;  /* a constant 1 unscaled */
        uint32_t bad = pre ? (check_codes ? ROWS(1, 1, 1) : ROWS(0, 1, 1))
                     : check_codes ? (plain ? ROWS(1, 1, 0) : ROWS(1, 0, 0)) : (plain ? ROWS(0, 1, 0) : ROWS(0, 0, 0));
#undef ROWS
        if (bad) return t + 1;
    }
    return 0;
}

#define SCALAR_FMT(Q, SP) \
    switch (fmt) { \
    case SCALE_NONE: return scalar_tiles(a, Q, SP, SCALE_NONE); \
    case SCALE_BF16: return scalar_tiles(a, Q, SP, SCALE_BF16); \
    case SCALE_E8M0: return scalar_tiles(a, Q, SP, SCALE_E8M0); \
    default: return scalar_tiles(a, Q, SP, SCALE_E4M3); \
    }
#define SCALAR_Q(Q) case Q: if (a->cfg->sparse) { SCALAR_FMT(Q, 1) } else { SCALAR_FMT(Q, 0) }

int64_t deca_decode_scalar(const deca_args *a) {
    const int fmt = a->cfg->scale_fmt;
    switch (a->cfg->q_bits) {
    SCALAR_Q(1) SCALAR_Q(2) SCALAR_Q(3) SCALAR_Q(4) SCALAR_Q(5) SCALAR_Q(6) SCALAR_Q(7) SCALAR_Q(8)
    default: if (a->cfg->sparse) { SCALAR_FMT(16, 1) } else { SCALAR_FMT(16, 0) }
    }
}
