# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the shape family (declared in dyn/_core/ops/shape.pyx): selection along
one dim, batch elements, concatenation (along a dim or the batch), transpose, reshape, x ** c.

Everything here moves data; backward scatters the gradient back with +=, so repeated indices and
batch-1 (broadcast) arguments accumulate by construction.

Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the kernel
table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.
"""
from libc.math cimport pow as cpow, log
from libc.string cimport memcpy
from dyn._core.core.graph cimport (
    Graph, Node, Dim, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_size, dim_total, arg, idx, elem_v, elem_g)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu.bcast cimport _ext
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.shape cimport OP_SEL, OP_BSEL, OP_CAT, OP_CATB, OP_TR, OP_RS, OP_POWC, OP_POW

# ---------------------------------------------------------------- helpers

cdef inline long _prod(const Dim* d, int lo, int hi) noexcept nogil:
    cdef long s = 1
    cdef int k
    for k in range(lo, hi):
        s *= _ext(d, k)
    return s


cdef inline void _move(real* dst, real* src, long m, bint acc) noexcept nogil:
    """dst = src, or dst += src (backward)."""
    cdef long q
    if acc:
        for q in range(m):
            dst[q] += src[q]
    else:
        for q in range(m):
            dst[q] = src[q]


# ---------------------------------------------------------------- gather along one dim
# ia[0] = dim k, ia[1] = remove dim k, ia[2] = one index per output batch
# element, ia[3] = name code; indices in idx(g, n).

cdef void _sel(real* y, real* x, Node* n, Node* a, int* ix, bint back) noexcept nogil:
    cdef int k = n.ia[0]
    cdef long inner = _prod(&a.dim, 0, k), L = _ext(&a.dim, k), outer = _prod(&a.dim, k + 1, 7)
    cdef long K = 1 if n.ia[2] else n.nidx
    cdef long s = inner * L * outer, t = inner * K * outer, b, o, j, i, r
    cdef real* xb
    cdef real* yb
    for b in range(n.dim.bd):
        xb = x + (b * s if a.dim.bd > 1 else 0)
        yb = y + b * t
        for o in range(outer):
            j = 0
            while j < K:
                i = ix[b] if n.ia[2] else ix[j]
                r = 1           # a run of consecutive indices is one contiguous block (pick_range)
                if not n.ia[2]:
                    while j + r < K and ix[j + r] == i + r:
                        r += 1
                if back:
                    _move(xb + (o * L + i) * inner, yb + (o * K + j) * inner, r * inner, True)
                else:
                    _move(yb + (o * K + j) * inner, xb + (o * L + i) * inner, r * inner, False)
                j += r


cdef void fwd_sel(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sel(y, <real*>a.v, n, a, idx(g, n), False)


cdef void bwd_sel(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sel(gy, <real*>a.g, n, a, idx(g, n), True)


set_kernels(OP_SEL, DEV_CPU, <kfwd_fn>fwd_sel[float], <kfwd_fn>fwd_sel[double],
            <kbwd_fn>bwd_sel[float], <kbwd_fn>bwd_sel[double])

# ---------------------------------------------------------------- batch elements

cdef void fwd_bsel(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef size_t s = <size_t>dim_size(&n.dim)
    cdef int b
    cdef int* ix = idx(g, n)
    for b in range(n.nidx):
        memcpy(y + b * s, <real*>a.v + ix[b] * s, s * sizeof(real))


cdef void bwd_bsel(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef int m = dim_size(&n.dim), b
    cdef size_t s = <size_t>m
    cdef int* ix = idx(g, n)
    for b in range(n.nidx):
        _blas.axpy(real_dtype(gy), m, 1.0, gy + b * s, <real*>a.g + ix[b] * s)


set_kernels(OP_BSEL, DEV_CPU, <kfwd_fn>fwd_bsel[float], <kfwd_fn>fwd_bsel[double],
            <kbwd_fn>bwd_bsel[float], <kbwd_fn>bwd_bsel[double])

# ---------------------------------------------------------------- concatenate along dim k

cdef void _cat(real* y, Node* a, Node* n, long off, bint back) noexcept nogil:
    """Argument a's block sits at offset `off` of dim k in the output; y is the output's value
    (forward) or gradient (back), and a's value or gradient is read by element (elem_v/elem_g:
    an automatic batch may pass it per member)."""
    cdef int k = n.ia[0]
    cdef long inner = _prod(&n.dim, 0, k), La = _ext(&a.dim, k), L = n.dim.d[k]
    cdef long outer = _prod(&n.dim, k + 1, 7), s = inner * La * outer, t = inner * L * outer
    cdef long b, o
    cdef real* xb
    cdef real* yb
    for b in range(n.dim.bd):
        xb = <real*>(elem_g(a, b, s, sizeof(real)) if back else elem_v(a, b, s, sizeof(real)))
        yb = y + b * t
        for o in range(outer):
            if back:
                _move(xb + o * La * inner, yb + (o * L + off) * inner, La * inner, True)
            else:
                _move(yb + (o * L + off) * inner, xb + o * La * inner, La * inner, False)


cdef void fwd_cat(Graph* g, Node* n, real* y) noexcept:
    cdef long off = 0
    cdef int i
    cdef Node* a
    for i in range(n.nargs):
        a = arg(g, n, i)
        _cat(y, a, n, off, False)
        off += _ext(&a.dim, n.ia[0])


cdef void bwd_cat(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef long off = 0
    cdef int j
    cdef Node* a = arg(g, n, i)
    for j in range(i):
        off += _ext(&arg(g, n, j).dim, n.ia[0])
    _cat(gy, a, n, off, True)


set_kernels(OP_CAT, DEV_CPU, <kfwd_fn>fwd_cat[float], <kfwd_fn>fwd_cat[double],
            <kbwd_fn>bwd_cat[float], <kbwd_fn>bwd_cat[double])

# ---------------------------------------------------------------- concatenate along the batch

cdef void fwd_catb(Graph* g, Node* n, real* y) noexcept:
    cdef size_t off = 0, m
    cdef int i
    for i in range(n.nargs):
        m = <size_t>dim_total(&arg(g, n, i).dim)
        memcpy(y + off, arg(g, n, i).v, m * sizeof(real))
        off += m


cdef void bwd_catb(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef size_t off = 0
    cdef int j
    for j in range(i):
        off += <size_t>dim_total(&arg(g, n, j).dim)
    _blas.axpy(real_dtype(gy), dim_total(&arg(g, n, i).dim), 1.0, gy + off, arg(g, n, i).g)


set_kernels(OP_CATB, DEV_CPU, <kfwd_fn>fwd_catb[float], <kfwd_fn>fwd_catb[double],
            <kbwd_fn>bwd_catb[float], <kbwd_fn>bwd_catb[double])

# ---------------------------------------------------------------- transpose (any permutation)

cdef void _tr(real* y, real* x, Node* n, Node* a, int* p, bint back) noexcept nogil:
    cdef long st[7]
    cdef long so[7]
    cdef int ext[7]
    cdef int cnt[7]
    cdef int m = n.dim.nd, j
    cdef long s = dim_size(&n.dim), acc = 1, b, i, off, r, c
    cdef real* xb
    cdef real* yb
    for j in range(7):
        st[j] = acc
        acc *= _ext(&a.dim, j)
    for j in range(m):
        so[j] = st[p[j]]
        ext[j] = n.dim.d[j]
    for b in range(n.dim.bd):
        xb = x + b * s
        yb = y + b * s
        if m == 2 and p[0] == 1:
            # plain matrix transpose: y (r x c) from x (c x r)
            r = ext[0]
            c = ext[1]
            for j in range(c):
                for i in range(r):
                    if back:
                        xb[j + i * c] += yb[i + j * r]
                    else:
                        yb[i + j * r] = xb[j + i * c]
            continue
        off = 0
        for j in range(m):
            cnt[j] = 0
        for i in range(s):
            if back:
                xb[off] += yb[i]
            else:
                yb[i] = xb[off]
            j = 0
            while j < m:
                cnt[j] += 1
                off += so[j]
                if cnt[j] < ext[j]:
                    break
                off -= so[j] * ext[j]
                cnt[j] = 0
                j += 1


cdef void fwd_tr(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _tr(y, <real*>a.v, n, a, idx(g, n), False)


cdef void bwd_tr(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _tr(gy, <real*>a.g, n, a, idx(g, n), True)


set_kernels(OP_TR, DEV_CPU, <kfwd_fn>fwd_tr[float], <kfwd_fn>fwd_tr[double],
            <kbwd_fn>bwd_tr[float], <kbwd_fn>bwd_tr[double])

# ---------------------------------------------------------------- reshape (copy)

cdef void fwd_rs(Graph* g, Node* n, real* y) noexcept:
    memcpy(y, arg(g, n, 0).v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_rs(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, arg(g, n, 0).g)


set_kernels(OP_RS, DEV_CPU, <kfwd_fn>fwd_rs[float], <kfwd_fn>fwd_rs[double],
            <kbwd_fn>bwd_rs[float], <kbwd_fn>bwd_rs[double])

# ---------------------------------------------------------------- x ** c (number) and pow(x, y)

cdef void _powc(real* y, real* x, real* gy, real* gx, long m, double c, bint back) noexcept nogil:
    cdef long i
    if not back:
        for i in range(m):
            y[i] = cpow(x[i], c)
    elif c != 0:
        for i in range(m):
            gx[i] += gy[i] * c * cpow(x[i], c - 1)


cdef void fwd_powc(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _powc(y, <real*>a.v, NULL, NULL, dim_total(&n.dim), n.fa[0], False)


cdef void bwd_powc(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _powc(NULL, <real*>a.v, gy, <real*>a.g, dim_total(&n.dim), n.fa[0], True)


set_kernels(OP_POWC, DEV_CPU, <kfwd_fn>fwd_powc[float], <kfwd_fn>fwd_powc[double],
            <kbwd_fn>bwd_powc[float], <kbwd_fn>bwd_powc[double])


cdef void _pow(real* y, real* x, real* e, real* gy, real* gx, Node* n, Node* a, Node* b,
               int which) noexcept nogil:
    """which -1: forward; 0: gx += gy e x^(e-1); 1: ge += sum gy y log x."""
    cdef long s = dim_size(&n.dim), k, i
    cdef real* xb
    cdef real* yb
    cdef double c, acc
    for k in range(n.dim.bd):
        xb = x + (k * s if a.dim.bd > 1 else 0)
        yb = y + k * s
        c = e[k if b.dim.bd > 1 else 0]
        if which == -1:
            for i in range(s):
                yb[i] = cpow(xb[i], c)
        elif which == 0:
            if c != 0:
                for i in range(s):
                    gx[(k * s if a.dim.bd > 1 else 0) + i] += gy[k * s + i] * c * cpow(xb[i], c - 1)
        else:
            acc = 0
            for i in range(s):
                if yb[i] != 0:
                    acc += gy[k * s + i] * <double>yb[i] * log(xb[i])
            gx[k if b.dim.bd > 1 else 0] += acc


cdef void fwd_pow(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _pow(y, <real*>a.v, <real*>b.v, NULL, NULL, n, a, b, -1)


cdef void bwd_pow(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef void* gx = a.g if i == 0 else b.g
    _pow(<real*>n.v, <real*>a.v, <real*>b.v, gy, <real*>gx, n, a, b, i)


set_kernels(OP_POW, DEV_CPU, <kfwd_fn>fwd_pow[float], <kfwd_fn>fwd_pow[double],
            <kbwd_fn>bwd_pow[float], <kbwd_fn>bwd_pow[double])
