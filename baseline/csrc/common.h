/* What the kernels of every path share: the configuration, the scalar arithmetic of the format. */
#ifndef DECA_COMMON_H
#define DECA_COMMON_H
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <x86intrin.h>
#define DECA_X86 1
#else
#define DECA_X86 0
#endif

enum { SCALE_NONE = 0, SCALE_BF16 = 1, SCALE_E8M0 = 2, SCALE_E4M3 = 3 };
/* PATH_AVX512_NO_BF16: the AVX-512 path without AVX512_BF16 instructions, as on CPUs without them. */
enum { PATH_SCALAR = 0, PATH_AVX512 = 1, PATH_AVX512_NO_BF16 = 2, PATH_AVX2 = 3 };

/* Per-kernel configuration (TileConfig), filled from Python. */
typedef struct {
    int32_t q_bits, sparse, scale_fmt, scale_group, lut_size;
    uint16_t lut[256];
} deca_cfg;

/* Counters of one decode call: tiles that took an exact slow path (E8M0 scales beyond the fast
 * path's range, or scaled LUT entries that are NaN or below 2^-126). */
typedef struct {
    int64_t slow_tiles;
} deca_stats;

/* ---------------------------------------------------------------------------------------------
 * Shared scalar pieces
 * ------------------------------------------------------------------------------------------- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Exact value of an E4M3FN code as float (NaN for 0x7F/0xFF): normal codes rebias the exponent
 * (7 -> 127), subnormal ones are m * 2^-9. */
static inline float e4m3_value(uint8_t x) {
    uint32_t mag = x & 0x7Fu, sign = (uint32_t)(x & 0x80) << 24;
    if (mag == 0x7F) return bits_f32(0x7FC00000u);
    float f = mag < 8 ? (float)mag * (1.0f / 512) : bits_f32((mag << 20) + (120u << 23));
    return bits_f32(f32_bits(f) | sign);
}

/* Little-endian loads of 4 and 8 bytes from anywhere. */
static inline uint64_t load_le(const uint8_t *p, int n) {
    uint64_t w = 0;
    memcpy(&w, p, n);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w) >> (64 - 8 * n);
#endif
    return w;
}
static inline uint32_t load_le32(const uint8_t *p) { return (uint32_t)load_le(p, 4); }
static inline uint64_t load_le64(const uint8_t *p) { return load_le(p, 8); }

/* A BF16 pattern as float with a zero exponent field read as signed zero (DAZ). */
static inline float bf16_daz(uint16_t v) {
    return bits_f32((v & 0x7F80) ? (uint32_t)v << 16 : (uint32_t)(v & 0x8000) << 16);
}

/* The scale of element group s of a tile as float, for BF16 and E4M3 scale streams. */
static inline float scale_float(const uint8_t *sc, int fmt, int s) {
    if (fmt == SCALE_BF16) return bf16_daz((uint16_t)(sc[2 * s] | sc[2 * s + 1] << 8));
    return e4m3_value(sc[s]);
}

/* Float32 product of two BF16-exact operands -> BF16 by scale_mul's rules. The product of two
 * 8-bit significands is exact in float32 except far below 2^-126, where the result flushes anyway;
 * just below 2^-126 it is exact, and rounding to 8 bits there reaches 2^-126 from
 * 2^-126 - 2^-135 (the tie goes to the even 2^-126) upwards. */
static inline uint16_t round_product(float p) {
    /* Branch-free: zero products are common (a LUT's zero) and come in no predictable order. */
    const uint32_t b = f32_bits(p), mag = b & 0x7FFFFFFFu;
    const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1)) >> 16;
    const uint32_t flushed = ((b >> 16) & 0x8000) | (mag >= 0x7FC000u ? 0x80 : 0);
    uint32_t sub = -(uint32_t)((b & 0x7F800000u) == 0), nan = -(uint32_t)(mag > 0x7F800000u);
    __asm__("" : "+r"(sub));  /* or the compiler makes a branch of the select again */
    return (uint16_t)((((rounded & ~sub) | (flushed & sub)) & ~nan) | (0x7FC0 & nan));
}

/* BF16 v times 2^k (E8M0 code x = k + 127), by scale_mul's rules. */
static inline uint16_t e8m0_mul(uint16_t v, int x) {
    int e = (v >> 7) & 0xFF, sign = v & 0x8000;
    if (x == 0xFF || (e == 0xFF && (v & 0x7F))) return 0x7FC0;
    if (e == 0xFF) return v;
    if (e == 0) return (uint16_t)sign;
    int E = e + x - 127;
    if (E >= 0xFF) return (uint16_t)(sign | 0x7F80);
    if (E <= 0) return (uint16_t)sign;
    return (uint16_t)(sign | E << 7 | (v & 0x7F));
}

static inline int popcount64(uint64_t x) { return __builtin_popcountll(x); }

/* Stored elements of a tile and the value-stream checks of golden.matrix._decode (length, zero
 * padding). Returns the number stored, or -1 when the stream is malformed. */
static inline int check_stream(const deca_cfg *cfg, const uint8_t *vals, int64_t vlen, const uint8_t *mask) {
    int n = 512;
    if (mask) {
        n = 0;
        for (int i = 0; i < 8; i++) { uint64_t w; memcpy(&w, mask + 8 * i, 8); n += popcount64(w); }
    }
    int64_t bits = (int64_t)n * cfg->q_bits;
    if (vlen != (bits + 7) / 8) return -1;
    int tail = (int)(bits % 8);
    if (tail && (vals[vlen - 1] >> tail)) return -1;
    return n;
}

static inline uint16_t *tile_out(uint16_t *out, int64_t t, int64_t tile_cols, int64_t row_stride) {
    if (tile_cols == 0) return out;  /* every tile into one buffer (benchmarks) */
    return out + (t / tile_cols) * 16 * row_stride + (t % tile_cols) * 32;
}

/* The smallest nonzero magnitude of a LUT's entries (DAZ), or -1 when one is Inf or NaN. */
static inline float lut_min_magnitude(const deca_cfg *cfg) {
    float vmin = 0;
    for (int i = 0; i < cfg->lut_size; i++) {
        uint16_t v = cfg->lut[i] & 0x7FFF;
        if (v >= 0x7F80) return -1;
        if (v & 0x7F80) { float f = bits_f32((uint32_t)v << 16); if (vmin == 0 || f < vmin) vmin = f; }
    }
    return vmin;
}

/* E8M0 codes x for which v + ((x - 127) << 7) is exact for every nonzero-exponent LUT entry: no
 * entry overflows or underflows and none is Inf/NaN. Empty (lo > hi) when the LUT has specials. */
static inline void e8m0_safe_range(const deca_cfg *cfg, int *lo, int *hi) {
    int emin = 255, emax = 0;
    for (int i = 0; i < cfg->lut_size; i++) {
        int e = (cfg->lut[i] >> 7) & 0xFF;
        if (e == 0xFF) { *lo = 1; *hi = 0; return; }
        if (e) { if (e < emin) emin = e; if (e > emax) emax = e; }
    }
    if (emax == 0) { *lo = 0; *hi = 254; return; }  /* only zeros: any finite scale */
    *lo = 128 - emin > 0 ? 128 - emin : 0;   /* emin + x - 127 >= 1 */
    *hi = 381 - emax < 254 ? 381 - emax : 254;  /* emax + x - 127 <= 254, and x != 255 (NaN) */
}

/* The arguments of deca_decode, as every path's tile loop takes them. */
typedef struct {
    const deca_cfg *cfg;
    int64_t ntiles;
    const uint8_t *values, *masks, *scales;
    const int64_t *val_off, *block_of_tile;
    uint16_t *out;
    int64_t tile_cols, row_stride;
    deca_stats *stats;
    int bf16ins;  /* the AVX-512 path uses AVX512_BF16's vcvtne2ps2bf16 (the others ignore it) */
} deca_args;

/* The portable scalar path (scalar.c): returns 0, or t + 1 for the first malformed tile t. */
int64_t deca_decode_scalar(const deca_args *a);

/* The AVX2 path (avx2.c, compiled without AVX-512 so that it measures what an AVX2-only CPU runs):
 * returns 0, or t + 1 for the first malformed tile t. */
int64_t deca_decode_avx2(const deca_args *a);
int deca_have_avx2(void);
#endif
