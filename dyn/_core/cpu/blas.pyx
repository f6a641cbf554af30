# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin float32/float64 dispatch over scipy's BLAS (sklearn's _cython_blas idea).

Matrix-vector products and rank-1 updates of small matrices (the per-example
shapes of dynamic graphs: 32x32 ... 64x64) run as plain compiled loops: at
those sizes OpenBLAS's call overhead costs more than the arithmetic
(_smallblas.h). Float32 matrix products with one small side (a vocabulary's
softmax over one sentence, an LSTM step over a small minibatch, a tree level's
gates, an LSTM weight's gradient over a small minibatch) run as
register-blocked loops that read the large matrix in place (_skinnygemm.h):
past its small-matrix kernel (10^6 multiply-adds), OpenBLAS packs the whole
large matrix for each such call and runs its square kernel at a fraction of
peak there. And the weight gradient of a 10k softmax over 1,000 tokens and
more, G += D X^T, is faster in OpenBLAS computed transposed (X D^T into a
scratch, then added transposed). bench/gemm_shapes.py measures both paths
shape by shape; the thresholds in _skinny below come from it.

The register-blocked kernels (and float32 matrix-vector products in registers)
are made for AVX-512's 32 sixteen-float registers. Without AVX-512 they spill
and run several times slower than OpenBLAS, so there (an AVX2-only CPU, such as
AMD's Zen 3, or another architecture) every such product goes to OpenBLAS, and
float32 matrix-vector products to the plain loops up to 64 x 64, as float64's.
"""
from posix.time cimport timespec, clock_gettime, CLOCK_MONOTONIC
from libc.stdlib cimport malloc, free
cimport numpy as cnp
from scipy.linalg.cython_blas cimport (
    sgemm, dgemm, sgemv, dgemv, sger, dger, saxpy, daxpy, sscal, dscal, sdot, ddot)

cnp.import_array()

cdef extern from "_smallblas.h" nogil:
    void dyn_gemv_n_f32_plain(int m, int n, float alpha, const float* A, int lda, const float* x, float beta,
                              float* y)
    void dyn_gemv_t_f32_plain(int m, int n, float alpha, const float* A, int lda, const float* x, float beta,
                              float* y)
    void dyn_gemv_n_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_gemv_t_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_ger_f32(int m, int n, float alpha, const float* x, const float* y, float* A, int lda)
    void dyn_gemv_n_f64(int m, int n, double alpha, const double* A, int lda, const double* x, double beta,
                        double* y)
    void dyn_gemv_t_f64(int m, int n, double alpha, const double* A, int lda, const double* x, double beta,
                        double* y)
    void dyn_ger_f64(int m, int n, double alpha, const double* x, const double* y, double* A, int lda)
cdef extern from "_narrowgemm.h" nogil:
    void dyn_sgemm_nn_narrow(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                             float beta, float* C, int ldc)
    void dyn_sgemm_tn_narrow(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                             float beta, float* C, int ldc)
    void dyn_sgemm_nn_panels(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                             float beta, float* C, int ldc)
    void dyn_sgemm_tn_long(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                           float beta, float* C, int ldc, int kc)
    int dyn_sgemm_tn_packed(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                            float beta, float* C, int ldc, int kc)
cdef extern from "_skinnygemm.h" nogil:
    void dyn_sgemm_nn(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                      float beta, float* C, int ldc)
    void dyn_sgemm_nn_bias(int m, int n, int k, const float* A, int lda, const float* B, int ldb,
                           const float* bias, float* C, int ldc)
    void dyn_sgemm_tn(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                      float beta, float* C, int ldc)
    void dyn_sgemm_nt(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                      float beta, float* C, int ldc)
    int dyn_sk_nt_ahead
    int dyn_sk_nn_far
    int dyn_sgemm_nt_tall(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                          float beta, float* C, int ldc)
    void dyn_add_transposed(int m, int n, const float* T, int ldt, float beta, float* C, int ldc)
    void dyn_vadd_f32(long n, const float* x, float* y)
    void dyn_vadd_f64(long n, const double* x, double* y)
    double dyn_dot_f32d(long n, const float* x, const float* y)
    int dyn_wide_vectors()
    int dyn_cpu_amd()

cdef extern from "_fewgemm.h" nogil:
    void dyn_sgemm_nn_few(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                          float beta, float* C, int ldc)
    void dyn_sgemm_nn_few_bias(int m, int n, int k, const float* A, int lda, const float* B, int ldb,
                               const float* bias, float* C, int ldc)

cdef extern from "_dotgemm.h" nogil:
    void dyn_sgemm_tn_dot(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                          float beta, float* C, int ldc)

cdef extern from "_biggemm.h" nogil:
    int dyn_bg_kc
    int dyn_bg_nc
    int dyn_sgemm_big(char tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                      float beta, float* C, int ldc, const float* bias)
    int dyn_sgemm_big_tn(char tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                         int ldb, float beta, float* C, int ldc)

cdef extern from "_lowrankadam.h" nogil:
    int dyn_lr_ahead
    int dyn_adam_plain_on
    int dyn_adam_nt_f32(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C,
                        float* w, float* mo, float* v, float gs, float l2, float c1, float c2, float alpha,
                        float eps, float d)

cdef enum:
    SMALL = 64 * 64   # elements of a matrix below which our loops win
    SMALL_GEMV_F32 = 4 * 128 * 128   # float32 matrix-vector products: ours (registers) up to here


cdef bint _wide = dyn_wide_vectors()   # AVX-512: the register kernels pay (_skinnygemm.h)
# dyn's register kernels in use: where they pay (AVX-512); _set_skinny switches them for tests and
# bench/gemm_shapes.py
cdef bint _skinny_on = _wide
# the rules of _skinny measured on an AMD EPYC with AVX-512 (Zen 4), on such processors only:
# dyn_sgemm_nt_tall for A B^T into a C of 1,024 rows and more, dyn_sgemm_tn up to 48 columns
cdef bint _amd_on = _wide and dyn_cpu_amd()
dyn_sk_nn_far = 1 if _amd_on else 0    # dyn_sgemm_nn's panels fetched two ahead (measured there)


cdef bint skinny_on() noexcept nogil:
    return _skinny_on


cdef enum:
    GEMV_T_REGS_INTEL = 3 << 16     # (a Tree-LSTM's 640 x 256 U: 163,840 elements)

cdef long _gemv_t_regs = 0      # (0: this machine's rule below; _set_gemv_t_regs)


cdef inline long _gemv_regs_max(char ta) noexcept nogil:
    """The largest float32 matrix (elements) whose y = A x (ta 'N') or y = A^T x ('T') runs in dyn's
    register loops where they are on; OpenBLAS's sgemv past it. A^T x: up to 3 2^16 elements on
    processors with AVX-512 other than AMD's, where OpenBLAS's time over the loops' was 1.2-1.5 for
    a Tree-LSTM's 640 x 128 blocks of U and 0.9-1.2 for its whole 640 x 256 (medians of 200
    alternating calls, hot and with 1 MB streamed between calls), and the sparse Tree-LSTM trained
    1.009x as fast (paired item by item); an RNN LM's 1,024 x 256 W_h at minibatch 1 (2^18) ran
    1.18-1.43x as fast alone but the LM 0.993x, so it stays with OpenBLAS. Up to 2^16 elsewhere,
    as A x everywhere (past it, OpenBLAS's time over the loops' was 0.67-1.18 there)."""
    if ta != b'T':
        return SMALL_GEMV_F32
    if _gemv_t_regs:
        return _gemv_t_regs
    return SMALL_GEMV_F32 if _amd_on else GEMV_T_REGS_INTEL


def _set_gemv_t_regs(long n):
    """Measurements: the largest A (elements) whose float32 A^T x runs in dyn's register loops
    (0: this machine's rule); returns the previous setting."""
    global _gemv_t_regs
    cdef long old = _gemv_t_regs
    _gemv_t_regs = n if n > 0 else 0
    return old


cdef inline bint _nt_tall_shape(int m, int n, int k) noexcept nogil:
    """Whether A B^T (C m x n, k columns) is one dyn_sgemm_nt_tall takes where its rules are on
    (_skinny's 11; _lr_shape holds back the same shapes)."""
    return m >= 1024 and <long>m * n >= (1 << 17) and k <= 128 and (k >= 8 or n >= 256)


cdef bint _dot_on = True    # off only to measure the shapes _tn_dot_shape takes through the other paths


cdef inline bint _tn_dot_shape(int m, int n, int k) noexcept nogil:
    """Whether float32 A^T B (C m x n, inner dimension k) runs as _dotgemm.h's blocks of sixteen dot
    products, on processors with AVX-512 other than AMD's: an A of fewer than 2^20 entries, k of
    64 and more, 2-32 columns (16 where k is under 128), and a product OpenBLAS's small-matrix
    kernel does not take (it leaves A^T B with m n > 1,200 or m n k > 10^6 to its packed path).
    On an Intel Xeon (Sapphire Rapids class, one thread, the operands in the caches, medians of
    300 calls), OpenBLAS's time over dyn_sgemm_tn_dot's was 1.35-1.86 for a BiLSTM tagger's
    W_x^T D (128 x 16-30 from k = 200), 1.9 for a Tree-LSTM's leaves (128 x 20, k = 384), 1.4-3.4
    for 128 rows at 10-16 columns and 256 rows at 6-16 columns with k of 128-640, 1.15-1.65 at
    24-32 columns for k of 128 and more, 4.8 for 256 x 4 from k = 1,024; 0.7-0.97 where the
    small-matrix kernel runs, and 0.78-1.33 at 48 columns."""
    cdef long mn = <long>m * n
    if k < 64 or n < 2 or n > 32 or (k < 128 and n > 16) or <long>m * k >= (1 << 20):
        return False
    return mn > 1200 or mn * k > 1000000


cdef bint _few_on = True    # off only to measure the shapes _nn_few_shape takes through the other paths


cdef inline bint _nn_few_shape(int m, int n, int k, long mnk) noexcept nogil:
    """Whether float32 A B (C m x n, inner dimension k) runs as _fewgemm.h's loop, on processors
    with AVX-512 other than AMD's: an A of 256 rows and more, k of 64 and more, fewer than 2^20
    entries and not short and wide (k < 2 m), with 3, 5 or 6 columns, or 4-32 columns where
    OpenBLAS would take its packed path (m n k > 10^6). On an Intel Xeon (Sapphire Rapids class,
    one thread, medians of 40 calls through blas._gemm, the operands in the caches and with 1 MB
    streamed between calls), OpenBLAS's time over the loop's was 1.3-1.8 at 3, 5 and 6 columns for
    a Tree-LSTM's 640 x 256 U and 1.3-2.1 for a character LSTM's 256 x 64, 2.0-3.1 for the 640 x 256
    at 7-16 columns, 1.5-1.6 for the Tree-LSTM's leaves (384 x 24-32 from k = 128), 2.8-4.6 for a
    1,024 x 256 at 4 and 8; 0.6-1.0 at 2 and 4 columns and for a tagger's 200 x 8-30 (k = 128),
    which stay with OpenBLAS. dyn_sgemm_nn, which its rule below gives the packed shapes, took
    1.0-1.1x the loop's time there."""
    if m < 256 or k < 64 or n < 3 or n > 32 or <long>m * k >= (1 << 20) or k >= 2 * m:
        return False
    return n == 3 or n == 5 or n == 6 or (n >= 4 and mnk > 1000000)


cdef bint _big_on = True    # off only to measure the shapes _big_shape takes through the other paths
cdef bint _big_tn_on = True # off only to measure the A^T B shapes _big_tn_shape takes through OpenBLAS

cdef enum:
    # on AMD's processors (Zen 4), A B through _biggemm.h only where OpenBLAS would take it at the end
    # of _skinny's A B rules (a short, wide A, k >= 2 m, unmeasured, stays with OpenBLAS) and C has
    # at most this many entries: a 10,000 x 256 W times 704 and 1,408 columns, and a 4,096 x 256 one
    # times 1,408, ran 0.98-0.99x OpenBLAS's speed
    AMD_BIG_NN_MN = 1 << 22

# A B of 33-63 columns with an A of 2^16 to 2^18 entries (and k < 2 m) through dyn_sgemm_nn rather
# than OpenBLAS, on processors with AVX-512 other than AMD's. On an Intel Xeon (Sapphire Rapids
# class, one thread, three rounds of 40 alternating calls with 1 MB streamed between them),
# OpenBLAS's time over dyn_sgemm_nn's was 1.43, 1.15 and 1.08 for a 640 x 256 A (a Tree-LSTM's
# gates) at 33, 48 and 63 columns, 1.22 for 512 x 128 and 1.21 for 1,024 x 128 at 40; the Tree-LSTM
# at 64 trees a graph trained 0.8-0.9% faster (bench/paired.py mid treelstm --batch 64).
cdef bint _mid_on = True    # off only to measure those shapes through OpenBLAS (_set_mid)


cdef inline bint _big_shape(char tb, int m, int n, int k) noexcept nogil:
    """Whether float32 A B or A B^T (C m x n, inner dimension k) runs as _biggemm.h's blocked loop,
    on processors with AVX-512: more than 4 10^6 multiply-adds (OpenBLAS's
    small-matrix kernel keeps the smallest), A B with 512 rows and more, k of 32 and more and 64
    columns and more, or 32 and more where A has 2^20 entries or more (a softmax's W: A then
    streams from memory, and dyn_sgemm_nn reads it once per group of columns); A B^T with 256 rows
    and more, 64 columns and more and k of 16 and more. On an Intel Xeon (Sapphire Rapids class,
    one thread, beta = 1, median of three alternating rounds; bench/gemm_shapes.py --big), the
    other paths' time over the loop's was 1.00-1.10 for a 10,000 x 256 W times 256-1,408 columns
    (1.06 at 352), 1.17-1.36 at 48-128 columns (dyn_sgemm_nn or OpenBLAS), 1.10 at 32; 0.99-1.17
    for 512-4,096 rows at 128-1,408 columns; A B^T into a 10,000 x 256 C 1.06-1.31 at k of
    16-1,408 (1.13 at 432: a softmax's weight gradient over 16 sentences), 1.05-1.24 for C of
    256-4,096 rows. It lost at 24 columns (1.00) and to _fewgemm.h and dyn_sgemm_nn for a 1,024 x
    256 A at 32-48 columns (0.76-0.94: A then stays in the second-level cache).
    On an AMD EPYC (Zen 4, same method) the loop lost to dyn_sgemm_nn and dyn_sgemm_nt_tall where
    those take the product (0.71-0.94 and 0.87-0.99), so there it has only what OpenBLAS would take:
    A B, with C of up to AMD_BIG_NN_MN entries, 1.05-1.19 for a 10,000 x 256 A at 96-352 columns,
    1.02-1.08 for 1,024 x 128 and 1,024 x 256 at 64-1,408, 1.03-1.06 for 4,096 x 256 at 128-352;
    A B^T with k of 256 and more, 1.01-1.22 into a 10,000 x 256 C (1.22 at 1,408: a softmax's weight
    gradient over 64 sentences), 1.01-1.17 for C of 1,024-10,000 rows."""
    if <long>m * n * k <= 4000000:
        return False
    if tb == b'T':
        return m >= 256 and n >= 64 and k >= 16
    return m >= 512 and k >= 32 and (n >= 64 or (n >= 32 and <long>m * k >= (1 << 20)))


cdef inline bint _big_tn_shape(int m, int n, int k) noexcept nogil:
    """Whether float32 A^T B (C m x n, inner dimension k) that no loop of dyn's takes before it
    (_tn_dot_shape's few columns, dyn_sgemm_tn's 16 and fewer) runs as _biggemm.h's blocked loop
    instead of OpenBLAS, on processors with AVX-512: 64 rows and more, k of 256
    and more, 10^6 multiply-adds and more, 32 columns and more (64 past 512 rows: every panel of B
    passes all of A^T's copied rows). On an Intel Xeon (Sapphire Rapids class, one thread, medians
    of 7 alternating rounds of 3 calls, 16 MB streamed between them), OpenBLAS's time over the
    loop's was 1.04-1.10 for a softmax's W^T G (W 10,000 x 256) at 352 and 1,408 columns, 1.31 at
    32 and 48; 1.07-1.65 for a Tree-LSTM's U^T D (U 640 x 128) at 33-330 columns; 1.06-1.37 for
    64-1,024 rows from k = 256-1,024 at 64-352 columns and 1.23-1.35 for 96 and 129 rows at 33 and
    47; 0.96-0.99 for 100 x 64 from k = 256 (inside the rule), 0.90 for 1,000 x 40 from k = 300
    (outside it). On an AMD EPYC (Zen 4, medians of five alternating rounds), 1.01-1.08 for the
    softmax's W^T G at 64-1,408 columns, 1.07-1.25 for an LSTM's 1,024 x 256 at 64-1,408, 1.06-1.52
    for the Tree-LSTM's 640 x 128 at 33-330, 1.00-1.52 for 64-1,024 rows from k = 256-1,024; there
    dyn_sgemm_tn keeps a 10,000 x 256 A at up to 48 columns (_skinny)."""
    if not _big_tn_on:
        return False
    return n >= (32 if m <= 512 else 64) and m >= 64 and k >= 256 and <long>m * n * k >= 1000000


cdef inline int _skinny(char ta, char tb, int m, int n, int k) noexcept nogil:
    """Which of _skinnygemm.h's kernels beats OpenBLAS on this float32 product
    (1: A B, 2: A^T B, 3: A B^T, 4: A B^T computed transposed, 11: A B^T through A's
    copied panels, 12: _dotgemm.h, 13: _fewgemm.h, 14: _biggemm.h, 0: none), from
    bench/gemm_shapes.py's grid.
    OpenBLAS keeps products of up to 10^6 multiply-adds, where its small-matrix
    kernel (no packing) is as fast as ours or faster, and products whose small
    side is wide, where its packing pays; ours take the ones between."""
    cdef long size = <long>m * k
    cdef long mnk = size * n
    if not _skinny_on:
        return 0
    if tb == b'T':     # A B^T, k small: a weight's gradient over a batch (an LSTM's 1024 x 256 at 4-16)
        if ta != b'N':
            return 0
        # A's panels copied, C swept in six-column strips (dyn_sgemm_nt_tall): on an AMD EPYC
        # (Zen 4), OpenBLAS's time over the loop's (medians of 11 alternating calls; C flushed from
        # the caches where it has 2^21 entries or more) was 1.03-2.2 for a 10,000 x 256 C at k of
        # 2-128 (1.19-1.33 at 16-32: a softmax's weight gradient over a sentence), 1.10-2.15 for
        # 1,024 x 256 and 4,096 x 256 at 2-256, 1.03-2.05 for 1,024 x 128 at 2-256 but 0.77-0.89
        # for 1,024 x 64 at 2-8, and below 1 for most C of 256 or 512 rows at k below 16
        if _amd_on and _nt_tall_shape(m, n, k):
            return 11
        if _big_on and _big_shape(tb, m, n, k) and (k >= 256 or not _amd_on):
            return 14
        if 4 <= k <= 16 and (1 << 18) <= <long>m * n <= (1 << 20):
            return 3
        # a 10k softmax's weight gradient over a minibatch of 1,000 tokens and more, where _biggemm.h
        # is off: OpenBLAS is 6-20% faster on the transposed product (C^T = B A^T, then added
        # transposed) on an Intel Xeon; on an AMD EPYC (Zen 4) the transposed product ran 0.90-0.97x
        # OpenBLAS's direct speed at k of 1,030-5,632
        return 4 if m >= 8192 and m >= 4 * n and n >= 64 and k >= 1024 else 0
    if n < 2:
        return 0
    if ta == b'N' and _few_on and not _amd_on and _nn_few_shape(m, n, k, mnk):
        return 13
    if ta == b'N' and _big_on and not _amd_on and _big_shape(tb, m, n, k):
        return 14
    if ta == b'N':
        if mnk <= 1000000 or size < (1 << 16) or m < 128:
            return 0
        if k >= 2 * m:      # a short, wide A (an LSTM's transposed H x 4H Wh): ours up to n = 128
            return 1 if n <= 128 else 0
        if n <= 32:
            return 1 if m >= 256 else 0
        # 33-63 columns with an A of 2^16 to 2^18 entries (a Tree-LSTM's 640 x 256 gates over a
        # batched level) on an Intel Xeon: see _mid_on
        if n <= 64 and (size >= (1 << 18) or (n < 64 and _mid_on and not _amd_on)):
            return 1
        return 14 if _amd_on and _big_on and _big_shape(tb, m, n, k) and <long>m * n <= AMD_BIG_NN_MN else 0
    if _dot_on and not _amd_on and _tn_dot_shape(m, n, k):
        return 12
    if n <= 16:
        return 2 if mnk > 1000000 and m >= 128 and size >= (1 << 16) else 0
    # on the EPYC (Zen 4), A^T B with A 10,000 x 256 ran 1.21x OpenBLAS's speed at 32 columns and
    # 1.05x at 48 (bench/gemm_shapes.py --ops TN); against _biggemm.h (medians of five, one run)
    # 73.9 against 68.4 GF/s at 32 columns, 82.8 against 66.9 at 40, 79.5 against 88.1 at 48
    if n <= (48 if _amd_on else 24) and size >= (1 << 20):
        return 2
    return 14 if _big_on and _big_tn_shape(m, n, k) else 0


cdef enum:
    COLS_MAX_N = 8            # a product of up to this many columns ...
    COLS_MIN_SIZE = 1 << 12   # ... with an A of at least this many elements: one gemv per column
    COLS_SMALL_SIZE = 1 << 15 # an A of 2^12 to 2^15 elements: also A B of up to 12 columns,
    COLS_SMALL_N = 12         # A^T B of up to 10 whose inner dimension k is 64 or more
    COLS_SMALL_N_T = 10
    # _narrowgemm.h (before the column loop), for an A under 2^18 elements: A B of up to 64
    # columns (32 with an A of 2^17 and more) where A has 16 to 1,023 rows, of up to 32 (24 with
    # an A of 2^17 and more) where it has 1,024 or more; with fewer than 16 rows, of up to 12
    # columns, or 32 with an A of 2^10 to 2^15. A^T B of up to 8 columns along an inner
    # dimension k of 64 or more, 16 along 128 or more, 32 along 512 or more; of up to 8 along
    # 128 or more whatever A's size.
    NARROW_N = 12
    NARROW_SIZE = 1 << 18
    NARROW_SMALL_N = 32
    NARROW_SMALL_MIN = 1 << 10
    NARROW_SMALL_SIZE = 1 << 15
    NARROW_TALL_M = 16
    NARROW_TALL_N = 64
    NARROW_TALL_SIZE = 1 << 17
    NARROW_TALL_N_LARGE = 32
    NARROW_LONG_M = 1024
    NARROW_LONG_N = 32
    NARROW_LONG_N_LARGE = 24
    NARROW_T_MIN_K = 128
    # an A of 2^18 elements and more (a 10,000-word softmax's W): A B of 3-32 columns (k >= 64)
    # through _narrowgemm.h's panels (7), A^T B of up to 32 along a k of 256 and more through its
    # long dot products (8), or from 5 columns on its packed loop (9)
    LARGE_MAX_N = 32
    LARGE_PACKED_MIN_N = 5
    # A B^T (a weight gradient over a batch's columns) through _narrowgemm.h's loops on a copy of
    # B^T (10): C of 8-512 rows and at most 2^15 entries, k up to 128
    NT_NARROW_MIN_M = 8
    NT_NARROW_MAX_M = 512
    NT_NARROW_MAX_MN = 1 << 15
    NT_NARROW_MAX_K = 128


cdef inline int _path(char ta, char tb, int m, int n, int k) noexcept nogil:
    """_skinny's choice where dyn's register kernels are on (AVX-512). Elsewhere 6
    (_narrowgemm.h: A read in place, once per group of up to six columns) for the shapes NARROW_*
    name: on an AMD EPYC (Zen 3), against OpenBLAS's gemm (best of three alternating rounds),
    A B with A 32 x 100 and 25 columns (a tagger's MLP over a sentence) took 0.39-0.40 of
    OpenBLAS's time, 256 x 64 (a character LSTM's Wh) 0.15-0.46 at 2-16 columns and 0.57-0.78
    at 24-64, 200 x 128 0.22-0.70 at 8-64, 512 x 128 0.21-0.91 at 8-64, 640 x 256 (a
    Tree-LSTM's gates) 0.29-0.80 at 8-32, 0.90-0.97 at 48 and 0.99-1.02 at 64; A^T B with A
    256 x 64 (k = 256) 0.41-0.88 at 8-16 columns and 1.06-1.17 at 24, 200 x 128 0.44-0.93 at
    8-16, 640 x 256 (k = 640) 0.34-1.05 at 8-32, and along a k of 32 2-4 times OpenBLAS's.
    Past those widths, or for an A of 2^18 elements and more (its row tiles then stride through
    memory: 10,000 x 256 at 8 columns took 5.3 ms, against 0.8 column by column) or A^T B along
    a short k, it loses. Then 5 (one
    matrix-vector product per column) for A B and A^T B of 1-8 columns with an A of 2^12
    elements or more, and of 9-12 (A B) or 9-10 (A^T B, k >= 64) columns with an A of 2^12 to
    2^15 elements; 0 (OpenBLAS) for the rest. Without AVX-512, OpenBLAS (its Haswell
    kernels) packs the whole A for each such product: on an AMD EPYC (Zen 3) a Tree-LSTM
    level's 640 x 256 gates took 139-165 us at 2-8 columns, against 23-104 us as separate
    matrix-vector products (equal at 16 columns), which made automatic batching slower than
    none there (bench/gemm_shapes.py --cols). A smaller A packs faster but not in proportion:
    at 10 columns, OpenBLAS over the column loop (median of 7 alternating rounds) was 1.6-2.0
    for A B with A 256 x 20, 256 x 64, 200 x 128, 64 x 256 (a character LSTM's Wh batched across
    a sentence's words), 1.2-1.6 for A^T B with k >= 64 (0.79 at k = 20), and 0.86-1.06 with A
    640 x 256 or 256 x 1024.
    Before all these, an A of 2^18 elements and more (LARGE_*): 7 (_narrowgemm.h's panels: each
    16-row panel of A read once for all columns) for A B, 8 (its long dot products, three
    columns of A against four of B) for A^T B. OpenBLAS packs the whole A for these too: on the
    EPYC (best of 7 alternating rounds, GFLOP/s) a 10,000-word
    softmax's W, 10,000 x 256, times 22 columns (a sentence's hidden states) ran at 41-55
    against 28-30, at 8 columns at 42-47 against 16-19 (17-20 column by column), at 32 at 42
    against 42, at 48 at 45 against 46 (bench/gemm_shapes.py --large, two runs: 1.33-2.29x
    OpenBLAS's speed at 22 columns, 0.93-1.23 at 32, 0.87-1.01 at 48); W^T times 22 columns at
    50-54 against 28-31 (1.40-1.42x), at 48 0.91-0.95x; A^T B with A 1,024 x 256 to 256 x 1,024
    at 16 columns at 48-70 against 32, at 32 at 49-63 against 46, at 48 at 50-64 against
    54-56. So both stop at 32 columns. An A whose columns lie
    a multiple of 512 bytes apart (its panels' lines then share a few of L1's sets) stays with
    OpenBLAS in gemm past 24 columns, or past 8 where they lie 16 KB apart or more: 8,192 x 256 at
    44 columns ran at 43 through the panels against 50 (65 with 8,200 rows apart), at 16 at 18
    against 20; 256 x 1,024, 1,024 x 256 and 4,096 x 128 at 16-24 columns at 34-49 against 26-39,
    at 32-48 at 35-47 against 37-49.
    From 5 columns on, A^T B of such an A takes 9 instead of 8 (_narrowgemm.h's packed loop: B's
    rows copied into a buffer, C's tile kept in registers along k; 8 read both operands through
    L1 with neither kept there): in C on the EPYC (medians of 41 calls, us), W^T times 22 columns
    1,613-1,927 against 2,840-3,182 (5 columns 941 against 1,201, 8 columns 876 against 1,516, 16
    1,135-1,325 against 2,147-2,624, 32 2,480-2,718 against 4,056-4,588), A^T B with A 1,024 x
    256 at 16 columns 144 against 252 and at 8 73 against 107; at 3 columns 8 stays faster
    (3 of every 8 lanes used).
    A B^T (tb 'T', ta 'N': a weight gradient D X^T over a batch's columns) takes 10 (the loops of
    6 on a copy of B^T) where C has 8-512 rows and at most 2^15 entries and k is at most 128: in
    a grid on the EPYC (median of 5 rounds, OpenBLAS's time over the loops', the copy not
    counted) 1.1-5.2 there for k of 8-64 (200 x 128 at 25 columns 1.22, 32 x 100 2.2), about 1.0
    at 200 x 256 to 512 x 384, and 0.6-1.0 for 1,024 rows past 32 columns."""
    if _skinny_on:
        return _skinny(ta, tb, m, n, k)
    cdef long size = <long>m * k
    cdef int widest
    if tb != b'N':
        if (tb == b'T' and ta == b'N' and _narrow_on and _narrow_nt_on and NT_NARROW_MIN_M <= m <= NT_NARROW_MAX_M
                and <long>m * n <= NT_NARROW_MAX_MN and k <= NT_NARROW_MAX_K):
            return 10
        return 0
    if _large_on and size >= NARROW_SIZE and n <= LARGE_MAX_N:
        if ta == b'N':
            if n >= 3 and k >= 64:
                return 7
        elif k >= 256:
            return 9 if _packed_on and n >= LARGE_PACKED_MIN_N else 8
    if _narrow_on:
        if ta == b'N':
            if size < NARROW_SIZE and m >= NARROW_TALL_M:
                if m < NARROW_LONG_M:
                    widest = NARROW_TALL_N if size < NARROW_TALL_SIZE else NARROW_TALL_N_LARGE
                else:
                    widest = NARROW_LONG_N if size < NARROW_TALL_SIZE else NARROW_LONG_N_LARGE
                if n <= widest:
                    return 6
            elif (n <= NARROW_N and size < NARROW_SIZE) or (n <= NARROW_SMALL_N and NARROW_SMALL_MIN <= size <= NARROW_SMALL_SIZE):
                return 6
        elif n <= COLS_MAX_N and k >= NARROW_T_MIN_K:
            return 6
        elif size < NARROW_SIZE and ((n <= COLS_MAX_N and k >= 64) or (n <= 16 and k >= NARROW_T_MIN_K)
                                     or (n <= 32 and k >= 512)):
            return 6
    if not _cols_on or size < COLS_MIN_SIZE:
        return 0
    if n <= COLS_MAX_N:
        return 5
    if _cols_on == 2 and size <= COLS_SMALL_SIZE and (n <= COLS_SMALL_N if ta == b'N' else (n <= COLS_SMALL_N_T and k >= 64)):
        return 5
    return 0


cdef inline int _path_lda(int which, int n, int lda) noexcept nogil:
    """_path's choice given A's leading dimension: the panels (7) keep off an A whose columns lie
    a multiple of 512 bytes apart past 24 columns, or past 8 where they lie 16 KB apart or more
    (see dyn_sgemm_nn_panels)."""
    if which == 7 and lda % 128 == 0 and (n > 24 or (n > 8 and lda > 4096)):
        return 0
    return which


# the paths of _path by number, as _skinny_path and the product trace name them
_PATH_NAMES = ("blas", "nn", "tn", "nt", "nt-transposed", "cols", "narrow", "panels", "long", "packed",
               "narrow-nt", "nt-tall", "dot", "few", "big")
cdef enum:
    NPATHS = 15

cdef int _cols_on = 2       # below 2 only to measure OpenBLAS on the same shapes (_set_cols)
cdef bint _narrow_on = True # off only to measure the paths without _narrowgemm.h (_set_narrow)
cdef bint _large_on = True  # off only to measure OpenBLAS on _path's 7 and 8 (_set_large)
cdef int _long_kc = 4096    # dyn_sgemm_tn_long's stretch of k at a time (_set_long_kc)
cdef bint _packed_on = True # off only to measure path 9's shapes through path 8 (_set_packed)
cdef int _packed_kc = 2048  # dyn_sgemm_tn_packed's stretch of k at a time (_set_packed_kc)
cdef bint _narrow_nt_on = True  # off only to measure path 10's shapes through OpenBLAS (_set_narrow_nt)


cdef bint _nt_transposed(int m, int n, int k, float alpha, float* A, int lda, float* B, int ldb, float beta,
                         float* C, int ldc) noexcept nogil:
    """C = alpha A B^T + beta C computed as T = alpha B A^T (n x m) and C = beta C + T^T;
    False (nothing done) when the scratch for T cannot be had."""
    cdef float zero = 0
    cdef char cn = b'N', ct = b'T'
    cdef float* T = <float*>malloc(<size_t>m * n * sizeof(float))
    if T == NULL:
        return False
    sgemm(&cn, &ct, &n, &m, &k, &alpha, B, &ldb, A, &lda, &zero, T, &n)
    dyn_add_transposed(m, n, T, n, beta, C, ldc)
    free(T)
    return True


cdef bint _nt_narrow(int m, int n, int k, float alpha, float* A, int lda, float* B, int ldb, float beta,
                     float* C, int ldc) noexcept nogil:
    """C = alpha A B^T + beta C (_path's 10) as _narrowgemm.h's A B on a copy of B^T (k x n: k n
    floats against m k n multiply-adds); False (nothing done) when the copy cannot be had."""
    cdef float* T = <float*>malloc(<size_t>k * n * sizeof(float))
    if T == NULL:
        return False
    dyn_add_transposed(k, n, B, ldb, 0.0, T, k)
    dyn_sgemm_nn_narrow(m, n, k, alpha, A, lda, T, k, beta, C, ldc)
    free(T)
    return True


cdef void _gemm_cols(char ta, int m, int n, int k, double alpha, void* A, int lda, void* B, int ldb,
                     double beta, void* C, int ldc) noexcept nogil:
    """float32 C = alpha op(A) B + beta C as one matrix-vector product per column (_path's 5)."""
    cdef int j
    for j in range(n):
        gemv(0, ta, m if ta == b'N' else k, k if ta == b'N' else m, alpha, A, lda,
             <float*>B + <long>j * ldb, beta, <float*>C + <long>j * ldc)


cdef inline void _gemm_narrow(char ta, int m, int n, int k, float alpha, float* A, int lda, float* B, int ldb,
                              float beta, float* C, int ldc) noexcept nogil:
    """float32 C = alpha op(A) B + beta C through _narrowgemm.h (_path's 6)."""
    if ta == b'N':
        dyn_sgemm_nn_narrow(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
    else:
        dyn_sgemm_tn_narrow(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)


# ---------------------------------------------------------------- the product trace (measurement)
# bench/gemm_trace.py: while on, every float32 or float64 product and matrix-vector product that
# gemm and gemv run is counted by its shape and path, with the tick counter's time around it. Off
# (the default), gemm and gemv test one flag more.

cdef extern from "_ticks.h" nogil:
    unsigned long long dyn_ticks()

ctypedef struct TraceRow:
    int op, m, n, k, path, dtype     # op: 0 NN, 1 TN, 2 NT, 3 TT, 4 gemv N, 5 gemv T
    long calls
    unsigned long long ticks

cdef enum:
    TRACE_ROWS = 4096

cdef TraceRow _trace_rows[TRACE_ROWS]
cdef int _trace_n = 0
cdef long _trace_lost = 0
cdef bint _trace_on = False
cdef unsigned long long _trace_t0 = 0
cdef timespec _trace_c0


cdef void _trace_add(int op, int m, int n, int k, int path, int dtype, unsigned long long t) noexcept nogil:
    global _trace_n, _trace_lost
    cdef int r
    cdef TraceRow* e
    for r in range(_trace_n - 1, -1, -1):     # (the recent shapes are the likely ones)
        e = &_trace_rows[r]
        if e.op == op and e.m == m and e.n == n and e.k == k and e.path == path and e.dtype == dtype:
            e.calls += 1
            e.ticks += t
            return
    if _trace_n == TRACE_ROWS:
        _trace_lost += 1
        return
    e = &_trace_rows[_trace_n]
    _trace_n += 1
    e.op, e.m, e.n, e.k, e.path, e.dtype, e.calls, e.ticks = op, m, n, k, path, dtype, 1, t


def _trace(bint on):
    """Count the products gemm and gemv run from now on (on) or stop counting; returns the previous
    setting. The counts add up until _trace_reset."""
    global _trace_on
    cdef bint old = _trace_on
    _trace_on = on
    return old


def _trace_reset():
    """Clear the counts (and start the tick counter's calibration against the clock again)."""
    global _trace_n, _trace_lost, _trace_t0
    _trace_n = 0
    _trace_lost = 0
    clock_gettime(CLOCK_MONOTONIC, &_trace_c0)
    _trace_t0 = dyn_ticks()


def _trace_table():
    """The counted products: a list of (op, m, n, k, path, float type, calls, seconds) where op is
    'NN', 'TN', 'NT' or 'TT' (C m x n, inner dimension k) or 'gemv N' / 'gemv T' (A m x n), and
    path the one gemm or gemv took (its name in _skinny_path, or 'regs', 'plain' or 'blas' for a
    matrix-vector product); and the calls not counted (the table full)."""
    cdef timespec c1
    cdef unsigned long long t1 = dyn_ticks()
    clock_gettime(CLOCK_MONOTONIC, &c1)
    cdef double secs = (c1.tv_sec - _trace_c0.tv_sec) + (c1.tv_nsec - _trace_c0.tv_nsec) * 1e-9
    cdef double per_tick = secs / max(<double>(t1 - _trace_t0), 1.0)
    ops = ("NN", "TN", "NT", "TT", "gemv N", "gemv T")
    names = _PATH_NAMES + ("regs", "plain")
    rows = [(ops[e.op], e.m, e.n, e.k, names[e.path], ("float32", "float64")[e.dtype], e.calls,
             e.ticks * per_tick) for e in _trace_rows[:_trace_n]]
    return rows, _trace_lost


cdef inline int _trace_op(char ta, char tb) noexcept nogil:
    return (1 if ta == b'T' else 0) + (2 if tb == b'T' else 0)


cdef void gemm(int dtype, char ta, char tb, int m, int n, int k, double alpha,
               void* A, int lda, void* B, int ldb, double beta, void* C, int ldc) noexcept nogil:
    cdef unsigned long long t0
    if not _trace_on:
        _gemm_run(dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        return
    t0 = dyn_ticks()
    _gemm_run(dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
    _trace_add(_trace_op(ta, tb), m, n, k, _path_lda(_path(ta, tb, m, n, k), n, lda) if dtype == 0 else 0,
               dtype, dyn_ticks() - t0)


cdef void _gemm_run(int dtype, char ta, char tb, int m, int n, int k, double alpha,
                    void* A, int lda, void* B, int ldb, double beta, void* C, int ldc) noexcept nogil:
    cdef float fa = alpha, fb = beta
    cdef int which
    if m == 0 or n == 0:
        return
    if dtype == 0:
        which = _path_lda(_path(ta, tb, m, n, k), n, lda)
        if which == 5:
            _gemm_cols(ta, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
            return
        if which == 6:
            _gemm_narrow(ta, m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 7:
            dyn_sgemm_nn_panels(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 9 and dyn_sgemm_tn_packed(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc,
                                              _packed_kc) == 0:
            return
        if which == 10 and _nt_narrow(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc):
            return
        if which == 8 or which == 9:   # 9 without its buffer: the long dot products
            dyn_sgemm_tn_long(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc, _long_kc)
            return
        if which == 1:
            dyn_sgemm_nn(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 12:
            dyn_sgemm_tn_dot(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 13:
            dyn_sgemm_nn_few(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 2:
            dyn_sgemm_tn(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 3:
            dyn_sgemm_nt(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc)
            return
        if which == 11 and dyn_sgemm_nt_tall(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc) == 0:
            return
        if which == 14 and ta == b'T':
            if dyn_sgemm_big_tn(tb, m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc) == 0:
                return
        elif which == 14 and dyn_sgemm_big(tb, m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc,
                                           NULL) == 0:
            return
        if which == 4 and _nt_transposed(m, n, k, fa, <float*>A, lda, <float*>B, ldb, fb, <float*>C, ldc):
            return
        sgemm(&ta, &tb, &m, &n, &k, &fa, <float*>A, &lda, <float*>B, &ldb, &fb, <float*>C, &ldc)
    else:
        dgemm(&ta, &tb, &m, &n, &k, &alpha, <double*>A, &lda, <double*>B, &ldb, &beta, <double*>C, &ldc)


cdef bint _bias_on = True
cdef long _bias_taken = 0      # products sgemm_bias ran (tests)


def _bias_products():
    """Tests: how many affine products have had their bias added in dyn's A B kernel so far."""
    return _bias_taken


def _set_bias_fused(bint on):
    """Measurement and test hook: an affine transform's bias added in dyn's A B kernel (sgemm_bias,
    the default) or copied into the output's columns before the product; returns the previous
    setting."""
    global _bias_on
    cdef bint old = _bias_on
    _bias_on = on
    return old


cdef bint sgemm_bias(int m, int n, int k, float* A, int lda, float* B, int ldb, float* bias, float* C,
                     int ldc) noexcept nogil:
    """float32 C = A B + bias 1^T (bias: m entries, added to each of C's n columns) in one pass, where
    gemm takes dyn_sgemm_nn or dyn_sgemm_nn_few for A B: the values of copying the bias into C's
    columns and then gemm with beta = 1, without writing C twice and reading it back. False, C
    untouched, where gemm takes another path."""
    global _bias_taken
    cdef int which
    cdef unsigned long long t0 = 0
    if not _bias_on or m == 0 or n == 0:
        return False
    if _trace_on:
        t0 = dyn_ticks()
    which = _path_lda(_path(b'N', b'N', m, n, k), n, lda)
    if which == 1:
        dyn_sgemm_nn_bias(m, n, k, A, lda, B, ldb, bias, C, ldc)
    elif which == 13:
        dyn_sgemm_nn_few_bias(m, n, k, A, lda, B, ldb, bias, C, ldc)
    elif which != 14 or dyn_sgemm_big(b'N', m, n, k, 1.0, A, lda, B, ldb, 0.0, C, ldc, bias) != 0:
        return False
    _bias_taken += 1
    if _trace_on:    # counted as the product it is, with the path that ran it
        _trace_add(0, m, n, k, which, 0, dyn_ticks() - t0)
    return True


# ---------------------------------------------------------------- a weight's gradient held back
# (see "Low-rank gradients" in dyn/_core/core/graph.pyx and _lowrankadam.h)

cdef int _lr_mode = 1       # 0 never, 1 by the rules of _lr_shape, 2 always (tests)
# mode 1 holds back products over at most this many columns (0: _lr_shape's rule for this machine;
# set by _set_lowrank_cols to measure)
cdef int LR_MAX_K = 0
cdef long _lr_held = 0      # products held back so far (tests)
cdef long _lr_fused = 0     # Adam steps that computed one (tests)


def _set_lowrank(int mode):
    """Measurement and test hook: a large weight's gradient G = D X^T is held back for the
    trainer's Adam step to compute block by block (lowrank_held) never (0), where _lr_shape's
    measured rules say it pays (1, the default: processors with AVX-512) or for every float32
    product of two columns and more (2); returns the previous mode."""
    global _lr_mode
    if mode not in (0, 1, 2):
        raise ValueError("_set_lowrank: mode must be 0, 1 or 2, got %r" % (mode,))
    cdef int old = _lr_mode
    _lr_mode = mode
    return old


def _set_lowrank_cols(int k):
    """Measurement hook: the most columns of a product held back in mode 1 (0, the default: the
    machine's rule, _lr_shape); returns the previous value."""
    global LR_MAX_K
    cdef int old = LR_MAX_K
    LR_MAX_K = k
    return old


def _set_lowrank_ahead(int panels):
    """Measurement hook: how many 64-row panels ahead the fused Adam step fetches the weights and
    moments (0: none); returns the old distance."""
    global dyn_lr_ahead
    cdef int old = dyn_lr_ahead
    dyn_lr_ahead = panels if panels > 0 else 0
    return old


def _set_adam_plain(bint on):
    """Measurement and test hook: optim._set_adam_plain for the held-back gradient's Adam step;
    returns the previous setting."""
    global dyn_adam_plain_on
    cdef bint old = dyn_adam_plain_on
    dyn_adam_plain_on = 1 if on else 0
    return old


def _lowrank_counts():
    """Tests: (products held back, Adam steps that computed one) so far."""
    return _lr_held, _lr_fused


cdef inline bint _lr_shape(int m, int n, int k) noexcept nogil:
    """Mode 1's rule: whether holding back C += A B^T (C m x n, k columns) for the fused Adam step
    beats the product followed by the step, by what bench/lowrank_adam.py measured (the backward
    pass and Adam step of a softmax layer, 64 MB streamed between steps).

    On an AMD EPYC with AVX-512 (Zen 4), where gemm computes such a product with
    dyn_sgemm_nt_tall (its 11), whose sums the fused step repeats: the product and step apart took
    1.03-1.15x as long as held back at 4-28 columns for a 10k x 256 softmax, 0.98-1.03x at 32-128.
    On an Intel Xeon with AVX-512, where gemm leaves these products to OpenBLAS: apart over held
    back 1.67 at 4 columns, 1.40 at 16, 1.21-1.30 at 22-28, 1.20 at 32, 1.02 at 40 and 0.70-0.90
    at 48-64 for 10k x 256; 1.22-1.35 at 2-40 for 4,096 x 256; 1.27-1.36 at 8-32 for 2,048 x 512;
    for 20,000 x 128 1.65 at 8, 1.07 at 22 and 0.87 at 32. So there: up to 32 columns, 22 for a C
    of fewer than 256 columns, on the shapes dyn_sgemm_nt_tall takes on AMD."""
    if not _skinny_on or not _nt_tall_shape(m, n, k):
        return False
    return k <= (LR_MAX_K or (28 if _amd_on else (32 if n >= 256 else 22)))


cdef bint lowrank_held(int m, int n, int k) noexcept nogil:
    """Whether the float32 product C += A B^T (C m x n, k columns of A and B) of a weight's
    gradient known to be zero is held back (and counted as such)."""
    global _lr_held
    if k < 2 or _lr_mode == 0 or (_lr_mode == 1 and not _lr_shape(m, n, k)):
        return False
    _lr_held += 1
    return True


cdef bint adam_lowrank(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C,
                       float* w, float* mo, float* v, float gs, float l2, float c1, float c2, float alpha,
                       float eps, float d) noexcept nogil:
    """Adam on w, mo, v with the gradient gs A B^T (+ l2 w) computed block by block (C: its memory,
    zero); False (nothing done) when the kernel's buffer cannot be had."""
    global _lr_fused
    if dyn_adam_nt_f32(m, n, k, A, lda, B, ldb, C, w, mo, v, gs, l2, c1, c2, alpha, eps, d) != 0:
        return False
    _lr_fused += 1
    return True


cdef void gemv(int dtype, char ta, int m, int n, double alpha, void* A, int lda,
               void* x, double beta, void* y) noexcept nogil:
    cdef unsigned long long t0
    cdef int path
    if not _trace_on:
        _gemv_run(dtype, ta, m, n, alpha, A, lda, x, beta, y)
        return
    t0 = dyn_ticks()
    _gemv_run(dtype, ta, m, n, alpha, A, lda, x, beta, y)
    if dtype == 0 and _skinny_on and <long>m * n <= _gemv_regs_max(ta):
        path = NPATHS              # (gemv's dispatch: its register loops, its plain ones, OpenBLAS)
    elif <long>m * n <= SMALL:
        path = NPATHS + 1
    else:
        path = 0
    _trace_add(4 if ta == b'N' else 5, m, n, 1, path, dtype, dyn_ticks() - t0)


cdef void _gemv_run(int dtype, char ta, int m, int n, double alpha, void* A, int lda,
                    void* x, double beta, void* y) noexcept nogil:
    cdef float fa = alpha, fb = beta
    cdef int one = 1
    if dtype == 0 and _skinny_on and <long>m * n <= _gemv_regs_max(ta):
        if ta == b'N':
            dyn_gemv_n_f32(m, n, fa, <float*>A, lda, <float*>x, fb, <float*>y)
        else:
            dyn_gemv_t_f32(m, n, fa, <float*>A, lda, <float*>x, fb, <float*>y)
        return
    if <long>m * n <= SMALL:
        if dtype == 0:
            if ta == b'N':
                dyn_gemv_n_f32_plain(m, n, fa, <float*>A, lda, <float*>x, fb, <float*>y)
            else:
                dyn_gemv_t_f32_plain(m, n, fa, <float*>A, lda, <float*>x, fb, <float*>y)
        elif ta == b'N':
            dyn_gemv_n_f64(m, n, alpha, <double*>A, lda, <double*>x, beta, <double*>y)
        else:
            dyn_gemv_t_f64(m, n, alpha, <double*>A, lda, <double*>x, beta, <double*>y)
        return
    if dtype == 0:
        sgemv(&ta, &m, &n, &fa, <float*>A, &lda, <float*>x, &one, &fb, <float*>y, &one)
    else:
        dgemv(&ta, &m, &n, &alpha, <double*>A, &lda, <double*>x, &one, &beta, <double*>y, &one)


cdef void ger(int dtype, int m, int n, double alpha, void* x, void* y, void* A, int lda) noexcept nogil:
    """A += alpha x y^T (the weight gradient of a matrix-vector product)."""
    cdef float fa = alpha
    cdef int one = 1
    if <long>m * n <= SMALL:
        if dtype == 0:
            dyn_ger_f32(m, n, fa, <float*>x, <float*>y, <float*>A, lda)
        else:
            dyn_ger_f64(m, n, alpha, <double*>x, <double*>y, <double*>A, lda)
        return
    if dtype == 0:
        sger(&m, &n, &fa, <float*>x, &one, <float*>y, &one, <float*>A, &lda)
    else:
        dger(&m, &n, &alpha, <double*>x, &one, <double*>y, &one, <double*>A, &lda)


cdef void axpy(int dtype, int n, double alpha, void* x, void* y) noexcept nogil:
    cdef float fa = alpha
    cdef int one = 1
    if dtype == 0:
        saxpy(&n, &fa, <float*>x, &one, <float*>y, &one)
    else:
        daxpy(&n, &alpha, <double*>x, &one, <double*>y, &one)


cdef void vadd(int dtype, long n, void* x, void* y) noexcept nogil:
    """y += x for short vectors (a batch element's slice): a compiled loop, no BLAS call."""
    if dtype == 0:
        dyn_vadd_f32(n, <float*>x, <float*>y)
    else:
        dyn_vadd_f64(n, <double*>x, <double*>y)


cdef void scal(int dtype, int n, double alpha, void* x) noexcept nogil:
    cdef float fa = alpha
    cdef int one = 1
    if dtype == 0:
        sscal(&n, &fa, <float*>x, &one)
    else:
        dscal(&n, &alpha, <double*>x, &one)


cdef double dot(int dtype, int n, void* x, void* y) noexcept nogil:
    if dtype == 0:
        # accumulate in double: float32 sums of long vectors lose digits
        return dyn_dot_f32d(n, <float*>x, <float*>y)
    cdef int one = 1
    return ddot(&n, <double*>x, &one, <double*>y, &one)


cdef double nrm2sq(int dtype, int n, void* x) noexcept nogil:
    return dot(dtype, n, x, x)


cdef void matmul_cols(int dtype, char ta, int m, int nb, int k, void* A, int lda, void* X, double beta,
                      void* Y) noexcept nogil:
    """Y (m x nb) = op(A) X + beta Y for X k x nb: a matrix-vector product for
    one column, a matrix product otherwise."""
    if nb == 1:
        if ta == b'N':
            gemv(dtype, b'N', m, k, 1.0, A, lda, X, beta, Y)
        else:
            gemv(dtype, b'T', k, m, 1.0, A, lda, X, beta, Y)
    else:
        gemm(dtype, ta, b'N', m, nb, k, 1.0, A, lda, X, k, beta, Y, m)


cdef void outer_acc(int dtype, int m, int k, int nb, void* D, void* X, void* G) noexcept nogil:
    """G (m x k) += D X^T for D m x nb, X k x nb (sums over the nb columns)."""
    if nb == 1:
        ger(dtype, m, k, 1.0, D, X, G, m)
    else:
        gemm(dtype, b'N', b'T', m, k, nb, 1.0, D, m, X, k, 1.0, G, m)


# ---------------------------------------------------------------- for tests and bench/gemm_shapes.py


def wide_kernels():
    """Whether this machine has AVX-512, where dyn's register kernels are on by default."""
    return bool(_wide)


def _set_skinny(bint on):
    """Route float32 products with one small side to _skinnygemm.h, and float32
    matrix-vector products up to 4 x 128 x 128 elements to the register loops
    (on: the default with AVX-512), or to OpenBLAS and the plain loops (off: the
    default elsewhere); returns the previous setting."""
    global _skinny_on
    cdef bint old = _skinny_on
    _skinny_on = on
    return old


def _set_amd_rules(bint on):
    """The rules of _skinny measured on an AMD EPYC with AVX-512 (A B^T into a C of 1,024 rows and
    more through dyn_sgemm_nt_tall, A^T B of a large A up to 48 columns through dyn_sgemm_tn, A's
    panels fetched two ahead in dyn_sgemm_nn at 8 columns and more, _biggemm.h only where OpenBLAS
    would take the product) on (the default on AMD processors with AVX-512) or off; returns the
    previous setting."""
    global _amd_on, dyn_sk_nn_far
    cdef bint old = _amd_on
    _amd_on = on
    dyn_sk_nn_far = 1 if on else 0
    return old


def _set_nn_far(int mode):
    """Measurement hook: how far ahead dyn_sgemm_nn fetches A's row panels: 0 one panel, 1 two at
    8 columns and more (the default on AMD processors with AVX-512), 2 two always; returns the
    previous mode."""
    global dyn_sk_nn_far
    if mode not in (0, 1, 2):
        raise ValueError(f"_set_nn_far: mode {mode} is not 0, 1 or 2")
    cdef int old = dyn_sk_nn_far
    dyn_sk_nn_far = mode
    return old


def _set_narrow(bint on):
    """Without dyn's register kernels: the products _path gives _narrowgemm.h (on, the default)
    or the column loop and OpenBLAS as before it (off: for measurements); returns the previous
    setting."""
    global _narrow_on
    cdef bint old = _narrow_on
    _narrow_on = on
    return old


def _set_large(bint on):
    """Without dyn's register kernels: the products of an A of 2^18 elements and more with up to
    32 columns through _narrowgemm.h's panels and long dot products (on, the default) or OpenBLAS
    (off: for measurements); returns the previous setting."""
    global _large_on
    cdef bint old = _large_on
    _large_on = on
    return old


def _set_long_kc(int kc):
    """The stretch of k that _narrowgemm.h's long A^T B runs at a time, its sums added into C
    stretch by stretch (0: all of k at once); returns the previous value."""
    global _long_kc
    cdef int old = _long_kc
    _long_kc = kc
    return old


def _set_packed(bint on):
    """A^T B of an A of 2^18 elements and more with 5-32 columns through _narrowgemm.h's packed
    loop (on, the default) or its long dot products (off: for measurements); returns the previous
    setting."""
    global _packed_on
    cdef bint old = _packed_on
    _packed_on = on
    return old


def _set_narrow_nt(bint on):
    """A B^T of the shapes _path gives 10 through _narrowgemm.h's loops on a copy of B^T (on, the
    default) or OpenBLAS (off: for measurements); returns the previous setting."""
    global _narrow_nt_on
    cdef bint old = _narrow_nt_on
    _narrow_nt_on = on
    return old


def _set_few(bint on):
    """Measurements: A B through _fewgemm.h where _nn_few_shape takes it (on, the default) or
    through the paths it would take without it (off); returns the previous setting."""
    global _few_on
    cdef bint old = _few_on
    _few_on = on
    return old


def _set_mid(bint on):
    """Measurements: A B of 33-63 columns with an A of 2^16 to 2^18 entries through dyn_sgemm_nn (on,
    the default, on Intel processors with AVX-512) or OpenBLAS (off); returns the previous setting."""
    global _mid_on
    cdef bint old = _mid_on
    _mid_on = on
    return old


def _set_dot(bint on):
    """Measurements: A^T B through _dotgemm.h where _tn_dot_shape takes it (on, the default) or
    through the paths it would take without it (off); returns the previous setting."""
    global _dot_on
    cdef bint old = _dot_on
    _dot_on = on
    return old


def _set_big(bint on):
    """Measurements: float32 A B, A B^T and A^T B through _biggemm.h where _big_shape and
    _big_tn_shape take them (on, the default; with dyn's register kernels; on AMD's processors only
    where OpenBLAS would take them) or through the paths they would take without it (off); returns
    the previous setting."""
    global _big_on
    cdef bint old = _big_on
    _big_on = on
    return old


def _set_big_tn(bint on):
    """Measurement hook: A^T B of _big_tn_shape's shapes through _biggemm.h's blocked loop (default)
    or OpenBLAS; returns the previous setting."""
    global _big_tn_on
    cdef bint old = _big_tn_on
    _big_tn_on = on
    return old


def _set_big_blocks(int kc, int nc):
    """Measurement hook: the largest stretch of the inner dimension (kc) and the most columns of
    op(B) (nc) that _biggemm.h's loop takes a block at a time; returns the previous pair."""
    global dyn_bg_kc, dyn_bg_nc
    if kc < 1 or nc < 1:
        raise ValueError(f"_set_big_blocks: kc and nc must be positive, got {kc}, {nc}")
    old = (dyn_bg_kc, dyn_bg_nc)
    dyn_bg_kc, dyn_bg_nc = kc, nc
    return old


def _set_packed_kc(int kc):
    """The stretch of k that _narrowgemm.h's packed A^T B copies into its buffer at a time (0: all
    of k at once); returns the previous value."""
    global _packed_kc
    cdef int old = _packed_kc
    _packed_kc = kc
    return old


def _set_nt_tall_ahead(int panels):
    """Measurement hook: how many 64-row panels ahead dyn_sgemm_nt_tall fetches C's lines (0:
    none); returns the old distance."""
    global dyn_sk_nt_ahead
    cdef int old = dyn_sk_nt_ahead
    dyn_sk_nt_ahead = panels if panels > 0 else 0
    return old


def _set_cols(int level):
    """Without dyn's register kernels: A B and A^T B of few columns as one matrix-vector product
    per column by _path's whole rule (2, the default), only those of 1-8 columns (1), or none
    (0: every product through OpenBLAS's gemm); returns the previous setting."""
    global _cols_on
    cdef int old = _cols_on
    if not 0 <= level <= 2:
        raise ValueError(f"_set_cols: level 0, 1 or 2, got {level}")
    _cols_on = level
    return old


def _skinny_path(str op, int m, int n, int k, int lda=0):
    """Which path a float32 product of these sizes takes: 'nn', 'tn', 'nt' (dyn's
    kernels), 'nt-transposed' (OpenBLAS on the transposed product), 'cols' (a
    matrix-vector product per column), 'narrow', 'panels', 'long', 'packed' or 'narrow-nt'
    (_narrowgemm.h), 'nt-tall' (_skinnygemm.h), 'dot' (_dotgemm.h), 'few' (_fewgemm.h), 'big'
    (_biggemm.h) or 'blas'
    (op: 'NN' for A B, 'TN' for A^T B, 'NT' for A B^T), for an A of leading dimension lda (0:
    its rows, as stored without padding)."""
    if lda <= 0:
        lda = m if op[0] == "N" else k
    return _PATH_NAMES[_path_lda(_path(ord(op[0]), ord(op[1]), m, n, k), n, lda)]


def _gemv(str path, str op, cnp.ndarray A, cnp.ndarray x, double alpha, double beta, cnp.ndarray y,
          int reps=1):
    """y = alpha op(A) x + beta y for a float32 Fortran-ordered A (op: 'N' or 'T'; its leading
    dimension A.shape[0], m = A.shape[0] unless x and y say less) through 'blas' (OpenBLAS),
    'regs' (dyn's register loops), 'plain' (dyn's plain loops) or 'auto' (gemv's dispatch: the
    register loops up to SMALL_GEMV_F32 elements where they are on, else the plain ones up to
    SMALL); repeated reps times, returns the seconds per call."""
    cdef int lda = A.shape[0], m, n, one = 1
    cdef char cta
    cdef float fa = alpha, fb = beta
    cdef int r
    cdef timespec t0, t1
    if op not in ("N", "T"):
        raise ValueError(f"_gemv: op {op!r} is not N or T")
    for X in (A, x, y):
        if X.dtype != "float32" or not X.flags.f_contiguous:
            raise ValueError("_gemv: float32 Fortran-ordered arrays only")
    n = A.shape[1]
    m = (y.shape[0] if op == "N" else x.shape[0])
    if A.ndim != 2 or m > lda or (x.shape[0] if op == "N" else y.shape[0]) != n:
        raise ValueError(f"_gemv: op {op} of {(<object>A).shape} does not fit x {(<object>x).shape}, "
                         f"y {(<object>y).shape}")
    if path not in ("auto", "blas", "regs", "plain"):
        raise ValueError(f"_gemv: path {path!r} is not auto, blas, regs or plain")
    cta = ord(op)
    clock_gettime(CLOCK_MONOTONIC, &t0)
    for r in range(reps):
        if path == "auto":
            gemv(0, cta, m, n, alpha, A.data, lda, x.data, beta, y.data)
        elif path == "regs" and cta == b'N':
            dyn_gemv_n_f32(m, n, fa, <float*>A.data, lda, <float*>x.data, fb, <float*>y.data)
        elif path == "regs":
            dyn_gemv_t_f32(m, n, fa, <float*>A.data, lda, <float*>x.data, fb, <float*>y.data)
        elif path == "plain" and cta == b'N':
            dyn_gemv_n_f32_plain(m, n, fa, <float*>A.data, lda, <float*>x.data, fb, <float*>y.data)
        elif path == "plain":
            dyn_gemv_t_f32_plain(m, n, fa, <float*>A.data, lda, <float*>x.data, fb, <float*>y.data)
        else:
            sgemv(&cta, &m, &n, &fa, <float*>A.data, &lda, <float*>x.data, &one, &fb, <float*>y.data, &one)
    clock_gettime(CLOCK_MONOTONIC, &t1)
    return ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9) / max(reps, 1)


def _gemm(str path, str op, cnp.ndarray A, cnp.ndarray B, double alpha, double beta, cnp.ndarray C,
          int reps=1, dims=None):
    """C = alpha op(A) op(B) + beta C for float32 Fortran-ordered arrays (op: 'NN',
    'TN' or 'NT') through one path: 'blas' (OpenBLAS), 'nn', 'tn' or 'nt'
    (_skinnygemm.h, for its op), 'cols' (a matrix-vector product per column,
    NN and TN), 'narrow' (_narrowgemm.h, NN and TN), 'panels' (_narrowgemm.h, NN),
    'long' or 'packed' (_narrowgemm.h, TN), 'narrow-nt' (_narrowgemm.h, NT), 'nt-tall'
    (_skinnygemm.h, NT), 'dot' (_dotgemm.h, TN with k >= 16), 'few' (_fewgemm.h, NN with m >= 16),
    'big' (_biggemm.h, NN, TN and NT) or 'auto' (gemm's
    dispatch); repeated reps
    times, returns the seconds per call (timed in C). dims = (m, n, k)
    multiplies the leading blocks of the arrays, whose first dimensions are then
    the leading dimensions (lda > m and so on)."""
    cdef int lda = A.shape[0], ldb = B.shape[0], ldc = C.shape[0]
    cdef int m, n, k
    cdef char cta, ctb
    cdef float fa = alpha, fb = beta
    cdef int r, kind
    cdef timespec t0, t1
    if op not in ("NN", "TN", "NT"):
        raise ValueError(f"_gemm: op {op!r} is not one of NN, TN, NT")
    cta, ctb = ord(op[0]), ord(op[1])
    for X in (A, B, C):
        if X.dtype != "float32" or not X.flags.f_contiguous or X.ndim != 2:
            raise ValueError("_gemm: 2-d float32 Fortran-ordered arrays only")
    m, n, k = dims if dims is not None else (C.shape[0], C.shape[1], A.shape[1] if op[0] == "N" else A.shape[0])
    arows, acols = (m, k) if op[0] == "N" else (k, m)
    brows, bcols = (k, n) if op[1] == "N" else (n, k)
    if not (0 < m <= C.shape[0] and 0 < n <= C.shape[1] and 0 < k and arows <= A.shape[0]
            and acols <= A.shape[1] and brows <= B.shape[0] and bcols <= B.shape[1]):
        raise ValueError(f"_gemm: (m, n, k) = {(m, n, k)} do not fit op {op} of arrays "
                         f"{(<object>A).shape}, {(<object>B).shape}, {(<object>C).shape}")
    if path not in ("auto", "blas", "nn", "tn", "nt", "cols", "narrow", "panels", "long", "packed", "narrow-nt",
                    "nt-tall", "dot", "few", "big"):
        raise ValueError(f"_gemm: path {path!r} is not auto, blas, nn, tn, nt, cols, narrow, panels, long, "
                         f"packed, narrow-nt, nt-tall, dot, few or big")
    kind = {"auto": -1, "blas": 0, "nn": 1, "tn": 2, "nt": 3, "cols": 5, "narrow": 6, "panels": 7,
            "long": 8, "packed": 9, "narrow-nt": 10, "nt-tall": 11, "dot": 12, "few": 13,
            "big": 14}[path]
    if 0 < kind < 5 and path.upper() != op:
        raise ValueError(f"_gemm: path {path} is for op {path.upper()}, not {op}")
    if kind in (10, 11) and op != "NT":
        raise ValueError(f"_gemm: path {path} is for NT, not {op}")
    if kind == 12 and (op != "TN" or k < 16):
        raise ValueError(f"_gemm: path dot is for TN with k >= 16, not {op} with k = {k}")
    if kind == 13 and (op != "NN" or m < 16):
        raise ValueError(f"_gemm: path few is for NN with m >= 16, not {op} with m = {m}")
    if 5 <= kind < 10 and op == "NT":
        raise ValueError(f"_gemm: path {path} is for NN and TN")
    if (kind == 7 and op != "NN") or (kind in (8, 9) and op != "TN"):
        raise ValueError(f"_gemm: path {path} is for {'NN' if kind == 7 else 'TN'}, not {op}")
    if kind == 9 and n > LARGE_MAX_N:
        raise ValueError(f"_gemm: path packed takes at most {LARGE_MAX_N} columns, not {n}")
    clock_gettime(CLOCK_MONOTONIC, &t0)
    for r in range(reps):
        if kind == -1:
            gemm(0, cta, ctb, m, n, k, alpha, A.data, lda, B.data, ldb, beta, C.data, ldc)
        elif kind == 0:
            sgemm(&cta, &ctb, &m, &n, &k, &fa, <float*>A.data, &lda, <float*>B.data, &ldb, &fb,
                  <float*>C.data, &ldc)
        elif kind == 1:
            dyn_sgemm_nn(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
        elif kind == 2:
            dyn_sgemm_tn(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
        elif kind == 5:
            _gemm_cols(cta, m, n, k, alpha, A.data, lda, B.data, ldb, beta, C.data, ldc)
        elif kind == 6:
            _gemm_narrow(cta, m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
        elif kind == 7:
            dyn_sgemm_nn_panels(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
        elif kind == 8:
            dyn_sgemm_tn_long(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc, _long_kc)
        elif kind == 10:
            if not _nt_narrow(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc):
                raise MemoryError("_gemm: the copy of B^T")
        elif kind == 9:
            if dyn_sgemm_tn_packed(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc,
                                   _packed_kc) != 0:
                raise MemoryError("_gemm: the packed loop's buffer")
        elif kind == 12:
            dyn_sgemm_tn_dot(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
        elif kind == 13:
            dyn_sgemm_nn_few(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
        elif kind == 14 and cta == b'T':
            if dyn_sgemm_big_tn(ctb, m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data,
                                ldc) != 0:
                raise MemoryError("_gemm: the blocked loop's buffer")
        elif kind == 14:
            if dyn_sgemm_big(ctb, m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc,
                             NULL) != 0:
                raise MemoryError("_gemm: the blocked loop's buffer")
        elif kind == 11:
            if dyn_sgemm_nt_tall(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc) != 0:
                raise MemoryError("_gemm: the tall A B^T's buffer")
        else:
            dyn_sgemm_nt(m, n, k, fa, <float*>A.data, lda, <float*>B.data, ldb, fb, <float*>C.data, ldc)
    clock_gettime(CLOCK_MONOTONIC, &t1)
    return ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9) / max(reps, 1)
