"""Numbers quoted from the DECA paper (MICRO'25), for side-by-side comparison with the model."""

#: Table 2, N = 16, SPR with HBM, TFLOPS: kernel -> (R-L classic roofline, R-S Roof-Surface with
#: the software engine).
TABLE2 = {
    "MXFP4": (25.2, 11.5), "BF8": (13.3, 13.3), "BF8_50%": (21.2, 16.1), "BF8_30%": (31.2, 16.1),
    "BF8_20%": (40.8, 16.1), "BF8_10%": (59.2, 16.1), "BF8_5%": (70.0, 16.1), "BF16_50%": (11.8, 11.8),
    "BF16_30%": (18.4, 18.4), "BF16_20%": (25.2, 23.0), "BF16_10%": (40.8, 23.0), "BF16_5%": (59.2, 23.0),
}

#: Section 4.1: R-L equals R-S exactly for the kernels both models call memory-bound; the others
#: are bound by the software's vector work.
TABLE2_MEM_BOUND = ("BF8", "BF16_50%", "BF16_30%")

#: Section 8.2: (W, L) of the under-provisioned, best and over-provisioned DECA designs, and the
#: simulated speedups between them.
DSE_UNDER, DSE_BEST, DSE_OVER = (8, 4), (32, 8), (64, 64)
DSE_BEST_OVER_UNDER = 2.0       # "2x faster"
DSE_OVER_OVER_BEST_MAX = 1.03   # "less than 3% faster"

#: Table 4, DECA system, Q8 (BF8), N = 1, HBM: density -> utilization (%) of memory bandwidth, TMUL, DECA.
TABLE4_DECA = {1.0: (93, 18, 75), 0.5: (92, 28, 71), 0.2: (91, 53, 63), 0.05: (73, 79, 87)}
#: Section 8.3 (Fig. 16): TEPLs "double the performance" over store-and-fence at 5% density.
TEPL_SPEEDUP_5PCT = 2.0

#: Table 1: share of Llama2-70B's BF16 next-token time spent in FC-layer GeMMs (%), SPR. The text
#: of the paper we have lays the table out ambiguously; we read it as the DDR rows by batch N and
#: prompt length (all "over 95%", as the text says) and one HBM row by prompt length ("85-90%"),
#: which we take at N = 1.
TABLE1_DDR = {(1, 32): 97.4, (1, 128): 97.5, (4, 32): 97.3, (4, 128): 97.1, (16, 32): 96.6, (16, 128): 95.5}
TABLE1_HBM_N1 = {32: 88.3, 128: 85.9}

#: Section 8.4: Tables 6 and 7 are for 128 prompt tokens and 128 generated tokens on SPR with HBM.
LLM_PROMPT, LLM_GENERATE = 128, 128
#: Table 6, next-token latency (ms): (model, N, scheme, system) -> ms. Schemes Q16 (BF16), Q4 (MXFP4),
#: Q8 30% (BF8 at 30% density); Q16 has no DECA entry (nothing to decompress). The text of the
#: paper we have gives the N = 1 and N = 16 columns; its N = 64 columns are not in it.
TABLE6 = {
    ("llama2-70b", 1, "q16", "sw"): 192.3, ("llama2-70b", 1, "q4", "sw"): 124.6, ("llama2-70b", 1, "q8@0.3", "sw"): 98.2,
    ("llama2-70b", 16, "q16", "sw"): 211.2, ("llama2-70b", 16, "q4", "sw"): 139.1,
    ("llama2-70b", 16, "q8@0.3", "sw"): 116.6,
    ("llama2-70b", 1, "q4", "deca"): 68.3, ("llama2-70b", 1, "q8@0.3", "deca"): 59.6,
    ("llama2-70b", 16, "q4", "deca"): 82.7, ("llama2-70b", 16, "q8@0.3", "deca"): 75.7,
    ("opt-66b", 1, "q16", "sw"): 178.5, ("opt-66b", 1, "q4", "sw"): 117.0, ("opt-66b", 1, "q8@0.3", "sw"): 91.3,
    ("opt-66b", 16, "q16", "sw"): 203.9, ("opt-66b", 16, "q4", "sw"): 132.3, ("opt-66b", 16, "q8@0.3", "sw"): 111.7,
    ("opt-66b", 1, "q4", "deca"): 60.8, ("opt-66b", 1, "q8@0.3", "deca"): 53.9,
    ("opt-66b", 16, "q4", "deca"): 81.8, ("opt-66b", 16, "q8@0.3", "deca"): 75.5,
}
#: Section 8.4's summary of Table 6: DECA cuts next-token time by 1.6x-1.9x over SW-only.
TABLE6_SPEEDUP_RANGE = (1.6, 1.9)

#: Table 7: W4A16 Llama2-70B, N = 1: platform -> (bandwidth GB/s, max compute TFLOPS, next-token ms).
#: The GPU latencies are llama.cpp measurements the paper quotes (its reference [11]).
TABLE7 = {
    "SPR HBM": (850, 72, 125), "SPR HBM + DECA": (850, 72, 68), "RTX 6000 ADA": (960, 364, 58),
    "A100 80GB PCIe": (1935, 312, 40), "H100 80GB PCIe": (2000, 989, 38),
}

#: Appendix 12.1 (Fig. 17, BF16 Llama2-70B on SPR HBM): throughput grows linearly and latency stays
#: flat up to N = 16; beyond it latency grows without linear gains.
FIG17_KNEE = 16
