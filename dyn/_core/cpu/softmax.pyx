# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the softmax family (softmax, log_softmax and its restricted form, logsumexp over
a list, pickneglogsoftmax(_batch)), declared in dyn/_core/ops/nonlin.pyx. Each op: forward,
backward (accumulating; pickneglogsoftmax's writes a fresh gradient, F_GFRESH), and their
registration in the kernel table.
"""
from libc.math cimport log as c_log, INFINITY
from libc.string cimport memset
from dyn._core.core.graph cimport (
    Graph, Node, DEV_CPU, F_GFRESH, F_BIASG, F_NG, F_CONST, F_PTRS, set_kernels, set_bwd_overwrites, kfwd_fn,
    kbwd_fn, dim_size, dim_cols, dim_total, arg, idx)
from dyn._core.core.types cimport real
from dyn._core.cpu.nonlin cimport _exp, _log
from dyn._core.ops.nonlin cimport OP_SOFTMAX, OP_LOGSOFTMAX, OP_RLOGSOFTMAX, OP_LSE, OP_PNLS
from dyn._core.ops.arith cimport OP_AFFINE

cdef extern from "_fastmath.h" nogil:
    void dyn_logsumexp_f32(const float* x, long n, float* mx, float* ls)
    void dyn_softmax_acc_f32(float* gx, const float* x, long n, float mx, float ls, float c)
    void dyn_softmax_set_f32(float* gx, const float* x, long n, float mx, float ls, float c)
    void dyn_colsum_acc_f32(float* y, const float* G, long m, long C)

# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in.

# ---------------------------------------------------------------- softmax, log_softmax

cdef void _sm_layout(Node* n, int* outer, int* ostr, int* inner, int* istr) noexcept nogil:
    """Slices normalised: d=0 each column (contiguous), d=1 each row (stride rows)."""
    cdef int m = n.dim.d[0], c = dim_cols(&n.dim)
    if n.ia[0] == 0:
        outer[0], ostr[0], inner[0], istr[0] = c, m, m, 1
    else:
        outer[0], ostr[0], inner[0], istr[0] = m, 1, c, m


cdef void _sm_fwd(real* y, real* x, int outer, int ostr, int inner, int istr, int nslices,
                  int s, bint logsm) noexcept nogil:
    cdef int b, o, i
    cdef real* px
    cdef real* py
    cdef real mx, e
    cdef double acc
    for b in range(nslices):
        for o in range(outer):
            px = x + b * s + o * ostr
            py = y + b * s + o * ostr
            mx = px[0]
            for i in range(1, inner):
                if px[i * istr] > mx:
                    mx = px[i * istr]
            acc = 0
            if logsm:
                for i in range(inner):
                    acc += _exp(px[i * istr] - mx)
                # (x - max) - log(acc): rounding max + log(acc) first loses digits
                e = <real>c_log(acc)
                for i in range(inner):
                    py[i * istr] = (px[i * istr] - mx) - e
            else:
                for i in range(inner):
                    e = _exp(px[i * istr] - mx)
                    py[i * istr] = e
                    acc += e
                e = <real>(1.0 / acc)
                for i in range(inner):
                    py[i * istr] *= e


cdef void _sm_bwd(real* gx, real* gy, real* y, int outer, int ostr, int inner, int istr,
                  int nslices, int s, bint logsm) noexcept nogil:
    cdef int b, o, i, k
    cdef double acc
    cdef real c
    for b in range(nslices):
        for o in range(outer):
            k = b * s + o * ostr
            acc = 0
            if logsm:
                # d log_softmax: gx = gy - softmax * sum(gy)
                for i in range(inner):
                    acc += gy[k + i * istr]
                c = <real>acc
                for i in range(inner):
                    gx[k + i * istr] += gy[k + i * istr] - _exp(y[k + i * istr]) * c
            else:
                # d softmax: gx = y * (gy - <gy, y>)
                for i in range(inner):
                    acc += gy[k + i * istr] * <double>y[k + i * istr]
                c = <real>acc
                for i in range(inner):
                    gx[k + i * istr] += y[k + i * istr] * (gy[k + i * istr] - c)


cdef void fwd_sm(Graph* g, Node* n, real* y) noexcept:
    cdef int outer, ostr, inner, istr
    _sm_layout(n, &outer, &ostr, &inner, &istr)
    _sm_fwd(y, <real*>arg(g, n, 0).v, outer, ostr, inner, istr, n.dim.bd, dim_size(&n.dim), n.ia[1])


cdef void bwd_sm(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int outer, ostr, inner, istr
    _sm_layout(n, &outer, &ostr, &inner, &istr)
    _sm_bwd(<real*>arg(g, n, 0).g, gy, <real*>n.v, outer, ostr, inner, istr, n.dim.bd,
            dim_size(&n.dim), n.ia[1])


set_kernels(OP_SOFTMAX, DEV_CPU, <kfwd_fn>fwd_sm[float], <kfwd_fn>fwd_sm[double],
            <kbwd_fn>bwd_sm[float], <kbwd_fn>bwd_sm[double])
set_kernels(OP_LOGSOFTMAX, DEV_CPU, <kfwd_fn>fwd_sm[float], <kfwd_fn>fwd_sm[double],
            <kbwd_fn>bwd_sm[float], <kbwd_fn>bwd_sm[double])

# ---------------------------------------------------------------- log_softmax restricted to some entries

cdef void _rlsm_fwd(real* y, real* x, int m, int* v, int nv) noexcept nogil:
    cdef int i
    cdef real mx = x[v[0]], lse
    cdef double acc = 0
    for i in range(m):
        y[i] = -INFINITY
    for i in range(1, nv):
        if x[v[i]] > mx:
            mx = x[v[i]]
    for i in range(nv):
        acc += _exp(x[v[i]] - mx)
    lse = <real>c_log(acc)
    for i in range(nv):
        y[v[i]] = (x[v[i]] - mx) - lse


cdef void _rlsm_bwd(real* gx, real* gy, real* y, int* v, int nv) noexcept nogil:
    # entries outside the restriction are constants (-inf): no gradient
    cdef int i
    cdef double acc = 0
    for i in range(nv):
        acc += gy[v[i]]
    for i in range(nv):
        gx[v[i]] += gy[v[i]] - _exp(y[v[i]]) * <real>acc


cdef void fwd_rlsm(Graph* g, Node* n, real* y) noexcept:
    _rlsm_fwd(y, <real*>arg(g, n, 0).v, n.dim.d[0], idx(g, n), n.nidx)


cdef void bwd_rlsm(Graph* g, Node* n, int i, real* gy) noexcept:
    _rlsm_bwd(<real*>arg(g, n, 0).g, gy, <real*>n.v, idx(g, n), n.nidx)


set_kernels(OP_RLOGSOFTMAX, DEV_CPU, <kfwd_fn>fwd_rlsm[float], <kfwd_fn>fwd_rlsm[double],
            <kbwd_fn>bwd_rlsm[float], <kbwd_fn>bwd_rlsm[double])

# ---------------------------------------------------------------- logsumexp over a list

cdef void _lse_fwd(Graph* g, Node* n, real* y, real* acc) noexcept nogil:
    # three vectorisable passes over the output: max, sum of exp, log
    cdef int j, b, i, s = dim_size(&n.dim), B = n.dim.bd
    cdef Node* a
    cdef real* px
    cdef real* py
    cdef real* pa
    for j in range(n.nargs):
        a = arg(g, n, j)
        for b in range(B):
            px = <real*>a.v + (b * s if a.dim.bd > 1 else 0)
            py = y + b * s
            if j == 0:
                for i in range(s):
                    py[i] = px[i]
            else:
                for i in range(s):
                    py[i] = px[i] if px[i] > py[i] else py[i]
    for i in range(s * B):
        acc[i] = 0
    for j in range(n.nargs):
        a = arg(g, n, j)
        for b in range(B):
            px = <real*>a.v + (b * s if a.dim.bd > 1 else 0)
            py = y + b * s
            pa = acc + b * s
            for i in range(s):
                # all -inf (log of zero probabilities) stays -inf, not NaN
                # (a NaN max stays NaN)
                pa[i] += _exp(px[i] - py[i]) if py[i] != -INFINITY else 0
    for i in range(s * B):
        y[i] += _log(acc[i])


cdef void _lse_bwd(real* gx, real* gy, real* x, real* y, int s, int B, int xb) noexcept nogil:
    cdef int b, i
    cdef real* px
    cdef real* pg
    for b in range(B):
        px = x + (b * s if xb > 1 else 0)
        pg = gx + (b * s if xb > 1 else 0)
        for i in range(s):
            pg[i] += gy[b * s + i] * _exp(px[i] - y[b * s + i]) if y[b * s + i] != -INFINITY else 0


cdef void fwd_lse(Graph* g, Node* n, real* y) noexcept:
    _lse_fwd(g, n, y, <real*>n.aux)


cdef void bwd_lse(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, i)
    _lse_bwd(<real*>a.g, gy, <real*>a.v, <real*>n.v, dim_size(&n.dim), n.dim.bd, a.dim.bd)


set_kernels(OP_LSE, DEV_CPU, <kfwd_fn>fwd_lse[float], <kfwd_fn>fwd_lse[double],
            <kbwd_fn>bwd_lse[float], <kbwd_fn>bwd_lse[double])

# ---------------------------------------------------------------- pickneglogsoftmax(_batch)

cdef void _pnls_fwd(real* y, real* x, real* lse, int* v, int m, int B, int xb) noexcept nogil:
    # y = logsumexp(x) - x[v]; kept for backward: lse = (max, log of the shifted sum) per
    # element, not the softmax (m / 2 times less memory; backward recomputes it from x)
    cdef int b, i
    cdef real* px
    cdef real mx
    cdef double acc
    for b in range(B):
        px = x + (b * m if xb > 1 else 0)
        if xb == 1 and b > 0:           # x broadcast: same normaliser for every index
            lse[2 * b], lse[2 * b + 1] = lse[0], lse[1]
        elif real is float:             # vectorised exp and sums (libm's expf is scalar)
            dyn_logsumexp_f32(px, m, &lse[2 * b], &lse[2 * b + 1])
        else:
            mx = px[0]
            for i in range(1, m):
                if px[i] > mx:
                    mx = px[i]
            acc = 0
            for i in range(m):
                acc += _exp(px[i] - mx)
            lse[2 * b], lse[2 * b + 1] = mx, c_log(acc)
        y[b] = <real>((<double>lse[2 * b] - px[v[b]]) + lse[2 * b + 1])


cdef void _pnls_bwd(real* gx, real* gy, real* x, real* lse, int* v, int m, int B, int xb,
                    bint fresh, float* bg) noexcept nogil:
    # d/dx (-log softmax(x)[v]) = softmax(x) - onehot(v), softmax(x) = exp((x - max) - log sum);
    # fresh: gx holds nothing yet, and each element has a column of its own (xb > 1) to write;
    # bg (float32, fresh and xb > 1 only, else NULL): the columns of gx summed into it as well
    cdef int b, i
    cdef real* pg
    cdef real* px
    cdef real c, mx, ls
    for b in range(B):
        c = gy[b]
        pg = gx + (b * m if xb > 1 else 0)
        px = x + (b * m if xb > 1 else 0)
        mx, ls = lse[2 * b], lse[2 * b + 1]
        if real is float:
            if fresh:
                dyn_softmax_set_f32(pg, px, m, mx, ls, c)
            else:
                dyn_softmax_acc_f32(pg, px, m, mx, ls, c)
        elif fresh:
            for i in range(m):
                pg[i] = c * _exp((px[i] - mx) - ls)
        else:
            for i in range(m):
                pg[i] += c * _exp((px[i] - mx) - ls)
        pg[v[b]] -= c
        if real is float and bg != NULL and b % 4 == 3:
            # the last four columns, still in cache, into the bias gradient: the sums affine's
            # backward would form from memory (four columns a pass, in order), bit for bit
            dyn_colsum_acc_f32(bg, <float*>gx + <long>(b - 3) * m, m, 4)
    if real is float and bg != NULL and B % 4:
        dyn_colsum_acc_f32(bg, <float*>gx + <long>(B - B % 4) * m, m, B % 4)


cdef void fwd_pnls(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _pnls_fwd(y, <real*>x.v, <real*>n.aux, idx(g, n), x.dim.d[0], n.dim.bd, x.dim.bd)


cdef bint _bias_sum_on = True   # off only to measure the fusion against affine's own pass
cdef long _bias_sums = 0        # how many backward passes took it (tests)


cdef float* _bias_grad(Graph* g, Node* x, int B) noexcept:
    """x, whose gradient the softmax writes fresh (its one consumer), an affine_transform over the
    batch with one bias vector that needs a gradient: that gradient, which the softmax's backward
    then sums into while x's columns are still in cache (x carries F_BIASG: its own backward leaves
    the bias out), so the 10k x tokens gradient is not read from memory once more for it; the sums
    are the ones affine_transform's backward forms, in its order. Else NULL."""
    cdef Node* b
    global _bias_sums
    if (not _bias_sum_on or x.op != OP_AFFINE or x.nargs < 3 or x.dim.nd != 1 or x.dim.bd < 2
            or x.dim.bd != B or (x.flags & F_PTRS)):
        return NULL
    b = arg(g, x, 0)
    if (b.dim.bd != 1 or dim_size(&b.dim) != x.dim.d[0] or not (b.flags & F_NG)
            or (b.flags & (F_CONST | F_PTRS)) or b.g == NULL):
        return NULL
    x.flags |= F_BIASG
    _bias_sums += 1
    return <float*>b.g


cdef void bwd_pnls(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef bint fresh = (x.flags & F_GFRESH) != 0
    cdef float* bg = NULL
    if fresh:
        x.flags &= ~F_GFRESH
        if x.dim.bd == 1 and n.dim.bd > 1:      # every element adds into the one column: zero it first
            memset(x.g, 0, <size_t>dim_total(&x.dim) * sizeof(real))
            fresh = False
        elif real is float:
            bg = _bias_grad(g, x, n.dim.bd)
    _pnls_bwd(<real*>x.g, gy, <real*>x.v, <real*>n.aux, idx(g, n), x.dim.d[0], n.dim.bd, x.dim.bd, fresh, bg)


set_kernels(OP_PNLS, DEV_CPU, <kfwd_fn>fwd_pnls[float], <kfwd_fn>fwd_pnls[double],
            <kbwd_fn>bwd_pnls[float], <kbwd_fn>bwd_pnls[double])
set_bwd_overwrites(OP_PNLS, DEV_CPU)


def _set_bias_sum(bint on):
    """Measurements: pickneglogsoftmax_batch's backward sums an affine_transform's bias gradient
    while it writes the scores' fresh gradient (on, the default) or leaves it to affine's backward
    (off); returns the previous setting."""
    global _bias_sum_on
    cdef bint old = _bias_sum_on
    _bias_sum_on = on
    return old


def _bias_sum_count():
    """Tests: how many backward passes have summed a bias gradient that way since the module loaded."""
    return _bias_sums
