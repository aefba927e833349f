/* The AVX2 path (AVX2, FMA, F16C, BMI2) of deca_decode, bit-exact to deca.golden like the others.
 *
 * build.py compiles this file with AVX-512 switched off, so that on an AVX-512 machine it still
 * measures the instructions an AVX2-only CPU runs (the compiler would otherwise use EVEX forms).
 * Only one 256-bit shuffle port on Intel cores (port 5) runs vpshufb, vpunpck*, vpermq and
 * vinserti128 from a register; the kernels spend it on lookups and put everything else on the
 * ALU ports and the load ports (broadcasts and vinserti128 from memory do not need port 5).
 *
 * A row (32 elements) at a time: its codes as 32 bytes, zero where not stored, are
 *   dense Q = 8: one load; dense Q = 1, 2, 4: the row's stream bytes broadcast to both lanes, a
 *   vpshufb that puts each element's byte in place and masks and a shift that leave its code at a
 *   bit offset below 4 (Q = 4: the code), looked up in a table spread to those offsets; other
 *   Q < 8: BMI2 pdep spreads each 8 codes (Q bytes) into 8 bytes of a tile buffer. Sparse tiles
 *   look their stored codes (from the stream, or for Q < 8 from the pdep buffer) up 32 at a time
 *   as dense rows, into BF16 words, then expand each row's words as sparse BF16 rows: per mask
 *   byte (8 elements) a 16-byte load and one vpshufb with indices from a 256-entry table. Sparse
 *   Q <= 4 instead expand the row's codes (pdep per mask byte, Q = 1 one per row) and look them
 *   up as a dense row, with one scale per row in the row's scaled table.
 * The codes index the LUT split into its low and high bytes: Q <= 4 one vpshufb per byte; Q = 5..8
 * a chain of vpshufb over the LUT's 16-entry pieces (piece i looked up by code - 16i, which
 * vpshufb zeroes when negative, XOR-accumulated from piece differences; Q = 8 two 7-bit chains
 * and a blend). 8-bit LUTs of the form sign | (magnitude << s) + base from a magnitude up (E5M2,
 * E4M3) are computed instead with a shift, a mask and an add per byte, the magnitudes below
 * (zeros, subnormals) corrected by a 16-entry vpshufb table; rows with a code above (Inf, NaN)
 * take the chain. vpunpck[lh]bw of the low and high bytes give the BF16 words; the codes are laid
 * out so that they come out in order. Integer LUTs (int8) are converted: codes sign-extended and
 * converted to float32, whose product with the scale is exact before rounding.
 * Scales: E8M0 adds (x - 127) << 7 to words with a nonzero exponent when the tile's scales keep
 * every LUT entry normal (else the exact per-lane rules); BF16 and E4M3 scales multiply in
 * float32 (even and odd words separately) and round to nearest-even on the bits, with the
 * exact fix-ups for NaN and products below 2^-126 only in tiles whose scales can make them; for
 * Q <= 4 with one scale per row, the row's 16 table entries are scaled instead of its 32 words.
 */
#include "common.h"

#if DECA_X86
#define AVX2 __attribute__((target("avx2,fma,f16c,bmi,bmi2,popcnt")))
#define INLINE static inline __attribute__((always_inline))

int deca_have_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("f16c");
}

/* word_mask[m]: word j = 0xFFFF when bit j of m is set; byte_mask[m]: byte j = 0xFF then.
 * expand16[m]: the vpshufb indices that expand the stored BF16 words of mask byte m (0x80, which
 * vpshufb writes as 0, where not stored). */
static uint16_t word_mask[256][8] __attribute__((aligned(16)));
static uint64_t byte_mask[256];
static uint8_t expand16[256][16] __attribute__((aligned(16)));
static int tables_ready;

static void init_tables(void) {
    for (int m = 0; m < 256; m++) {
        int rank = 0;
        for (int j = 0; j < 8; j++) {
            int set = (m >> j) & 1;
            word_mask[m][j] = set ? 0xFFFF : 0;
            byte_mask[m] |= set ? 0xFFull << 8 * j : 0;
            expand16[m][2 * j] = set ? (uint8_t)(2 * rank) : 0x80;
            expand16[m][2 * j + 1] = set ? (uint8_t)(2 * rank + 1) : 0x80;
            rank += set;
        }
    }
    tables_ready = 1;
}

/* Per-kernel constants. */
typedef struct {
    __m256i lo[16], hi[16];  /* LUT pieces (Q <= 4: piece 0 is the table the row's indices look up; else
                                differences), both lanes */
    __m256i words;           /* Q <= 4: that table as 16 words (scaled per row for BF16 and E4M3 scales per 32) */
    int pieces;
    int spread;              /* dense Q <= 2 (all codes valid): indices by spread_row, the table spread to them */
    int int8;                /* Q = 8: entry i is the integer (int8_t)i: converted, not looked up */
    int affine;              /* Q = 8: codes of magnitude up to amax computed, not looked up */
    __m256i a_lomask, a_himask, a_base, a_max, a_low, low_lo, low_hi;
    __m256i a_up, a_down;    /* word multipliers 2^s and 2^(8 + s): shifts by s left and 8 - s right */
} luts;

/* The LUT's 16-entry pieces (DAZ when scaled), as XOR differences for the chains; the spread table
 * of dense Q <= 2 (entry c << o is code c's for every bit offset o < 4 spread_row leaves); the
 * integer form of 8-bit LUTs; their affine form sign | ((magnitude << s) + base) (base's low byte
 * 0) from a magnitude amin <= 16 to amax, where the magnitudes below amin (zero and subnormals of
 * E5M2 and E4M3) must be sign-symmetric: their entries XOR the formula's result are a 16-entry
 * table indexed by magnitude - amin + 128 (saturating), which vpshufb zeroes from amin up. */
AVX2 static void load_luts(const deca_cfg *cfg, int daz, luts *L) {
    const int q = cfg->q_bits;
    uint16_t v[256];
    for (int i = 0; i < 256; i++) v[i] = daz && !(cfg->lut[i] & 0x7F80) ? cfg->lut[i] & 0x8000 : cfg->lut[i];
    L->pieces = q <= 4 ? 1 : 1 << (q - 4);
    L->spread = q <= 2 && !cfg->sparse && cfg->lut_size == 1 << q;
    uint16_t t[256] = {0};
    memcpy(t, v, sizeof t);
    if (L->spread) {
        memset(t, 0, 16 * sizeof *t);
        for (int c = 0; c < 1 << q; c++)
            for (int o = 0; o < 4; o += q) t[c << o] = v[c];
    }
    L->words = _mm256_loadu_si256((const __m256i *)t);
    for (int p = 0; p < L->pieces; p++) {
        uint8_t lo[16], hi[16];
        /* Q = 8: pieces 0-7 and 8-15 are two chains */
        int prev = (p & 7) ? p - 1 : -1;
        for (int i = 0; i < 16; i++) {
            uint16_t x = t[16 * p + i] ^ (prev >= 0 ? t[16 * prev + i] : 0);
            lo[i] = (uint8_t)x; hi[i] = (uint8_t)(x >> 8);
        }
        L->lo[p] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lo));
        L->hi[p] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hi));
    }
    L->int8 = L->affine = 0;
    if (q != 8 || cfg->lut_size != 256) return;
    L->int8 = 1;
    for (int i = 0; i < 256; i++) L->int8 &= (uint32_t)v[i] << 16 == f32_bits((float)(int8_t)i);
    int best = 0;
    for (int s = 1; s < 8; s++) {
        uint16_t base = (uint16_t)(v[64] - (64 << s));
        if (base & 0xFF) continue;
        int ok[128];
        for (int m = 0; m < 128; m++) {
            uint16_t f = (uint16_t)((m << s) + base);
            ok[m] = !(f & 0x8000) && v[m] == f && v[m + 128] == (f | 0x8000);
        }
        if (!ok[64]) continue;
        int amin = 64, amax = 64;
        while (amin > 0 && ok[amin - 1]) amin--;
        while (amax < 127 && ok[amax + 1]) amax++;
        int symmetric = amin <= 16;
        for (int m = 0; m < amin; m++) symmetric &= v[m + 128] == (v[m] | 0x8000);
        if (!symmetric || amax - amin + 1 <= best) continue;
        best = amax - amin + 1;
        uint8_t lo[16] = {0}, hi[16] = {0};
        for (int m = 0; m < amin; m++) {  /* the entries XOR the formula's bytes */
            lo[(m - amin) & 15] = (uint8_t)(v[m] ^ (m << s));
            hi[(m - amin) & 15] = (uint8_t)((v[m] >> 8) ^ ((m >> (8 - s)) + (base >> 8)));
        }
        L->low_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lo));
        L->low_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hi));
        L->a_low = _mm256_set1_epi8((char)(0x80 - amin));
        L->a_up = _mm256_set1_epi16((short)(1 << s));
        L->a_down = _mm256_set1_epi16((short)(1 << (8 + s)));
        L->a_lomask = _mm256_set1_epi8((char)((0xFF << s) & 0xFF));
        L->a_himask = _mm256_set1_epi8((char)(0x7F >> (8 - s)));
        L->a_base = _mm256_set1_epi8((char)(base >> 8));
        L->a_max = _mm256_set1_epi8((char)amax);
    }
    L->affine = best >= 64;
}

/* The constants of the last configuration decoded (per thread): deca baseline times calls of a few
 * dozen tiles, and the affine search costs as much as several tiles. */
static __thread struct {
    deca_cfg cfg;
    int daz, valid;
    luts L;
} lut_cache;

AVX2 static void cached_luts(const deca_cfg *cfg, int daz, luts *L) {
    if (!lut_cache.valid || lut_cache.daz != daz || memcmp(&lut_cache.cfg, cfg, sizeof *cfg)) {
        load_luts(cfg, daz, &lut_cache.L);
        lut_cache.cfg = *cfg, lut_cache.daz = daz, lut_cache.valid = 1;
    }
    *L = lut_cache.L;
}

/* Low and high bytes of the LUT entries of 32 codes (any layout), Q = 5..8. */
AVX2 INLINE void chain(const luts *L, int q, __m256i x, __m256i *lo, __m256i *hi) {
    __m256i l = _mm256_shuffle_epi8(L->lo[0], x), h = _mm256_shuffle_epi8(L->hi[0], x);
    const int n = q == 8 ? 8 : L->pieces;
    for (int i = 1; i < n; i++) {
        __m256i xi = _mm256_sub_epi8(x, _mm256_set1_epi8((char)(16 * i)));
        l = _mm256_xor_si256(l, _mm256_shuffle_epi8(L->lo[i], xi));
        h = _mm256_xor_si256(h, _mm256_shuffle_epi8(L->hi[i], xi));
    }
    if (q == 8) {  /* codes 128-255: the upper chain on code - 128 */
        __m256i xu = _mm256_xor_si256(x, _mm256_set1_epi8((char)0x80));
        __m256i ul = _mm256_shuffle_epi8(L->lo[8], xu), uh = _mm256_shuffle_epi8(L->hi[8], xu);
        for (int i = 1; i < 8; i++) {
            __m256i xi = _mm256_sub_epi8(xu, _mm256_set1_epi8((char)(16 * i)));
            ul = _mm256_xor_si256(ul, _mm256_shuffle_epi8(L->lo[8 + i], xi));
            uh = _mm256_xor_si256(uh, _mm256_shuffle_epi8(L->hi[8 + i], xi));
        }
        l = _mm256_blendv_epi8(l, ul, x);
        h = _mm256_blendv_epi8(h, uh, x);
    }
    *lo = l, *hi = h;
}

/* Low and high bytes of the LUT entries of 32 codes (any layout): Q <= 4 one vpshufb each; 8-bit
 * LUTs the affine form for rows whose codes all have magnitudes up to amax; else the chain. */
AVX2 INLINE void lookup(const luts *L, int q, __m256i x, __m256i *lo, __m256i *hi) {
    if (q <= 4) {
        *lo = _mm256_shuffle_epi8(L->lo[0], x), *hi = _mm256_shuffle_epi8(L->hi[0], x);
        return;
    }
    if (q == 8 && L->affine) {
        __m256i mag = _mm256_and_si256(x, _mm256_set1_epi8(0x7F));
        if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(mag, L->a_max), mag)) == -1) {
            __m256i low = _mm256_adds_epu8(mag, L->a_low);
            /* shifts by a variable count take the shuffle port, multiplies do not */
            __m256i l = _mm256_and_si256(_mm256_mullo_epi16(x, L->a_up), L->a_lomask);
            __m256i h = _mm256_add_epi8(_mm256_and_si256(_mm256_mulhi_epu16(x, L->a_down), L->a_himask), L->a_base);
            *lo = _mm256_xor_si256(l, _mm256_shuffle_epi8(L->low_lo, low));
            h = _mm256_xor_si256(h, _mm256_shuffle_epi8(L->low_hi, low));
            *hi = _mm256_or_si256(h, _mm256_andnot_si256(_mm256_set1_epi8(0x7F), x));
            return;
        }
    }
    chain(L, q, x, lo, hi);
}

/* The BF16 words of elements 0-15 (*w0) and 16-31 (*w1) from the low and high bytes of 32 codes'
 * entries in the rows layout (lane L byte b holds element 16 (b >> 3) + 8L + (b & 7)). */
AVX2 INLINE void to_words(__m256i lo, __m256i hi, __m256i *w0, __m256i *w1) {
    *w0 = _mm256_unpacklo_epi8(lo, hi);
    *w1 = _mm256_unpackhi_epi8(lo, hi);
}

/* Float32 products -> dwords whose high word is the BF16 result by scale_mul's rules: nearest-even
 * on the bits; ``exact``: NaN -> 0x7FC0, below 2^-126 -> signed zero, or 2^-126 from
 * 2^-126 - 2^-135 up (round_product). */
AVX2 INLINE __m256i round_dwords(__m256 p, int exact) {
    __m256i b = _mm256_castps_si256(p);
    __m256i t = _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)),
                                 _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1)));
    if (!exact) return t;
    __m256i sub = _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
    __m256i up = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7FBFFF));
    __m256i flushed = _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32((int)0x80000000u)),
                                      _mm256_and_si256(up, _mm256_set1_epi32(0x00800000)));
    t = _mm256_blendv_epi8(t, flushed, sub);
    return _mm256_blendv_epi8(t, _mm256_set1_epi32(0x7FC00000), _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q)));
}

/* The BF16 words of the float32 products of even (pe) and odd (po) elements. */
AVX2 INLINE __m256i round_pairs(__m256 pe, __m256 po, int exact) {
    return _mm256_or_si256(_mm256_srli_epi32(round_dwords(pe, exact), 16),
                           _mm256_and_si256(round_dwords(po, exact), _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* scale_mul of 16 BF16 words (DAZ applied) by one float scale. */
AVX2 INLINE __m256i mul_round(__m256i v, __m256 s, int exact) {
    return round_pairs(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), s),
                       _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u))), s),
                       exact);
}

/* scale_mul of 16 codes of an integer LUT (luts.int8) by one float scale: each dword holds two
 * codes, each converted to float exactly (the entry), the product exact in float32 (7 by 8
 * significant bits) and rounded as the looked-up entry's would be. */
AVX2 INLINE __m256i int_mul_round(__m256i d, __m256 s, int exact) {
    return round_pairs(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(d, 24), 24)), s),
                       _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(d, 16), 24)), s), exact);
}

/* A 16-entry table of (scaled) words split into its low and high bytes, each in both lanes: the
 * row's lookups then give scaled words (Q <= 4, one scale per row). */
AVX2 INLINE void split_table(__m256i words, __m256i split, __m256i *lo, __m256i *hi) {
    const __m256i t = _mm256_shuffle_epi8(words, split);  /* each lane: 8 low, 8 high bytes */
    *lo = _mm256_permute4x64_epi64(t, 0x88);
    *hi = _mm256_permute4x64_epi64(t, 0xDD);
}

/* v times 2^k per word (kv = k, k7 = k << 7), exact by scale_mul's rules; nan: the scale is NaN. */
AVX2 INLINE __m256i e8m0_exact(__m256i v, __m256i kv, __m256i k7, __m256i nan_scale) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i e = _mm256_and_si256(_mm256_srli_epi16(v, 7), _mm256_set1_epi16(0xFF));
    __m256i E = _mm256_add_epi16(e, kv);
    __m256i sign = _mm256_and_si256(v, _mm256_set1_epi16((short)0x8000));
    __m256i r = _mm256_add_epi16(v, k7);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(sign, _mm256_set1_epi16(0x7F80)), _mm256_cmpgt_epi16(E, _mm256_set1_epi16(254)));
    __m256i under = _mm256_or_si256(_mm256_cmpgt_epi16(_mm256_set1_epi16(1), E), _mm256_cmpeq_epi16(e, zero));
    r = _mm256_blendv_epi8(r, sign, under);
    r = _mm256_blendv_epi8(r, v, _mm256_cmpeq_epi16(e, _mm256_set1_epi16(0xFF)));
    __m256i nan = _mm256_or_si256(nan_scale, _mm256_cmpgt_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7FFF)),
                                                                 _mm256_set1_epi16(0x7F80)));
    return _mm256_blendv_epi8(r, _mm256_set1_epi16(0x7FC0), nan);
}

/* A tile's scales: E8M0 k7 and k as dwords (the word twice, for vpbroadcastd from memory),
 * BF16/E4M3 as floats. Returns 1 when the tile takes the exact path: E8M0 scales outside
 * [safe_lo, safe_hi], or float scales that can make a NaN or a product below 2^-126 with a LUT
 * entry of magnitude >= vmin (vmin < 0: always). */
AVX2 INLINE int tile_scales(int fmt, int nscales, const uint8_t *sc, int safe_lo, int safe_hi, float vmin,
                            uint32_t *k7d, uint32_t *kd, float *sf) {
    int exact = 0;
    for (int h = 0; h < nscales; h += 8) {
        __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sc + h)));
        if (fmt == SCALE_E8M0) {
            __m256i k = _mm256_sub_epi32(x, _mm256_set1_epi32(127));
            __m256i k7 = _mm256_and_si256(_mm256_slli_epi32(k, 7), _mm256_set1_epi32(0xFFFF));
            _mm256_storeu_si256((__m256i *)(k7d + h), _mm256_or_si256(k7, _mm256_slli_epi32(k7, 16)));
            k = _mm256_and_si256(k, _mm256_set1_epi32(0xFFFF));
            _mm256_storeu_si256((__m256i *)(kd + h), _mm256_or_si256(k, _mm256_slli_epi32(k, 16)));
            __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(safe_lo), x),
                                          _mm256_cmpgt_epi32(x, _mm256_set1_epi32(safe_hi)));
            exact |= safe_lo > safe_hi || !_mm256_testz_si256(out, out);
            continue;
        }
        __m256 f;
        if (fmt == SCALE_BF16) {
            __m256i d = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(sc + 2 * h))), 16);
            __m256i zexp = _mm256_cmpeq_epi32(_mm256_and_si256(d, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
            f = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_and_si256(zexp, _mm256_set1_epi32(0x7FFFFFFF)), d));
        } else {
            __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x80)), 24);
            __m256i mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7F));
            __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23));
            __m256i sub = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(1.0f / 512)));
            __m256i v = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
            v = _mm256_blendv_epi8(v, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F)));
            f = _mm256_castsi256_ps(_mm256_or_si256(v, sign));
        }
        _mm256_storeu_ps(sf + h, f);
        __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), f);
        __m256 bad = _mm256_or_ps(_mm256_cmp_ps(a, _mm256_set1_ps(__builtin_inff()), _CMP_NLT_UQ),  /* NaN, Inf */
                                  _mm256_and_ps(_mm256_cmp_ps(_mm256_mul_ps(a, _mm256_set1_ps(vmin)),
                                                              _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ),
                                                _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_NEQ_OQ)));
        exact |= vmin < 0 || !_mm256_testz_ps(bad, bad);
    }
    return exact;
}

/* scale_mul of the 16 words of elements 16h..16h+15 of row r by their scale. */
AVX2 INLINE __m256i scale_words(__m256i v, int fmt, int g, int r, int h, const uint32_t *k7d, const uint32_t *kd,
                                const float *sf, const uint8_t *sc, int exact) {
    const int s = g == 32 ? r : 2 * r + h;
    if (fmt == SCALE_E8M0) {
        __m256i k7 = _mm256_set1_epi32((int)k7d[s]);  /* vpbroadcastd from memory */
        if (!exact)  /* zero-exponent (zero) entries stay signed zero */
            return _mm256_add_epi16(v, _mm256_andnot_si256(
                _mm256_cmpeq_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7F80)), _mm256_setzero_si256()), k7));
        __m256i nan = _mm256_set1_epi16(sc[s] == 0xFF ? -1 : 0);
        return e8m0_exact(v, _mm256_set1_epi32((int)kd[s]), k7, nan);
    }
    if (fmt != SCALE_NONE) return mul_round(v, _mm256_broadcast_ss(sf + s), exact);
    return v;
}

/* The word mask of row r's 32 mask bits: elements 0-15 (*m0) and 16-31 (*m1). */
AVX2 INLINE void row_word_masks(uint32_t m, __m256i *m0, __m256i *m1) {
    *m0 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)word_mask[m & 0xFF])),
                                  _mm_load_si128((const __m128i *)word_mask[(m >> 8) & 0xFF]), 1);
    *m1 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)word_mask[(m >> 16) & 0xFF])),
                                  _mm_load_si128((const __m128i *)word_mask[m >> 24]), 1);
}

/* The stored BF16 words of a row (from p) expanded by its mask m: elements 0-15 (*w0) and 16-31
 * (*w1), zero where not stored. Each lane's 8 words come from a 16-byte load at its mask byte's
 * first stored word, put in place by one vpshufb with the byte's indices (expand16). */
AVX2 INLINE void expand_words(const uint8_t *p, uint32_t m, __m256i *w0, __m256i *w1) {
    /* 64-bit counts: no sign extension before the address arithmetic */
    const uint64_t c0 = (uint64_t)__builtin_popcountll(m & 0xFFu), c1 = (uint64_t)__builtin_popcountll(m & 0xFFFFu);
    const uint64_t c2 = c1 + (uint64_t)__builtin_popcountll(m & 0xFF0000u);
    *w0 = _mm256_shuffle_epi8(
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                _mm_loadu_si128((const __m128i *)(p + 2 * c0)), 1),
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)expand16[m & 0xFF])),
                                _mm_load_si128((const __m128i *)expand16[(m >> 8) & 0xFF]), 1));
    *w1 = _mm256_shuffle_epi8(
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + 2 * c1))),
                                _mm_loadu_si128((const __m128i *)(p + 2 * c2)), 1),
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)expand16[(m >> 16) & 0xFF])),
                                _mm_load_si128((const __m128i *)expand16[m >> 24]), 1));
}

/* Element order -> rows layout (lane L byte b: element 16 (b >> 3) + 8L + (b & 7)). */
AVX2 INLINE __m256i to_rows(__m256i x) { return _mm256_permute4x64_epi64(x, 0xD8); }

/* Dense Q = 1, 2, 4: the row's stream bytes broadcast; sp[0] puts in each byte of the rows layout
 * the stream byte of its element, whose code is at bit offset o; sp[1] keeps it where o < 4, sp[2]
 * (after a shift by 4) where o >= 4: an index c << (o mod 4) of the spread table (Q = 4: the code). */
AVX2 INLINE __m256i spread_row(const uint8_t *row, const __m256i sp[3]) {
    __m256i x = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)row)), sp[0]);
    return _mm256_or_si256(_mm256_and_si256(x, sp[1]), _mm256_and_si256(_mm256_srli_epi16(x, 4), sp[2]));
}

/* The BF16 words of a sparse tile's n stored codes (bytes from src) into wb, 32 at a time as dense
 * rows are looked up (the last group's codes beyond n are looked up and never used); returns
 * nonzero when a stored code is beyond the LUT (``check``). */
AVX2 INLINE int stored_words(const luts *L, int q, const uint8_t *src, int n, int check, __m256i code_max,
                             uint16_t *wb) {
    int bad = 0;
    for (int k = 0; 32 * k < n; k++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(src + 32 * k));
        if (check) {
            const uint32_t stored = n - 32 * k >= 32 ? 0xFFFFFFFFu : (1u << (n - 32 * k)) - 1;
            bad |= (~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(x, code_max), x)) & stored) != 0;
        }
        __m256i lo, hi, w0, w1;
        lookup(L, q, to_rows(x), &lo, &hi);
        to_words(lo, hi, &w0, &w1);
        _mm256_store_si256((__m256i *)(wb + 32 * k), w0);
        _mm256_store_si256((__m256i *)(wb + 32 * k + 16), w1);
    }
    return bad;
}

/* n codes of Q < 8 bits from the stream spread to bytes by pdep, 8 at a time (Q bytes each). */
AVX2 INLINE void unpack_codes(const uint8_t *vals, int n, int q, uint8_t *buf) {
    const uint64_t dep = 0x0101010101010101ull * ((1u << q) - 1);
    for (int k = 0; 8 * k < n; k++) {
        uint64_t w = _pdep_u64(load_le64(vals + q * k), dep);
        memcpy(buf + 8 * k, &w, 8);
    }
}

/* Sparse Q <= 4: the codes of a row (mask m) expanded to bytes, zero where
 * not stored, in the rows layout: per mask byte one pdep of the stream's next codes (from bit *bp)
 * into the bytes of its stored elements, the four joined in registers (a reload of stores of
 * them would wait for the stores to complete). */
AVX2 INLINE __m256i expand_codes(const uint8_t *vals, uint64_t *bp, uint32_t m, int q) {
    if (q == 1) {  /* one pdep for the row, its 32 bits spread to the bytes of the rows layout */
        const uint32_t bits = (uint32_t)_pdep_u64(load_le64(vals + (*bp >> 3)) >> (*bp & 7), m);
        *bp += (uint64_t)__builtin_popcount(m);
        const __m256i by = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,
                                            1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
        const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), by), bit);
        return _mm256_min_epu8(x, _mm256_set1_epi8(1));
    }
    const uint64_t dep = 0x0101010101010101ull * ((1u << q) - 1);
    uint64_t w[4];
    for (int j = 0; j < 4; j++) {
        const uint8_t mb = (uint8_t)(m >> 8 * j);
        w[j] = _pdep_u64(load_le64(vals + (*bp >> 3)) >> (*bp & 7), byte_mask[mb] & dep);
        *bp += (uint64_t)q * __builtin_popcount(mb);
    }
    return _mm256_set_epi64x((long long)w[3], (long long)w[1], (long long)w[2], (long long)w[0]);
}

/* The tile loop, specialized by the compiler for each constant (q, sparse, fmt). */
AVX2 INLINE int64_t tiles(const deca_args *a, const int q, const int sparse, const int fmt) {
    const deca_cfg *cfg = a->cfg;
    const int g = cfg->scale_group, nscales = 512 / g;
    const int scale_len = fmt == SCALE_NONE ? 0 : nscales * (fmt == SCALE_BF16 ? 2 : 1);
    const int check_codes = q <= 8 && cfg->lut_size < (1 << q);
    const __m256i code_max = _mm256_set1_epi8((char)(cfg->lut_size - 1));
    luts L;
    if (q <= 8) cached_luts(cfg, fmt != SCALE_NONE, &L);
    int safe_lo = 1, safe_hi = 0;
    /* Q = 16 takes its values from the stream: every tile takes the exact path. */
    if (fmt == SCALE_E8M0 && q <= 8) e8m0_safe_range(cfg, &safe_lo, &safe_hi);
    const float vmin = q <= 8 ? lut_min_magnitude(cfg) : -1;
    /* spread_row's constants (dense Q = 1, 2, 4): per rows-layout byte, its element's stream byte,
     * and the masks of its code at offsets below and from 4 */
    uint8_t spb[3][32];
    for (int p = 0; p < 32; p++) {
        const int e = 16 * ((p & 15) >> 3) + 8 * (p >> 4) + (p & 7), bit = e * q, off = bit & 7;
        const int cm = q <= 4 ? (1 << q) - 1 : 0;
        spb[0][p] = (uint8_t)(bit >> 3);
        spb[1][p] = (uint8_t)(off < 4 ? cm << off : 0);
        spb[2][p] = (uint8_t)(off >= 4 ? cm << (off - 4) : 0);
    }
    __m256i sp[3];
    for (int i = 0; i < 3; i++) sp[i] = _mm256_loadu_si256((const __m256i *)spb[i]);
    const int spread = !sparse && (q == 4 || (q <= 2 && L.spread));
    /* Q <= 4 with float scales per row: the row's 16 table entries scaled instead of its 32 words */
    const int row_tables = !sparse && q <= 4 && g == 32 && (fmt == SCALE_BF16 || fmt == SCALE_E4M3);
    /* Sparse Q <= 4 with one scale per row: codes expanded first, then looked up in the row's
     * scaled table (fewer words to scale than the row's 32, and no stored words to expand) */
    const int sparse_tables = sparse && q <= 4 && g == 32 && fmt != SCALE_NONE;
    /* Sparse Q <= 4: the row's codes expanded (zero where not stored) and looked up; Q = 5..8: the
     * stored codes looked up, the words expanded */
    const int sparse_codes = sparse && q <= 4;
    /* Sparse elements not stored: looked up as code 0 (sparse_codes), and scaling could make NaN or
     * -0 of a zero */
    const int mask_words = fmt != SCALE_NONE || (sparse_codes && cfg->lut[0] != 0);
    const int int_codes = !sparse && q == 8 && L.int8 && (fmt == SCALE_BF16 || fmt == SCALE_E4M3);
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                           0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const int64_t ntiles = a->ntiles, tile_cols = a->tile_cols, rs = a->row_stride;
    const uint8_t *const values = a->values, *const masks = a->masks, *const scales = a->scales;
    const int64_t *const val_off = a->val_off, *const block_of_tile = a->block_of_tile;
    uint16_t *const out = a->out;
    int64_t slow_tiles = 0;
    uint8_t buf[512 + 64] __attribute__((aligned(32)));
    uint32_t k7d[32], kd[32];
    uint8_t wpage[4096 + 2 * (512 + 32)] __attribute__((aligned(32)));  /* holds the stored words */
    float sf[32];

    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *vals = values + val_off[t];
        const uint8_t *mask = sparse ? masks + 64 * t : NULL;
        const uint8_t *sc = fmt ? scales + block_of_tile[t] * scale_len : NULL;
        const int n = check_stream(cfg, vals, val_off[t + 1] - val_off[t], mask);
        if (n < 0) { a->stats->slow_tiles += slow_tiles; return t + 1; }
        uint16_t *o = tile_out(out, t, tile_cols, rs);
        int exact = 0;
        if (fmt != SCALE_NONE) {
            exact = tile_scales(fmt, nscales, sc, safe_lo, safe_hi, vmin, k7d, kd, sf);
            slow_tiles += exact;
        }
        const uint8_t *src = vals;  /* stored codes, one per byte (Q = 8 or unpacked) */
        if (!sparse_codes && q < 8 && !spread) { unpack_codes(vals, n, q, buf); src = buf; }
        int bad = 0;
        const uint8_t *words = vals;  /* sparse: the stored elements' BF16 words */
        if (sparse && q <= 8 && !sparse_codes) {
            /* 2 KiB from the output tile modulo 4 KiB: loads of the words are not taken for reloads
             * of the tile's stores (4K aliasing) */
            uint16_t *wb = (uint16_t *)(wpage + (((uintptr_t)o + 2048 - (uintptr_t)wpage) & 4064));
            bad = stored_words(&L, q, src, n, check_codes, code_max, wb);
            words = (const uint8_t *)wb;
        }
        int64_t pos = 0;  /* stored elements before the row */
        uint64_t bp = 0;  /* sparse_codes: bits of the stream before the row */
        for (int r = 0; r < 16; r++) {
            const uint32_t m = sparse ? load_le32(mask + 4 * r) : 0xFFFFFFFFu;
            __m256i w0, w1;
            if (sparse_codes) {
                const __m256i c = expand_codes(vals, &bp, m, q);
                if (check_codes) bad |= _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(c, code_max), c)) != -1;
                __m256i lo, hi;
                if (sparse_tables) {
                    __m256i tlo, thi;
                    split_table(scale_words(L.words, fmt, g, r, 0, k7d, kd, sf, sc, exact), split, &tlo, &thi);
                    lo = _mm256_shuffle_epi8(tlo, c), hi = _mm256_shuffle_epi8(thi, c);
                } else lookup(&L, q, c, &lo, &hi);
                to_words(lo, hi, &w0, &w1);
            } else if (sparse) expand_words(words + 2 * pos, m, &w0, &w1);
            else if (q == 16) {
                w0 = _mm256_loadu_si256((const __m256i *)(vals + 64 * r));
                w1 = _mm256_loadu_si256((const __m256i *)(vals + 64 * r + 32));
            } else {
                const __m256i c = spread ? spread_row(vals + 4 * q * r, sp)
                                         : to_rows(_mm256_loadu_si256((const __m256i *)(src + 32 * r)));
                if (check_codes) {
                    __m256i over = _mm256_cmpeq_epi8(_mm256_min_epu8(c, code_max), c);
                    bad |= _mm256_movemask_epi8(over) != -1;
                }
                if (int_codes) {  /* each dword two codes of element order */
                    const __m256i e = _mm256_loadu_si256((const __m256i *)(src + 32 * r));
                    w0 = int_mul_round(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(e)),
                                       _mm256_broadcast_ss(sf + (g == 32 ? r : 2 * r)), exact);
                    w1 = int_mul_round(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(e, 1)),
                                       _mm256_broadcast_ss(sf + (g == 32 ? r : 2 * r + 1)), exact);
                } else {
                    __m256i lo, hi;
                    if (row_tables) {
                        __m256i tlo, thi;
                        split_table(mul_round(L.words, _mm256_broadcast_ss(sf + r), exact), split, &tlo, &thi);
                        lo = _mm256_shuffle_epi8(tlo, c), hi = _mm256_shuffle_epi8(thi, c);
                    } else lookup(&L, q, c, &lo, &hi);
                    to_words(lo, hi, &w0, &w1);
                }
            }
            if (q == 16 && (fmt == SCALE_BF16 || fmt == SCALE_E4M3)) {  /* the scaler reads zero exponents as zero */
                const __m256i keep = _mm256_set1_epi16(0x7FFF);
                __m256i z0 = _mm256_cmpeq_epi16(_mm256_and_si256(w0, _mm256_set1_epi16(0x7F80)), _mm256_setzero_si256());
                __m256i z1 = _mm256_cmpeq_epi16(_mm256_and_si256(w1, _mm256_set1_epi16(0x7F80)), _mm256_setzero_si256());
                w0 = _mm256_andnot_si256(_mm256_and_si256(z0, keep), w0);
                w1 = _mm256_andnot_si256(_mm256_and_si256(z1, keep), w1);
            }
            pos += sparse ? __builtin_popcountll(m) : 32;
            if (!row_tables && !int_codes && !sparse_tables) {
                w0 = scale_words(w0, fmt, g, r, 0, k7d, kd, sf, sc, exact);
                w1 = scale_words(w1, fmt, g, r, 1, k7d, kd, sf, sc, exact);
            }
            if (sparse && mask_words) {
                __m256i m0, m1;
                row_word_masks(m, &m0, &m1);
                w0 = _mm256_and_si256(w0, m0);
                w1 = _mm256_and_si256(w1, m1);
            }
            _mm256_storeu_si256((__m256i *)(o + r * rs), w0);
            _mm256_storeu_si256((__m256i *)(o + r * rs + 16), w1);
        }
        if (bad) { a->stats->slow_tiles += slow_tiles; return t + 1; }
    }
    a->stats->slow_tiles += slow_tiles;
    return 0;
}

#define FMT_CASES(Q, SP) \
    switch (fmt) { \
    case SCALE_NONE: return tiles(a, Q, SP, SCALE_NONE); \
    case SCALE_BF16: return tiles(a, Q, SP, SCALE_BF16); \
    case SCALE_E8M0: return tiles(a, Q, SP, SCALE_E8M0); \
    default: return tiles(a, Q, SP, SCALE_E4M3); \
    }
#define Q_CASE(Q) case Q: if (sparse) { FMT_CASES(Q, 1) } else { FMT_CASES(Q, 0) }

AVX2 int64_t deca_decode_avx2(const deca_args *a) {
    if (!tables_ready) init_tables();
    const int sparse = a->cfg->sparse, fmt = a->cfg->scale_fmt;
    switch (a->cfg->q_bits) {
    Q_CASE(1) Q_CASE(2) Q_CASE(3) Q_CASE(4) Q_CASE(5) Q_CASE(6) Q_CASE(7) Q_CASE(8)
    default: if (sparse) { FMT_CASES(16, 1) } else { FMT_CASES(16, 0) }
    }
}
#endif
