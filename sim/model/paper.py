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
