"""The queue of weight-gradient products, G += D X^T, shared by the CPU kernels of the fused
Tree-LSTM nodes and the LSTM steps.

Run level by level (the automatic batching engine batches a tree's nodes by depth, a sentence's
character LSTMs step by step), a weight's gradient would be one product per batch, G += D_l X_l^T,
each reading and writing all of G for a few columns (a rank-1 update at a tree's top levels). The
products are queued instead (D and X stay in the nodes' scratch, untouched until the graph is
renewed) and done as one product per weight over all the queued columns (outer_flush): its D
pieces and X pieces copied side by side. When G is a parameter's gradient nothing reads it before
the backward pass ends, so those products wait until then (an end-of-backward hook of the graph);
a node that reads another gradient (tree_weights, lstm_step_weight) flushes that gradient's
products in its own backward."""

from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from dyn._core.core.graph cimport Graph, add_backward_end
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas


ctypedef struct Outer:
    char* G
    char* D
    char* X
    int m, k, n, ldd, ldx, ldg, isz

cdef Outer* _q = NULL
cdef int _nq = 0, _cq = 0
cdef char* _oscr = NULL
cdef size_t _oscrcap = 0
cdef bint _defer = True
cdef bint _gather = True
cdef int _last_q = 0, _last_p = 0     # the last pass's products left to its end, and the products run for them


cdef bint outer_deferring() noexcept:
    return _defer


def _set_deferred(bint on):
    """Queue the weight products of parameters until the end of backward (default) or not (tests)."""
    global _defer
    _defer = on


def _set_gather(bint on):
    """Test hook: a flush copies a weight's queued columns side by side for one product (on, the
    default) or takes the path it takes when that memory cannot be had (off: one product per
    queued entry, in place); returns the previous setting."""
    global _gather
    cdef bint old = _gather
    _gather = on
    return old


def _last_flush():
    """(products left to the end of the last backward pass, products run for them) (tests)."""
    return _last_q, _last_p


cdef void outer_now(int m, int k, int n, real* D, int ldd, real* X, int ldx, real* G, int ldg) noexcept:
    if m <= 0 or k <= 0 or n <= 0:
        return
    if n == 1:
        _blas.ger(real_dtype(G), m, k, 1.0, D, X, G, ldg)
    else:
        _blas.gemm(real_dtype(G), b'N', b'T', m, k, n, 1.0, D, ldd, X, ldx, 1.0, G, ldg)


cdef bint outer_queue(char* G, char* D, int ldd, char* X, int ldx, int m, int k, int n, int ldg,
                      int isz) noexcept:
    global _q, _nq, _cq
    cdef Outer* e
    cdef Outer* q2
    if _nq == _cq:
        q2 = <Outer*>realloc(_q, <size_t>(2 * _cq + 16) * sizeof(Outer))
        if q2 == NULL:
            return False
        _q = q2
        _cq = 2 * _cq + 16
    e = &_q[_nq]
    _nq += 1
    e.G, e.D, e.X = G, D, X
    e.m, e.k, e.n, e.ldd, e.ldx, e.ldg, e.isz = m, k, n, ldd, ldx, ldg, isz
    return True


cdef void _copy_cols(char* dst, const char* src, int rows, int cols, int ld, int isz) noexcept nogil:
    """dst (rows x cols, packed) = src (rows x cols, leading dimension ld)."""
    cdef int c
    if ld == rows:
        memcpy(dst, src, <size_t>rows * cols * isz)
        return
    for c in range(cols):
        memcpy(dst + <size_t>c * rows * isz, src + <size_t>c * ld * isz, <size_t>rows * isz)


cdef void _run_one(Outer* e) noexcept:
    if e.isz == 4:
        outer_now[float](e.m, e.k, e.n, <float*>e.D, e.ldd, <float*>e.X, e.ldx, <float*>e.G, e.ldg)
    else:
        outer_now[double](e.m, e.k, e.n, <double*>e.D, e.ldd, <double*>e.X, e.ldx, <double*>e.G, e.ldg)


cdef inline bint _alike(Outer* f, Outer* e) noexcept nogil:
    return f.G == e.G and f.m == e.m and f.k == e.k and f.ldg == e.ldg and f.isz == e.isz


cdef bint _grow_scratch(size_t need) noexcept:
    global _oscr, _oscrcap
    cdef char* s = <char*>malloc(need)
    if s == NULL:
        return False
    free(_oscr)
    _oscr, _oscrcap = s, need
    return True


cdef void outer_flush(char* lo, char* hi) noexcept:
    """The queued products into gradients G in [lo, hi), one per weight (same G, shape and float
    type): its D pieces and X pieces copied side by side, then G += [D_1 D_2 ...] [X_1 X_2 ...]^T.
    Done entries are marked (G NULL); counts the products run in _last_p."""
    global _last_p
    cdef int i, j, cols, c
    cdef Outer* f
    cdef Outer e
    cdef size_t need
    for i in range(_nq):
        if _q[i].G == NULL or _q[i].G < lo or _q[i].G >= hi:    # done, or another weight's
            continue
        e = _q[i]
        cols = 0
        for j in range(i, _nq):
            if _alike(&_q[j], &e):
                cols += _q[j].n
        need = <size_t>(e.m + e.k) * cols * e.isz
        if cols == e.n or not _gather or (need > _oscrcap and not _grow_scratch(need)):
            for j in range(i, _nq):     # alone, or no memory for the copies: one product each
                f = &_q[j]
                if _alike(f, &e):
                    _run_one(f)
                    _last_p += 1
                    f.G = NULL
            continue
        c = 0
        for j in range(i, _nq):
            f = &_q[j]
            if _alike(f, &e):
                _copy_cols(_oscr + <size_t>c * e.m * e.isz, f.D, f.m, f.n, f.ldd, f.isz)
                _copy_cols(_oscr + (<size_t>e.m * cols + <size_t>c * e.k) * e.isz, f.X, f.k, f.n, f.ldx, f.isz)
                c += f.n
                f.G = NULL
        e.D, e.ldd = _oscr, e.m
        e.X, e.ldx = _oscr + <size_t>e.m * cols * e.isz, e.k
        e.n = cols
        _run_one(&e)
        _last_p += 1


cdef void _flush_all(Graph* g, bint ok) noexcept:
    """End of backward: every product still queued (all of them parameters'), or none when the pass
    failed; the queue is then empty."""
    global _nq, _last_q, _last_p
    cdef int i
    _last_q = 0
    for i in range(_nq):
        if _q[i].G != NULL:
            _last_q += 1
    _last_p = 0
    if ok:
        outer_flush(<char*>NULL, <char*><size_t>-1)
    _nq = 0


add_backward_end(_flush_all)
