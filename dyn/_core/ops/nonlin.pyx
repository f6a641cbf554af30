# cython: language_level=3, boundscheck=False, wraparound=False
"""Nonlinearities (tanh, logistic, rectify, exp, log), the softmax family
(softmax, log_softmax, logsumexp, pickneglogsoftmax) and the gradient-flow
ops (dropout, noise, nobackprop). Each op: shape rule, forward, backward
(accumulating), side by side.
"""
import operator

from libc.math cimport exp as c_exp, log as c_log, tanh as c_tanh, expf, logf, fabs, sqrt, cos, sin, M_PI, INFINITY
from libc.string cimport memcpy
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_BCAST, AB_IDX, AB_AUXSLICE
from dyn._core.core.graph cimport (
    Graph, Node, cg, declare_op, set_kernels, kfwd_fn, kbwd_fn, shape_fn, DEV_CPU, dim_size, dim_total, dim_cols, dim_str, arg, idx,
    set_indices, set_indices_c, dim_eq_nobatch, arena_alloc, rand_uniform, F_NG, F_CONST)
from dyn._core.core.expr cimport node1, noden, finish, Expression
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport batch_rule, expr_arg, g_node, index_arg, int_arg, number_arg

cdef extern from "_fastmath.h" nogil:
    # vectorisable float32 tanh/logistic (about 2 ulp; glibc's are scalar)
    void dyn_tanh_f32(float* y, const float* x, long n)
    void dyn_logistic_f32(float* y, const float* x, long n)
    void dyn_logsumexp_f32(const float* x, long n, float* mx, float* ls)
    void dyn_softmax_acc_f32(float* gx, const float* x, long n, float mx, float ls, float c)

cdef enum:
    TANH, LOGISTIC, RECTIFY, EXP, LOG

# ---------------------------------------------------------------- helpers
# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in.

cdef int _op(str name, shape_fn shape, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32, kbwd_fn b64,
             int aux=0) except -1:
    cdef int op = declare_op(name, shape, aux)
    set_kernels(op, DEV_CPU, f32, f64, b32, b64)
    return op


cdef inline real _exp(real x) noexcept nogil:
    if real is float:
        return expf(x)
    else:
        return c_exp(x)


cdef inline real _log(real x) noexcept nogil:
    if real is float:
        return logf(x)
    else:
        return c_log(x)


cdef inline real _tanh(real x) noexcept nogil:
    # float32: one double exp (glibc's tanhf/expm1f are ~4x slower); the
    # cancellation in 1 - t costs double digits a float does not need, and
    # below 1e-4 tanh(x) rounds to x in float
    cdef double a, t
    if real is float:
        a = fabs(<double>x)
        if a < 1e-4:
            return x
        t = c_exp(-2 * a)
        t = (1 - t) / (1 + t)
        return <float>(t if x >= 0 else -t)
    else:
        return c_tanh(x)


cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0

# ---------------------------------------------------------------- elementwise unary

cdef void _unary_fwd(int kind, real* y, real* x, int m) noexcept nogil:
    cdef int i
    if real is float and kind == TANH:
        dyn_tanh_f32(y, x, m)
    elif real is float and kind == LOGISTIC:
        dyn_logistic_f32(y, x, m)
    elif kind == TANH:
        for i in range(m):
            y[i] = _tanh(x[i])
    elif kind == LOGISTIC:
        # exp(-x) overflows to inf for x << 0, which gives the right limit 0
        for i in range(m):
            y[i] = 1 / (1 + _exp(-x[i]))
    elif kind == RECTIFY:
        # written so that NaN fails the test and passes through (x > 0 ? x : 0
        # would turn NaN into 0); still one compare-and-blend per element
        for i in range(m):
            y[i] = x[i] if not (x[i] <= 0) else 0
    elif kind == EXP:
        for i in range(m):
            y[i] = _exp(x[i])
    else:
        for i in range(m):
            y[i] = _log(x[i])


cdef void _unary_bwd(int kind, real* gx, real* gy, real* x, real* y, int m) noexcept nogil:
    # derivatives from the output where it holds them: no exp/tanh recomputed
    cdef int i
    cdef real one = 1     # typed: Cython writes a literal 1 as 1.0, a double, and float loops ran in double
    if kind == TANH:
        for i in range(m):
            gx[i] += gy[i] * (one - y[i] * y[i])
    elif kind == LOGISTIC:
        for i in range(m):
            gx[i] += gy[i] * y[i] * (one - y[i])
    elif kind == RECTIFY:
        # y > 0 exactly when x > 0: the gradient at 0 is 0. Otherwise y is 0
        # or NaN (NaN input): adding y gives 0, or a NaN gradient for a NaN
        for i in range(m):
            gx[i] += gy[i] if y[i] > 0 else y[i]
    elif kind == EXP:
        for i in range(m):
            gx[i] += gy[i] * y[i]
    else:
        for i in range(m):
            gx[i] += gy[i] / x[i]


cdef void fwd_unary(Graph* g, Node* n, real* y) noexcept:
    _unary_fwd(n.ia[0], y, <real*>arg(g, n, 0).v, dim_total(&n.dim))


cdef void bwd_unary(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _unary_bwd(n.ia[0], <real*>a.g, gy, <real*>a.v, <real*>n.v, dim_total(&n.dim))


cdef int OP_UNARY = _op("nonlin_unary", _shape_same, <kfwd_fn>fwd_unary[float], <kfwd_fn>fwd_unary[double],
                        <kbwd_fn>bwd_unary[float], <kbwd_fn>bwd_unary[double])

cdef tuple _UNARY_NAMES = ("tanh", "logistic", "rectify", "exp", "log")
set_labels("nonlin_unary", 0, _UNARY_NAMES)


cdef Expression _unary(object x, int kind):
    expr_arg(x, _UNARY_NAMES[kind])
    cdef int nid = node1(OP_UNARY, x)
    g_node(nid).ia[0] = kind
    return finish(nid)


def tanh(x):
    return _unary(x, TANH)


def logistic(x):
    return _unary(x, LOGISTIC)


def rectify(x):
    return _unary(x, RECTIFY)


def exp(x):
    return _unary(x, EXP)


def log(x):
    return _unary(x, LOG)

# ---------------------------------------------------------------- softmax, log_softmax

cdef int _shape_sm(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if x.dim.nd > 2:
        raise ValueError("%s: input must have at most 2 dimensions, got %s"
                         % ("log_softmax" if n.ia[1] else "softmax", dim_str(&x.dim)))
    n.dim = x.dim
    return 0


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


cdef int OP_SOFTMAX = _op("softmax", _shape_sm, <kfwd_fn>fwd_sm[float], <kfwd_fn>fwd_sm[double],
                          <kbwd_fn>bwd_sm[float], <kbwd_fn>bwd_sm[double])
cdef int OP_LOGSOFTMAX = _op("log_softmax", _shape_sm, <kfwd_fn>fwd_sm[float], <kfwd_fn>fwd_sm[double],
                             <kbwd_fn>bwd_sm[float], <kbwd_fn>bwd_sm[double])


def softmax(x, d=0):
    expr_arg(x, "softmax")
    d = int_arg(d, "softmax", "d")
    if d != 0 and d != 1:
        raise ValueError("softmax: d must be 0 (columns) or 1 (rows), got %d" % d)
    cdef int nid = node1(OP_SOFTMAX, x)
    g_node(nid).ia[0] = d
    g_node(nid).ia[1] = 0
    return finish(nid)

# ---------------------------------------------------------------- log_softmax restricted to some entries

cdef int _shape_rlsm(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k, m = x.dim.d[0]
    cdef int* v = idx(g, n)
    if dim_size(&x.dim) != m or x.dim.bd != 1:
        raise ValueError("log_softmax: with restrict, the input must be an unbatched vector, got %s"
                         % dim_str(&x.dim))
    for k in range(n.nidx):
        if v[k] >= m:
            raise IndexError("log_softmax: restrict index %d out of range for %s" % (v[k], dim_str(&x.dim)))
    n.dim = x.dim
    return 0


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


cdef int OP_RLOGSOFTMAX = _op("restricted_log_softmax", _shape_rlsm, <kfwd_fn>fwd_rlsm[float],
                              <kfwd_fn>fwd_rlsm[double], <kbwd_fn>bwd_rlsm[float], <kbwd_fn>bwd_rlsm[double])


def log_softmax(x, restrict=None):
    expr_arg(x, "log_softmax")
    cdef int nid
    if restrict is None:
        nid = node1(OP_LOGSOFTMAX, x)
        g_node(nid).ia[0] = 0
        g_node(nid).ia[1] = 1
        return finish(nid)
    if not isinstance(restrict, list):      # DyNet types it `list restrict`
        raise TypeError("log_softmax: restrict must be a list of indices, got %s" % type(restrict).__name__)
    if not restrict:
        raise ValueError("log_softmax: restrict is an empty list")
    # a set of entries: a repeated index would count twice in the normaliser
    v = sorted(set([index_arg(i, "log_softmax") for i in restrict]))
    nid = node1(OP_RLOGSOFTMAX, x)
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- logsumexp over a list

cdef int _shape_lse(Graph* g, Node* n) except -1:
    cdef int i
    cdef Node* a = arg(g, n, 0)
    for i in range(1, n.nargs):
        if not dim_eq_nobatch(&a.dim, &arg(g, n, i).dim):
            raise ValueError("logsumexp: all expressions must have the same dimensions, got %s"
                             % ", ".join([dim_str(&arg(g, n, k).dim) for k in range(n.nargs)]))
    n.dim = a.dim
    n.dim.bd = batch_rule(g, n, "logsumexp")
    return 0


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


cdef int OP_LSE = _op("logsumexp", _shape_lse, <kfwd_fn>fwd_lse[float], <kfwd_fn>fwd_lse[double],
                      <kbwd_fn>bwd_lse[float], <kbwd_fn>bwd_lse[double], 1)


def logsumexp(xs):
    try:
        nid = noden(OP_LSE, xs, "logsumexp")
    except TypeError as e:
        raise TypeError(str(e) if str(e).startswith("logsumexp") else "logsumexp: %s" % e) from None
    return finish(nid)

# ---------------------------------------------------------------- pickneglogsoftmax(_batch)

cdef int _shape_pnls(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef str name = "pickneglogsoftmax_batch" if n.ia[0] else "pickneglogsoftmax"
    cdef int k, m = x.dim.d[0]
    cdef int* v = idx(g, n)
    if dim_size(&x.dim) != m:
        raise ValueError("%s: x must be a vector (every dimension after the first 1), got %s"
                         % (name, dim_str(&x.dim)))
    if not n.ia[0] and x.dim.bd != 1:
        raise ValueError("pickneglogsoftmax: x is batched (%s) but one index was given; use "
                         "pickneglogsoftmax_batch(x, [one index per batch element])" % dim_str(&x.dim))
    if x.dim.bd != 1 and n.nidx != x.dim.bd:
        raise ValueError("pickneglogsoftmax_batch: %d indices for x of batch size %d (%s); give one "
                         "index per batch element" % (n.nidx, x.dim.bd, dim_str(&x.dim)))
    for k in range(n.nidx):
        if v[k] >= m:
            raise IndexError("%s: index %d out of range for x of dim %s" % (name, v[k], dim_str(&x.dim)))
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = n.nidx
    n.naux = 2 * n.nidx   # max and log shifted sum per element: backward recomputes the softmax
    return 0


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


cdef void _pnls_bwd(real* gx, real* gy, real* x, real* lse, int* v, int m, int B, int xb) noexcept nogil:
    # d/dx (-log softmax(x)[v]) = softmax(x) - onehot(v), softmax(x) = exp((x - max) - log sum)
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
            dyn_softmax_acc_f32(pg, px, m, mx, ls, c)
        else:
            for i in range(m):
                pg[i] += c * _exp((px[i] - mx) - ls)
        pg[v[b]] -= c


cdef void fwd_pnls(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _pnls_fwd(y, <real*>x.v, <real*>n.aux, idx(g, n), x.dim.d[0], n.dim.bd, x.dim.bd)


cdef void bwd_pnls(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    _pnls_bwd(<real*>x.g, gy, <real*>x.v, <real*>n.aux, idx(g, n), x.dim.d[0], n.dim.bd, x.dim.bd)


cdef int OP_PNLS = _op("pickneglogsoftmax", _shape_pnls, <kfwd_fn>fwd_pnls[float], <kfwd_fn>fwd_pnls[double],
                       <kbwd_fn>bwd_pnls[float], <kbwd_fn>bwd_pnls[double])


def pickneglogsoftmax(x, v):
    expr_arg(x, "pickneglogsoftmax")
    cdef int i = index_arg(v, "pickneglogsoftmax")
    cdef int nid = node1(OP_PNLS, x)
    g_node(nid).ia[0] = 0
    set_indices_c(nid, &i, 1)
    return finish(nid)


def pickneglogsoftmax_batch(x, vs):
    expr_arg(x, "pickneglogsoftmax_batch")
    try:
        it = iter(vs)
    except TypeError:
        raise TypeError("pickneglogsoftmax_batch: vs must be a sequence of indices, got %s"
                        % type(vs).__name__) from None
    v = [index_arg(i, "pickneglogsoftmax_batch") for i in it]
    if not v:
        raise ValueError("pickneglogsoftmax_batch: vs is empty (one index per batch element needed)")
    cdef int nid = node1(OP_PNLS, x)
    g_node(nid).ia[0] = 1
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- dropout, noise

cdef void _drop_fwd(Graph* g, real* y, real* x, real* mask, int m, double p) noexcept:
    cdef int i
    cdef real scale = <real>(1.0 / (1.0 - p)) if p < 1 else 0
    cdef double keep = 1.0 - p
    if p == 0:
        for i in range(m):
            mask[i] = 1
            y[i] = x[i]
        return
    for i in range(m):
        # u is in (0, 1): u < 1 - p with probability 1 - p; p = 1 drops all
        mask[i] = scale if rand_uniform(g) < keep else 0
        y[i] = x[i] * mask[i]


cdef void _mask_bwd(real* gx, real* gy, real* mask, int m) noexcept nogil:
    cdef int i
    for i in range(m):
        gx[i] += gy[i] * mask[i]


cdef void fwd_drop(Graph* g, Node* n, real* y) noexcept:
    _drop_fwd(g, y, <real*>arg(g, n, 0).v, <real*>n.aux, dim_total(&n.dim), n.fa[0])


cdef void bwd_drop(Graph* g, Node* n, int i, real* gy) noexcept:
    _mask_bwd(<real*>arg(g, n, 0).g, gy, <real*>n.aux, dim_total(&n.dim))


cdef int OP_DROPOUT = _op("dropout", _shape_same, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
                          <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double], 1)


def dropout(x, p):
    expr_arg(x, "dropout")
    p = number_arg(p, "dropout", "p")      # not float(p): '0.5' and True are no probability
    if not 0.0 <= p <= 1.0:
        raise ValueError("dropout: p must be in [0, 1], got %r" % p)
    cdef int nid = node1(OP_DROPOUT, x)
    g_node(nid).fa[0] = p
    return finish(nid)


cdef void _noise_fwd(Graph* g, real* y, real* x, int m, double sd) noexcept:
    # Box-Muller, using both normals of each pair of uniforms
    cdef int i
    cdef double r, th
    for i in range(0, m, 2):
        r = sd * sqrt(-2.0 * c_log(rand_uniform(g)))
        th = 2.0 * M_PI * rand_uniform(g)
        y[i] = x[i] + <real>(r * cos(th))
        if i + 1 < m:
            y[i + 1] = x[i + 1] + <real>(r * sin(th))


cdef void fwd_noise(Graph* g, Node* n, real* y) noexcept:
    _noise_fwd(g, y, <real*>arg(g, n, 0).v, dim_total(&n.dim), n.fa[0])


cdef void bwd_identity(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, arg(g, n, 0).g)


cdef int OP_NOISE = _op("noise", _shape_same, <kfwd_fn>fwd_noise[float], <kfwd_fn>fwd_noise[double],
                        <kbwd_fn>bwd_identity[float], <kbwd_fn>bwd_identity[double])


def noise(x, stddev):
    expr_arg(x, "noise")
    stddev = number_arg(stddev, "noise", "stddev")
    if not stddev >= 0.0:
        raise ValueError("noise: stddev must be >= 0, got %r" % stddev)
    cdef int nid = node1(OP_NOISE, x)
    g_node(nid).fa[0] = stddev
    return finish(nid)

# ---------------------------------------------------------------- nobackprop

cdef void fwd_copy(Graph* g, Node* n, real* y) noexcept:
    memcpy(y, arg(g, n, 0).v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_none(Graph* g, Node* n, int i, real* gy) noexcept:
    pass      # reached only by backward(full=True): the gradient stops here


cdef int OP_NOBACKPROP = _op("nobackprop", _shape_same, <kfwd_fn>fwd_copy[float], <kfwd_fn>fwd_copy[double],
                             <kbwd_fn>bwd_none[float], <kbwd_fn>bwd_none[double])


def nobackprop(x):
    expr_arg(x, "nobackprop")
    cdef int nid = node1(OP_NOBACKPROP, x)
    # not on any path to a parameter, so backward skips it and what feeds it
    g_node(nid).flags = (g_node(nid).flags & ~F_NG) | F_CONST
    return finish(nid)

# ---------------------------------------------------------------- automatic batching (src/_autobatch.pyx)
set_autobatch(OP_UNARY, AB_ON)
set_autobatch(OP_SOFTMAX, AB_ON)
set_autobatch(OP_LOGSOFTMAX, AB_ON)
set_autobatch(OP_PNLS, AB_ON | AB_BCAST | AB_IDX)      # one index per batch element: concatenated
set_autobatch(OP_DROPOUT, AB_ON | AB_AUXSLICE)         # each member still gets its own mask values
set_autobatch(OP_NOISE, AB_ON)
set_autobatch(OP_NOBACKPROP, AB_ON)
