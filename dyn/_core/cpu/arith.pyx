# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of arithmetic (declared in dyn/_core/ops/arith.pyx): elementwise binary ops with
broadcasting, x*a + c, the matrix product and affine_transform (BLAS), esum, the reductions to one
value per batch element, dot_product / squared_distance and sum_batches. Each op: forward, backward
(accumulating), and their registration in the kernel table.
"""
from libc.math cimport sqrt
from libc.string cimport memset, memcpy
from dyn._core.core.graph cimport (
    Graph, Node, Dim, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_size, dim_total, dim_cols, arg, LowRank,
    LR_ZERO, LR_PENDING, F_PTRS, F_FIXED, F_BIASG, lr_find, lr_written, set_lr_gemm, set_bwd_lowrank)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu.bcast cimport BIter, bi_init, bi_next, same_shape
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.arith cimport (
    ADD, SUB, MUL, DIV, OP_CW, OP_AFFS, OP_MM, OP_AFFINE, OP_ESUM, OP_RED, OP_PAIR, OP_SUMB)

cdef extern from "_fastmath.h" nogil:
    # a bias gradient over a whole batch in one pass (float32)
    void dyn_colsum_acc_f32(float* y, const float* G, long m, long C)
    # a bias broadcast over a batch (streaming stores where the output is large)
    void dyn_bcast_cols_f32(float* y, const float* b, long m, long n)
    long dyn_bcast_stream_bytes

# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in (the _blas calls take real_dtype(p), a compile-time constant).

# ---------------------------------------------------------------- elementwise binary

cdef void _cw_fwd(int kind, real* y, real* a, real* b, const Dim* dy, const Dim* da,
                  const Dim* db) noexcept nogil:
    cdef int s = dim_size(dy), i, k
    cdef real* pa
    cdef real* pb
    cdef real* py
    cdef BIter it
    if same_shape(da, db) and same_shape(da, dy):
        for k in range(dy.bd):
            pa = a + (k * s if da.bd > 1 else 0)
            pb = b + (k * s if db.bd > 1 else 0)
            py = y + k * s
            if kind == ADD:
                for i in range(s):
                    py[i] = pa[i] + pb[i]
            elif kind == SUB:
                for i in range(s):
                    py[i] = pa[i] - pb[i]
            elif kind == MUL:
                for i in range(s):
                    py[i] = pa[i] * pb[i]
            else:
                for i in range(s):
                    py[i] = pa[i] / pb[i]
        return
    bi_init(&it, dy, da, db)
    for i in range(s * dy.bd):
        if kind == ADD:
            y[i] = a[it.oa] + b[it.ob]
        elif kind == SUB:
            y[i] = a[it.oa] - b[it.ob]
        elif kind == MUL:
            y[i] = a[it.oa] * b[it.ob]
        else:
            y[i] = a[it.oa] / b[it.ob]
        bi_next(&it)


cdef void _cw_bwd(int kind, int which, real* gx, real* gy, real* a, real* b, const Dim* dy,
                  const Dim* da, const Dim* db) noexcept nogil:
    cdef int s = dim_size(dy), i, k
    cdef long oa, ob
    cdef real* pa
    cdef real* pb
    cdef real* pg
    cdef real* px
    cdef BIter it
    if same_shape(da, db) and same_shape(da, dy):
        for k in range(dy.bd):
            oa = k * s if da.bd > 1 else 0
            ob = k * s if db.bd > 1 else 0
            pa = a + oa
            pb = b + ob
            pg = gy + k * s
            px = gx + (oa if which == 0 else ob)
            if kind == ADD or (kind == SUB and which == 0):
                for i in range(s):
                    px[i] += pg[i]
            elif kind == SUB:
                for i in range(s):
                    px[i] -= pg[i]
            elif kind == MUL:
                if which == 0:
                    for i in range(s):
                        px[i] += pg[i] * pb[i]
                else:
                    for i in range(s):
                        px[i] += pg[i] * pa[i]
            elif which == 0:
                for i in range(s):
                    px[i] += pg[i] / pb[i]
            else:
                for i in range(s):
                    px[i] -= pg[i] * pa[i] / (pb[i] * pb[i])
        return
    bi_init(&it, dy, da, db)
    for i in range(s * dy.bd):
        oa = it.oa
        ob = it.ob
        if kind == ADD or (kind == SUB and which == 0):
            gx[oa if which == 0 else ob] += gy[i]
        elif kind == SUB:
            gx[ob] -= gy[i]
        elif kind == MUL:
            if which == 0:
                gx[oa] += gy[i] * b[ob]
            else:
                gx[ob] += gy[i] * a[oa]
        elif which == 0:
            gx[oa] += gy[i] / b[ob]
        else:
            gx[ob] -= gy[i] * a[oa] / (b[ob] * b[ob])
        bi_next(&it)


cdef void fwd_cw(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _cw_fwd(n.ia[0], y, <real*>a.v, <real*>b.v, &n.dim, &a.dim, &b.dim)


cdef void bwd_cw(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef real* gx = <real*>(a.g if i == 0 else b.g)
    _cw_bwd(n.ia[0], i, gx, gy, <real*>a.v, <real*>b.v, &n.dim, &a.dim, &b.dim)


set_kernels(OP_CW, DEV_CPU, <kfwd_fn>fwd_cw[float], <kfwd_fn>fwd_cw[double],
            <kbwd_fn>bwd_cw[float], <kbwd_fn>bwd_cw[double])

# ---------------------------------------------------------------- x * a + c

cdef void _aff_fwd(real* y, real* x, int m, real a, real c) noexcept nogil:
    cdef int i
    for i in range(m):
        y[i] = a * x[i] + c


cdef void fwd_affs(Graph* g, Node* n, real* y) noexcept:
    _aff_fwd(y, <real*>arg(g, n, 0).v, dim_total(&n.dim), <real>n.fa[0], <real>n.fa[1])


cdef void bwd_affs(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), n.fa[0], gy, arg(g, n, 0).g)


set_kernels(OP_AFFS, DEV_CPU, <kfwd_fn>fwd_affs[float], <kfwd_fn>fwd_affs[double],
            <kbwd_fn>bwd_affs[float], <kbwd_fn>bwd_affs[double])

# ---------------------------------------------------------------- matrix product

cdef void mm_fwd(Graph* g, real* y, int ybd, Node* W, Node* x, double beta) noexcept:
    """y (+)= W x per batch element; one gemm when W is shared over the batch."""
    cdef int m = W.dim.d[0], k = dim_cols(&W.dim), n = dim_cols(&x.dim), b, dt = real_dtype(y)
    cdef int N = n * ybd
    cdef real* Wb
    cdef real* xb
    if W.dim.bd == 1 and x.dim.bd == ybd:
        if N == 1:
            _blas.gemv(dt, b'N', m, k, 1.0, W.v, m, x.v, beta, y)
        else:
            _blas.gemm(dt, b'N', b'N', m, N, k, 1.0, W.v, m, x.v, k, beta, y, m)
        return
    for b in range(ybd):
        Wb = <real*>W.v + (<size_t>b * m * k if W.dim.bd > 1 else 0)
        xb = <real*>x.v + (<size_t>b * k * n if x.dim.bd > 1 else 0)
        _blas.gemm(dt, b'N', b'N', m, n, k, 1.0, Wb, m, xb, k, beta, y + <size_t>b * m * n, m)


cdef void mm_bwd(Graph* g, real* gy, int ybd, Node* W, Node* x, int which) noexcept:
    """Accumulate gW += gy x^T (which 0) or gx += W^T gy (which 1). gW of a large float32
    parameter whose gradient is known zero may be held back instead (_lr_hold); any other write into
    a tracked gradient is reported (see "Low-rank gradients" in dyn/_core/core/graph.pyx)."""
    cdef int r = -1
    if which == 0 and g.nlr > 0:
        r = lr_find(g, W.g)
        if r >= 0 and real is float and _lr_hold(g, r, <float*>gy, ybd, W, x):
            return
    _mm_bwd(g, gy, ybd, W, x, which)
    if r >= 0:
        lr_written(g, r)


cdef bint _lr_hold(Graph* g, int r, float* gy, int ybd, Node* W, Node* x) noexcept:
    """Hold gW += gy x^T back as tracked gradient r's product: r is known zero and is exactly W's
    gradient, W is shared over the batch, x's values lie in the graph's arena (not a parameter's
    or a caller's array, which may change before the step) and blas.lowrank_held takes the
    shape."""
    cdef int m = W.dim.d[0], k = dim_cols(&W.dim), N = dim_cols(&x.dim) * ybd
    cdef LowRank* R = &g.lr[r]
    if R.state != LR_ZERO or <char*>W.g != R.C or R.size != <long>m * k or W.dim.bd != 1 \
            or x.dim.bd != ybd or (x.flags & (F_PTRS | F_FIXED)) or not _blas.lowrank_held(m, k, N):
        return False
    R.A = gy
    R.lda = m
    R.B = <float*>x.v
    R.ldb = k
    R.m = m
    R.n = k
    R.k = N
    R.state = LR_PENDING
    return True


cdef void _lr_gemm(LowRank* R) noexcept nogil:
    """A held-back gradient computed into its memory: C += A B^T, as mm_bwd would have."""
    _blas.gemm(0, b'N', b'T', R.m, R.n, R.k, 1.0, <void*>R.A, R.lda, <void*>R.B, R.ldb, 1.0, R.C, R.m)


set_lr_gemm(_lr_gemm)


cdef void _mm_bwd(Graph* g, real* gy, int ybd, Node* W, Node* x, int which) noexcept:
    cdef int m = W.dim.d[0], k = dim_cols(&W.dim), n = dim_cols(&x.dim), b, dt = real_dtype(gy)
    cdef int N = n * ybd
    cdef real* gyb
    if W.dim.bd == 1 and x.dim.bd == ybd:
        if which == 0 and N == 1:
            _blas.ger(dt, m, k, 1.0, gy, x.v, W.g, m)
        elif which == 0:
            _blas.gemm(dt, b'N', b'T', m, k, N, 1.0, gy, m, x.v, k, 1.0, W.g, m)
        elif N == 1:
            _blas.gemv(dt, b'T', m, k, 1.0, W.v, m, gy, 1.0, x.g)
        else:
            _blas.gemm(dt, b'T', b'N', k, N, m, 1.0, W.v, m, gy, m, 1.0, x.g, k)
        return
    for b in range(ybd):
        gyb = gy + <size_t>b * m * n
        if which == 0:
            _blas.gemm(dt, b'N', b'T', m, k, n, 1.0, gyb, m,
                       <real*>x.v + (<size_t>b * k * n if x.dim.bd > 1 else 0), k, 1.0,
                       <real*>W.g + (<size_t>b * m * k if W.dim.bd > 1 else 0), m)
        else:
            _blas.gemm(dt, b'T', b'N', k, n, m, 1.0,
                       <real*>W.v + (<size_t>b * m * k if W.dim.bd > 1 else 0), m, gyb, m, 1.0,
                       <real*>x.g + (<size_t>b * k * n if x.dim.bd > 1 else 0), k)


cdef void fwd_mm(Graph* g, Node* n, real* y) noexcept:
    mm_fwd(g, y, n.dim.bd, arg(g, n, 0), arg(g, n, 1), 0.0)


cdef void bwd_mm(Graph* g, Node* n, int i, real* gy) noexcept:
    mm_bwd(g, gy, n.dim.bd, arg(g, n, 0), arg(g, n, 1), i)


set_kernels(OP_MM, DEV_CPU, <kfwd_fn>fwd_mm[float], <kfwd_fn>fwd_mm[double],
            <kbwd_fn>bwd_mm[float], <kbwd_fn>bwd_mm[double])
set_bwd_lowrank(OP_MM, 2)     # its first argument's gradient may be held back (mm_bwd)

# ---------------------------------------------------------------- affine_transform

def _set_bcast_stream_bytes(long nbytes):
    """Test hook: the output size (bytes) from which a float32 bias broadcast uses streaming
    stores (default 8 MB); returns the previous value."""
    global dyn_bcast_stream_bytes
    cdef long was = dyn_bcast_stream_bytes
    dyn_bcast_stream_bytes = nbytes
    return was


cdef bint _affine_one_pass(Graph* g, Node* n, float* y, float* bias, int bs) noexcept:
    """y = W x + b as one product with the bias added in it (blas.sgemm_bias), where the transform
    is one product, W is shared over the batch and b is one column of W's rows; False (y
    untouched) where it is not, or where gemm takes another path than dyn's A B kernel."""
    cdef Node* W
    cdef Node* x
    if n.nargs != 3:
        return False
    W = arg(g, n, 1)
    x = arg(g, n, 2)
    if W.dim.bd != 1 or x.dim.bd != n.dim.bd or bs != W.dim.d[0]:
        return False
    return _blas.sgemm_bias(bs, dim_cols(&x.dim) * n.dim.bd, dim_cols(&W.dim), <float*>W.v, bs, <float*>x.v,
                            dim_cols(&W.dim), bias, y, bs)


cdef void fwd_affine(Graph* g, Node* n, real* y) noexcept:
    cdef Node* b = arg(g, n, 0)
    cdef int i, k, s = dim_size(&n.dim), bs = dim_size(&b.dim)
    if real is float and b.dim.bd == 1 and _affine_one_pass(g, n, <float*>y, <float*>b.v, bs):
        return
    # bias, broadcast over the batch and (for a column bias) over columns
    if real is float and b.dim.bd == 1:     # one bias for every column: streamed where y is large
        dyn_bcast_cols_f32(<float*>y, <float*>b.v, bs, <long>(s // bs) * n.dim.bd)
    else:
        for k in range(n.dim.bd):
            for i in range(0, s, bs):
                memcpy(y + (<size_t>k * s + i),
                       <real*>b.v + (<size_t>k * bs if b.dim.bd > 1 else 0), bs * sizeof(real))
    for i in range(1, n.nargs, 2):
        mm_fwd(g, y, n.dim.bd, arg(g, n, i), arg(g, n, i + 1), 1.0)


cdef void bwd_affine(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* b
    cdef int k, j, s, bs
    if i == 0 and (n.flags & F_BIASG):   # the softmax over it added the bias gradient already
        n.flags &= ~F_BIASG
        return
    if i == 0:
        b = arg(g, n, 0)
        s = dim_size(&n.dim)
        bs = dim_size(&b.dim)
        if real is float:
            if b.dim.bd == 1:  # one bias for every column of the batch: one pass
                dyn_colsum_acc_f32(<float*>b.g, gy, bs, <long>n.dim.bd * (s // bs))
                return
        for k in range(n.dim.bd):
            for j in range(0, s, bs):
                _blas.axpy(real_dtype(gy), bs, 1.0, gy + (<size_t>k * s + j),
                           <real*>b.g + (<size_t>k * bs if b.dim.bd > 1 else 0))
        return
    j = i if i % 2 == 1 else i - 1
    mm_bwd(g, gy, n.dim.bd, arg(g, n, j), arg(g, n, j + 1), 0 if i % 2 == 1 else 1)


set_kernels(OP_AFFINE, DEV_CPU, <kfwd_fn>fwd_affine[float], <kfwd_fn>fwd_affine[double],
            <kbwd_fn>bwd_affine[float], <kbwd_fn>bwd_affine[double])
set_bwd_lowrank(OP_AFFINE, 1)     # its weights' (odd arguments') gradients may be held back

# ---------------------------------------------------------------- esum

cdef void fwd_esum(Graph* g, Node* n, real* y) noexcept:
    cdef int i, k, s = dim_size(&n.dim)
    cdef Node* a
    memset(y, 0, <size_t>s * n.dim.bd * sizeof(real))
    for i in range(n.nargs):
        a = arg(g, n, i)
        if a.dim.bd == n.dim.bd:
            _blas.axpy(real_dtype(y), s * n.dim.bd, 1.0, a.v, y)
        else:
            for k in range(n.dim.bd):
                _blas.axpy(real_dtype(y), s, 1.0, a.v, y + <size_t>k * s)


cdef void bwd_sumlike(Graph* g, Node* n, int i, real* gy) noexcept:
    """gx += gy, summing over the batch when x was broadcast."""
    cdef Node* a = arg(g, n, i)
    cdef int k, s = dim_size(&n.dim)
    if a.dim.bd == n.dim.bd:
        _blas.axpy(real_dtype(gy), s * n.dim.bd, 1.0, gy, a.g)
    else:
        for k in range(n.dim.bd):
            _blas.axpy(real_dtype(gy), s, 1.0, gy + <size_t>k * s, a.g)


set_kernels(OP_ESUM, DEV_CPU, <kfwd_fn>fwd_esum[float], <kfwd_fn>fwd_esum[double],
            <kbwd_fn>bwd_sumlike[float], <kbwd_fn>bwd_sumlike[double])

# ---------------------------------------------------------------- reductions to one value per batch element

cdef void _sum_fwd(real* y, real* x, int s, int bd, int kind) noexcept nogil:
    # kind 0: sum, 1: sum of squares, 2: l2 norm
    cdef int b, i
    cdef double acc
    for b in range(bd):
        acc = 0
        if kind == 0:
            for i in range(s):
                acc += x[b * s + i]
        else:
            for i in range(s):
                acc += x[b * s + i] * <double>x[b * s + i]
        y[b] = sqrt(acc) if kind == 2 else acc


cdef void _sum_bwd(real* gx, real* gy, real* x, real* y, int s, int bd, int kind) noexcept nogil:
    cdef int b, i
    cdef real c
    for b in range(bd):
        if kind == 0:
            c = gy[b]
            for i in range(s):
                gx[b * s + i] += c
        else:
            if kind == 1:
                c = 2 * gy[b]
            else:
                c = gy[b] / y[b] if y[b] != 0 else 0    # a NaN norm: NaN gradients
            for i in range(s):
                gx[b * s + i] += c * x[b * s + i]


cdef void fwd_red(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sum_fwd(y, <real*>a.v, dim_size(&a.dim), a.dim.bd, n.ia[0])


cdef void bwd_red(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sum_bwd(<real*>a.g, gy, <real*>a.v, <real*>n.v, dim_size(&a.dim), a.dim.bd, n.ia[0])


set_kernels(OP_RED, DEV_CPU, <kfwd_fn>fwd_red[float], <kfwd_fn>fwd_red[double],
            <kbwd_fn>bwd_red[float], <kbwd_fn>bwd_red[double])

# ---------------------------------------------------------------- dot_product, squared_distance

cdef void _pair_fwd(real* y, real* a, real* b, int s, int bd, int ba, int bb, int kind) noexcept nogil:
    cdef int k, i
    cdef real* pa
    cdef real* pb
    cdef double acc
    for k in range(bd):
        pa = a + (k * s if ba > 1 else 0)
        pb = b + (k * s if bb > 1 else 0)
        acc = 0
        if kind == 0:
            for i in range(s):
                acc += pa[i] * <double>pb[i]
        else:
            for i in range(s):
                acc += (pa[i] - <double>pb[i]) * (pa[i] - <double>pb[i])
        y[k] = acc


cdef void _pair_bwd(real* gx, real* gy, real* a, real* b, int s, int bd, int ba, int bb,
                    int kind, int which) noexcept nogil:
    cdef int k, i
    cdef real* pa
    cdef real* pb
    cdef real* px
    cdef real c
    for k in range(bd):
        pa = a + (k * s if ba > 1 else 0)
        pb = b + (k * s if bb > 1 else 0)
        px = gx + (k * s if (ba if which == 0 else bb) > 1 else 0)
        if kind == 0:
            for i in range(s):
                px[i] += gy[k] * (pb[i] if which == 0 else pa[i])
        else:
            c = 2 * gy[k] if which == 0 else -2 * gy[k]
            for i in range(s):
                px[i] += c * (pa[i] - pb[i])


cdef void fwd_pair(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _pair_fwd(y, <real*>a.v, <real*>b.v, dim_size(&a.dim), n.dim.bd, a.dim.bd, b.dim.bd, n.ia[0])


cdef void bwd_pair(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef real* gx = <real*>(a.g if i == 0 else b.g)
    _pair_bwd(gx, gy, <real*>a.v, <real*>b.v, dim_size(&a.dim), n.dim.bd, a.dim.bd, b.dim.bd, n.ia[0], i)


set_kernels(OP_PAIR, DEV_CPU, <kfwd_fn>fwd_pair[float], <kfwd_fn>fwd_pair[double],
            <kbwd_fn>bwd_pair[float], <kbwd_fn>bwd_pair[double])

# ---------------------------------------------------------------- sum_batches

cdef void fwd_sumb(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef int k, s = dim_size(&n.dim)
    memset(y, 0, <size_t>s * sizeof(real))
    for k in range(a.dim.bd):
        _blas.axpy(real_dtype(y), s, 1.0, <real*>a.v + <size_t>k * s, y)


cdef void bwd_sumb(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef int k, s = dim_size(&n.dim)
    for k in range(a.dim.bd):
        _blas.axpy(real_dtype(gy), s, 1.0, gy, <real*>a.g + <size_t>k * s)


set_kernels(OP_SUMB, DEV_CPU, <kfwd_fn>fwd_sumb[float], <kfwd_fn>fwd_sumb[double],
            <kbwd_fn>bwd_sumb[float], <kbwd_fn>bwd_sumb[double])
