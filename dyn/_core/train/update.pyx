# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Optimizer kernels over the parameter pool (used by dyn/trainers.py).

One fused pass per parameter reads value, gradient and the rule's state,
writes them back and consumes (zeroes) the gradient. A lookup table takes a
step only on the rows touched since the last update: the cost of a step is
the rows touched, not the vocabulary. Rows left idle are brought up to date
lazily and exactly by src/_k_catchup.pyx (which also holds the state types).
"""
from libc.math cimport isfinite, sqrt, log
from libc.string cimport memset
from libc.stdlib cimport qsort
cimport numpy as cnp
from dyn._core.core.expr cimport Pool, ParamExpr
from dyn._core.core.graph cimport Touch
from dyn._core.cpu cimport blas as _blas
from dyn._core.core.types cimport real_dtype
from dyn._core.train.catchup cimport (
    HP, PState, real, state_at, eg_norm, catch_row_r, catch_all,
    SGD, MOMENTUM, ADAGRAD, ADADELTA, RMSPROP, ADAM, AMSGRAD, EG, SMORMS3)

cnp.import_array()

cdef extern from "_fastopt.h" nogil:
    void dyn_adam_f32(float* w, float* g, float* m, float* v, long n, float gs, float l2, float c1,
                      float c2, float alpha, float eps, float d)
    unsigned dyn_ftz_begin()
    void dyn_ftz_end(unsigned old)
    void dyn_adam_f32_nograd(float* w, float* m, float* v, long n, float l2, float c1, float c2,
                             float alpha, float eps, float d)

# ---------------------------------------------------------------- one step of a rule

cdef void _step(HP* h, real* w, real* g, real* s0, real* s1, real* s2, long n) noexcept:
    """The rule on n elements with gradient g * gscale (+ l2 * w), then decay;
    g is zeroed. EG leaves log x + h in w: eg_norm finishes it. One plain
    loop per rule, so the compiler vectorises each."""
    cdef long i
    cdef double gi, v, m, a, r, M
    cdef double d = h.d, lr = h.lr, gs = h.gscale, l2 = h.l2, eps = h.eps, mom = h.mom
    cdef double rho = h.rho, b1 = h.b1, b2 = h.b2, alpha = h.alpha
    if h.rule == SGD:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            w[i] = (w[i] - lr * gi) * d
    elif h.rule == MOMENTUM:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            v = mom * s0[i] - lr * gi
            s0[i] = v
            w[i] = (w[i] + v) * d
    elif h.rule == ADAGRAD:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            v = s0[i] + gi * gi
            s0[i] = v
            w[i] = (w[i] - lr * gi / sqrt(v + eps)) * d
    elif h.rule == ADADELTA:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            v = rho * s0[i] + (1 - rho) * gi * gi
            s0[i] = v
            m = -gi * sqrt(s1[i] + eps) / sqrt(v + eps)
            s1[i] = rho * s1[i] + (1 - rho) * m * m
            w[i] = (w[i] + m) * d
    elif h.rule == RMSPROP:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            v = rho * s0[i] + (1 - rho) * gi * gi
            s0[i] = v
            w[i] = (w[i] - lr * gi / sqrt(v + eps)) * d
    elif h.rule == ADAM:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            m = b1 * s0[i] + (1 - b1) * gi
            v = b2 * s1[i] + (1 - b2) * gi * gi
            s0[i] = m
            s1[i] = v
            w[i] = (w[i] - alpha * m / (sqrt(v) + eps)) * d
    elif h.rule == AMSGRAD:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            m = b1 * s0[i] + (1 - b1) * gi
            v = b2 * s1[i] + (1 - b2) * gi * gi
            s0[i] = m
            s1[i] = v
            if s2[i] > v:
                v = s2[i]
            s2[i] = v
            w[i] = (w[i] - alpha * m / (sqrt(v) + eps)) * d
    elif h.rule == EG:
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            v = mom * s0[i] - lr * gi
            s0[i] = v
            w[i] = log(w[i]) + v
    else:  # SMORMS3 (Simon Funk)
        for i in range(n):
            gi = g[i] * gs + l2 * w[i]
            M = s2[i]
            r = 1.0 / (M + 1)
            m = (1 - r) * s0[i] + r * gi
            v = (1 - r) * s1[i] + r * gi * gi
            a = m * m / (v + eps)
            s0[i] = m
            s1[i] = v
            w[i] = (w[i] - gi * (a if a < lr else lr) / (sqrt(v) + eps)) * d
            s2[i] = 1 + M * (1 - a)
    memset(g, 0, n * sizeof(real))


# ---------------------------------------------------------------- a trainer step
# Fused over `real`, the pool's float type: vb / gb are the pool's values / gradients as that type
# (the dispatch table at the end chooses the specialisation, once per call).

cdef void _run(PState s, real* vb, long off, long n) noexcept:
    """One rule step on elements [off, off + n) of a parameter."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef real* w = vb + p.off + off
    cdef real* g = <real*>p.pool.gb + p.off + off
    cdef unsigned csr = dyn_ftz_begin()     # denormals flushed (see src/_fastopt.h)
    if real is float and h.rule == ADAM:    # the hot case: one vector pass (src/_fastopt.h)
        dyn_adam_f32(w, g, state_at(<real*>s.sp[0], off), state_at(<real*>s.sp[1], off), n, h.gscale, h.l2,
                     1 - h.b1, 1 - h.b2, h.alpha, h.eps, h.d)
    else:
        _step(h, w, g, state_at(<real*>s.sp[0], off), state_at(<real*>s.sp[1], off),
              state_at(<real*>s.sp[2], off), n)
    dyn_ftz_end(csr)


cdef int _cmp_int(const void* a, const void* b) noexcept nogil:
    return (<const int*>a)[0] - (<const int*>b)[0]


cdef void _run_dense_lookup(PState s, real* vb, Touch* tc) noexcept:
    """A dense step over a whole lookup table. Unless the table was used whole,
    only the touched rows can hold a gradient, so the rows between them take
    the zero-gradient loop (no gradient read, nothing to clear). float32 Adam
    only (the hot case); other rules and float64 take the plain pass."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef long rs = p.rowsize, start = 0, r
    cdef int k
    cdef unsigned csr
    if real is float:
        if not tc.all and h.rule == ADAM and tc.n * 4 <= p.nrows:
            csr = dyn_ftz_begin()
            qsort(tc.rows, tc.n, sizeof(int), _cmp_int)
            for k in range(tc.n + 1):         # the gap before each touched row, and after the last
                r = tc.rows[k] if k < tc.n else p.nrows
                if r > start:
                    dyn_adam_f32_nograd(vb + p.off + start * rs, state_at(<real*>s.sp[0], start * rs),
                                        state_at(<real*>s.sp[1], start * rs), (r - start) * rs, h.l2, 1 - h.b1,
                                        1 - h.b2, h.alpha, h.eps, h.d)
                if k < tc.n:
                    _run(s, vb, r * rs, rs)
                start = r + 1
            dyn_ftz_end(csr)
            return
    _run(s, vb, 0, p.size)


cdef void _eg_rows(PState s, real* vb, long off, long n, long rowsize) noexcept:
    cdef ParamExpr p = s.p
    cdef long r
    for r in range(off, off + n, rowsize):
        eg_norm(vb + p.off + r, rowsize, s.hyper.c.d)


cdef int _param_step(PState s, bint sparse, real* vb) except -1:
    """step() in the pool's float type."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef Touch* tc
    cdef cnp.int64_t* last
    cdef int k, r
    if not p.is_lookup:
        _run(s, vb, 0, p.size)
        if h.rule == EG:
            _eg_rows(s, vb, 0, p.size, p.size)
        return 0
    tc = p.touch_ptr()
    if sparse and not tc.all:
        s._advance()
        last = s.lastp
        for k in range(tc.n):
            r = tc.rows[k]
            catch_row_r(s, r, s.tloc, vb)
            _run(s, vb, <long>r * p.rowsize, p.rowsize)
            if h.rule == EG:
                _eg_rows(s, vb, <long>r * p.rowsize, p.rowsize, p.rowsize)
            last[r] = s.tloc + 1
            tc.flag[r] = 0
        tc.n = 0
        s.tloc += 1
        return 0
    catch_all(s)
    s._advance()
    _run_dense_lookup(s, vb, tc)
    if h.rule == EG:
        _eg_rows(s, vb, 0, p.size, p.rowsize)
    s.tloc += 1
    s.base = s.tloc
    p.clear_touched()
    return 0


# ---------------------------------------------------------------- gradient norms

cdef double _grad_sq_norm(ParamExpr p, real* gb) noexcept:
    cdef Touch* t
    cdef int k
    cdef double s = 0
    cdef real* g = gb + p.off
    if p.is_lookup and not p.touch_ptr().all:
        t = p.touch_ptr()
        for k in range(t.n):
            s += _blas.nrm2sq(real_dtype(g), p.rowsize, g + <long>t.rows[k] * p.rowsize)
        return s
    return _blas.nrm2sq(real_dtype(g), p.size, g)


cdef bint _has_nonfinite_grad(ParamExpr p, real* gb) noexcept:
    cdef long k
    cdef real* g = gb + p.off
    for k in range(p.size):
        if not isfinite(g[k]):
            return True
    return False

# ---------------------------------------------------------------- the float type
# The one place this module chooses it: each entry point's float32 and float64 specialisations,
# indexed by the pool's dtype (0 float32, 1 float64).

ctypedef int (*step_fn)(PState s, bint sparse, void* vb) except -1
ctypedef double (*sq_norm_fn)(ParamExpr p, void* gb) noexcept
ctypedef bint (*nonfinite_fn)(ParamExpr p, void* gb) noexcept

ctypedef struct FloatOps:
    step_fn step
    sq_norm_fn grad_sq_norm
    nonfinite_fn has_nonfinite_grad

cdef FloatOps _OPS[2]
_OPS[0].step = <step_fn>_param_step[float]
_OPS[0].grad_sq_norm = <sq_norm_fn>_grad_sq_norm[float]
_OPS[0].has_nonfinite_grad = <nonfinite_fn>_has_nonfinite_grad[float]
_OPS[1].step = <step_fn>_param_step[double]
_OPS[1].grad_sq_norm = <sq_norm_fn>_grad_sq_norm[double]
_OPS[1].has_nonfinite_grad = <nonfinite_fn>_has_nonfinite_grad[double]


cdef inline FloatOps* _ops(Pool pool) noexcept:
    return &_OPS[pool.dtype]


def step(PState s, bint sparse):
    """One step of s's parameter from its gradient (consumed). A lookup table
    steps on its touched rows when sparse (and not used whole), else on all
    rows; idle rows are left to the catch-up."""
    cdef Pool pool = s.p.pool
    _ops(pool).step(s, sparse, pool.vb)


def grad_sq_norm(ParamExpr p):
    """Squared L2 norm of p's gradient (a lookup table not used whole: its
    touched rows, the only ones with a gradient). NaN/Inf propagate."""
    return _ops(p.pool).grad_sq_norm(p, p.pool.gb)


def has_nonfinite_grad(ParamExpr p):
    return _ops(p.pool).has_nonfinite_grad(p, p.pool.gb)
