# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of elementwise math (declared in dyn/_core/ops/math.pyx): the math_unary node's
functions and their derivatives, bmin/bmax and emax/emin over a list. Each op: forward, backward
(accumulating), and their registration in the kernel table. float32 graphs call libm's float
functions.
"""
from libc cimport math as cm
from dyn._core.core.graph cimport Graph, Node, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_total, arg
from dyn._core.core.types cimport real
from dyn._core.ops.math cimport (
    SQRT, ABS, SQUARE, CUBE, ERF, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH,
    LOG_SIGMOID, LGAMMA, SOFTSIGN, ELU, SELU, SILU, ROUND, CEIL, FLOOR, OP_UNARY, OP_BMINMAX, OP_ELIST)

# SELU's constants (Klambauer et al. 2017), as DyNet
cdef double SELU_LAMBDA = 1.0507009873554804934193349852946
cdef double SELU_ALPHA = 1.6732632423543772848170429916717
cdef double TWO_OVER_SQRT_PI = 1.1283791670955125738961589031215

# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in.

# ---------------------------------------------------------------- libm, float or double

cdef inline real _sqrt(real x) noexcept nogil:
    if real is float:
        return cm.sqrtf(x)
    else:
        return cm.sqrt(x)


cdef inline real _exp(real x) noexcept nogil:
    if real is float:
        return cm.expf(x)
    else:
        return cm.exp(x)


cdef inline real _expm1(real x) noexcept nogil:
    if real is float:
        return cm.expm1f(x)
    else:
        return cm.expm1(x)


cdef inline real _log1p(real x) noexcept nogil:
    if real is float:
        return cm.log1pf(x)
    else:
        return cm.log1p(x)


cdef inline real _libm(int kind, real x) noexcept nogil:
    """The transcendental functions: each costs far more than this switch."""
    if real is float:
        if kind == ERF: return cm.erff(x)
        if kind == SIN: return cm.sinf(x)
        if kind == COS: return cm.cosf(x)
        if kind == TAN: return cm.tanf(x)
        if kind == ASIN: return cm.asinf(x)
        if kind == ACOS: return cm.acosf(x)
        if kind == ATAN: return cm.atanf(x)
        if kind == SINH: return cm.sinhf(x)
        if kind == COSH: return cm.coshf(x)
        if kind == ASINH: return cm.asinhf(x)
        if kind == ACOSH: return cm.acoshf(x)
        if kind == ATANH: return cm.atanhf(x)
        if kind == LGAMMA: return cm.lgammaf(x)
        if kind == ROUND: return cm.roundf(x)
        if kind == CEIL: return cm.ceilf(x)
        return cm.floorf(x)
    else:
        if kind == ERF: return cm.erf(x)
        if kind == SIN: return cm.sin(x)
        if kind == COS: return cm.cos(x)
        if kind == TAN: return cm.tan(x)
        if kind == ASIN: return cm.asin(x)
        if kind == ACOS: return cm.acos(x)
        if kind == ATAN: return cm.atan(x)
        if kind == SINH: return cm.sinh(x)
        if kind == COSH: return cm.cosh(x)
        if kind == ASINH: return cm.asinh(x)
        if kind == ACOSH: return cm.acosh(x)
        if kind == ATANH: return cm.atanh(x)
        if kind == LGAMMA: return cm.lgamma(x)
        if kind == ROUND: return cm.round(x)
        if kind == CEIL: return cm.ceil(x)
        return cm.floor(x)


cdef double _digamma(double x) noexcept nogil:
    """d lgamma / dx (libm has none): recurrence up to x >= 10, then the
    asymptotic series (next term below 1e-13); reflection for x < 0."""
    cdef double r = 0, f
    if x <= 0 and cm.floor(x) == x:
        return cm.NAN
    if x < 0:
        return _digamma(1 - x) - cm.M_PI / cm.tan(cm.M_PI * x)
    while x < 10:
        r -= 1 / x
        x += 1
    f = 1 / (x * x)
    return r + cm.log(x) - 0.5 / x - f * (1 / 12.0 - f * (1 / 120.0 - f * (1 / 252.0 - f * (
        1 / 240.0 - f * (1 / 132.0)))))

# ---------------------------------------------------------------- elementwise unary

cdef void _unary_fwd(int kind, real* y, real* x, long m, double a) noexcept nogil:
    cdef long i
    cdef real t, al = <real>a
    if kind == SQRT:
        for i in range(m):
            y[i] = _sqrt(x[i])
    elif kind == ABS:
        for i in range(m):
            y[i] = x[i] if x[i] >= 0 else -x[i]
    elif kind == SQUARE:
        for i in range(m):
            y[i] = x[i] * x[i]
    elif kind == CUBE:
        for i in range(m):
            y[i] = x[i] * x[i] * x[i]
    elif kind == LOG_SIGMOID:
        # log sigmoid(x) = min(x, 0) - log(1 + exp(-|x|)): exp never overflows
        for i in range(m):
            t = x[i] if x[i] < 0 else -x[i]
            y[i] = (x[i] if x[i] < 0 else 0) - _log1p(_exp(t))
    elif kind == SOFTSIGN:
        for i in range(m):
            y[i] = x[i] / (1 + (x[i] if x[i] >= 0 else -x[i]))
    elif kind == ELU or kind == SELU:
        # expm1: exact near 0, where exp(x) - 1 cancels
        if kind == SELU:
            al = <real>SELU_ALPHA
        for i in range(m):
            y[i] = x[i] if x[i] > 0 else al * _expm1(x[i])
        if kind == SELU:
            for i in range(m):
                y[i] *= <real>SELU_LAMBDA
    elif kind == SILU:
        # exp(-beta x) = inf for beta x << 0 gives the right limit 0
        for i in range(m):
            y[i] = x[i] / (1 + _exp(-al * x[i]))
    else:
        for i in range(m):
            y[i] = _libm(kind, x[i])


cdef void _unary_bwd(int kind, real* gx, real* gy, real* x, real* y, long m, double a) noexcept nogil:
    # from the output where it holds the derivative (sqrt, tan, log_sigmoid, elu)
    cdef long i
    cdef real t, s, al = <real>a
    if kind == SQRT:
        for i in range(m):
            gx[i] += gy[i] * <real>0.5 / y[i]
    elif kind == ABS:
        # sign(x): the gradient at 0 is 0, as DyNet (x - x: 0, or NaN for NaN)
        for i in range(m):
            gx[i] += gy[i] if x[i] > 0 else (-gy[i] if x[i] < 0 else x[i] - x[i])
    elif kind == SQUARE:
        for i in range(m):
            gx[i] += gy[i] * 2 * x[i]
    elif kind == CUBE:
        for i in range(m):
            gx[i] += gy[i] * 3 * x[i] * x[i]
    elif kind == ERF:
        for i in range(m):
            gx[i] += gy[i] * <real>TWO_OVER_SQRT_PI * _exp(-x[i] * x[i])
    elif kind == SIN:
        for i in range(m):
            gx[i] += gy[i] * _libm(COS, x[i])
    elif kind == COS:
        for i in range(m):
            gx[i] -= gy[i] * _libm(SIN, x[i])
    elif kind == TAN:
        for i in range(m):
            gx[i] += gy[i] * (1 + y[i] * y[i])
    elif kind == ASIN or kind == ACOS:
        for i in range(m):
            t = gy[i] / _sqrt(1 - x[i] * x[i])
            gx[i] += t if kind == ASIN else -t
    elif kind == ATAN:
        for i in range(m):
            gx[i] += gy[i] / (1 + x[i] * x[i])
    elif kind == SINH:
        for i in range(m):
            gx[i] += gy[i] * _libm(COSH, x[i])
    elif kind == COSH:
        for i in range(m):
            gx[i] += gy[i] * _libm(SINH, x[i])
    elif kind == ASINH:
        for i in range(m):
            gx[i] += gy[i] / _sqrt(x[i] * x[i] + 1)
    elif kind == ACOSH:
        for i in range(m):
            gx[i] += gy[i] / _sqrt(x[i] * x[i] - 1)
    elif kind == ATANH:
        for i in range(m):
            gx[i] += gy[i] / (1 - x[i] * x[i])
    elif kind == LOG_SIGMOID:
        # d/dx log sigmoid(x) = 1 - sigmoid(x) = -expm1(y): no cancellation for x >> 0
        for i in range(m):
            gx[i] -= gy[i] * _expm1(y[i])
    elif kind == LGAMMA:
        for i in range(m):
            gx[i] += gy[i] * <real>_digamma(x[i])
    elif kind == SOFTSIGN:
        for i in range(m):
            t = 1 + (x[i] if x[i] >= 0 else -x[i])
            gx[i] += gy[i] / (t * t)
    elif kind == ELU or kind == SELU:
        # x <= 0: d/dx lambda alpha (e^x - 1) = y + lambda alpha
        s = <real>SELU_LAMBDA if kind == SELU else 1
        t = <real>(SELU_LAMBDA * SELU_ALPHA) if kind == SELU else al
        for i in range(m):
            gx[i] += gy[i] * (s if x[i] > 0 else y[i] + t)
    elif kind == SILU:
        # d/dx x s(beta x) = s + beta x s (1 - s)
        for i in range(m):
            s = 1 / (1 + _exp(-al * x[i]))
            gx[i] += gy[i] * (s + al * x[i] * s * (1 - s))
    else:
        # rounding: reached only in straight-through mode (zero_gradient nodes
        # do not propagate, see _rounding), where the gradient passes unchanged
        for i in range(m):
            gx[i] += gy[i]


cdef void fwd_unary(Graph* g, Node* n, real* y) noexcept:
    _unary_fwd(n.ia[0], y, <real*>arg(g, n, 0).v, dim_total(&n.dim), n.fa[0])


cdef void bwd_unary(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    if n.ia[0] >= ROUND and not n.ia[1]:
        return      # zero_gradient rounding: reached only by backward(full=True)
    _unary_bwd(n.ia[0], <real*>x.g, gy, <real*>x.v, <real*>n.v, dim_total(&n.dim), n.fa[0])


set_kernels(OP_UNARY, DEV_CPU, <kfwd_fn>fwd_unary[float], <kfwd_fn>fwd_unary[double],
            <kbwd_fn>bwd_unary[float], <kbwd_fn>bwd_unary[double])

# ---------------------------------------------------------------- bmin, bmax

cdef void _bminmax_fwd(real* z, real* x, real* y, long m, bint mx) noexcept nogil:
    cdef long i
    # a NaN wins (either side), unlike IEEE fmax/fmin
    if mx:
        for i in range(m):
            z[i] = x[i] if (x[i] > y[i] or x[i] != x[i]) else y[i]
    else:
        for i in range(m):
            z[i] = x[i] if (x[i] < y[i] or x[i] != x[i]) else y[i]


cdef void _bminmax_bwd(real* gx, real* gz, real* x, real* y, long m, bint mx, int which) noexcept nogil:
    # x wins only when strictly better: ties send the gradient to y, as DyNet
    cdef long i
    cdef bint xwins
    for i in range(m):
        xwins = ((x[i] > y[i]) if mx else (x[i] < y[i])) or x[i] != x[i]
        if xwins == (which == 0):
            gx[i] += gz[i]


cdef void fwd_bminmax(Graph* g, Node* n, real* y) noexcept:
    _bminmax_fwd(y, <real*>arg(g, n, 0).v, <real*>arg(g, n, 1).v, dim_total(&n.dim), n.ia[0])


cdef void bwd_bminmax(Graph* g, Node* n, int i, real* gy) noexcept:
    _bminmax_bwd(<real*>arg(g, n, i).g, gy, <real*>arg(g, n, 0).v, <real*>arg(g, n, 1).v,
                 dim_total(&n.dim), n.ia[0], i)


set_kernels(OP_BMINMAX, DEV_CPU, <kfwd_fn>fwd_bminmax[float], <kfwd_fn>fwd_bminmax[double],
            <kbwd_fn>bwd_bminmax[float], <kbwd_fn>bwd_bminmax[double])

# ---------------------------------------------------------------- emax, emin over a list

cdef void _elist_fwd(Graph* g, Node* n, real* y, real* win) noexcept nogil:
    # win[i] = the argument that supplies y[i] (the last of equal ones, as
    # DyNet's chain of bmax sends ties to its second operand)
    cdef long i, m = dim_total(&n.dim)
    cdef int j
    cdef real* x = <real*>arg(g, n, 0).v
    cdef bint mx = n.ia[0]
    for i in range(m):
        y[i] = x[i]
        win[i] = 0
    for j in range(1, n.nargs):
        x = <real*>arg(g, n, j).v
        for i in range(m):
            # a NaN wins: once y[i] is NaN it stays
            if y[i] == y[i] and not ((x[i] < y[i]) if mx else (x[i] > y[i])):
                y[i] = x[i]
                win[i] = j


cdef void _elist_bwd(real* gx, real* gy, real* win, long m, int j) noexcept nogil:
    cdef long i
    cdef real rj = j
    for i in range(m):
        if win[i] == rj:
            gx[i] += gy[i]


cdef void fwd_elist(Graph* g, Node* n, real* y) noexcept:
    _elist_fwd(g, n, y, <real*>n.aux)


cdef void bwd_elist(Graph* g, Node* n, int i, real* gy) noexcept:
    _elist_bwd(<real*>arg(g, n, i).g, gy, <real*>n.aux, dim_total(&n.dim), i)


set_kernels(OP_ELIST, DEV_CPU, <kfwd_fn>fwd_elist[float], <kfwd_fn>fwd_elist[double],
            <kbwd_fn>bwd_elist[float], <kbwd_fn>bwd_elist[double])
