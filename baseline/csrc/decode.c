/* Software decompression of DECA compressed tiles into BF16 tiles, bit-exact to deca.golden.
 *
 * The format is the one of golden/format.py; the arithmetic is golden/numerics.py's scale_mul.
 * Three implementations share one entry point: AVX-512 (F, BW, VL, DQ, VBMI, VBMI2, BITALG, and BF16
 * when present; compiled with target attributes so the file builds anywhere), AVX2 (avx2.c) and a
 * portable scalar loop. All validate the streams exactly where the golden model does and return
 * the first bad tile; Python then asks the golden model for the message, so all report the same
 * error. Every path may read up to 64 bytes past a value stream: the caller pads the buffer.
 */
#include "common.h"

/* ---------------------------------------------------------------------------------------------
 * AVX-512 path
 * ------------------------------------------------------------------------------------------- */
#if DECA_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,avx512dq,avx512bf16,avx512bitalg,popcnt,bmi2")))
#define INLINE static inline __attribute__((always_inline))

/* Byte layouts of a row pair's 64 elements in a register. IDENTITY: element e in byte e. ROWS:
 * element e = 32h + 8L + j (row h of the pair, 128-bit lane L) in byte 16L + 8h + j, so that
 * vpunpcklbw / vpunpckhbw of the looked-up low and high bytes give rows r and r + 1 as BF16 words in
 * order (in-lane unpacks rather than two cross-lane vpermi2b, which share Zen 4's one
 * 512-bit permute pipe with every other lookup). */
enum { LAYOUT_IDENTITY = 0, LAYOUT_ROWS = 1 };

static inline int layout_element(int layout, int pos) {
    return layout == LAYOUT_IDENTITY ? pos : 32 * ((pos >> 3) & 1) + 8 * (pos >> 4) + (pos & 7);
}

/* Bit unpacking of Q < 8 (vpermb + vpmultishiftqb), two rows (64 codes) at a time: for codes
 * whose first one starts at bit b0 of byte 0, the code of element e lands in the byte of e's
 * layout position. Qword J of the result holds 8 consecutive elements 8G..8G+7; it gathers the 8
 * bytes from B = (b0 + 8GQ) / 8 on (B + 7 <= 56 < 64), which hold them (8Q + 7 <= 63 bits); each
 * byte then selects 8 bits at its offset. */
static uint8_t unpack_perm[2][8][8][64], unpack_shift[2][8][8][64];

/* Per layout position: the element's mask byte within the pair (for vpshufb of the pair's mask
 * qword), the mask bits below the element in that byte, and its own bit. */
static uint8_t rank_sel[2][64], rank_below[2][64], rank_bit[2][64], rows_perm[64];

/* Scale indices of a scaled LUT pair: words 0-15 scale s, words 16-31 scale s + 1. */
static uint16_t scale_pair_idx[32][32];

static void init_tables(void) {
    for (int s = 0; s < 32; s++)
        for (int i = 0; i < 32; i++) scale_pair_idx[s][i] = (uint16_t)(s + (i >= 16));
    for (int lay = 0; lay < 2; lay++)
        for (int pos = 0; pos < 64; pos++) {
            int e = layout_element(lay, pos);
            rank_sel[lay][pos] = (uint8_t)(e >> 3);
            rank_below[lay][pos] = (uint8_t)((1 << (e & 7)) - 1);
            rank_bit[lay][pos] = (uint8_t)(1 << (e & 7));
            if (lay == LAYOUT_ROWS) rows_perm[pos] = (uint8_t)e;
            for (int q = 1; q < 8; q++)
                for (int b0 = 0; b0 < 8; b0++) {
                    int base = (b0 + 8 * (e >> 3) * q) >> 3;
                    unpack_perm[lay][q][b0][pos] = (uint8_t)(base + (pos & 7));
                    unpack_shift[lay][q][b0][pos] = (uint8_t)(b0 + e * q - 8 * base);
                }
        }
}

/* The bytes of a stream from ``byte`` on, up to 64, without reading past its end. */
AVX512 INLINE __m512i load_stream(const uint8_t *vals, int64_t vlen, int64_t byte) {
    int64_t avail = vlen - byte;  /* >= 0: the stream checks passed. Branch-free: sparse tiles end anywhere. */
    return _mm512_maskz_loadu_epi8(_bzhi_u64(~0ull, (unsigned)(avail < 64 ? avail : 64)), vals + byte);
}

/* 64 consecutive Q-bit codes (Q < 8) from stream bit bp, one per byte, in ``layout``. */
AVX512 INLINE __m512i unpack64(const uint8_t *vals, int64_t vlen, int64_t bp, int q, int layout) {
    __m512i data = load_stream(vals, vlen, bp >> 3);
    int b0 = (int)(bp & 7);
    __m512i perm = _mm512_loadu_si512(unpack_perm[layout][q][b0]);
    __m512i shift = _mm512_loadu_si512(unpack_shift[layout][q][b0]);
    __m512i codes = _mm512_multishift_epi64_epi8(shift, _mm512_permutexvar_epi8(perm, data));
    return _mm512_and_si512(codes, _mm512_set1_epi8((char)((1 << q) - 1)));
}

/* The LUT split into low and high bytes, 64 entries per register; word interleave indices of
 * the identity layout. ``symmetric`` (Q = 8): SYM_SIGN, entry c + 128 is entry c with the sign
 * flipped, so both bytes are looked up by the low 7 bits (vpermi2b ignores index bit 7) and bit 7
 * flips the sign; SYM_POS, the lower half is non-negative and each upper entry is the lower one
 * negated or the same (E5M2 and E4M3, whose NaN codes all decode to 0x7FC0): bit 7 of the code
 * sets the sign unless bit 7 of the looked-up high byte marks the entry as kept (one vpternlog,
 * sign = code7 & ~mark7, the other bits from the table); SYM_LOW, only the low bytes do not
 * depend on bit 7, so the low byte takes one vpermi2b and the high byte two. */
enum { SYM_NONE = 0, SYM_LOW = 1, SYM_SIGN = 2, SYM_POS = 3 };
typedef struct {
    __m512i lo[4], hi[4], inter0, inter1;
    int symmetric;
} lut_regs;

AVX512 static void load_lut(const deca_cfg *cfg, int daz, lut_regs *L) {
    uint8_t lo[256], hi[256], i0[64], i1[64];
    uint16_t v[256];
    int flip = 1, pos = 1, low = 1;
    for (int i = 0; i < 256; i++) {
        v[i] = cfg->lut[i];
        if (daz && !(v[i] & 0x7F80)) v[i] &= 0x8000;  /* the scaler reads zero-exponent inputs as zero */
        lo[i] = (uint8_t)v[i]; hi[i] = (uint8_t)(v[i] >> 8);
        if (i >= 128) {
            flip &= v[i] == (v[i - 128] ^ 0x8000);
            pos &= !(v[i - 128] & 0x8000) && (v[i] == (v[i - 128] | 0x8000) || v[i] == v[i - 128]);
            low &= lo[i] == lo[i - 128];
        }
    }
    L->symmetric = flip ? SYM_SIGN : pos ? SYM_POS : low ? SYM_LOW : SYM_NONE;
    if (L->symmetric == SYM_POS)  /* bit 7 of a kept entry's high byte: bit 7 of the code does not set the sign */
        for (int i = 0; i < 128; i++) hi[i] |= v[i + 128] == v[i] ? 0x80 : 0;
    for (int i = 0; i < 4; i++) {
        L->lo[i] = _mm512_loadu_si512(lo + 64 * i);
        L->hi[i] = _mm512_loadu_si512(hi + 64 * i);
    }
    for (int i = 0; i < 32; i++) {
        i0[2 * i] = (uint8_t)i; i0[2 * i + 1] = (uint8_t)(64 + i);
        i1[2 * i] = (uint8_t)(32 + i); i1[2 * i + 1] = (uint8_t)(96 + i);
    }
    L->inter0 = _mm512_loadu_si512(i0);
    L->inter1 = _mm512_loadu_si512(i1);
}

/* LUT lookup of 64 byte codes (two rows in ``layout``), zero where ``keep`` is 0 (where the codes
 * must be 0 too): BF16 words of row 0 in *w0 and row 1 in *w1. */
AVX512 INLINE void lookup(const lut_regs *L, int q, int layout, __mmask64 keep, __m512i idx, __m512i *w0, __m512i *w1) {
    __m512i lo, hi;
    if (q <= 6) {
        lo = _mm512_maskz_permutexvar_epi8(keep, idx, L->lo[0]);
        hi = _mm512_maskz_permutexvar_epi8(keep, idx, L->hi[0]);
    } else if (q == 7) {
        lo = _mm512_maskz_permutex2var_epi8(keep, L->lo[0], idx, L->lo[1]);
        hi = _mm512_maskz_permutex2var_epi8(keep, L->hi[0], idx, L->hi[1]);
    } else if (L->symmetric == SYM_SIGN) {
        lo = _mm512_maskz_permutex2var_epi8(keep, L->lo[0], idx, L->lo[1]);
        hi = _mm512_maskz_permutex2var_epi8(keep, L->hi[0], idx, L->hi[1]);
        hi = _mm512_ternarylogic_epi32(hi, idx, _mm512_set1_epi8((char)0x80), 0x78);  /* hi ^ idx & 0x80 */
    } else if (L->symmetric == SYM_POS) {
        lo = _mm512_maskz_permutex2var_epi8(keep, L->lo[0], idx, L->lo[1]);
        hi = _mm512_maskz_permutex2var_epi8(keep, L->hi[0], idx, L->hi[1]);
        /* bit 7: idx & ~hi, bits 0-6: hi */
        hi = _mm512_ternarylogic_epi32(hi, idx, _mm512_set1_epi8((char)0x80), 0x58);
    } else if (L->symmetric == SYM_LOW) {
        __mmask64 top = _mm512_movepi8_mask(idx);
        lo = _mm512_maskz_permutex2var_epi8(keep, L->lo[0], idx, L->lo[1]);
        hi = _mm512_mask_blend_epi8(top, _mm512_maskz_permutex2var_epi8(keep, L->hi[0], idx, L->hi[1]),
                                    _mm512_maskz_permutex2var_epi8(keep, L->hi[2], idx, L->hi[3]));
    } else {
        __mmask64 top = _mm512_movepi8_mask(idx);
        lo = _mm512_mask_blend_epi8(top, _mm512_maskz_permutex2var_epi8(keep, L->lo[0], idx, L->lo[1]),
                                    _mm512_maskz_permutex2var_epi8(keep, L->lo[2], idx, L->lo[3]));
        hi = _mm512_mask_blend_epi8(top, _mm512_maskz_permutex2var_epi8(keep, L->hi[0], idx, L->hi[1]),
                                    _mm512_maskz_permutex2var_epi8(keep, L->hi[2], idx, L->hi[3]));
    }
    if (layout == LAYOUT_ROWS) {
        *w0 = _mm512_unpacklo_epi8(lo, hi);
        *w1 = _mm512_unpackhi_epi8(lo, hi);
    } else {
        *w0 = _mm512_permutex2var_epi8(lo, L->inter0, hi);
        *w1 = _mm512_permutex2var_epi8(lo, L->inter1, hi);
    }
}

/* Float32 products -> rounded dwords whose high word is the BF16 result. Nearest-even on the
 * bits; products below 2^-126 (float32 subnormal or zero exponent) and NaNs take the fix-ups. */
AVX512 INLINE __m512i round_dwords(__m512 p) {
    __m512i b = _mm512_castps_si512(p);
    __m512i t = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7FFF)),
                                 _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1)));
    /* Classes: QNaN 0x01, denormal 0x20, SNaN 0x80. Zeros round to themselves already. */
    if (_mm512_fpclass_ps_mask(p, 0xA1)) {
        __mmask16 sub = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7F800000));
        __mmask16 up = _mm512_mask_cmpge_epu32_mask(sub, _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)),
                                                   _mm512_set1_epi32(0x7FC000));
        t = _mm512_mask_and_epi32(t, sub, b, _mm512_set1_epi32((int)0x80000000u));
        t = _mm512_mask_or_epi32(t, up, t, _mm512_set1_epi32(0x00800000));
        t = _mm512_mask_mov_epi32(t, _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC00000));
    }
    return t;
}

/* Words 0-15 from the high words of x's dwords, words 16-31 from y's. */
AVX512 INLINE __m512i high_words(__m512i x, __m512i y) {
    const __m512i idx = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33,
                                         31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi16(x, idx, y);
}

/* scale_mul of 32 BF16 words (DAZ already applied) by two float scales (lanes 0-15, 16-31).
 * Even and odd words become float32 in place (shift / mask). With AVX512_BF16, vcvtne2ps2bf16
 * rounds exactly as scale_mul unless a product is NaN or below 2^-126 (it flushes those): such
 * rare rows take the bitwise rounding and set *slow. ``safe``: the tile's scales cannot make such
 * products (scales_safe), so the check is skipped. */
AVX512 INLINE __m512i mul_round(__m512i v, __m512 s0, __m512 s1, int bf16ins, int safe, int *slow) {
    __m512 s = _mm512_mask_blend_ps(0xFF00, s0, s1);  /* dword j holds words 2j, 2j+1 */
    __m512 pe = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), s);
    __m512 po = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u))), s);
    __mmask16 special = safe ? 0 : _mm512_fpclass_ps_mask(pe, 0xA1) | _mm512_fpclass_ps_mask(po, 0xA1);
    if (bf16ins && !special) {
        /* [even results | odd results] -> interleaved back */
        const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                               23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        return _mm512_permutexvar_epi16(inter, (__m512i)_mm512_cvtne2ps_pbh(po, pe));
    }
    *slow |= special != 0;
    return _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(round_dwords(pe), 16), round_dwords(po));
}

/* 16 BF16 scales (little-endian bytes) as float32, a zero exponent field read as signed zero. */
AVX512 INLINE __m512 bf16_scales(const uint8_t *sc) {
    __m512i d = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)sc)), 16);
    return _mm512_castsi512_ps(_mm512_mask_and_epi32(d, _mm512_testn_epi32_mask(d, _mm512_set1_epi32(0x7F800000)),
                                                     d, _mm512_set1_epi32((int)0x80000000u)));
}

/* 16 E4M3FN scales as float32: normal codes rebias the exponent (7 -> 127), subnormal ones are
 * m * 2^-9, 0x7F and 0xFF are NaN. */
AVX512 INLINE __m512 e4m3_scales(const uint8_t *sc) {
    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sc));
    __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
    __m512i mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7F));
    __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23));
    __m512i sub = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(mag), _mm512_set1_ps(1.0f / 512)));
    __m512i v = _mm512_mask_mov_epi32(normal, _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32(8)), sub);
    v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)), _mm512_set1_epi32(0x7FC00000));
    return _mm512_castsi512_ps(_mm512_or_si512(v, sign));
}

/* The LUT (16 float entries, DAZ) times scale a in words 0-15 and times scale b in words 16-31.
 * With AVX512_BF16, vcvtne2ps2bf16 rounds exactly as scale_mul when no product is NaN or below
 * 2^-126 (it flushes those); such rare products take the bitwise path and set *slow. */

/* 1 when no product of a LUT entry and one of these 16 float scales (DAZ) is NaN or nonzero below
 * 2^-126: every scale is finite and zero or at least 2^-126 / vmin (checked by the product
 * |s| vmin, exact: two 8-bit significands). vmin < 0 (a LUT with Inf or NaN): never. */
AVX512 INLINE int scales_safe(__m512 s, float vmin) {
    __m512 t = _mm512_mul_ps(_mm512_abs_ps(s), _mm512_set1_ps(vmin));
    __mmask16 bad = _mm512_fpclass_ps_mask(s, 0x99)  /* NaN, Inf */
                  | (_mm512_cmp_ps_mask(t, _mm512_set1_ps(0x1p-126f), _CMP_LT_OQ)
                     & _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_NEQ_UQ));
    return vmin >= 0 && !bad;
}
AVX512 INLINE __m512i scale_lut(__m512 lutf, float a, float b, int bf16ins, int safe, int *slow) {
    __m512 pa = _mm512_mul_ps(lutf, _mm512_set1_ps(a)), pb = _mm512_mul_ps(lutf, _mm512_set1_ps(b));
    __mmask16 special = safe ? 0 : _mm512_fpclass_ps_mask(pa, 0xA1) | _mm512_fpclass_ps_mask(pb, 0xA1);
    if (bf16ins && !special) return (__m512i)_mm512_cvtne2ps_pbh(pb, pa);
    *slow |= special != 0;
    return high_words(round_dwords(pa), round_dwords(pb));
}

/* v times 2^k per lane (kv = k, k7 = k << 7), exact by scale_mul's rules (every special case). */
AVX512 INLINE __m512i e8m0_exact(__m512i v, __m512i kv, __m512i k7, __mmask32 nan_scale) {
    __m512i e = _mm512_and_si512(_mm512_srli_epi16(v, 7), _mm512_set1_epi16(0xFF));
    __m512i E = _mm512_add_epi16(e, kv);
    __m512i sign = _mm512_and_si512(v, _mm512_set1_epi16((short)0x8000));
    __m512i r = _mm512_add_epi16(v, k7);
    __mmask32 under = _mm512_cmple_epi16_mask(E, _mm512_setzero_si512()) | _mm512_cmpeq_epi16_mask(e, _mm512_setzero_si512());
    r = _mm512_mask_mov_epi16(r, _mm512_cmpgt_epi16_mask(E, _mm512_set1_epi16(254)),
                              _mm512_or_si512(sign, _mm512_set1_epi16(0x7F80)));
    r = _mm512_mask_mov_epi16(r, under, sign);
    r = _mm512_mask_mov_epi16(r, _mm512_cmpeq_epi16_mask(e, _mm512_set1_epi16(0xFF)), v);
    __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7F80));
    return _mm512_mask_mov_epi16(r, nan | nan_scale, _mm512_set1_epi16(0x7FC0));
}

/* Per-lane scale of a row for E8M0: k (or k << 7) of lanes 0-15 from scale s0, 16-31 from s1. */
AVX512 INLINE __m512i two_halves(int a, int b) {
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16((short)a), _mm512_set1_epi16((short)b));
}


/* Sparse expansion of a row pair without vpexpandb (on Zen 4 it holds the permute pipe for
 * several cycles): a vpermb of the pair's stored codes by each element's rank among the set mask
 * bits, rank(e) = popcount(m & (2^e - 1)) = the set bits of byte e/8 below bit e%8 plus those of
 * the pair's bytes before it. Both come from in-lane vpshufb of the pair's mask qword and of its
 * byte-prefix qword (computed once per tile), broadcast from memory, so only the final vpermb
 * uses the permute pipe. The rank is in the byte of the element's layout position. */
typedef struct {
    __m512i sel, below, bit, rows;  /* rows: element of each rows-layout position (dense Q = 8) */
} rank_regs;

AVX512 INLINE rank_regs rank_regs_of(int layout) {
    rank_regs x = {_mm512_loadu_si512(rank_sel[layout]), _mm512_loadu_si512(rank_below[layout]),
                   _mm512_loadu_si512(rank_bit[layout]), _mm512_loadu_si512(rows_perm)};
    return x;
}

/* Per mask byte of a tile, the set bits of its row pair's bytes before it. */
AVX512 INLINE void tile_prefix(const uint8_t *mask, uint64_t before[8]) {
    __m512i counts = _mm512_popcnt_epi8(_mm512_loadu_si512(mask));
    _mm512_storeu_si512(before, _mm512_slli_epi64(_mm512_mullo_epi64(counts, _mm512_set1_epi64(0x0101010101010101ll)), 8));
    __asm__ volatile("" ::: "memory");  /* broadcast from memory, not from a register (a shuffle) */
}

AVX512 INLINE __m512i broadcast_qword(const void *p) {
    return _mm512_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)p));
}

/* Ranks of pair p's elements and (*present) its mask bits, both in the layout of ``x``. */
AVX512 INLINE __m512i pair_ranks(const rank_regs *x, const uint8_t *mask, const uint64_t *before, int p,
                                 __mmask64 *present) {
    __m512i bytes = _mm512_shuffle_epi8(broadcast_qword(mask + 8 * p), x->sel);
    *present = _mm512_test_epi8_mask(bytes, x->bit);
    __m512i own = _mm512_popcnt_epi8(_mm512_and_si512(bytes, x->below));
    return _mm512_add_epi8(own, _mm512_shuffle_epi8(broadcast_qword(before + p), x->sel));
}

/* Codes of row pair p (64 elements) as bytes in ``layout``, zero where the mask is 0 (*present);
 * advances the bit position. The stored codes of consecutive rows are consecutive in the stream,
 * so one load and one expansion serve both rows. Dense Q = 8 in the rows layout costs one vpermb. */
AVX512 INLINE __m512i pair_codes(const uint8_t *vals, int64_t vlen, int64_t *bp, int q, int sparse, int layout,
                                 const rank_regs *x, const uint8_t *mask, const uint64_t *before, int p,
                                 __mmask64 *present) {
    __m512i c;
    *present = ~0ull;
    if (sparse) {
        __m512i rank = pair_ranks(x, mask, before, p, present);
        c = q == 8 ? load_stream(vals, vlen, *bp >> 3) : unpack64(vals, vlen, *bp, q, LAYOUT_IDENTITY);
        c = _mm512_maskz_permutexvar_epi8(*present, rank, c);
        uint64_t m;
        memcpy(&m, mask + 8 * p, 8);
        *bp += q * (int64_t)_mm_popcnt_u64(m);
    } else {
        if (q == 8) {
            c = _mm512_loadu_si512(vals + (*bp >> 3));  /* dense Q = 8 tiles are exactly 512 bytes */
            if (layout == LAYOUT_ROWS) c = _mm512_permutexvar_epi8(x->rows, c);
        } else c = unpack64(vals, vlen, *bp, q, layout);
        *bp += 64 * q;
    }
    return c;
}

/* Raw BF16 values of one row (Q = 16), read as zero-exponent = zero when they will be scaled.
 * Sparse rows expand by vpexpandw (measured faster here than a rank-based vpermi2w per row pair). */
AVX512 INLINE __m512i row_bf16(const uint8_t *vals, int64_t *bp, __mmask32 m, int sparse, int daz) {
    __m512i w = sparse ? _mm512_maskz_expand_epi16(m, _mm512_maskz_loadu_epi16(
                             (__mmask32)_bzhi_u32(0xFFFFFFFFu, _mm_popcnt_u32(m)), vals + (*bp >> 3)))
                       : _mm512_loadu_si512(vals + (*bp >> 3));
    *bp += 16 * (int64_t)(sparse ? _mm_popcnt_u32(m) : 32);
    if (daz)
        w = _mm512_mask_mov_epi16(w, _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x7F80)),
                                  _mm512_and_si512(w, _mm512_set1_epi16((short)0x8000)));
    return w;
}

/* scale_mul of 32 BF16 words: lanes 0-15 by scale s0, lanes 16-31 by scale s1. */
AVX512 INLINE __m512i scale_words(__m512i v, int fmt, const uint8_t *sc, const float *sf, int s0, int s1, int fast_e8m0,
                                  int bf16ins, int safe, int *slow) {
    if (fmt == SCALE_E8M0) {
        int x0 = sc[s0], x1 = sc[s1];
        __m512i k7 = two_halves((x0 - 127) << 7, (x1 - 127) << 7);
        if (fast_e8m0)  /* zero-exponent (zero) entries stay signed zero */
            return _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7F80)), v, k7);
        return e8m0_exact(v, two_halves(x0 - 127, x1 - 127), k7,
                          (x0 == 0xFF ? 0xFFFFu : 0) | (x1 == 0xFF ? 0xFFFF0000u : 0));
    }
    if (fmt != SCALE_NONE) return mul_round(v, _mm512_set1_ps(sf[s0]), _mm512_set1_ps(sf[s1]), bf16ins, safe, slow);
    return v;
}

/* The 16-entry LUT times scales sa (words 0-15) and sa + 1 (words 16-31), for Q <= 4. The fast
 * E8M0 path adds the scales' exponents, picked from k7all by sidx, to the nonzero-exponent entries. */
AVX512 INLINE __m512i lut_pair(int fmt, __m512i lut16, __mmask32 knz, __m512i k7all, __m512i sidx, __m512 lutf,
                               const uint8_t *sc, const float *sf, int sa, int fast_e8m0, int bf16ins, int safe,
                               int *slow) {
    if (fmt == SCALE_E8M0) {
        if (fast_e8m0) return _mm512_add_epi16(lut16, _mm512_maskz_permutexvar_epi16(knz, sidx, k7all));
        return scale_words(lut16, fmt, sc, sf, sa, sa + 1, 0, bf16ins, 0, slow);
    }
    return scale_lut(lutf, sf[sa], sf[sa + 1], bf16ins, safe, slow);
}

AVX512 INLINE void store_row(uint16_t *o, __m512i v, __mmask32 m, int zero_absent) {
    _mm512_storeu_si512(o, zero_absent ? _mm512_maskz_mov_epi16(m, v) : v);
}

/* A tile's scales. E8M0: *k7all = (x - 127) << 7 of every scale x, *fast_e8m0 when all are in
 * [safe_lo, safe_hi]; returns 0 when not (a slow tile). BF16/E4M3: sf[] as floats, *safe when no
 * product with a LUT entry can be special (scales_safe; vmin < 0: never); returns 1. */
AVX512 INLINE int tile_scales(int fmt, int nscales, const uint8_t *sc, int safe_lo, int safe_hi, float vmin,
                              __m512i *k7all, float *sf, int *fast_e8m0, int *safe) {
    if (fmt == SCALE_E8M0) {
        __mmask32 all = nscales == 32 ? 0xFFFFFFFFu : 0xFFFFu;
        __m256i x = _mm256_maskz_loadu_epi8(all, sc);
        __mmask32 out_of_range = _mm256_cmplt_epu8_mask(x, _mm256_set1_epi8((char)safe_lo))
                               | _mm256_cmpgt_epu8_mask(x, _mm256_set1_epi8((char)safe_hi));
        *fast_e8m0 = safe_lo <= safe_hi && !(out_of_range & all);
        *k7all = _mm512_slli_epi16(_mm512_sub_epi16(_mm512_cvtepu8_epi16(x), _mm512_set1_epi16(127)), 7);
        return *fast_e8m0;
    }
    *safe = 1;
    for (int h = 0; h < nscales; h += 16) {
        __m512 f = fmt == SCALE_BF16 ? bf16_scales(sc + 2 * h) : e4m3_scales(sc + h);
        _mm512_storeu_ps(sf + h, f);
        *safe &= scales_safe(f, vmin);
    }
    __asm__ volatile("" ::: "memory");  /* broadcast the scales from memory, not by shuffles */
    return 1;
}

/* The tile loop, specialized by the compiler for each constant (q, sparse, fmt). */
AVX512 INLINE int64_t decode_tiles(const deca_args *a, const int q, const int sparse, const int fmt) {
    const deca_cfg *cfg = a->cfg;
    const int g = cfg->scale_group;
    const int nscales = 512 / g;
    const int scale_len = fmt == SCALE_NONE ? 0 : nscales * (fmt == SCALE_BF16 ? 2 : 1);
    const int check_codes = q <= 8 && cfg->lut_size < (1 << q);
    const __m512i lut_size = _mm512_set1_epi8((char)(cfg->lut_size > 255 ? 255 : cfg->lut_size));
    lut_regs L;
    if (q <= 8) load_lut(cfg, fmt != SCALE_NONE, &L);
    /* LUT entries 0-15 (DAZ) in both halves of a register, for the scaled-LUT path of Q <= 4. */
    uint16_t lut2[32];
    for (int i = 0; i < 32; i++) {
        uint16_t v = cfg->lut[i & 15];
        lut2[i] = fmt == SCALE_NONE || (v & 0x7F80) ? v : v & 0x8000;
    }
    const __m512i lut16 = _mm512_loadu_si512(lut2);
    const __m512 lutf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)lut2)), 16));
    const int bf16ins = a->bf16ins;
    const __mmask32 knz = _mm512_test_epi16_mask(lut16, _mm512_set1_epi16(0x7F80));  /* nonzero exponents */
    int safe_lo = 1, safe_hi = 0;
    /* Q = 16 takes its values from the stream, so the fast E8M0 path never applies. */
    if (fmt == SCALE_E8M0 && q <= 8) e8m0_safe_range(cfg, &safe_lo, &safe_hi);
    const float vmin = lut_min_magnitude(cfg);
    /* Word-indexed LUT paths (Q <= 4 scaled) need codes in element order; byte LUTs take the rows
     * layout except dense Q = 8 with a LUT that is not sign-symmetric (its lookup already costs
     * four vpermi2b, so the interleave stays two vpermi2b rather than one more vpermb). */
    const int layout = (q <= 4 && fmt != SCALE_NONE) || (q == 8 && !sparse && L.symmetric == SYM_NONE) ? LAYOUT_IDENTITY
                     : LAYOUT_ROWS;
    const rank_regs rx = rank_regs_of(layout);
    /* Locals: the stores through uint16_t * would otherwise make the compiler reload *a. */
    const int64_t ntiles = a->ntiles, tile_cols = a->tile_cols, rs = a->row_stride;
    const uint8_t *const values = a->values, *const masks = a->masks, *const scales = a->scales;
    const int64_t *const val_off = a->val_off, *const block_of_tile = a->block_of_tile;
    uint16_t *const out = a->out;
    int64_t slow_tiles = 0, bad = 0;
    uint64_t before[8] __attribute__((aligned(64)));

    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *vals = values + val_off[t];
        const int64_t vlen = val_off[t + 1] - val_off[t];
        const uint8_t *mask = sparse ? masks + 64 * t : NULL;
        const uint8_t *sc = fmt ? scales + block_of_tile[t] * scale_len : NULL;
        if (check_stream(cfg, vals, vlen, mask) < 0) { bad = t + 1; break; }
        uint16_t *o = tile_out(out, t, tile_cols, rs);
        int fast_e8m0 = 0, slow = 0, safe = 0;
        float sf[32];
        __m512i k7all = _mm512_setzero_si512();  /* E8M0: (x - 127) << 7 of every scale x of the tile */
        /* Scale indices of a row pair's scaled LUT: the first scale in words 0-15, the next in 16-31. */
        __m512i sidx = _mm512_maskz_mov_epi16(0xFFFF0000u, _mm512_set1_epi16(1));
        if (fmt != SCALE_NONE)
            slow_tiles += !tile_scales(fmt, nscales, sc, safe_lo, safe_hi, q <= 8 ? vmin : -1, &k7all, sf, &fast_e8m0,
                                       &safe);  /* Q = 16 scales stream values, not LUT entries */

        if (sparse && q <= 8) tile_prefix(mask, before);
        int64_t bp = 0;
#pragma GCC unroll 8
        for (int r = 0; r < 16; r += 2) {
            __mmask32 m0 = 0xFFFFFFFFu, m1 = 0xFFFFFFFFu;
            __m512i w0, w1;
            if (sparse) { memcpy(&m0, mask + 4 * r, 4); memcpy(&m1, mask + 4 * r + 4, 4); }
            if (q == 16) {
                w0 = row_bf16(vals, &bp, m0, sparse, fmt == SCALE_BF16 || fmt == SCALE_E4M3);
                w1 = row_bf16(vals, &bp, m1, sparse, fmt == SCALE_BF16 || fmt == SCALE_E4M3);
            } else {
                __mmask64 present;
                __m512i c = pair_codes(vals, vlen, &bp, q, sparse, layout, &rx, mask, before, r / 2, &present);
                if (check_codes && _mm512_mask_cmpge_epu8_mask(present, c, lut_size)) { bad = t + 1; break; }
                if (q <= 4 && fmt != SCALE_NONE) {
                    /* At most 16 LUT entries: scale the LUT (twice, into the two halves of a register)
                     * rather than the elements, and look the codes up as words with vpermw. */
                    __m512i i0 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(c));
                    __m512i i1 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(c, 1));
                    if (g == 32) {  /* one scale per row: row r in lanes 0-15, row r+1 in 16-31 */
                        __m512i lut = lut_pair(fmt, lut16, knz, k7all, sidx, lutf, sc, sf, r, fast_e8m0, bf16ins, safe, &slow);
                        w0 = _mm512_permutexvar_epi16(i0, lut);
                        w1 = _mm512_permutexvar_epi16(_mm512_add_epi16(i1, _mm512_set1_epi16(16)), lut);
                        sidx = _mm512_add_epi16(sidx, _mm512_set1_epi16(2));
                    } else {  /* two scales per row: columns 16-31 look up the upper half */
                        __m512i hi = _mm512_maskz_mov_epi16(0xFFFF0000u, _mm512_set1_epi16(16));
                        __m512i lut0 = lut_pair(fmt, lut16, knz, k7all, sidx, lutf, sc, sf, 2 * r, fast_e8m0, bf16ins, safe, &slow);
                        sidx = _mm512_add_epi16(sidx, _mm512_set1_epi16(2));
                        __m512i lut1 = lut_pair(fmt, lut16, knz, k7all, sidx, lutf, sc, sf, 2 * r + 2, fast_e8m0, bf16ins, safe, &slow);
                        sidx = _mm512_add_epi16(sidx, _mm512_set1_epi16(2));
                        w0 = _mm512_permutexvar_epi16(_mm512_add_epi16(i0, hi), lut0);
                        w1 = _mm512_permutexvar_epi16(_mm512_add_epi16(i1, hi), lut1);
                    }
                    store_row(o + r * rs, w0, m0, sparse);
                    store_row(o + (r + 1) * rs, w1, m1, sparse);
                    continue;
                }
                lookup(&L, q, layout, present, c, &w0, &w1);
            }
            /* Absent elements are zero already; scaling could make NaN of them (0 x Inf). */
            const int zero_absent = sparse && fmt != SCALE_NONE;
            int s0 = g == 32 ? r : 2 * r, s1 = g == 32 ? r : 2 * r + 1;
            store_row(o + r * rs, scale_words(w0, fmt, sc, sf, s0, s1, fast_e8m0, bf16ins, safe, &slow), m0, zero_absent);
            s0 = g == 32 ? r + 1 : 2 * r + 2, s1 = g == 32 ? r + 1 : 2 * r + 3;
            store_row(o + (r + 1) * rs, scale_words(w1, fmt, sc, sf, s0, s1, fast_e8m0, bf16ins, safe, &slow), m1, zero_absent);
        }
        if (bad) break;
        slow_tiles += slow;
    }
    a->stats->slow_tiles += slow_tiles;
    return bad;
}

/* Per-kernel constants of decode_dense_q4. */
typedef struct {
    int fmt, g, check_codes, bf16ins;
    int64_t rs;
    __m512i lut16, shift, nib, lut_size, col_half;
    __m512 lutf;
    __mmask32 knz;
} q4_consts;

/* The 16 rows of a dense Q = 4 tile; ``fast``: the tile's scales take no exact slow path (E8M0 in
 * the safe range, or BF16/E4M3 scales with no special product and AVX512_BF16 rounding). Returns 1
 * for a code beyond the LUT. */
AVX512 INLINE int q4_rows(const q4_consts *k, const uint8_t *vals, uint16_t *o, const uint8_t *sc, const float *sf,
                          __m512i k7all, const int fast, int *slow) {
    /* Locals, not k->: the stores through o may alias *k as far as the compiler knows. */
    const int fmt = k->fmt, g = k->g, check_codes = k->check_codes, bf16ins = k->bf16ins;
    const int64_t rs = k->rs;
    __m512i lut16 = k->lut16, shift = k->shift, nib = k->nib, lut_size = k->lut_size, col_half = k->col_half;
    __m512i half1 = _mm512_set1_epi16(16);
    __m512 lutf = k->lutf;
    __mmask32 knz = k->knz;
    __mmask8 high4 = 0xF0;
    /* Opaque to the compiler, so it keeps them in registers instead of rebuilding constants by
     * broadcasts from general registers (shuffles) in every row. */
    __asm__("" : "+v"(lut16), "+v"(shift), "+v"(nib), "+v"(lut_size), "+v"(col_half), "+v"(half1), "+v"(lutf),
                 "+k"(knz), "+k"(high4));
    __m512i lut = lut16;
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
        __m512i row = _mm512_mask_broadcastq_epi64(broadcast_qword(vals + 16 * r), high4,
                                                   _mm_loadl_epi64((const __m128i *)(vals + 16 * r + 8)));
        __m512i idx = _mm512_multishift_epi64_epi8(shift, row);
        if (check_codes && _mm512_cmpge_epu16_mask(_mm512_and_si512(idx, nib), lut_size)) return 1;
        __m512i w;
        if (fmt == SCALE_NONE) w = _mm512_permutexvar_epi16(idx, lut16);
        else {
            const int s0 = g == 32 ? r & ~1 : 2 * r;  /* the scales of LUT halves 0 and 1: s0, s0 + 1 */
            if (g == 16 || !(r & 1)) {
                const __m512i sidx = _mm512_loadu_si512(scale_pair_idx[s0]);
                if (fast && fmt == SCALE_E8M0)
                    lut = _mm512_add_epi16(lut16, _mm512_maskz_permutexvar_epi16(knz, sidx, k7all));
                else if (fast)
                    lut = (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(lutf, _mm512_set1_ps(sf[s0 + 1])),
                                                       _mm512_mul_ps(lutf, _mm512_set1_ps(sf[s0])));
                else lut = lut_pair(fmt, lut16, knz, k7all, sidx, lutf, sc, sf, s0, 0, bf16ins, 0, slow);
            }
            const __m512i half = g == 16 ? col_half : r & 1 ? half1 : _mm512_setzero_si512();
            w = _mm512_permutexvar_epi16(_mm512_ternarylogic_epi32(idx, nib, half, 0xEA), lut);  /* (idx & 0x0F) | half */
        }
        _mm512_storeu_si512(o + r * rs, w);
    }
    return 0;
}

/* Dense Q = 4 (MXFP4, NVFP4, INT4, NF4), specialized on the scale format and group, one row at a
 * time with no cross-lane shuffle but the lookup: the row's two stream qwords are broadcast from
 * memory (qword Q of the register holds row qword Q / 4), vpmultishiftqb moves the nibble of element
 * k into the low byte of word k, and vpermw looks it up (index bits 0-4; the LUT is repeated in both
 * halves, so the bit above the nibble does not matter). Scaled: the 16 LUT entries are scaled per
 * row pair into the two halves of a register (or per row and column half, g = 16), and bit 4 of
 * the index picks the half. */
AVX512 INLINE int64_t decode_dense_q4(const deca_args *a, const int fmt, const int g) {
    const deca_cfg *cfg = a->cfg;
    const int nscales = 512 / g;
    const int scale_len = fmt == SCALE_NONE ? 0 : nscales * (fmt == SCALE_BF16 ? 2 : 1);
    uint16_t lut2[32];  /* entries 0-15 (DAZ when scaled) in both halves */
    uint8_t ctrl[64];  /* vpmultishiftqb: the nibble of element k (bit 4k of the row) to word k */
    for (int i = 0; i < 32; i++) {
        uint16_t v = cfg->lut[i & 15];
        lut2[i] = fmt == SCALE_NONE || (v & 0x7F80) ? v : v & 0x8000;
        ctrl[2 * i] = ctrl[2 * i + 1] = (uint8_t)(4 * i % 64);
    }
    q4_consts k;
    k.fmt = fmt, k.g = g, k.check_codes = cfg->lut_size < 16, k.bf16ins = a->bf16ins, k.rs = a->row_stride;
    k.lut16 = _mm512_loadu_si512(lut2), k.shift = _mm512_loadu_si512(ctrl);
    k.lutf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)lut2)), 16));
    k.knz = _mm512_test_epi16_mask(k.lut16, _mm512_set1_epi16(0x7F80));  /* nonzero exponents */
    k.nib = _mm512_set1_epi16(0x0F), k.lut_size = _mm512_set1_epi16((short)cfg->lut_size);
    k.col_half = _mm512_maskz_mov_epi16(0xFFFF0000u, _mm512_set1_epi16(16));
    int safe_lo = 1, safe_hi = 0;
    if (fmt == SCALE_E8M0) e8m0_safe_range(cfg, &safe_lo, &safe_hi);
    const float vmin = lut_min_magnitude(cfg);
    const int64_t ntiles = a->ntiles, tile_cols = a->tile_cols, rs = a->row_stride;
    const int bf16ins = a->bf16ins;
    const uint8_t *const values = a->values, *const scales = a->scales;
    const int64_t *const val_off = a->val_off, *const block_of_tile = a->block_of_tile;
    uint16_t *const out = a->out;
    int64_t slow_tiles = 0;
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *vals = values + val_off[t];
        const uint8_t *sc = fmt ? scales + block_of_tile[t] * scale_len : NULL;
        if (check_stream(cfg, vals, val_off[t + 1] - val_off[t], NULL) < 0) { a->stats->slow_tiles += slow_tiles; return t + 1; }
        uint16_t *o = tile_out(out, t, tile_cols, rs);
        int fast_e8m0 = 0, slow = 0, safe = 0;
        float sf[32];
        __m512i k7all = _mm512_setzero_si512();  /* E8M0: (x - 127) << 7 of every scale x of the tile */
        if (fmt != SCALE_NONE)
            slow_tiles += !tile_scales(fmt, nscales, sc, safe_lo, safe_hi, vmin, &k7all, sf, &fast_e8m0, &safe);

        /* The common tiles take a copy of the row loop without per-pair checks or branches. */
        const int fast = fmt == SCALE_NONE || (fmt == SCALE_E8M0 ? fast_e8m0 : bf16ins && safe);
        int bad = fast ? q4_rows(&k, vals, o, sc, sf, k7all, 1, &slow) : q4_rows(&k, vals, o, sc, sf, k7all, 0, &slow);
        if (bad) { a->stats->slow_tiles += slow_tiles; return t + 1; }
        slow_tiles += slow;
    }
    a->stats->slow_tiles += slow_tiles;
    return 0;
}

#define FMT_CASES(Q, SP) \
    switch (fmt) { \
    case SCALE_NONE: return decode_tiles(a, Q, SP, SCALE_NONE); \
    case SCALE_BF16: return decode_tiles(a, Q, SP, SCALE_BF16); \
    case SCALE_E8M0: return decode_tiles(a, Q, SP, SCALE_E8M0); \
    default: return decode_tiles(a, Q, SP, SCALE_E4M3); \
    }
#define Q_CASE(Q) case Q: if (sparse) { FMT_CASES(Q, 1) } else { FMT_CASES(Q, 0) }

AVX512 static int64_t decode_avx512(const deca_args *a) {
    const int sparse = a->cfg->sparse, fmt = a->cfg->scale_fmt, g32 = a->cfg->scale_group == 32;
    if (a->cfg->q_bits == 4 && !sparse) switch (fmt) {
        case SCALE_NONE: return decode_dense_q4(a, SCALE_NONE, 32);
        case SCALE_BF16: return g32 ? decode_dense_q4(a, SCALE_BF16, 32) : decode_dense_q4(a, SCALE_BF16, 16);
        case SCALE_E8M0: return g32 ? decode_dense_q4(a, SCALE_E8M0, 32) : decode_dense_q4(a, SCALE_E8M0, 16);
        default: return g32 ? decode_dense_q4(a, SCALE_E4M3, 32) : decode_dense_q4(a, SCALE_E4M3, 16);
    }
    switch (a->cfg->q_bits) {
    Q_CASE(1) Q_CASE(2) Q_CASE(3) Q_CASE(4) Q_CASE(5) Q_CASE(6) Q_CASE(7) Q_CASE(8)
    default: if (sparse) { FMT_CASES(16, 1) } else { FMT_CASES(16, 0) }
    }
}

AVX512 static uint64_t stream_read_avx512(const uint8_t *buf, int64_t n) {
    __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t i = 0; i + 256 <= n; i += 256) {
        acc0 = _mm512_xor_si512(acc0, _mm512_loadu_si512(buf + i));
        acc1 = _mm512_xor_si512(acc1, _mm512_loadu_si512(buf + i + 64));
        acc2 = _mm512_xor_si512(acc2, _mm512_loadu_si512(buf + i + 128));
        acc3 = _mm512_xor_si512(acc3, _mm512_loadu_si512(buf + i + 192));
    }
    return (uint64_t)_mm512_reduce_or_epi64(_mm512_xor_si512(_mm512_xor_si512(acc0, acc1), _mm512_xor_si512(acc2, acc3)));
}
#endif

/* ---------------------------------------------------------------------------------------------
 * Entry points (ctypes)
 * ------------------------------------------------------------------------------------------- */

/* The x86 features the paths need, as bits in the order of deca.baseline.decode.FEATURE_BITS. */
int64_t deca_cpu_features(void) {
    int64_t bits = 0;
#if DECA_X86
    __builtin_cpu_init();
    const int have[] = {
        __builtin_cpu_supports("avx2"), __builtin_cpu_supports("fma"), __builtin_cpu_supports("f16c"),
        __builtin_cpu_supports("bmi2"), __builtin_cpu_supports("popcnt"), __builtin_cpu_supports("avx512f"),
        __builtin_cpu_supports("avx512bw"), __builtin_cpu_supports("avx512vl"), __builtin_cpu_supports("avx512dq"),
        __builtin_cpu_supports("avx512vbmi"), __builtin_cpu_supports("avx512vbmi2"),
        __builtin_cpu_supports("avx512bitalg"), __builtin_cpu_supports("avx512bf16"),
    };
    for (int i = 0; i < (int)(sizeof have / sizeof have[0]); i++) bits |= (int64_t)(have[i] != 0) << i;
#endif
    return bits;
}

/* 1 when this CPU runs the AVX-512 path. */
int deca_have_avx512(void) {
#if DECA_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2") &&
           __builtin_cpu_supports("avx512bitalg");
#else
    return 0;
#endif
}

/* Decode ntiles tiles. Tile t's values are values[val_off[t]:val_off[t+1]], its mask
 * masks[64t:64t+64] (sparse), its scales block block_of_tile[t] of ``scales``. Row r of tile t
 * goes to out + (t / tile_cols) * 16 * row_stride + (t % tile_cols) * 32 + r * row_stride
 * (tile_cols = 0: every tile to ``out``). Returns 0, or t + 1 for the first malformed tile t, or
 * -1 when the AVX-512 or AVX2 path is asked for on a CPU without it. */
int64_t deca_decode(const deca_cfg *cfg, int path, int64_t ntiles, const uint8_t *values, const int64_t *val_off,
                    const uint8_t *masks, const uint8_t *scales, const int64_t *block_of_tile,
                    uint16_t *out, int64_t tile_cols, int64_t row_stride, deca_stats *stats) {
    deca_args a = {cfg, ntiles, values, masks, scales, val_off, block_of_tile, out, tile_cols, row_stride, stats, 0};
    if (path == PATH_AVX512 || path == PATH_AVX512_NO_BF16) {
#if DECA_X86
        static int tables_ready;
        if (!deca_have_avx512()) return -1;
        if (!tables_ready) { init_tables(); tables_ready = 1; }
        a.bf16ins = path == PATH_AVX512 && __builtin_cpu_supports("avx512bf16");
        return decode_avx512(&a);
#else
        return -1;
#endif
    }
    if (path == PATH_AVX2) {
#if DECA_X86
        if (!deca_have_avx2()) return -1;
        return deca_decode_avx2(&a);
#else
        return -1;
#endif
    }
    return deca_decode_scalar(&a);
}

/* Time stamp counter (0 where there is none). */
uint64_t deca_tsc(void) {
#if DECA_X86
    return __rdtsc();
#else
    return 0;
#endif
}

/* ``deca_decode`` timed with the TSC: ticks of the whole call in *ticks. */
int64_t deca_decode_timed(const deca_cfg *cfg, int path, int64_t ntiles, const uint8_t *values, const int64_t *val_off,
                          const uint8_t *masks, const uint8_t *scales, const int64_t *block_of_tile,
                          uint16_t *out, int64_t tile_cols, int64_t row_stride, deca_stats *stats, uint64_t *ticks) {
    uint64_t t0 = deca_tsc();
    int64_t rc = deca_decode(cfg, path, ntiles, values, val_off, masks, scales, block_of_tile, out, tile_cols,
                             row_stride, stats);
    *ticks = deca_tsc() - t0;
    return rc;
}

/* TSC ticks of n dependent integer adds: one add per core cycle, so n / ticks is the core clock
 * in TSC ticks. */
uint64_t deca_add_chain(int64_t n) {
    uint64_t t0 = deca_tsc(), x = 0;
    for (int64_t i = 0; i < n; i += 8) {
#if DECA_X86
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
#else
        __asm__ volatile("" : "+r"(x));
        x += 8;
#endif
    }
    return deca_tsc() - t0 + (x == 1);  /* x keeps the chain alive */
}

/* TSC ticks to read n bytes (a multiple of 256) once, with the widest loads of ``path``. */
uint64_t deca_stream_read(const uint8_t *buf, int64_t n, int path, uint64_t *sink) {
    uint64_t t0 = deca_tsc(), acc = 0;
#if DECA_X86
    if (path == PATH_AVX512 && deca_have_avx512()) acc = stream_read_avx512(buf, n);
    else
#endif
    for (int64_t i = 0; i < n; i += 8) { uint64_t w; memcpy(&w, buf + i, 8); acc ^= w; }
    uint64_t dt = deca_tsc() - t0;
    *sink = acc;
    return dt;
}
