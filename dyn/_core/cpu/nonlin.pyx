# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the elementwise nonlinearities (tanh, logistic, rectify, exp, log) and the
gradient-flow ops (dropout, noise, nobackprop), declared in dyn/_core/ops/nonlin.pyx (the softmax
family's kernels: cpu/softmax.pyx). Each op: forward, backward (accumulating), and their
registration in the kernel table.
"""
from libc.math cimport log as c_log, tanh as c_tanh, fabs, sqrt, cos, sin, M_PI
from libc.string cimport memcpy
from dyn._core.core.graph cimport (
    Graph, Node, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_total, arg, rand_uniform)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.nonlin cimport (
    TANH, LOGISTIC, RECTIFY, EXP, LOG, OP_UNARY, OP_DROPOUT, OP_NOISE, OP_NOBACKPROP)

cdef extern from "_fastmath.h" nogil:
    # vectorisable float32 tanh/logistic (about 2 ulp; glibc's are scalar)
    void dyn_tanh_f32(float* y, const float* x, long n)
    void dyn_logistic_f32(float* y, const float* x, long n)

# ---------------------------------------------------------------- helpers
# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in.

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


set_kernels(OP_UNARY, DEV_CPU, <kfwd_fn>fwd_unary[float], <kfwd_fn>fwd_unary[double],
            <kbwd_fn>bwd_unary[float], <kbwd_fn>bwd_unary[double])

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


set_kernels(OP_DROPOUT, DEV_CPU, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
            <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double])


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


set_kernels(OP_NOISE, DEV_CPU, <kfwd_fn>fwd_noise[float], <kfwd_fn>fwd_noise[double],
            <kbwd_fn>bwd_identity[float], <kbwd_fn>bwd_identity[double])

# ---------------------------------------------------------------- nobackprop

cdef void fwd_copy(Graph* g, Node* n, real* y) noexcept:
    memcpy(y, arg(g, n, 0).v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_none(Graph* g, Node* n, int i, real* gy) noexcept:
    pass      # reached only by backward(full=True): the gradient stops here


set_kernels(OP_NOBACKPROP, DEV_CPU, <kfwd_fn>fwd_copy[float], <kfwd_fn>fwd_copy[double],
            <kbwd_fn>bwd_none[float], <kbwd_fn>bwd_none[double])
