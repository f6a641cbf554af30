# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the losses (declared in dyn/_core/ops/loss.pyx): hinge (single, batch,
along a dimension), binary log loss, Huber and L1 distances, Poisson loss, pairwise rank loss.
Forward writes, backward accumulates. The sparse probability maps, normalisation and gradient-flow
ops are in loss_norm.pyx.

Where DyNet rejects a batch (binary_log_loss, huber_distance, ...) these
kernels treat each batch element separately, and an argument of batch 1 is
shared by every batch element (its gradient is summed over the batch).

Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the kernel
table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.
"""
from libc.math cimport exp, log, fabs
from libc.float cimport FLT_MIN
from dyn._core.core.graph cimport Graph, Node, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_size, arg, idx
from dyn._core.core.types cimport real
from dyn._core.ops.util cimport batch_off
from dyn._core.ops.loss cimport (
    BLL, HUBER, L1, _slices, OP_HINGE, OP_HINGE_DIM, OP_PAIRLOSS, OP_POISSON, OP_PRL)

# ---------------------------------------------------------------- hinge, hinge_batch

cdef void _hinge_fwd(real* y, real* x, int* vs, int m, int B, int xb, real margin) noexcept nogil:
    cdef int b, i, v
    cdef real* px
    cdef real mv, t
    cdef double acc
    for b in range(B):
        px = x + (b * m if xb > 1 else 0)
        v = vs[b]
        mv = margin - px[v]
        acc = 0
        for i in range(m):
            t = px[i] + mv
            if i != v and not (t <= 0):     # a NaN term makes the loss NaN
                acc += t
        y[b] = <real>acc


cdef void _hinge_bwd(real* gx, real* gy, real* x, int* vs, int m, int B, int xb,
                     real margin) noexcept nogil:
    # the same float test as forward, so the active set is the one forward used
    cdef int b, i, v, cnt
    cdef real* px
    cdef real* pg
    cdef real mv, t
    for b in range(B):
        px = x + (b * m if xb > 1 else 0)
        pg = gx + (b * m if xb > 1 else 0)
        v = vs[b]
        mv = margin - px[v]
        cnt = 0
        t = 0
        for i in range(m):
            if i != v and px[i] + mv > 0:
                pg[i] += gy[b]
                cnt += 1
            elif i != v and not (px[i] + mv <= 0):
                # a NaN term: its derivative is NaN, for x_i and for x_v
                t = px[i] + mv
                pg[i] += t
        pg[v] -= gy[b] * cnt - t


cdef void fwd_hinge(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _hinge_fwd(y, <real*>x.v, idx(g, n), x.dim.d[0], n.dim.bd, x.dim.bd, <real>n.fa[0])


cdef void bwd_hinge(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    _hinge_bwd(<real*>x.g, gy, <real*>x.v, idx(g, n), x.dim.d[0], n.dim.bd, x.dim.bd, <real>n.fa[0])


set_kernels(OP_HINGE, DEV_CPU, <kfwd_fn>fwd_hinge[float], <kfwd_fn>fwd_hinge[double],
            <kbwd_fn>bwd_hinge[float], <kbwd_fn>bwd_hinge[double])

# ---------------------------------------------------------------- hinge_dim

cdef void _hdim_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    cdef Node* x = arg(g, n, 0)
    cdef int b, o, i, v, outer, ostr, inner, istr, s = dim_size(&x.dim)
    cdef int* vs = idx(g, n)
    cdef real* px
    cdef real mv, t, margin = <real>n.fa[0]
    cdef double acc
    _slices(&x.dim, n.ia[0], &outer, &ostr, &inner, &istr)
    for b in range(n.dim.bd):
        for o in range(outer):
            px = <real*>x.v + b * s + o * ostr
            v = vs[o]
            mv = margin - px[v * istr]
            acc = 0
            for i in range(inner):
                t = px[i * istr] + mv
                if i != v and not (t <= 0):     # a NaN term makes the loss NaN
                    acc += t
            y[b * outer + o] = <real>acc


cdef void _hdim_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    cdef Node* x = arg(g, n, 0)
    cdef int b, o, i, v, cnt, outer, ostr, inner, istr, s = dim_size(&x.dim)
    cdef int* vs = idx(g, n)
    cdef real* px
    cdef real* pg
    cdef real mv, c, t, margin = <real>n.fa[0]
    _slices(&x.dim, n.ia[0], &outer, &ostr, &inner, &istr)
    for b in range(n.dim.bd):
        for o in range(outer):
            px = <real*>x.v + b * s + o * ostr
            pg = <real*>x.g + b * s + o * ostr
            v = vs[o]
            mv = margin - px[v * istr]
            c = gy[b * outer + o]
            cnt = 0
            t = 0
            for i in range(inner):
                if i != v and px[i * istr] + mv > 0:
                    pg[i * istr] += c
                    cnt += 1
                elif i != v and not (px[i * istr] + mv <= 0):
                    # a NaN term: its derivative is NaN, for x_i and for x_v
                    t = px[i * istr] + mv
                    pg[i * istr] += t
            pg[v * istr] -= c * cnt - t


set_kernels(OP_HINGE_DIM, DEV_CPU, <kfwd_fn>_hdim_fwd[float], <kfwd_fn>_hdim_fwd[double],
            <kbwd_fn>_hdim_bwd[float], <kbwd_fn>_hdim_bwd[double])

# ---------------------------------------------------------------- pairwise reductions to {1}: binary_log_loss, huber_distance, l1_distance

cdef inline double _clog(double p) noexcept nogil:
    # DyNet's convention: log of a probability never goes below log(FLT_MIN)
    # (a NaN probability stays NaN)
    return log(p if not (p <= FLT_MIN) else FLT_MIN)


cdef void _pairloss_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef int k, i, s = dim_size(&a.dim), kind = n.ia[0]
    cdef real* pa
    cdef real* pb
    cdef double acc, d, ad, c = n.fa[0], t
    for k in range(n.dim.bd):
        pa = <real*>a.v + batch_off(a, k, s)
        pb = <real*>b.v + batch_off(b, k, s)
        acc = 0
        if kind == BLL:
            for i in range(s):
                t = pb[i]
                # a term whose weight is 0 is 0, even where its log is clamped
                if t != 0:
                    acc -= t * _clog(pa[i])
                if t != 1:
                    acc -= (1 - t) * _clog(1 - <double>pa[i])
        elif kind == HUBER:
            for i in range(s):
                d = <double>pa[i] - pb[i]
                ad = fabs(d)
                acc += d * d if ad < c else c * (2 * ad - c)
        else:
            for i in range(s):
                acc += fabs(<double>pa[i] - pb[i])
        y[k] = <real>acc


cdef void _pairloss_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef Node* w = a if which == 0 else b
    cdef int k, i, s = dim_size(&a.dim), kind = n.ia[0]
    cdef real* pa
    cdef real* pb
    cdef real* pg
    cdef double c, d, x, t, sg, hc = n.fa[0]
    for k in range(n.dim.bd):
        pa = <real*>a.v + batch_off(a, k, s)
        pb = <real*>b.v + batch_off(b, k, s)
        pg = <real*>w.g + batch_off(w, k, s)
        c = gy[k]
        if kind == BLL:
            for i in range(s):
                x = pa[i]
                t = pb[i]
                if which == 0:
                    pg[i] += <real>(c * ((1 - t) / (1 - x if not (1 - x <= FLT_MIN) else FLT_MIN)
                                         - t / (x if not (x <= FLT_MIN) else FLT_MIN)))
                else:
                    pg[i] += <real>(c * (_clog(1 - x) - _clog(x)))
        else:
            sg = c if which == 0 else -c
            for i in range(s):
                d = <double>pa[i] - pb[i]
                if d != d:
                    pg[i] += <real>d        # NaN in: a NaN gradient, not sign(NaN) = 0
                elif kind == HUBER:
                    if fabs(d) < hc:
                        pg[i] += <real>(2 * sg * d)
                    else:
                        pg[i] += <real>(2 * sg * hc * ((d > 0) - (d < 0)))
                else:
                    pg[i] += <real>(sg * ((d > 0) - (d < 0)))


set_kernels(OP_PAIRLOSS, DEV_CPU, <kfwd_fn>_pairloss_fwd[float], <kfwd_fn>_pairloss_fwd[double],
            <kbwd_fn>_pairloss_bwd[float], <kbwd_fn>_pairloss_bwd[double])

# ---------------------------------------------------------------- poisson_loss

cdef void _poisson_fwd(real* y, real* x, int m, double k, double lgk) noexcept nogil:
    cdef int i
    for i in range(m):
        y[i] = <real>(exp(<double>x[i]) - k * x[i] + lgk)


cdef void _poisson_bwd(real* gx, real* gy, real* x, int m, double k) noexcept nogil:
    cdef int i
    for i in range(m):
        gx[i] += <real>(gy[i] * (exp(<double>x[i]) - k))


cdef void fwd_poisson(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _poisson_fwd(y, <real*>x.v, n.dim.bd, n.fa[0], n.fa[1])


cdef void bwd_poisson(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    _poisson_bwd(<real*>x.g, gy, <real*>x.v, n.dim.bd, n.fa[0])


set_kernels(OP_POISSON, DEV_CPU, <kfwd_fn>fwd_poisson[float], <kfwd_fn>fwd_poisson[double],
            <kbwd_fn>bwd_poisson[float], <kbwd_fn>bwd_poisson[double])

# ---------------------------------------------------------------- pairwise_rank_loss

cdef void _prl_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef int k, i, s = dim_size(&n.dim)
    cdef real* pa
    cdef real* pb
    cdef real t, m = <real>n.fa[0]
    for k in range(n.dim.bd):
        pa = <real*>a.v + batch_off(a, k, s)
        pb = <real*>b.v + batch_off(b, k, s)
        for i in range(s):
            t = m - pa[i] + pb[i]
            y[k * s + i] = t if not (t <= 0) else 0      # NaN stays NaN


cdef void _prl_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    # y > 0 exactly where the margin is violated: the gradient at the kink is 0
    cdef Node* w = arg(g, n, which)
    cdef int k, i, s = dim_size(&n.dim)
    cdef real* pg
    cdef real* py = <real*>n.v
    for k in range(n.dim.bd):
        pg = <real*>w.g + batch_off(w, k, s)
        for i in range(s):
            if py[k * s + i] != py[k * s + i]:
                pg[i] += py[k * s + i]     # NaN in: a NaN gradient
            elif py[k * s + i] > 0:
                if which == 0:
                    pg[i] -= gy[k * s + i]
                else:
                    pg[i] += gy[k * s + i]


set_kernels(OP_PRL, DEV_CPU, <kfwd_fn>_prl_fwd[float], <kfwd_fn>_prl_fwd[double],
            <kbwd_fn>_prl_bwd[float], <kbwd_fn>_prl_bwd[double])
