"""The float32 products with one small side run through dyn's own kernels
(dyn/_core/cpu/_skinnygemm.h) instead of OpenBLAS above some sizes: check the
kernels (A B, A^T B, A B^T) against float64 numpy on every remainder of their
blocking (rows past the 64- and 16-row blocks, columns past the 5- and
6-column blocks, inner lengths past the vector width and the 1024 chunk), on
leading dimensions larger than the block, with alpha and beta, and that
beta = 0 writes C without reading it (BLAS's contract: NaN there must not
leak). The kernels are tested on every machine; gemm routes products to them
only where they pay (AVX-512), which the dispatch tests switch on to check the
rule itself."""

import os
import platform

import numpy as np
import pytest

from dyn._core.cpu import blas


@pytest.fixture
def kernels_on():
    """dyn's register kernels on (their default only with AVX-512), for the tests of the rule;
    the rules measured on AMD off (their default only on AMD processors with AVX-512: their own
    test)."""
    old = blas._set_skinny(True)
    old_tall = blas._set_amd_rules(False)
    yield
    blas._set_amd_rules(old_tall)
    blas._set_skinny(old)

# (m, k, n) of C (m x n) = op(A) op(B), op(A) m x k
NN_SHAPES = [(1, 1, 1), (15, 7, 3), (16, 1, 1), (63, 17, 5), (64, 16, 6), (65, 33, 7), (130, 40, 13),
             (200, 3, 31), (257, 64, 12), (333, 129, 61), (1030, 260, 5)]
TN_SHAPES = [(1, 1, 1), (3, 15, 2), (4, 16, 5), (5, 17, 6), (7, 33, 11), (9, 1023, 4), (13, 1024, 9),
             (6, 1025, 31), (33, 2100, 3), (260, 1030, 5)]
NT_SHAPES = [(1, 1, 1), (15, 3, 7), (16, 1, 6), (63, 5, 13), (64, 16, 64), (130, 7, 61), (257, 12, 67),
             (1030, 9, 260)]
SHAPES = {"NN": NN_SHAPES, "TN": TN_SHAPES, "NT": NT_SHAPES}


def _case(op, m, n, k, pad, seed):
    rng = np.random.default_rng(seed)
    ar, ac = (m, k) if op[0] == "N" else (k, m)
    br, bc = (k, n) if op[1] == "N" else (n, k)
    A = np.asfortranarray(rng.standard_normal((ar + pad, ac), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((br + pad, bc), dtype=np.float32))
    C = np.asfortranarray(rng.standard_normal((m + pad, n), dtype=np.float32))
    return A, B, C


def _ref(op, A, B, C, m, n, k, alpha, beta):
    a = A[:m, :k] if op[0] == "N" else A[:k, :m].T
    b = B[:k, :n] if op[1] == "N" else B[:n, :k].T
    out = C.astype(np.float64)
    core = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    out[:m, :n] = core + (beta * out[:m, :n] if beta != 0 else 0)
    return out, np.abs(a).max() * np.abs(b).max() * k


@pytest.mark.parametrize("op", ["NN", "TN", "NT"])
@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_kernels_match_numpy(op, pad, alpha, beta):
    for i, (m, k, n) in enumerate(SHAPES[op]):
        A, B, C = _case(op, m, n, k, pad, seed=i)
        want, scale = _ref(op, A, B, C, m, n, k, alpha, beta)
        got = C.copy(order="F")
        blas._gemm(op.lower(), op, A, B, alpha, beta, got, dims=(m, n, k))
        # rows past m (the padding of a larger leading dimension) are left as they were
        np.testing.assert_array_equal(got[m:], C[m:])
        np.testing.assert_allclose(got[:m], want[:m], rtol=1e-5, atol=2e-6 * scale,
                                   err_msg=f"{op} m={m} k={k} n={n} pad={pad}")


@pytest.mark.parametrize("op", ["NN", "TN", "NT"])
def test_beta_zero_does_not_read_c(op):
    m, k, n = {"NN": (130, 40, 7), "TN": (9, 1030, 7), "NT": (130, 7, 40)}[op]
    A, B, C = _case(op, m, n, k, 0, seed=1)
    C[:] = np.nan
    blas._gemm(op.lower(), op, A, B, 1.0, 0.0, C)
    want, scale = _ref(op, A, B, np.zeros_like(C), m, n, k, 1.0, 0.0)
    assert np.isfinite(C).all()
    np.testing.assert_allclose(C, want, rtol=1e-5, atol=2e-6 * scale)


def test_nonfinite_inputs_propagate():
    A, B, C = _case("NN", 130, 7, 40, 0, seed=2)
    A[5, 3] = np.inf
    B[3, 0] = 0.0          # inf * 0 = nan in column 0, as BLAS gives
    B[3, 1] = 1.0
    blas._gemm("nn", "NN", A, B, 1.0, 0.0, C)
    assert np.isnan(C[5, 0]) and C[5, 1] == np.inf


def test_dispatch_agrees_with_openblas_on_the_tasks_shapes(kernels_on):
    """gemm's own choice ('auto') gives OpenBLAS's result to float rounding on
    the shapes where it picks the kernels (a 10k softmax over a sentence, an
    LSTM step over a small minibatch and its weight gradient) and on shapes
    where it keeps OpenBLAS."""
    for op, (m, n, k), expect in [("NN", (10000, 22, 256), "nn"), ("TN", (256, 22, 10000), "tn"),
                                  ("NN", (1024, 16, 256), "few"), ("TN", (256, 8, 1024), "dot"),
                                  # a tagger's W_x^T D over a sentence and a Tree-LSTM's U^T D over a
                                  # level: blocks of dot products; a small one stays with OpenBLAS's
                                  # small-matrix kernel
                                  ("TN", (128, 22, 200), "dot"), ("TN", (128, 12, 640), "dot"),
                                  ("TN", (128, 8, 640), "blas"),
                                  ("NT", (1024, 256, 8), "nt"), ("NT", (640, 256, 4), "blas"),
                                  ("NN", (128, 8, 64), "blas"), ("TN", (64, 8, 128), "blas"),
                                  # an LSTM step's Wh^T d through Wh's transposed copy (H x 4H)
                                  ("NN", (256, 64, 1024), "nn"), ("NN", (128, 128, 512), "nn"),
                                  ("NN", (256, 160, 1024), "blas"),
                                  # every side large: _biggemm.h's blocked loop
                                  ("NN", (1024, 96, 256), "big"), ("NN", (10000, 352, 256), "big"),
                                  ("NT", (10000, 256, 432), "big")]:
        assert blas._skinny_path(op, m, n, k) == expect
        A, B, C = _case(op, m, n, k, 0, seed=3)
        auto, ref = C.copy(order="F"), C.copy(order="F")
        blas._gemm("auto", op, A, B, 1.0, 1.0, auto)
        blas._gemm("blas", op, A, B, 1.0, 1.0, ref)
        np.testing.assert_allclose(auto, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
@pytest.mark.parametrize("m", [8200, 8203])
def test_softmax_weight_gradient_computed_transposed(beta, m, kernels_on):
    """G += D X^T for a 10k-row G over 1,000 tokens and more runs as T = X D^T
    and G = beta G + T^T (dyn_add_transposed, in 32 x 32 tiles of 8 x 8 blocks
    transposed in registers): the same values as OpenBLAS's direct product, rows
    and columns past the tiles and past the blocks included, and the leading
    dimension of G honoured. (Where _biggemm.h's loop is on, as on processors with AVX-512 other
    than AMD's, it takes these shapes; it is switched off here.)"""
    n, k = 70, 1030
    assert blas._skinny_path("NT", m, n, k) == "big"
    old = blas._set_big(False)
    try:
        assert blas._skinny_path("NT", m, n, k) == "nt-transposed"
        A, B, C = _case("NT", m, n, k, 5, seed=5)
        got, ref = C.copy(order="F"), C.copy(order="F")
        blas._gemm("auto", "NT", A, B, 0.7, beta, got, dims=(m, n, k))
    finally:
        blas._set_big(old)
    blas._gemm("blas", "NT", A, B, 0.7, beta, ref, dims=(m, n, k))
    np.testing.assert_array_equal(got[m:], C[m:])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_switch_routes_everything_to_openblas(kernels_on):
    assert blas._skinny_path("NN", 10000, 22, 256) == "nn"
    old, old_large = blas._set_skinny(False), blas._set_large(False)
    try:
        assert blas._skinny_path("NN", 10000, 22, 256) == "blas"
        blas._set_large(True)
        assert blas._skinny_path("NN", 10000, 22, 256) == "panels"
    finally:
        blas._set_skinny(old)
        blas._set_large(old_large)
    assert blas._skinny_path("NN", 10000, 22, 256) == "nn"


@pytest.mark.skipif(platform.machine() != "x86_64" or not os.path.exists("/proc/cpuinfo"),
                    reason="reads the CPU's flags from Linux's /proc/cpuinfo on x86-64")
def test_register_kernels_on_by_default_only_with_avx512():
    """The kernels hold up to 24 sixteen-float accumulators: with AVX2 (16 registers of eight)
    they spill and run several times slower than OpenBLAS (on an AMD Zen 3), so without AVX-512
    products go to OpenBLAS or to _narrowgemm.h's AVX2 loops, and float32 matrix-vector products
    to the plain loops."""
    with open("/proc/cpuinfo") as f:
        flags = next(line for line in f if line.startswith("flags")).split()
    assert blas.wide_kernels() == ("avx512f" in flags)
    assert blas._skinny_path("NN", 10000, 22, 256) == ("nn" if "avx512f" in flags else "panels")
    assert blas._skinny_path("TN", 256, 22, 10000) == ("tn" if "avx512f" in flags else "packed")
    assert blas._skinny_path("NN", 256, 100, 256) == "blas"


def test_bad_calls_raise():
    A, B, C = _case("NN", 20, 3, 10, 0, seed=4)
    with pytest.raises(ValueError, match="float32 Fortran"):
        blas._gemm("nn", "NN", np.ascontiguousarray(A[:, :5]), B, 1.0, 0.0, C)
    with pytest.raises(ValueError, match="do not fit"):
        blas._gemm("nn", "NN", A, B, 1.0, 0.0, C, dims=(21, 3, 10))
    with pytest.raises(ValueError, match="is for op"):
        blas._gemm("tn", "NN", A, B, 1.0, 0.0, C)
    with pytest.raises(ValueError, match="not one of"):
        blas._gemm("nn", "TT", A, B, 1.0, 0.0, C)


@pytest.mark.parametrize("op", ["N", "T"])
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
@pytest.mark.parametrize("path", ["regs", "plain", "auto"])
def test_matrix_vector_products_match_openblas(op, beta, path):
    """float32 A x and A^T x through dyn's loops (regs: vectors in registers, up to 2^16
    elements, past the last multiple of 16 rows A x recomputes the last 16 rows and A^T x reads
    them against x's last 16 with the rows already summed zeroed; plain: the loops of
    float64's; auto: gemv's own choice on this machine) agree with OpenBLAS's to float32
    rounding, with a leading dimension past m, and write nothing past y."""
    rng = np.random.default_rng(7)
    for m in (1, 7, 15, 16, 17, 33, 50, 128, 200, 257):
        for n in (1, 5, 16, 17, 40, 50, 255):
            if m * n > 4 * 128 * 128:
                continue
            A = np.asfortranarray(rng.standard_normal((m + 3, n), dtype=np.float32))   # lda = m + 3
            x = rng.standard_normal(n if op == "N" else m, dtype=np.float32)
            ylen = m if op == "N" else n
            y0 = rng.standard_normal(ylen + 5, dtype=np.float32)
            got, ref = y0.copy(), y0.copy()
            blas._gemv(path, op, A, x, 0.7, beta, got[:ylen])
            blas._gemv("blas", op, A, x, 0.7, beta, ref[:ylen])
            np.testing.assert_array_equal(got[ylen:], y0[ylen:])
            k = n if op == "N" else m
            np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6 * np.sqrt(k), err_msg=f"{m} x {n}")


def _matches_openblas(path, op, shapes, alpha, beta, seed):
    """path's C = alpha op(A) B + beta C on each shape (m, k, n), with and without padding rows:
    OpenBLAS's values, rows past m untouched, beta = 0 writing C without reading it (NaN there)."""
    for i, (m, k, n) in enumerate(shapes):
        for pad in (0, 3):
            A, B, C = _case(op, m, n, k, pad, seed=seed + i)
            if beta == 0:
                C[:m] = np.nan
            want, scale = _ref(op, A, B, np.nan_to_num(C), m, n, k, alpha, beta)
            got = C.copy(order="F")
            blas._gemm(path, op, A, B, alpha, beta, got, dims=(m, n, k))
            np.testing.assert_array_equal(got[m:], C[m:])
            np.testing.assert_allclose(got[:m], want[:m], rtol=1e-5, atol=2e-6 * scale,
                                       err_msg=f"{path} {op} m={m} k={k} n={n} pad={pad}")


@pytest.mark.parametrize("path", ["cols", "narrow"])
@pytest.mark.parametrize("op", ["NN", "TN"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_products_with_few_columns(path, op, alpha, beta):
    """Without AVX-512, A B and A^T B of few columns run as one matrix-vector product per column
    ('cols') or through _narrowgemm.h ('narrow'; OpenBLAS packs the whole A for each such product
    there): the same values as OpenBLAS's gemm, leading dimensions honoured, rows past m
    untouched, and beta = 0 writing C without reading it. The shapes cover the narrow loops'
    blocks and what is left over: rows in sixteens, an eight and single rows (A B), columns of A
    in pairs and one (A^T B), k in eights and the rest, and B's columns in fours and 1-3."""
    shapes = [(640, 256, 1), (640, 256, 3), (65, 70, 8), (256, 640, 5), (33, 129, 2), (256, 64, 12),
              (64, 256, 10), (25, 9, 7), (16, 8, 4), (8, 1, 6), (7, 17, 33), (1, 1, 1), (24, 130, 11)]
    _matches_openblas(path, op, shapes, alpha, beta, seed=20)


@pytest.mark.parametrize("op,rows", [("NN", range(1, 90)), ("TN", range(1, 20))])
def test_narrow_tiles_every_split(op, rows):
    """_narrowgemm.h's narrow loops split B's columns into groups of at most six (7: 4 + 3,
    13: 5 + 4 + 4) and give each group a tile as tall as its column count allows (A B: 64 rows
    for one column down to 16 for six, then tiles of 32, 16 and 8 rows and single rows; A^T B:
    eight columns of A for one of B down to two, then one tile of what is left): every row
    count up to past the tallest tile and its tails, against OpenBLAS, for each group size."""
    ks = (9,) if op == "NN" else (7, 17)
    shapes = [(m, k, n) for n in (1, 2, 3, 4, 5, 6, 7, 13) for m in rows for k in ks]
    _matches_openblas("narrow", op, shapes, 0.75, 0.5, seed=90)


@pytest.mark.parametrize("path,op,kc", [("panels", "NN", 0), ("long", "TN", 4096), ("long", "TN", 64)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_products_with_a_large_side(path, op, kc, alpha, beta):
    """_narrowgemm.h's loops for an A of 2^18 elements and more, on small shapes that take every
    branch: A B in 16-row panels (with the panel 64 rows on prefetched, and without near the
    end), B's columns in sixes and 1-5 left, then an 8-row block and single rows; A^T B with A's
    columns in threes, then a pair or one, B's in fours and 1-3, k in eights and the rest, and
    in stretches of kc (64: beta taken at the first stretch only, a last stretch shorter than
    the rest). The same values as OpenBLAS's gemm, leading dimensions honoured, rows past m
    untouched, beta = 0 writing C without reading it."""
    shapes = [(1000, 70, 23), (333, 9, 17), (97, 64, 6), (16, 5, 1), (15, 3, 4), (200, 256, 48),
              (90, 33, 11), (7, 1000, 13), (8, 1003, 4), (10, 37, 22), (1, 9, 1), (2, 5, 3), (5, 8, 2)]
    old = blas._set_long_kc(kc) if path == "long" else None
    try:
        _matches_openblas(path, op, shapes, alpha, beta, seed=40)
    finally:
        if old is not None:
            blas._set_long_kc(old)
    A, B, C = _case(op, 20, 3, 30, 0, seed=5)
    with pytest.raises(ValueError, match=f"path {path} is for {op}"):
        blas._gemm(path, "TN" if op == "NN" else "NN", A, B, 1.0, 0.0, C)


def _auto_takes(path, op, m, n, k, pad, seed):
    """gemm's own dispatch takes path for this shape (A's leading dimension padded by pad) and
    gives its values bit for bit; returns the operands and path's C = 0.5 op(A) op(B) + C."""
    A, B, C = _case(op, m, n, k, pad, seed=seed)
    assert blas._skinny_path(op, m, n, k, A.shape[0]) == path
    auto, ref = C.copy(order="F"), C.copy(order="F")
    blas._gemm("auto", op, A, B, 0.5, 1.0, auto, dims=(m, n, k))
    blas._gemm(path, op, A, B, 0.5, 1.0, ref, dims=(m, n, k))
    np.testing.assert_array_equal(auto, ref)
    return A, B, C, ref


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_narrow_products_with_a_transposed_b(alpha, beta):
    """A B^T (a weight gradient over a batch's columns) through _narrowgemm.h's loops on a copy
    of B^T: the same values as OpenBLAS's gemm for rows in every tile and tail of the loops
    (8 to 90), B's rows in groups of 1-6 (up to 13, and 128), k from 1 to 128, leading
    dimensions honoured, rows past m untouched, beta = 0 writing C without reading it; the
    buffer for B^T grows from a small product to a larger one. Without AVX-512 the automatic
    dispatch sends C of 8-512 rows and at most 2^15 entries with k <= 128 there."""
    shapes = [(m, k, n) for m in (8, 9, 15, 16, 17, 31, 40, 63, 64, 90) for n in (1, 2, 3, 5, 6, 7, 13)
              for k in (1, 9)]
    shapes += [(200, 25, 128), (32, 25, 100), (9, 25, 32), (512, 128, 64), (100, 70, 3)]
    _matches_openblas("narrow-nt", "NT", shapes, alpha, beta, seed=70)
    A, B, C = _case("NN", 20, 3, 30, 0, seed=5)
    with pytest.raises(ValueError, match="path narrow-nt is for NT"):
        blas._gemm("narrow-nt", "NN", A, B, 1.0, 0.0, C)
    if blas.wide_kernels():
        return
    for (m, n, k), expect in [((200, 128, 25), "narrow-nt"), ((8, 4096, 128), "narrow-nt"),
                              ((512, 64, 128), "narrow-nt"), ((7, 32, 25), "blas"), ((513, 16, 25), "blas"),
                              ((200, 200, 25), "blas"), ((200, 128, 129), "blas")]:
        assert blas._skinny_path("NT", m, n, k) == expect, (m, n, k)
    _auto_takes("narrow-nt", "NT", 200, 128, 25, pad=2, seed=11)
    old = blas._set_narrow_nt(False)
    try:
        assert blas._skinny_path("NT", 200, 128, 25) == "blas"
    finally:
        assert blas._set_narrow_nt(old) is False


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_tall_products_with_a_transposed_b(alpha, beta):
    """A B^T with A's 64-row panels copied into a buffer and C swept six columns at a time
    ('nt-tall': a softmax's weight gradient over a sentence): OpenBLAS's values for C with no
    whole panel, one, several, and 1-63 rows past them (its 16-row blocks and single rows), 1-13
    columns (blocks of six and the 1-5 after them) and 128 or 256, k from 1 to 64, leading
    dimensions honoured, rows past m untouched, beta = 0 writing C without reading it; the buffer
    grows from a small product to a larger one."""
    shapes = [(m, k, n) for m in (1, 63, 64, 65, 80, 128, 191) for n in (1, 5, 6, 7, 12, 13)
              for k in (1, 22)]
    shapes += [(1000, 64, 128), (4100, 22, 256)]
    _matches_openblas("nt-tall", "NT", shapes, alpha, beta, seed=90)
    A, B, C = _case("TN", 64, 6, 3, 0, seed=9)
    with pytest.raises(ValueError, match="path nt-tall is for NT"):
        blas._gemm("nt-tall", "TN", A, B, 1.0, 0.0, C)


def test_rules_measured_on_amd(kernels_on):
    """With the rules measured on AMD switched on (their default on AMD processors with AVX-512),
    gemm sends A B^T into a C of 1,024 rows and more and 2^17 entries and more, along a k of 8-128
    (of 1-128 with 256 columns and more), to the tall loop, and A^T B of an A of 2^20 elements and
    more up to 48 columns (24 elsewhere) to dyn's kernel, bit for bit their values; _biggemm.h's
    loop takes only what OpenBLAS would (A B^T along a k of 256 and more, A B with C of up to 2^22
    entries, A^T B past those 48 columns); the rest keeps its path."""
    blas._set_amd_rules(True)
    for (m, n, k), expect in [((10000, 256, 22), "nt-tall"), ((1024, 256, 4), "nt-tall"),
                              ((1024, 128, 8), "nt-tall"), ((4096, 64, 128), "nt-tall"),
                              ((1024, 128, 4), "blas"), ((1024, 64, 8), "blas"),
                              ((1023, 256, 22), "blas"), ((10000, 256, 129), "blas"),
                              ((640, 256, 4), "blas"), ((10000, 256, 1030), "big"),
                              ((10000, 256, 256), "big"), ((10000, 256, 255), "blas"),
                              ((1024, 128, 352), "big")]:
        assert blas._skinny_path("NT", m, n, k) == expect, (m, n, k)
    _auto_takes("nt-tall", "NT", 1100, 256, 22, pad=3, seed=12)
    # and A^T B of a large A up to 48 columns through dyn's kernel
    assert blas._skinny_path("TN", 256, 48, 10000) == "tn"
    assert blas._skinny_path("TN", 256, 49, 10000) == "big"
    assert blas._skinny_path("TN", 128, 33, 640) == "big"
    _auto_takes("tn", "TN", 256, 40, 4200, pad=1, seed=13)
    # A^T B's blocks of dot products were measured on an Intel Xeon only
    assert blas._skinny_path("TN", 128, 22, 200) == "blas"
    # A B: dyn_sgemm_nn keeps its shapes, _biggemm.h takes OpenBLAS's up to 2^22 entries of C
    for (m, n, k), expect in [((10000, 48, 256), "nn"), ((10000, 64, 256), "nn"), ((10000, 96, 256), "big"),
                              ((10000, 352, 256), "big"), ((8192, 512, 256), "big"),
                              ((10000, 704, 256), "blas"), ((4096, 1408, 256), "blas"),
                              ((1024, 1408, 128), "big"), ((511, 128, 256), "blas")]:
        assert blas._skinny_path("NN", m, n, k) == expect, (m, n, k)
    _auto_takes("big", "NN", 1030, 96, 260, pad=2, seed=14)
    _auto_takes("big", "NT", 1030, 70, 300, pad=1, seed=15)
    blas._set_amd_rules(False)
    assert blas._skinny_path("NT", 1024, 256, 8) == "nt"
    assert blas._skinny_path("NT", 10000, 256, 22) == "big"   # (_biggemm.h: the tall loop's on AMD)
    assert blas._skinny_path("TN", 256, 32, 10000) == "big"    # (dyn_sgemm_tn's on AMD)


@pytest.mark.parametrize("mode", [1, 2])
def test_panels_fetched_two_ahead(kernels_on, mode):
    """dyn's A B kernel fetching A's 64-row panels two ahead instead of one (at 8 columns and more
    on AMD processors with AVX-512; mode 2: at every width): OpenBLAS's values with no whole
    panel, one, two, three and more (the fetch stops two panels before the end), rows past them,
    1-22 columns; the AMD rules' switch turns it on and off."""
    old = blas._set_nn_far(mode)
    try:
        shapes = [(m, k, n) for m in (63, 64, 128, 130, 192, 200, 1030) for n in (2, 7, 8, 22)
                  for k in (1, 40)]
        for alpha, beta in ((1.0, 0.0), (-0.5, 2.0)):
            _matches_openblas("nn", "NN", shapes, alpha, beta, seed=70)
    finally:
        blas._set_nn_far(old)
    blas._set_amd_rules(True)
    assert blas._set_nn_far(0) == 1
    blas._set_amd_rules(False)
    assert blas._set_nn_far(0) == 0
    with pytest.raises(ValueError, match="mode 3"):
        blas._set_nn_far(3)


@pytest.mark.parametrize("m,k,cols,batch,path", [(1030, 260, 5, 1, "few"), (1030, 260, 1, 6, "few"),
                                                  (300, 1000, 3, 2, "nn"), (1100, 256, 22, 1, "few"),
                                                  (4200, 260, 5, 1, "nn"), (1030, 260, 3, 1, "few"),
                                                  (1030, 260, 70, 1, "big"), (1030, 260, 1, 70, "big")])
def test_affine_bias_added_in_the_product(kernels_on, m, k, cols, batch, path):
    """An affine transform b + W x whose product takes dyn's A B kernel (dyn_sgemm_nn, or
    dyn_sgemm_nn_few for a few columns) adds its bias there (one pass, no copy of b into every
    column first): the same values bit for bit as copying the bias and then the product with
    beta = 1, those of float64 numpy to float32 rounding, a W x of several columns and a batch of
    single columns, rows past the 128-, 64- and 16-row blocks; the gradients are unchanged."""
    import dyn as dy

    assert blas._skinny_path("NN", m, cols * batch, k) == path
    rng = np.random.default_rng(m + cols)
    W0 = rng.standard_normal((m, k)).astype(np.float32)
    b0 = rng.standard_normal(m).astype(np.float32)
    x0 = rng.standard_normal((k, cols, batch) if cols > 1 else (k, batch)).astype(np.float32)

    def run(fused):
        old = blas._set_bias_fused(fused)
        try:
            dy.renew_cg(autobatching=False)
            W, b = dy.inputTensor(W0), dy.inputTensor(b0)
            x = dy.inputTensor(x0, batched=True)
            y = dy.affine_transform([b, W, x])
            taken = blas._bias_products()
            v = y.npvalue()
            taken = blas._bias_products() - taken
            dy.sum_batches(dy.sum_elems(dy.cmult(y, y))).backward()
            return v, W.gradient(), b.gradient(), taken
        finally:
            blas._set_bias_fused(old)

    (v1, gW1, gb1, n1), (v0, gW0, gb0, n0) = run(True), run(False)
    assert (n1, n0) == (1, 0)
    np.testing.assert_array_equal(v1, v0)
    np.testing.assert_array_equal(gW1, gW0)
    np.testing.assert_array_equal(gb1, gb0)
    # the columns of W x in order: each batch element's, one element after the other
    X = np.concatenate([x0[..., i].reshape(k, -1) for i in range(batch)], axis=1).astype(np.float64)
    want = W0.astype(np.float64) @ X + b0.astype(np.float64)[:, None]
    got = np.concatenate([v1[..., i].reshape(m, -1) for i in range(batch)], axis=1) if batch > 1 else v1
    np.testing.assert_allclose(got.reshape(m, -1), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("kc", [2048, 64, 0])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_packed_transposed_products(kc, alpha, beta):
    """_narrowgemm.h's packed A^T B: B's rows copied into a buffer in stretches of kc (64: beta
    taken at the first stretch only, a last stretch shorter than the rest; 0: all of k at once),
    one to four vectors of C's rows per tile (1-32 columns, padded to a multiple of eight), tiles
    of six, four or two columns of C and the two- and one-column tiles after them. The same values
    as OpenBLAS's gemm, leading dimensions honoured, rows past m untouched, beta = 0 writing C
    without reading it; the automatic dispatch sends an A of 2^18 elements and more with 5-32
    columns here, and with the loop switched off to the long dot products, with the same values."""
    shapes = [(m, k, n) for n, ms in [(1, (1, 5, 6, 7)), (5, (6, 13)), (8, (11, 12)), (9, (14, 17)),
                                      (16, (7, 18)), (17, (4, 9)), (22, (8, 10)), (24, (3, 5)),
                                      (25, (2, 3)), (32, (1, 4))]
              for m in ms for k in (1, 63, 65, 200)]
    old = blas._set_packed_kc(kc)
    try:
        _matches_openblas("packed", "TN", shapes, alpha, beta, seed=60)
    finally:
        blas._set_packed_kc(old)
    A, B, C = _case("TN", 4, 33, 10, 0, seed=6)
    with pytest.raises(ValueError, match="at most 32 columns"):
        blas._gemm("packed", "TN", A, B, 1.0, 0.0, C)
    if blas.wide_kernels():
        return
    A, B, C, ref = _auto_takes("packed", "TN", 256, 22, 1100, pad=3, seed=8)   # A: 1,103 x 256, past 2^18
    old = blas._set_packed(False)
    try:
        assert blas._skinny_path("TN", 256, 22, 1100, 1103) == "long"
        off = C.copy(order="F")
        blas._gemm("auto", "TN", A, B, 0.5, 1.0, off, dims=(256, 22, 1100))
        np.testing.assert_allclose(off, ref, rtol=1e-5, atol=1e-5 * np.sqrt(1100))
    finally:
        assert blas._set_packed(old) is False


def test_a_large_a_whose_columns_alias_in_the_cache_stays_with_openblas():
    """gemm keeps an A whose columns lie a multiple of 512 bytes apart from the panels past 24
    columns, or past 8 when they lie 16 KB apart or more (their lines would share a few of L1's
    sets): through the automatic dispatch it gives OpenBLAS's values there, the panels' on the
    other side of each line and for A's neighbours that do not alias."""
    old = blas._set_skinny(False)
    try:
        for m, k, lda, n, expect in [(4096, 128, 4096, 24, "panels"), (4096, 128, 4096, 25, "blas"),
                                     (4096, 128, 4100, 32, "panels"), (8192, 64, 8192, 8, "panels"),
                                     (8192, 64, 8192, 9, "blas"), (8192, 64, 8200, 9, "panels"),
                                     (300, 1024, 384, 30, "blas"), (300, 1024, 300, 30, "panels")]:
            A, B, C = _case("NN", m, n, k, lda - m, seed=7)
            assert blas._skinny_path("NN", m, n, k, lda) == expect
            auto = C.copy(order="F")
            blas._gemm("auto", "NN", A, B, 1.0, 0.0, auto, dims=(m, n, k))
            same = C.copy(order="F")
            blas._gemm(expect, "NN", A, B, 1.0, 0.0, same, dims=(m, n, k))
            np.testing.assert_array_equal(auto, same, err_msg=f"{m} x {k}, lda {lda}, {n} columns")
    finally:
        blas._set_skinny(old)


def test_without_the_register_kernels_narrow_products_avoid_openblas_packing():
    old, old_narrow = blas._set_skinny(False), blas._set_narrow(True)
    try:
        for op, (m, n, k), expect in [("NN", (32, 25, 100), "narrow"), ("NN", (200, 32, 128), "narrow"),
                                      ("NN", (200, 64, 128), "narrow"), ("NN", (200, 65, 128), "blas"),
                                      ("NN", (640, 12, 256), "narrow"),
                                      ("NN", (640, 32, 256), "narrow"), ("NN", (640, 33, 256), "blas"),
                                      ("NN", (1023, 64, 128), "narrow"), ("NN", (1024, 24, 128), "narrow"),
                                      ("NN", (1024, 25, 128), "blas"), ("NN", (1024, 32, 64), "narrow"),
                                      ("NN", (1024, 33, 64), "blas"),
                                      ("NN", (15, 33, 256), "blas"), ("NN", (1024, 2, 256), "cols"),
                                      ("NN", (10000, 2, 256), "cols"), ("NN", (10000, 3, 256), "panels"),
                                      ("NN", (10000, 32, 256), "panels"), ("NN", (10000, 33, 256), "blas"),
                                      ("NN", (1024, 8, 256), "panels"), ("NN", (1023, 8, 256), "narrow"),
                                      ("NN", (20000, 8, 32), "cols"), ("NN", (9, 25, 32), "blas"),
                                      ("TN", (64, 8, 256), "narrow"), ("TN", (64, 16, 256), "narrow"),
                                      ("TN", (64, 17, 256), "blas"),
                                      ("TN", (256, 32, 640), "narrow"), ("TN", (256, 33, 640), "blas"),
                                      ("TN", (64, 8, 64), "narrow"), ("TN", (64, 9, 64), "cols"),
                                      ("TN", (256, 4, 10000), "long"), ("TN", (256, 5, 10000), "packed"),
                                      ("TN", (256, 8, 10000), "packed"), ("TN", (256, 32, 10000), "packed"),
                                      ("TN", (256, 33, 10000), "blas"), ("TN", (1024, 32, 256), "packed"),
                                      ("TN", (1024, 33, 256), "blas"), ("TN", (2048, 8, 128), "narrow"),
                                      ("TN", (256, 4, 32), "cols"), ("TN", (100, 25, 32), "blas"),
                                      ("NT", (640, 256, 4), "blas")]:
            assert blas._skinny_path(op, m, n, k) == expect, (op, m, n, k)
        blas._set_narrow(False)
        A, B, C = _case("NN", 640, 4, 256, 0, seed=9)
        auto, ref = C.copy(order="F"), C.copy(order="F")
        blas._gemm("auto", "NN", A, B, 0.5, 1.0, auto)
        blas._gemm("blas", "NN", A, B, 0.5, 1.0, ref)
        np.testing.assert_allclose(auto, ref, rtol=1e-4, atol=1e-4 * np.sqrt(256))
        old_cols = blas._set_cols(1)
        try:
            assert blas._skinny_path("NN", 256, 12, 64) == "blas"    # level 1: only 1-8 columns
            assert blas._skinny_path("NN", 640, 2, 256) == "cols"
            blas._set_cols(0)
            assert blas._skinny_path("NN", 640, 2, 256) == "blas"
            with pytest.raises(ValueError, match="level 0, 1 or 2"):
                blas._set_cols(3)
        finally:
            blas._set_cols(old_cols)
        assert old_cols == 2
    finally:
        blas._set_skinny(old)
        blas._set_narrow(old_narrow)


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_dot_product_blocks(alpha, beta):
    """A^T B as blocks of sixteen dot products ('dot': a tagger's W_x^T D, a Tree-LSTM level's
    U^T D): OpenBLAS's values for every block shape (16 x 1 at one column of B, 8 x 2 at two,
    5 x 3 at three and six, 4 x 4 and its 1-3 column tail otherwise), columns of A past the last
    whole block (1-15 of them), k a multiple of 16 or 1-15 past one, leading dimensions
    honoured, rows past m untouched and beta = 0 writing C without reading it."""
    shapes = [(m, k, n) for m in (1, 3, 4, 5, 8, 16, 17, 21) for n in (1, 2, 3, 4, 5, 6, 7, 9)
              for k in (16, 17, 47)]
    shapes += [(128, 200, 22), (130, 640, 12), (67, 384, 33), (7, 1030, 2)]
    _matches_openblas("dot", "TN", shapes, alpha, beta, seed=140)


def test_dot_product_blocks_clear_the_repeated_lanes():
    """The last k % 16 entries are read as the columns' last sixteen with the lanes already summed
    cleared in both operands: an infinity or NaN among those earlier entries is counted once (in
    the vector loop), not again as 0 x inf; and a NaN or infinity in the tail still propagates."""
    m, n, k = 8, 4, 21
    A, B, C = _case("TN", m, n, k, 0, seed=150)
    A[10, 2] = np.inf                  # entry 10 of A's column 2: in the vector loop and a cleared tail lane
    B[12, 1] = np.nan                  # entry 12 of B's column 1: likewise
    A[19, 5] = np.inf                  # a tail entry
    got = C.copy(order="F")
    blas._gemm("dot", "TN", A, B, 1.0, 0.0, got)
    want = np.asarray(A, np.float64).T @ np.asarray(B, np.float64)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fine = np.isfinite(want)
    np.testing.assert_allclose(got[fine], want[fine], rtol=1e-5, atol=1e-5)
    A, B, C = _case("TN", 8, 2, 15, 0, seed=1)
    with pytest.raises(ValueError, match="path dot is for TN with k >= 16"):
        blas._gemm("dot", "TN", A, B, 1.0, 0.0, C)
    A, B, C = _case("NN", 8, 2, 32, 0, seed=1)
    with pytest.raises(ValueError, match="path dot is for TN"):
        blas._gemm("dot", "NN", A, B, 1.0, 0.0, C)


def test_dot_product_rule(kernels_on):
    """gemm takes the blocks of dot products for A^T B along a k of 64 and more with 2-32
    columns (16 along a k under 128) where OpenBLAS's small-matrix kernel would not run (m n >
    1,200 or m n k > 10^6), for an A under 2^20 entries; with the switch off, those shapes take
    the paths they took before."""
    for (m, n, k), expect in [((128, 22, 200), "dot"), ((128, 16, 64), "dot"), ((128, 20, 384), "dot"),
                              ((256, 6, 640), "dot"), ((64, 24, 128), "dot"), ((128, 32, 200), "dot"),
                              ((128, 8, 640), "blas"), ((64, 16, 640), "blas"), ((128, 24, 64), "blas"),
                              ((128, 33, 200), "blas"), ((128, 22, 32), "blas"), ((128, 1, 640), "blas"),
                              ((256, 22, 10000), "tn")]:
        assert blas._skinny_path("TN", m, n, k) == expect, (m, n, k)
    _auto_takes("dot", "TN", 128, 22, 200, pad=2, seed=160)
    old = blas._set_dot(False)
    try:
        assert blas._skinny_path("TN", 128, 22, 200) == "blas"
        assert blas._skinny_path("TN", 256, 8, 1024) == "tn"
    finally:
        assert blas._set_dot(old) is False


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_products_of_a_few_columns(alpha, beta):
    """A B through _fewgemm.h ('few': a Tree-LSTM level's gates): OpenBLAS's values for 1-3
    columns (128-row blocks), 4-13 (64-row blocks, column blocks of up to six), rows past the
    128-, 64- and 16-row blocks (the last 1-15 through a tile: C's rows past m untouched), leading
    dimensions honoured, and beta = 0 writing C without reading it."""
    shapes = [(m, k, n) for m in (16, 17, 31, 64, 79, 128, 130, 200, 257) for n in (1, 2, 3, 4, 6, 7, 13)
              for k in (1, 9)]
    shapes += [(640, 256, 3), (640, 256, 5), (384, 128, 24)]
    _matches_openblas("few", "NN", shapes, alpha, beta, seed=170)
    A, B, C = _case("NN", 15, 2, 8, 0, seed=2)
    with pytest.raises(ValueError, match="path few is for NN with m >= 16"):
        blas._gemm("few", "NN", A, B, 1.0, 0.0, C)


def test_few_columns_rule(kernels_on):
    """gemm takes _fewgemm.h's loop for A B with an A of 256 rows and more, k of 64 and more (and
    under 2 m), under 2^20 entries: at 3, 5 and 6 columns, and at 4-32 where OpenBLAS would pack
    (m n k > 10^6); with the switch off, those shapes take the paths they took before."""
    for (m, n, k), expect in [((640, 3, 256), "few"), ((640, 5, 256), "few"), ((640, 6, 256), "few"),
                              ((640, 8, 256), "few"), ((384, 24, 128), "few"), ((1024, 4, 256), "few"),
                              ((640, 2, 256), "blas"), ((640, 4, 256), "blas"), ((200, 22, 128), "blas"),
                              ((384, 20, 128), "blas"), ((640, 33, 256), "nn"), ((10000, 22, 256), "nn"),
                              ((256, 64, 1024), "nn"), ((128, 6, 256), "blas")]:
        assert blas._skinny_path("NN", m, n, k) == expect, (m, n, k)
    _auto_takes("few", "NN", 640, 3, 256, pad=2, seed=171)
    old = blas._set_few(False)
    try:
        assert blas._skinny_path("NN", 640, 3, 256) == "blas"
        assert blas._skinny_path("NN", 640, 8, 256) == "nn"
    finally:
        assert blas._set_few(old) is False


def test_mid_columns_rule(kernels_on):
    """On processors with AVX-512 other than AMD's, A B of 33-63 columns with an A of 2^16 to 2^18
    entries (k under 2 m; a Tree-LSTM's 640 x 256 gates over a batched level) runs as dyn_sgemm_nn,
    with OpenBLAS's values to rounding; from 64 columns the paths from before (the blocked loop from
    512 rows, else OpenBLAS), below 2^16 entries OpenBLAS; with the switch off or AMD's rules,
    OpenBLAS."""
    for (m, n, k), expect in [((640, 33, 256), "nn"), ((640, 48, 256), "nn"), ((640, 63, 256), "nn"),
                              ((512, 40, 128), "nn"), ((1024, 40, 128), "nn"), ((256, 40, 256), "nn"),
                              ((640, 64, 256), "big"), ((640, 32, 256), "few"), ((384, 48, 128), "blas"),
                              ((256, 48, 64), "blas"), ((640, 65, 256), "big"), ((1024, 48, 256), "nn"),
                              ((256, 63, 256), "nn"), ((256, 64, 256), "blas")]:
        assert blas._skinny_path("NN", m, n, k) == expect, (m, n, k)
    A, B, C, ref = _auto_takes("nn", "NN", 640, 47, 256, pad=3, seed=205)
    want = 0.5 * (A[:640].astype(np.float64) @ B[:256].astype(np.float64)) + C[:640]
    np.testing.assert_allclose(ref[:640], want, rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(ref[640:], C[640:])      # rows past m untouched
    old = blas._set_mid(False)
    try:
        assert blas._skinny_path("NN", 640, 48, 256) == "blas"
        assert blas._skinny_path("NN", 1024, 48, 256) == "nn"     # (2^18 entries: nn before too)
    finally:
        assert blas._set_mid(old) is False
    blas._set_amd_rules(True)
    assert blas._skinny_path("NN", 640, 48, 256) == "blas"


@pytest.mark.parametrize("op", ["NN", "NT"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_blocked_products_with_every_side_large(op, alpha, beta):
    """A B and A B^T through _biggemm.h ('big': a softmax over a minibatch, its weight gradient):
    OpenBLAS's values for rows in whole 32-row panels, past them (1-31 rows of zero-padded panel)
    and past the 192-row blocks, columns past the 12-column panels, inner dimensions split into
    blocks (past 384: the later blocks added into C), leading dimensions honoured, rows past m
    untouched and beta = 0 writing C without reading it; and with smaller blocks than the
    defaults, columns split into several blocks."""
    shapes = [(m, k, n) for m in (1, 31, 32, 33, 193, 200) for n in (1, 11, 12, 13, 25) for k in (1, 7)]
    shapes += [(385, 385, 30), (64, 800, 12), (100, 30, 500)]
    _matches_openblas("big", op, shapes, alpha, beta, seed=180)
    old = blas._set_big_blocks(40, 24)
    try:
        _matches_openblas("big", op, [(70, 130, 61), (33, 81, 24), (200, 41, 25)], alpha, beta, seed=190)
    finally:
        assert blas._set_big_blocks(*old) == (40, 24)
    with pytest.raises(ValueError, match="must be positive"):
        blas._set_big_blocks(0, 24)


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (-0.5, 2.0)])
def test_blocked_transposed_products(alpha, beta):
    """A^T B through _biggemm.h ('big': a softmax's W^T G, a Tree-LSTM's U^T D): OpenBLAS's values
    where A^T's rows fill 32-row panels, half of one (16) or parts of either half (1, 15, 17, 31,
    33, 200 rows: the copy's 16 x 16 transposes load zeros past m), where k is past whole 16-step
    transposes (17, 37) and split into blocks (385, 800: the later blocks added into C), for every
    width of a 12-column panel of B (1, 11, 12, 13, 25: its transposes store whole 16-float steps,
    the last one into the room past the block: a block of exactly 12 x 400 floats before A^T's
    copy), with leading dimensions honoured, rows past m untouched and beta = 0 not reading C; and
    with smaller blocks than the defaults, columns split into several blocks."""
    shapes = [(m, k, n) for m in (1, 15, 16, 17, 32, 33, 200) for n in (1, 11, 12, 13, 25) for k in (16, 37)]
    shapes += [(385, 385, 30), (64, 800, 12), (100, 30, 500), (31, 17, 1)]
    _matches_openblas("big", "TN", shapes, alpha, beta, seed=230)
    old = blas._set_big_blocks(40, 24)
    try:
        _matches_openblas("big", "TN", [(70, 130, 61), (33, 81, 24), (200, 41, 25)], alpha, beta, seed=240)
    finally:
        assert blas._set_big_blocks(*old) == (40, 24)


def test_blocked_products_rule(kernels_on):
    """gemm takes _biggemm.h's loop, on processors with AVX-512 (on AMD's, see
    test_rules_measured_on_amd), for products of more than 4 10^6 multiply-adds: A B with 512 rows
    and more, k of 32 and more and 64 columns and more (32 and more for an A of 2^20 entries and
    more); A B^T with 256 rows and more, 64 columns and more and k of 16 and more. Elsewhere, and
    with the switch off, the paths from before; with the AMD rules on, only the products OpenBLAS
    would take."""
    for op, (m, n, k), expect in [("NN", (10000, 352, 256), "big"), ("NN", (10000, 1408, 256), "big"),
                                  ("NN", (10000, 32, 256), "big"), ("NN", (10000, 24, 256), "nn"),
                                  ("NN", (1024, 32, 256), "few"), ("NN", (1024, 48, 256), "nn"),
                                  ("NN", (1024, 64, 256), "big"), ("NN", (512, 128, 256), "big"),
                                  ("NN", (511, 128, 256), "blas"), ("NN", (1024, 352, 31), "blas"),
                                  ("NN", (1024, 352, 32), "big"), ("NN", (600, 64, 105), "big"),
                                  ("NN", (600, 64, 104), "blas"),
                                  ("NT", (10000, 256, 432), "big"), ("NT", (10000, 256, 1408), "big"),
                                  ("NT", (10000, 256, 16), "big"), ("NT", (10000, 256, 15), "blas"),
                                  ("NT", (1024, 256, 8), "nt"), ("NT", (256, 128, 352), "big"),
                                  ("NT", (255, 128, 352), "blas"), ("NT", (1024, 63, 352), "blas"),
                                  ("NT", (256, 64, 245), "big"), ("NT", (256, 64, 244), "blas"),
                                  # A^T B: 32 columns and more (64 past 512 rows), 64 rows and more,
                                  # k of 256 and more, 10^6 multiply-adds and more, where neither
                                  # the dot-product blocks nor dyn_sgemm_tn (16 columns and fewer)
                                  # take it
                                  ("TN", (256, 352, 10000), "big"), ("TN", (256, 1408, 10000), "big"),
                                  ("TN", (256, 32, 10000), "big"), ("TN", (256, 31, 10000), "blas"),
                                  ("TN", (256, 22, 10000), "tn"), ("TN", (128, 33, 640), "big"),
                                  ("TN", (128, 330, 640), "big"), ("TN", (128, 32, 1024), "dot"),
                                  ("TN", (512, 32, 512), "dot"), ("TN", (512, 48, 512), "big"),
                                  ("TN", (513, 63, 512), "blas"), ("TN", (513, 64, 512), "big"),
                                  ("TN", (63, 64, 256), "blas"), ("TN", (64, 64, 256), "big"),
                                  ("TN", (256, 64, 255), "blas"), ("TN", (64, 61, 256), "blas"),
                                  ("TN", (1000, 40, 300), "blas")]:
        assert blas._skinny_path(op, m, n, k) == expect, (op, m, n, k)
    _auto_takes("big", "NN", 1030, 70, 260, pad=2, seed=200)
    _auto_takes("big", "NT", 1030, 70, 260, pad=1, seed=201)
    A, B, C, ref = _auto_takes("big", "TN", 130, 70, 300, pad=3, seed=202)
    want = 0.5 * (A[:300, :130].T.astype(np.float64) @ B[:300].astype(np.float64)) + C[:130]
    np.testing.assert_allclose(ref[:130], want, rtol=2e-5, atol=2e-5 * np.sqrt(300))
    np.testing.assert_array_equal(ref[130:], C[130:])
    old = blas._set_big_tn(False)
    try:
        assert blas._skinny_path("TN", 256, 352, 10000) == "blas"
        assert blas._skinny_path("TN", 128, 33, 640) == "blas"
        assert blas._skinny_path("NN", 10000, 352, 256) == "big"      # (A B and A B^T: their own switch)
    finally:
        assert blas._set_big_tn(old) is False
    old = blas._set_big(False)
    try:
        assert blas._skinny_path("NN", 10000, 352, 256) == "blas"
        assert blas._skinny_path("NN", 10000, 32, 256) == "nn"
        assert blas._skinny_path("NT", 10000, 256, 1408) == "nt-transposed"
        assert blas._skinny_path("TN", 256, 352, 10000) == "blas"
    finally:
        assert blas._set_big(old) is False
    blas._set_amd_rules(True)
    assert blas._skinny_path("NN", 10000, 352, 256) == "big"
    assert blas._skinny_path("NN", 10000, 1408, 256) == "blas"
    assert blas._skinny_path("NN", 10000, 32, 256) == "nn"
    assert blas._skinny_path("NT", 10000, 256, 432) == "big"
    assert blas._skinny_path("NT", 10000, 256, 16) == "nt-tall"
    assert blas._skinny_path("TN", 256, 352, 10000) == "big"
    assert blas._skinny_path("TN", 256, 32, 10000) == "tn"


def test_transposed_matrix_vector_rule_and_the_product_trace(kernels_on):
    """On processors with AVX-512 other than AMD's, A^T x of up to 3 2^16 elements (a Tree-LSTM's
    640 x 128 and 640 x 256) runs in dyn's register loops, bit for bit the 'regs' path and
    OpenBLAS's values to rounding; A x past 2^16 and A^T x past 3 2^16 stay with OpenBLAS; with
    AMD's rules, A^T x past 2^16 too. The product trace records each call's shape and path, and
    the time it took."""
    rng = np.random.default_rng(11)
    blas._trace(False)
    blas._trace_reset()
    for (m, n, op, path) in [(640, 256, "T", "regs"), (640, 128, "T", "regs"), (1024, 256, "T", "blas"),
                             (640, 256, "N", "blas"), (256, 256, "N", "regs")]:
        A = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
        x = rng.standard_normal(m if op == "T" else n, dtype=np.float32)
        got = np.zeros(n if op == "T" else m, np.float32)
        want, ref = got.copy(), got.copy()
        old = blas._trace(True)
        blas._gemv("auto", op, A, x, 1.0, 0.0, got)
        blas._trace(old)
        blas._gemv(path, op, A, x, 1.0, 0.0, want)
        blas._gemv("blas", op, A, x, 1.0, 0.0, ref)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(m))
        rows, lost = blas._trace_table()
        assert lost == 0 and rows[-1][:5] == ("gemv " + op, m, n, 1, path), rows[-1]
        assert rows[-1][5:7] == ("float32", 1) and rows[-1][7] > 0
    blas._set_amd_rules(True)
    try:
        old = blas._trace(True)
        A = np.asfortranarray(rng.standard_normal((640, 128), dtype=np.float32))
        blas._gemv("auto", "T", A, np.ones(640, np.float32), 1.0, 0.0, np.zeros(128, np.float32))
        blas._trace(old)
        assert ("gemv T", 640, 128, 1, "blas") in [r[:5] for r in blas._trace_table()[0]]
    finally:
        blas._set_amd_rules(False)
    blas._trace_reset()
    assert blas._trace_table() == ([], 0)


def test_the_product_trace_counts_the_fused_bias(kernels_on):
    """affine_transform's product with its bias fused (sgemm_bias) is in the product trace as the
    product it is, with the path that ran it; its values are W x + b."""
    import dyn as dy

    rng = np.random.default_rng(12)
    W = rng.standard_normal((1030, 260)).astype(np.float32)
    b = rng.standard_normal(1030).astype(np.float32)
    x = rng.standard_normal((260, 70)).astype(np.float32)
    blas._trace_reset()
    old = blas._trace(True)
    try:
        dy.renew_cg()
        y = dy.affine_transform([dy.inputTensor(b), dy.inputTensor(W), dy.inputTensor(x, batched=True)])
        got = y.npvalue()
    finally:
        blas._trace(old)
    rows = [r[:5] for r in blas._trace_table()[0]]
    blas._trace_reset()
    assert ("NN", 1030, 70, 260, blas._skinny_path("NN", 1030, 70, 260)) in rows, rows
    np.testing.assert_allclose(got, W.astype(np.float64) @ x + b[:, None], rtol=1e-4, atol=1e-4)
