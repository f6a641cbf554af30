# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The CPU's optimizer loops over the parameter pool: the update rules' step, the catch-up of
idle lookup rows, the gradient norms. Fused over `real`, the pool's float type, and registered
at import in the table of dyn/_core/train/catchup.pxd, through which dyn/_core/train/update.pyx
and dyn/_core/train/catchup.pyx (the entry points, the schedules, the bookkeeping of touched
and current rows; the closed forms are described there) reach them.
"""
from libc.math cimport isfinite, sqrt, exp, log, pow, ceil
from libc.string cimport memset
from libc.stdlib cimport qsort
cimport numpy as cnp
from dyn._core.core.expr cimport ParamExpr
from dyn._core.core.graph cimport Touch, DEV_CPU, LowRank
from dyn._core.cpu cimport blas as _blas
from dyn._core.core.types cimport real, real_dtype
from dyn._core.train.catchup cimport (
    HP, Coef, PState, state_at, _moves_idle, _coef, _replay_buf, OptKernels, set_opt_kernels,
    run_fn, dense_lookup_fn, eg_rows_fn, catch_fn, sq_norm_fn, nonfinite_fn,
    SGD, MOMENTUM, ADAGRAD, ADADELTA, RMSPROP, ADAM, AMSGRAD, EG, SMORMS3, NSER)

cnp.import_array()

cdef extern from "_fastopt.h" nogil:
    void dyn_adam_f32(float* w, float* g, float* m, float* v, long n, float gs, float l2, float c1,
                      float c2, float alpha, float eps, float d)
    unsigned dyn_ftz_begin()
    void dyn_ftz_end(unsigned old)
    void dyn_adam_f32_nograd(float* w, float* m, float* v, long n, float l2, float c1, float c2,
                             float alpha, float eps, float d)
    int dyn_adam_still
    int dyn_adam_plain_on
    void dyn_adam_catchup_range_f32(const float* v, const float* m, int n, double thrA, double thrB,
                                    double* minA, double* maxB, double* a0)
    int dyn_adam_catchup_a_f32(const float* m, int n, const double* S, int nS, double eps, double thrA,
                               double* acc)
    void dyn_adam_catchup_apply_f32(float* w, float* m, float* v, int n, const double* acc, double D,
                                    double P1, double P2)

def _set_adam_plain(bint on):
    """Measurement and test hook: the dense Adam loop without gs, L2 and weight decay's factor where
    they are 1, 0 and 1 (_fastopt.h, dyn_adam_plain) on (the default) or off; returns the previous
    setting. (blas._set_adam_plain switches the held-back step's.)"""
    global dyn_adam_plain_on
    cdef bint old = dyn_adam_plain_on
    dyn_adam_plain_on = 1 if on else 0
    return old


def _set_adam_still(bint on):
    """Measurement and test hook: the dense float32 Adam step's shortcut for untouched lookup
    elements whose first moment is zero (_fastopt.h, dyn_adam_f32_nograd) on (the default) or
    off; returns the previous setting."""
    global dyn_adam_still
    cdef bint old = dyn_adam_still
    dyn_adam_still = 1 if on else 0
    return old


cdef enum:
    SMORMS3_EXACT = 512  # SMORMS3 idle steps replayed exactly


cdef inline void eg_norm(real* w, long n, double d) noexcept:
    """w holds log x + h: w = d * exp(w - logsumexp(w))."""
    cdef long i
    cdef double mx = w[0], z = 0
    for i in range(n):
        if w[i] > mx:
            mx = w[i]
    for i in range(n):
        z += exp(w[i] - mx)
    mx += log(z)
    for i in range(n):
        w[i] = d * exp(w[i] - mx)

# ---------------------------------------------------------------- one step of a rule

cdef inline double _grad(double g, double gs, double l2, double w) noexcept nogil:
    """A step's gradient: g gs, plus l2 w with L2 regularisation (none without: an infinite weight
    does not make it NaN through 0 w)."""
    return g * gs + l2 * w if l2 != 0 else g * gs


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
            gi = _grad(g[i], gs, l2, w[i])
            w[i] = (w[i] - lr * gi) * d
    elif h.rule == MOMENTUM:
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
            v = mom * s0[i] - lr * gi
            s0[i] = v
            w[i] = (w[i] + v) * d
    elif h.rule == ADAGRAD:
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
            v = s0[i] + gi * gi
            s0[i] = v
            w[i] = (w[i] - lr * gi / sqrt(v + eps)) * d
    elif h.rule == ADADELTA:
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
            v = rho * s0[i] + (1 - rho) * gi * gi
            s0[i] = v
            m = -gi * sqrt(s1[i] + eps) / sqrt(v + eps)
            s1[i] = rho * s1[i] + (1 - rho) * m * m
            w[i] = (w[i] + m) * d
    elif h.rule == RMSPROP:
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
            v = rho * s0[i] + (1 - rho) * gi * gi
            s0[i] = v
            w[i] = (w[i] - lr * gi / sqrt(v + eps)) * d
    elif h.rule == ADAM:
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
            m = b1 * s0[i] + (1 - b1) * gi
            v = b2 * s1[i] + (1 - b2) * gi * gi
            s0[i] = m
            s1[i] = v
            w[i] = (w[i] - alpha * m / (sqrt(v) + eps)) * d
    elif h.rule == AMSGRAD:
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
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
            gi = _grad(g[i], gs, l2, w[i])
            v = mom * s0[i] - lr * gi
            s0[i] = v
            w[i] = log(w[i]) + v
    else:  # SMORMS3 (Simon Funk)
        for i in range(n):
            gi = _grad(g[i], gs, l2, w[i])
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
    cdef unsigned csr = dyn_ftz_begin()     # denormals flushed (see _fastopt.h)
    if real is float and h.rule == ADAM:    # the hot case: one vector pass (_fastopt.h)
        dyn_adam_f32(w, g, state_at(<real*>s.sp[0], off), state_at(<real*>s.sp[1], off), n, h.gscale, h.l2,
                     1 - h.b1, 1 - h.b2, h.alpha, h.eps, h.d)
    else:
        _step(h, w, g, state_at(<real*>s.sp[0], off), state_at(<real*>s.sp[1], off),
              state_at(<real*>s.sp[2], off), n)
    dyn_ftz_end(csr)


cdef bint _run_lowrank(PState s, void* vb, LowRank* R) noexcept:
    """A float32 Adam step whose gradient is R's held-back product, computed block by block as the
    step goes (blas.adam_lowrank): the weights and moments come out as K.run would leave them."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef unsigned csr
    cdef bint ok
    if h.rule != ADAM:
        return False
    csr = dyn_ftz_begin()
    ok = _blas.adam_lowrank(R.m, R.n, R.k, R.A, R.lda, R.B, R.ldb, <float*>R.C, <float*>vb + p.off,
                            state_at(<float*>s.sp[0], 0), state_at(<float*>s.sp[1], 0), h.gscale, h.l2,
                            1 - h.b1, 1 - h.b2, h.alpha, h.eps, h.d)
    dyn_ftz_end(csr)
    return ok


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

# ---------------------------------------------------------------- catch-up of idle rows


cdef void _smorms3_idle(double* gm, double* g2, double* M, long k, double eps) noexcept:
    """k zero-gradient SMORMS3 steps of one element's (g, g2, mem)."""
    cdef long i, n = k if k < SMORMS3_EXACT else SMORMS3_EXACT
    cdef double r, a, a0, lp = 0.0, h, rem, y[2]
    cdef double k1[2]
    cdef double k2[2]
    cdef double k3[2]
    cdef double k4[2]
    for i in range(n):
        r = 1.0 / (M[0] + 1)
        gm[0] *= 1 - r
        g2[0] *= 1 - r
        a = gm[0] * gm[0] / (g2[0] + eps)
        M[0] = 1 + M[0] * (1 - a)
    if k <= n:
        return
    # the rest as the ODE in (mem, log P) whose unit-time flow is one step
    # (modified equation to first order); g and g2 both scale by P.
    a0 = gm[0] * gm[0] / g2[0] if g2[0] > 0 else 0.0
    rem = <double>(k - n)
    y[0], y[1] = M[0], 0.0
    while rem > 0:
        h = y[0] / 16
        if h > rem:
            h = rem
        _smorms3_field(y[0], y[1], a0, k1)
        _smorms3_field(y[0] + h / 2 * k1[0], y[1] + h / 2 * k1[1], a0, k2)
        _smorms3_field(y[0] + h / 2 * k2[0], y[1] + h / 2 * k2[1], a0, k3)
        _smorms3_field(y[0] + h * k3[0], y[1] + h * k3[1], a0, k4)
        y[0] += h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y[1] += h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        rem -= h
    M[0] = y[0]
    gm[0] *= exp(y[1])
    g2[0] *= exp(y[1])


cdef inline void _smorms3_field(double M, double lp, double a0, double* out) noexcept:
    # one step: P *= rho, mem = 1 + mem (1 - a0 P), rho = mem / (mem + 1);
    # G = F - (DF . F) / 2 makes the ODE's unit-time flow match the step.
    cdef double P = exp(lp), rho = M / (M + 1)
    cdef double F1 = 1 - a0 * P * M * rho, F2 = log(rho)
    cdef double D1 = -a0 * P * M * (M + 2) / ((M + 1) * (M + 1)) * F1 - a0 * P * M * rho * F2
    out[0] = F1 - 0.5 * D1
    out[1] = F2 - 0.5 * F1 / (M * (M + 1))


cdef void _series_terms(HP* h, real* v, real* m, int n, long k, int* nS, int* nR, double* roots) noexcept:
    """Terms of Adam's two catch-up series this row needs for 1e-17: the
    largest ratio of each series over the row's elements fixes the count. roots (float32 rows: n
    doubles, or NULL): every element's sqrt(v), for _adam_row_f32."""
    cdef int i, J = <int>(k if k < h.K else h.K)
    cdef double sq2 = sqrt(h.b2), bJ = pow(sq2, J), thrA = 8 * h.eps / bJ, thrB = h.eps / (8 * sq2)
    cdef double a0, lo = 1e300, hi = -1.0
    if real is float:      # one vector pass
        dyn_adam_catchup_range_f32(v, m, n, thrA, thrB, &lo, &hi, roots)
    else:
        for i in range(n):
            if m[i] == 0:
                continue
            a0 = sqrt(<double>v[i])
            if a0 >= thrA and a0 < lo:
                lo = a0
            elif a0 <= thrB and a0 > hi:
                hi = a0
        lo = lo if lo < 1e300 else -1.0
    # the largest ratio of series A is at the smallest sqrt(v), of series B at the largest
    nS[0] = _nterms(h.eps / (lo * bJ)) if lo >= 0 else 0
    nR[0] = _nterms(hi * sq2 / h.eps) if hi >= 0 else 0


cdef inline int _nterms(double x) noexcept:
    # x^n < 1e-17 (x <= 1/8 here)
    if x <= 1e-17:
        return 1
    cdef int n = <int>ceil(log(1e-17) / log(x))
    return n if n < NSER else NSER


cdef double _adam_idle_sum(PState s, Coef* c, double a0, long t0, long t, double** buf) except? -1:
    """The sum over the idle steps (t0, t] that moves an element by -m0 * sum
    (m0 != 0, c.J > 0; a0 = sqrt(v0)); *buf holds the replay's coefficients once
    an element needs them."""
    cdef double eps = s.hyper.c.eps, y, acc = 0.0
    cdef int j
    if a0 >= c.thrA:            # eps small next to sqrt(v): series in eps / sqrt(v)
        y = eps / a0
        acc = c.S[c.nS - 1]
        for j in range(c.nS - 2, -1, -1):
            acc = c.S[j] - y * acc
        return acc / a0
    if a0 <= c.thrB:            # sqrt(v) small next to eps: series in sqrt(v) / eps
        y = a0 / eps
        acc = c.R[c.nR - 1]
        for j in range(c.nR - 2, -1, -1):
            acc = c.R[j] - y * acc
        return acc / eps
    if buf[0] == NULL:          # in between: replay the J steps
        buf[0] = _replay_buf(s, t0, t, c.J)
    for j in range(c.J):
        acc += buf[0][j] / (a0 * buf[0][c.J + j] + eps)
    return acc


cdef enum:
    CATCH_VEC = 1024     # float32 rows up to this size take the vector passes (stack scratch)


cdef int _adam_row_f32(PState s, Coef* c, float* w, float* s0, float* s1, int n, long t0, long t,
                       double* acc) except -1:
    """_catch_row_t's Adam case for a float32 row in vector passes: series A for
    every element it covers (_fastopt.h, the arithmetic of _adam_idle_sum),
    _adam_idle_sum for the rest, then one pass applying the sums. acc: n doubles
    holding each element's sqrt(v) (_series_terms), overwritten with its sum."""
    cdef HP* h = &s.hyper.c
    cdef double* buf = NULL
    cdef double a0
    cdef int i, rest
    if c.J > 0:
        rest = dyn_adam_catchup_a_f32(s0, n, c.S, c.nS, h.eps, c.thrA, acc)
        for i in range(n if rest else 0):
            a0 = sqrt(<double>s1[i])
            if s0[i] != 0.0 and a0 < c.thrA:
                acc[i] = _adam_idle_sum(s, c, a0, t0, t, &buf)
    else:
        for i in range(n):
            acc[i] = 0.0
    dyn_adam_catchup_apply_f32(w, s0, s1, n, acc, c.D, c.P1, c.P2)
    return 0


cdef int _catch_row_t(PState s, real* w, real* s0, real* s1, real* s2, int n, long t0, long t) except -1:
    """Apply the t - t0 zero-gradient steps (t0, t] to one row."""
    cdef HP* h = &s.hyper.c
    cdef Coef* c
    cdef int i, nS = 0, nR = 0
    cdef long k = t - t0
    cdef double m0, acc, gm, g2, M
    cdef double* buf = NULL
    cdef double roots[CATCH_VEC]      # (a float32 row's sqrt(v), then its sums: _adam_row_f32)
    cdef bint vec = real is float and n <= CATCH_VEC
    if h.exact and h.rule == ADAM:
        _series_terms(h, s1, s0, n, k, &nS, &nR, roots if vec else NULL)
    c = _coef(s, t0, t, nS, nR, NULL, NULL)
    if not h.exact or not _moves_idle(h.rule):
        if c.D != 1.0:
            for i in range(n):
                w[i] *= c.D
        return 0
    if h.rule == MOMENTUM:
        for i in range(n):
            w[i] = w[i] * c.D + c.A * s0[i]
            s0[i] *= c.P1
    elif h.rule == RMSPROP or h.rule == ADADELTA:
        for i in range(n):
            w[i] *= c.D
            s0[i] *= c.P1
            if h.rule == ADADELTA:
                s1[i] *= c.P1
    elif h.rule == AMSGRAD:
        for i in range(n):
            w[i] = w[i] * c.D - s0[i] * c.A / (sqrt(s2[i]) + h.eps)
            s0[i] *= c.P1
            s1[i] *= c.P2
    elif h.rule == ADAM:
        if real is float:
            if vec:
                return _adam_row_f32(s, c, w, s0, s1, n, t0, t, roots)
        for i in range(n):
            m0 = s0[i]
            acc = _adam_idle_sum(s, c, sqrt(<double>s1[i]), t0, t, &buf) if m0 != 0.0 and c.J > 0 else 0.0
            w[i] = w[i] * c.D - m0 * acc
            s0[i] = m0 * c.P1
            s1[i] *= c.P2
    elif h.rule == EG:
        for i in range(n):
            w[i] = log(w[i]) + c.A * s0[i]
            s0[i] *= c.P1
        eg_norm(w, n, c.dlast)
    elif h.rule == SMORMS3:
        for i in range(n):
            w[i] *= c.D
            gm, g2, M = s0[i], s1[i], s2[i]
            _smorms3_idle(&gm, &g2, &M, k, h.eps)
            s0[i], s1[i], s2[i] = gm, g2, M
    return 0



cdef int _catch_row(PState s, real* vb, long off, long t0, long t) except -1:
    """The idle steps (t0, t] applied to the row at element offset off of s's table (vb: the
    pool's values, of the pool's float type)."""
    cdef ParamExpr p = s.p
    _catch_row_t(s, vb + p.off + off, state_at(<real*>s.sp[0], off), state_at(<real*>s.sp[1], off),
                 state_at(<real*>s.sp[2], off), p.rowsize, t0, t)
    return 0

# ---------------------------------------------------------------- the table (per float type)


cdef OptKernels _k
_k.run = <run_fn>_run[float]
_k.run_dense_lookup = <dense_lookup_fn>_run_dense_lookup[float]
_k.eg_rows = <eg_rows_fn>_eg_rows[float]
_k.catch_row = <catch_fn>_catch_row[float]
_k.grad_sq_norm = <sq_norm_fn>_grad_sq_norm[float]
_k.has_nonfinite_grad = <nonfinite_fn>_has_nonfinite_grad[float]
_k.run_lowrank = _run_lowrank
set_opt_kernels(DEV_CPU, 0, &_k)
_k.run_lowrank = NULL
_k.run = <run_fn>_run[double]
_k.run_dense_lookup = <dense_lookup_fn>_run_dense_lookup[double]
_k.eg_rows = <eg_rows_fn>_eg_rows[double]
_k.catch_row = <catch_fn>_catch_row[double]
_k.grad_sq_norm = <sq_norm_fn>_grad_sq_norm[double]
_k.has_nonfinite_grad = <nonfinite_fn>_has_nonfinite_grad[double]
set_opt_kernels(DEV_CPU, 1, &_k)
