# cython: language_level=3, boundscheck=False, wraparound=False
"""Losses: hinge (single, batch, along a dimension), binary log loss, Huber
and L1 distances, Poisson loss, pairwise rank loss. Each op: shape rule,
forward, backward (accumulating), side by side. The sparse probability maps,
normalisation and gradient-flow ops are in _k_loss_norm.pyx.

Where DyNet rejects a batch (binary_log_loss, huber_distance, ...) these
kernels treat each batch element separately, and an argument of batch 1 is
shared by every batch element (its gradient is summed over the batch).
"""
import operator

from libc.math cimport exp, log, fabs
from libc.float cimport FLT_MIN
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, set_kernels, shape_fn, kfwd_fn, kbwd_fn, DEV_CPU, dim_size, dim_cols,
    dim_str, arg, idx, set_indices, dim_eq_nobatch)
from dyn._core.core.expr cimport node1, node2, finish, Expression
from dyn._core.core.types cimport real
from dyn._core.ops.util cimport batch_off, batch_rule, expr_arg, g_node, index_arg, indices_arg, int_arg, looks_like_vector, number_arg, scalar_out

# ---------------------------------------------------------------- helpers
# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.


cdef int _op(str name, shape_fn shape, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32, kbwd_fn b64,
             int aux=0) except -1:
    """declare_op, then the CPU kernels of both float types."""
    cdef int op = declare_op(name, shape, aux)
    set_kernels(op, DEV_CPU, f32, f64, b32, b64)
    return op


# ---------------------------------------------------------------- hinge, hinge_batch

cdef int _shape_hinge(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef str name = "hinge_batch" if n.ia[0] else "hinge"
    cdef int k, m = x.dim.d[0]
    cdef int* v = idx(g, n)
    if not looks_like_vector(&x.dim):
        raise ValueError("%s: x must be a vector (every dimension after the first 1), got %s"
                         % (name, dim_str(&x.dim)))
    if not n.ia[0] and x.dim.bd != 1:
        raise ValueError("hinge: x is batched (%s) but one index was given; use "
                         "hinge_batch(x, [one index per batch element])" % dim_str(&x.dim))
    if x.dim.bd != 1 and n.nidx != x.dim.bd:
        raise ValueError("hinge_batch: %d indices for x of batch size %d (%s); give one index per "
                         "batch element" % (n.nidx, x.dim.bd, dim_str(&x.dim)))
    for k in range(n.nidx):
        if v[k] >= m:
            raise IndexError("%s: index %d out of range for x of dim %s" % (name, v[k], dim_str(&x.dim)))
    scalar_out(n, n.nidx)
    return 0


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


cdef int OP_HINGE = _op("hinge", _shape_hinge, <kfwd_fn>fwd_hinge[float], <kfwd_fn>fwd_hinge[double],
                        <kbwd_fn>bwd_hinge[float], <kbwd_fn>bwd_hinge[double])


cdef double _margin(object m, str name) except? -1.0:
    cdef double mv = number_arg(m, name, "m")
    if not mv >= 0:
        raise ValueError("%s: the margin m must be >= 0, got %r" % (name, m))
    return mv


def hinge(x, v, m=1.0):
    expr_arg(x, "hinge")
    cdef int i = index_arg(v, "hinge")
    cdef double mv = _margin(m, "hinge")
    cdef int nid = node1(OP_HINGE, x)
    g_node(nid).ia[0] = 0
    g_node(nid).fa[0] = mv
    set_indices(nid, [i])
    return finish(nid)


def hinge_batch(x, vs, m=1.0):
    expr_arg(x, "hinge_batch")
    v = indices_arg(vs, "hinge_batch", "vs")
    cdef double mv = _margin(m, "hinge_batch")
    cdef int nid = node1(OP_HINGE, x)
    g_node(nid).ia[0] = 1
    g_node(nid).fa[0] = mv
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- hinge_dim

cdef void _slices(Dim* d, int which, int* outer, int* ostr, int* inner, int* istr) noexcept nogil:
    """which=0: each column (contiguous); 1: each row (stride rows)."""
    cdef int r = d.d[0], c = dim_cols(d)
    if which == 0:
        outer[0], ostr[0], inner[0], istr[0] = c, r, r, 1
    else:
        outer[0], ostr[0], inner[0], istr[0] = r, 1, c, r


cdef int _shape_hdim(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k, outer, ostr, inner, istr
    cdef int* v = idx(g, n)
    if x.dim.nd > 2:
        raise ValueError("hinge_dim: x must have at most 2 dimensions, got %s" % dim_str(&x.dim))
    _slices(&x.dim, n.ia[0], &outer, &ostr, &inner, &istr)
    if n.nidx != outer:
        raise ValueError("hinge_dim: %d indices for x of dim %s with d=%d; give one index per %s (%d)"
                         % (n.nidx, dim_str(&x.dim), n.ia[0], "column" if n.ia[0] == 0 else "row", outer))
    for k in range(n.nidx):
        if v[k] >= inner:
            raise IndexError("hinge_dim: index %d out of range along dimension %d of x of dim %s"
                             % (v[k], n.ia[0], dim_str(&x.dim)))
    n.dim.nd = 1
    n.dim.d[0] = outer
    n.dim.bd = x.dim.bd
    return 0


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


cdef int OP_HINGE_DIM = _op("hinge_dim", _shape_hdim, <kfwd_fn>_hdim_fwd[float], <kfwd_fn>_hdim_fwd[double],
                            <kbwd_fn>_hdim_bwd[float], <kbwd_fn>_hdim_bwd[double])


def hinge_dim(x, v, d=0, m=1.0):
    expr_arg(x, "hinge_dim")
    vs = indices_arg(v, "hinge_dim", "v")
    d = int_arg(d, "hinge_dim", "d")
    if d != 0 and d != 1:
        raise ValueError("hinge_dim: d must be 0 (each column) or 1 (each row), got %d" % d)
    cdef double mv = _margin(m, "hinge_dim")
    cdef int nid = node1(OP_HINGE_DIM, x)
    g_node(nid).ia[0] = d
    g_node(nid).fa[0] = mv
    set_indices(nid, vs)
    return finish(nid)

# ---------------------------------------------------------------- pairwise reductions to {1}: binary_log_loss, huber_distance, l1_distance

cdef enum:
    BLL, HUBER, L1

cdef tuple _PAIR_NAMES = ("binary_log_loss", "huber_distance", "l1_distance")


cdef int _shape_pairloss(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef str name = _PAIR_NAMES[n.ia[0]]
    if not dim_eq_nobatch(&a.dim, &b.dim):
        raise ValueError("%s: dimensions must match, got %s and %s" % (name, dim_str(&a.dim), dim_str(&b.dim)))
    scalar_out(n, batch_rule(g, n, name))
    return 0


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


cdef int OP_PAIRLOSS = _op("pair_loss", _shape_pairloss, <kfwd_fn>_pairloss_fwd[float],
                           <kfwd_fn>_pairloss_fwd[double], <kbwd_fn>_pairloss_bwd[float],
                           <kbwd_fn>_pairloss_bwd[double])
set_labels("pair_loss", 0, _PAIR_NAMES)


cdef Expression _pairloss(int kind, object x, object y, double c):
    cdef str name = _PAIR_NAMES[kind]
    expr_arg(x, name)
    expr_arg(y, name)
    cdef int nid = node2(OP_PAIRLOSS, x, y)
    g_node(nid).ia[0] = kind
    g_node(nid).fa[0] = c
    return finish(nid)


def binary_log_loss(x, y):
    return _pairloss(BLL, x, y, 0.0)


def huber_distance(x, y, c=1.345):
    cdef double cv = number_arg(c, "huber_distance", "c")
    if not cv > 0:
        raise ValueError("huber_distance: c must be > 0, got %r" % (c,))
    return _pairloss(HUBER, x, y, cv)


def l1_distance(x, y):
    return _pairloss(L1, x, y, 0.0)

# ---------------------------------------------------------------- poisson_loss

cdef int _shape_poisson(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if dim_size(&x.dim) != 1:
        raise ValueError("poisson_loss: log_lambda must have one element per batch element, got %s"
                         % dim_str(&x.dim))
    n.dim = x.dim
    return 0


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


cdef int OP_POISSON = _op("poisson_loss", _shape_poisson, <kfwd_fn>fwd_poisson[float],
                          <kfwd_fn>fwd_poisson[double], <kbwd_fn>bwd_poisson[float],
                          <kbwd_fn>bwd_poisson[double])


def poisson_loss(log_lambda, x, double lgamma_x1):
    expr_arg(log_lambda, "poisson_loss")
    cdef int nid = node1(OP_POISSON, log_lambda)
    g_node(nid).fa[0] = x
    g_node(nid).fa[1] = lgamma_x1
    return finish(nid)

# ---------------------------------------------------------------- pairwise_rank_loss

cdef int _shape_prl(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    if a.dim.nd > 2 or a.dim.d[0] != 1 or not dim_eq_nobatch(&a.dim, &b.dim):
        raise ValueError("pairwise_rank_loss: x and y must be scalars or row vectors {1,n} of the same "
                         "dimensions, got %s and %s" % (dim_str(&a.dim), dim_str(&b.dim)))
    n.dim = a.dim
    n.dim.bd = batch_rule(g, n, "pairwise_rank_loss")
    return 0


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


cdef int OP_PRL = _op("pairwise_rank_loss", _shape_prl, <kfwd_fn>_prl_fwd[float], <kfwd_fn>_prl_fwd[double],
                      <kbwd_fn>_prl_bwd[float], <kbwd_fn>_prl_bwd[double])


def pairwise_rank_loss(x, y, m=1.0):
    expr_arg(x, "pairwise_rank_loss")
    expr_arg(y, "pairwise_rank_loss")
    cdef double mv = number_arg(m, "pairwise_rank_loss", "m")
    cdef int nid = node2(OP_PRL, x, y)
    g_node(nid).fa[0] = mv
    return finish(nid)
