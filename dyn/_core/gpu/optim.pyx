# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The GPU device's optimizer loops over the parameter pool: the update rules' step, EG's row
normalisation, the exact catch-up of idle lookup rows, the gradient norms. Registered at import
(dyn/_core/gpu/__init__.py load()) for both float types in the table of
dyn/_core/train/catchup.pxd; dyn/_core/train/update.pyx and dyn/_core/train/catchup.pyx reach
them through opt_kernels for a pool whose memory is not the host's.

Each entry is a C function that holds the GIL and runs array code (the backend's xp: cupy on a
GPU, numpy on the stand-in) over views of the pool (backend.wrap of its raw addresses) and of the
state arrays (PState.arrays, device arrays of the pool's device). The scalars of a catch-up
interval are the host's (catchup.pyx's _coef / _replay_buf, exactly as the CPU uses them); only
the per-element formulas run here. A sparse step does every touched row in one vectorised pass
(gather the rows, one rule step, scatter them back), and a catch-up does every row idle over the
same interval in one pass. The rule step runs in the pool's float type; the catch-up computes in
float64 (as the CPU's double arithmetic) and stores the pool's type.

Host synchronisation: the gradient norm and the NaN/Inf check return host values (one copy back
per parameter); an Adam catch-up reads three scalars back per interval (how many series terms
its rows need, whether any element needs the step-by-step replay); SMORMS3's long-idle catch-up
reads one flag per integration step.
"""
from libc.math cimport sqrt, pow, ceil, log
cimport numpy as cnp
import numpy as np
from dyn._core.core.expr cimport ParamExpr, Pool
from dyn._core.core.graph cimport Touch, DEV_GPU
from dyn._core.train.catchup cimport (
    HP, Coef, PState, _moves_idle, _coef, _replay_buf, OptKernels, set_opt_kernels, opt_error,
    SGD, MOMENTUM, ADAGRAD, ADADELTA, RMSPROP, ADAM, AMSGRAD, EG, SMORMS3, NSER)
import dyn._core.gpu as _gpu

cnp.import_array()

# IEEE results (inf, NaN) are meant, as the CPU's loops give them: the entries run under
# np.errstate(all="ignore") so numpy (the stand-in, and host code) does not warn; cupy never does.

cdef enum:
    SMORMS3_EXACT = 512       # SMORMS3 idle steps replayed exactly (as the CPU)
    REPLAY_BLOCK = 1 << 22    # Adam's replay: elements x steps per block of array code

# ---------------------------------------------------------------- views


cdef inline object _dt(ParamExpr p):
    return np.float32 if p.pool.dtype == 0 else np.float64


cdef object _view(object bk, ParamExpr p, char* base, long off, long n):
    """The n items of p's memory from element off (base: the pool's values or gradients)."""
    return bk.wrap(<size_t>(base + (p.off + off) * p.pool.itemsize), (n,), _dt(p))


cdef list _states(PState s, long off, long n):
    """Views of items [off, off + n) of s's state arrays, None where the rule has none."""
    st = [a[off:off + n] for a in s.arrays]
    while len(st) < 3:
        st.append(None)
    return st


cdef object _int_rows(const int* rows, int n):
    """A host int64 copy of rows[0:n]."""
    if n <= 0:
        return np.zeros(0, np.int64)
    return np.array(<int[:n]><int*>rows, dtype=np.int64)

# ---------------------------------------------------------------- one step of a rule


cdef _rule(HP* h, w, g, s0, s1, s2, bk):
    """The rule on arrays of one shape (views, or gathered rows), in place: gradient g * gscale
    (+ l2 * w), then decay; g is zeroed. EG leaves log x + h in w (_eg_norm finishes it).
    The CPU's _step (dyn/_core/cpu/optim.pyx), element for element, and as it in float64
    arithmetic with one rounding at the store for float32 (which also flushes denormal results
    to zero, as the CPU's step and cupy's -ftz=true kernels do: the stand-in flushes them here)."""
    xp = bk.xp
    if w.dtype != xp.float32:
        _rule64(h, w, g, s0, s1, s2, xp)
        g[...] = 0
        return
    f64 = xp.float64
    outs = [a for a in (w, s0, s1, s2) if a is not None]
    c = [a.astype(f64) for a in outs]
    c += [None] * (4 - len(c))
    _rule64(h, c[0], g.astype(f64), c[1], c[2], c[3], xp)
    tiny = float(np.finfo(np.float32).tiny)
    for a, b in zip(outs, c):
        if not bk.is_gpu:
            b = xp.where(xp.abs(b) < tiny, 0.0, b)
        a[...] = b
    g[...] = 0


cdef _rule64(HP* h, w, g, s0, s1, s2, xp):
    """_rule's arithmetic, in place on w and the states (g is read only)."""
    cdef int rule = h.rule
    cdef double d = h.d, lr = h.lr, eps = h.eps, mom = h.mom, rho = h.rho
    cdef double b1 = h.b1, b2 = h.b2, alpha = h.alpha
    gi = g * h.gscale + h.l2 * w if h.l2 != 0 else g * h.gscale   # (the CPU's _grad)
    if rule == SGD:
        w[...] = (w - lr * gi) * d
    elif rule == MOMENTUM:
        v = mom * s0 - lr * gi
        s0[...] = v
        w[...] = (w + v) * d
    elif rule == ADAGRAD:
        v = s0 + gi * gi
        s0[...] = v
        w[...] = (w - lr * gi / xp.sqrt(v + eps)) * d
    elif rule == ADADELTA:
        v = rho * s0 + (1 - rho) * gi * gi
        s0[...] = v
        m = -gi * xp.sqrt(s1 + eps) / xp.sqrt(v + eps)
        s1[...] = rho * s1 + (1 - rho) * m * m
        w[...] = (w + m) * d
    elif rule == RMSPROP:
        v = rho * s0 + (1 - rho) * gi * gi
        s0[...] = v
        w[...] = (w - lr * gi / xp.sqrt(v + eps)) * d
    elif rule == ADAM or rule == AMSGRAD:
        m = b1 * s0 + (1 - b1) * gi
        v = b2 * s1 + (1 - b2) * gi * gi
        s0[...] = m
        s1[...] = v
        if rule == AMSGRAD:
            v = xp.where(s2 > v, s2, v)      # the CPU's `if s2 > v` (a NaN v stays)
            s2[...] = v
        w[...] = (w - alpha * m / (xp.sqrt(v) + eps)) * d
    elif rule == EG:
        v = mom * s0 - lr * gi
        s0[...] = v
        w[...] = xp.log(w) + v
    else:  # SMORMS3
        r = 1.0 / (s2 + 1)
        m = (1 - r) * s0 + r * gi
        v = (1 - r) * s1 + r * gi * gi
        a = m * m / (v + eps)
        s0[...] = m
        s1[...] = v
        w[...] = (w - gi * xp.where(a < lr, a, lr) / (xp.sqrt(v) + eps)) * d
        s2[...] = 1 + s2 * (1 - a)


cdef _eg_norm(w2, double d, xp):
    """Rows of w2 (rows x rowsize, holding log x + h), in place: w = d * exp(w - logsumexp(w)),
    in float64 as the CPU."""
    w = w2.astype(xp.float64)
    mx = w.max(axis=1, keepdims=True)
    z = xp.exp(w - mx).sum(axis=1, keepdims=True)
    w2[...] = d * xp.exp(w - (mx + xp.log(z)))

# ---------------------------------------------------------------- the table's loops


cdef void _run(PState s, void* vb, long off, long n) noexcept:
    try:
        bk = _gpu.current()
        st = _states(s, off, n)
        with np.errstate(all="ignore"):
            _rule(&s.hyper.c, _view(bk, s.p, <char*>vb, off, n), _view(bk, s.p, s.p.pool.gb, off, n),
                  st[0], st[1], st[2], bk)
    except BaseException as e:
        opt_error(e)


cdef void _run_dense_lookup(PState s, void* vb, Touch* tc) noexcept:
    _run(s, vb, 0, s.p.size)


cdef void _eg_rows(PState s, void* vb, long off, long n, long rowsize) noexcept:
    try:
        bk = _gpu.current()
        with np.errstate(all="ignore"):
            _eg_norm(_view(bk, s.p, <char*>vb, off, n).reshape(n // rowsize, rowsize), s.hyper.c.d, bk.xp)
    except BaseException as e:
        opt_error(e)


cdef double _grad_sq_norm(ParamExpr p, void* gb) noexcept:
    cdef Touch* t
    try:
        bk = _gpu.current()
        xp = bk.xp
        g = _view(bk, p, <char*>gb, 0, p.size)
        if p.is_lookup and not p.touch_ptr().all:
            t = p.touch_ptr()
            if t.n == 0:
                return 0.0
            g = g.reshape(p.nrows, p.rowsize)[xp.asarray(_int_rows(t.rows, t.n))].ravel()
        g = g.astype(xp.float64)
        return float(xp.vdot(g, g))
    except BaseException as e:
        opt_error(e)
        return 0.0


cdef bint _has_nonfinite_grad(ParamExpr p, void* gb) noexcept:
    try:
        bk = _gpu.current()
        return not bool(bk.xp.isfinite(_view(bk, p, <char*>gb, 0, p.size)).all())
    except BaseException as e:
        opt_error(e)
        return False


cdef int _run_rows(PState s, void* vb, Touch* tc) except -1:
    with np.errstate(all="ignore"):
        _run_rows_q(s, vb, tc)
    return 0


cdef int _run_rows_q(PState s, void* vb, Touch* tc) except -1:
    """The sparse step of the touched rows: caught up to s.tloc, then one pass of the rule over
    the gathered rows (and EG's normalisation), scattered back; their gradients cleared."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef long nr = p.nrows, rs = p.rowsize
    if tc.n == 0:
        return 0
    rows = _int_rows(tc.rows, tc.n)
    if (h.exact and _moves_idle(h.rule)) or s.decays:
        _catch_rows_py(s, <char*>vb, rows, s.tloc)
    bk = _gpu.current()
    xp = bk.xp
    ridx = xp.asarray(rows)
    W = _view(bk, p, <char*>vb, 0, p.size).reshape(nr, rs)
    G = _view(bk, p, p.pool.gb, 0, p.size).reshape(nr, rs)
    S = [a.reshape(nr, rs) for a in s.arrays]
    w, g = W[ridx], G[ridx]
    st = [a[ridx] for a in S]
    while len(st) < 3:
        st.append(None)
    _rule(h, w, g, st[0], st[1], st[2], bk)
    if h.rule == EG:
        _eg_norm(w, h.d, xp)
    W[ridx] = w
    G[ridx] = 0
    for a, x in zip(S, st):
        a[ridx] = x
    return 0


cdef int _catch_row(PState s, void* vb, long off, long t0, long t) except -1:
    with np.errstate(all="ignore"):
        _catch_group(s, <char*>vb, np.array([off // s.p.rowsize], np.int64), t0, t)
    return 0


cdef int _catch_rows(PState s, void* vb, const int* rows, int n, long t) except -1:
    with np.errstate(all="ignore"):
        _catch_rows_py(s, <char*>vb, None if rows == NULL else _int_rows(rows, n), t)
    return 0

# ---------------------------------------------------------------- catch-up of idle rows


cdef _catch_rows_py(PState s, char* vb, rows, long t):
    """The rows (host int64; None: every row) brought to step t, each group of rows idle over
    the same interval in one pass; their last[r] = t."""
    cdef ParamExpr p = s.p
    last = s.last
    rows = np.arange(p.nrows, dtype=np.int64) if rows is None else np.unique(rows)
    if len(rows) == 0:
        return
    t0s = np.maximum(last[rows], s.base)
    keep = t0s < t
    rows, t0s = rows[keep], t0s[keep]
    if len(rows) == 0:
        return
    for t0 in np.unique(t0s):
        _catch_group(s, vb, rows[t0s == t0], <long>t0, t)
    last[rows] = t


cdef inline int _nterms(double x) noexcept:
    # x^n < 1e-17 (x <= 1/8 here): the CPU's count of series terms
    if x <= 1e-17:
        return 1
    cdef int n = <int>ceil(log(1e-17) / log(x))
    return n if n < NSER else NSER


cdef _catch_group(PState s, char* vb, rows, long t0, long t):
    """The t - t0 zero-gradient steps (t0, t] applied to the rows (host int64, distinct), all
    current as of t0: the CPU's _catch_row_t over every element of the rows at once."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef long nr = p.nrows, rs = p.rowsize, k = t - t0
    cdef int rule = h.rule, nS = 0, nR = 0, J, j, j0, j1, nb
    cdef double eps = h.eps, sq2, bJ, thrA, thrB, lo, hi
    cdef Coef c
    cdef double* buf
    bk = _gpu.current()
    xp = bk.xp
    f64 = xp.float64
    dt = _dt(p)
    full = len(rows) == nr
    ridx = slice(None) if full else xp.asarray(rows)
    W = _view(bk, p, vb, 0, p.size).reshape(nr, rs)
    S = [a.reshape(nr, rs) for a in s.arrays]
    if not h.exact or not _moves_idle(rule):
        c = _coef(s, t0, t, 0, 0, NULL, NULL)[0]
        if c.D != 1.0:
            W[ridx] = (W[ridx].astype(f64) * c.D).astype(dt)
        return
    w = W[ridx].astype(f64)
    st = [a[ridx].astype(f64) for a in S]
    if rule == ADAM:
        # how many terms of each series the rows need (as the CPU's _series_terms), and whether
        # any element sits between the two regimes: three scalars read back
        m, v = st[0], st[1]
        a0 = xp.sqrt(v)
        nz = m != 0
        J = <int>(k if k < h.K else h.K)
        sq2 = sqrt(h.b2)
        bJ = pow(sq2, J)
        thrA = 8 * eps / bJ
        thrB = eps / (8 * sq2)
        inA = nz & (a0 >= thrA)
        inB = nz & ~inA & (a0 <= thrB)
        mid = nz & ~inA & ~inB
        hs = bk.asnumpy(xp.stack([xp.min(xp.where(inA, a0, np.inf)), xp.max(xp.where(inB, a0, -1.0)),
                                  xp.sum(mid).astype(f64)]))
        lo = hs[0] if hs[0] < 1e300 else -1.0
        hi = hs[1]
        nS = _nterms(eps / (lo * bJ)) if lo >= 0 else 0
        nR = _nterms(hi * sq2 / eps) if hi >= 0 else 0
        c = _coef(s, t0, t, nS, nR, NULL, NULL)[0]
        acc = xp.zeros_like(w)
        if c.J > 0:
            if nS > 0:      # eps small next to sqrt(v): series in eps / sqrt(v)
                aA = xp.where(inA, a0, 1.0)
                y = eps / aA
                sA = c.S[nS - 1]
                for j in range(nS - 2, -1, -1):
                    sA = c.S[j] - y * sA
                acc = xp.where(inA, sA / aA, acc)
            if nR > 0:      # sqrt(v) small next to eps: series in sqrt(v) / eps
                y = xp.where(inB, a0, 0.0) / eps
                sB = c.R[nR - 1]
                for j in range(nR - 2, -1, -1):
                    sB = c.R[j] - y * sB
                acc = xp.where(inB, sB / eps, acc)
            if hs[2] > 0:   # in between: replay the J steps, in blocks of steps
                J = c.J
                buf = _replay_buf(s, t0, t, J)
                hb = np.array(<double[:2 * J]>buf)
                cb, sb = xp.asarray(hb[:J]), xp.asarray(hb[J:])
                at = xp.nonzero(mid.ravel())[0]
                am = a0.ravel()[at]
                tot = xp.zeros_like(am)
                nb = <int>max(1, REPLAY_BLOCK // max(1, <long>hs[2]))
                for j0 in range(0, J, nb):
                    j1 = min(J, j0 + nb)
                    tot += (cb[None, j0:j1] / (am[:, None] * sb[None, j0:j1] + eps)).sum(axis=1)
                acc = acc.ravel()
                acc[at] = tot
                acc = acc.reshape(w.shape)
        w = w * c.D - m * acc
        st[0] = m * c.P1
        st[1] = v * c.P2
    else:
        c = _coef(s, t0, t, 0, 0, NULL, NULL)[0]
        if rule == MOMENTUM:
            w = w * c.D + c.A * st[0]
            st[0] = st[0] * c.P1
        elif rule == RMSPROP or rule == ADADELTA:
            w = w * c.D
            st[0] = st[0] * c.P1
            if rule == ADADELTA:
                st[1] = st[1] * c.P1
        elif rule == AMSGRAD:
            w = w * c.D - st[0] * c.A / (xp.sqrt(st[2]) + eps)
            st[0] = st[0] * c.P1
            st[1] = st[1] * c.P2
        elif rule == EG:
            w = (xp.log(w) + c.A * st[0]).astype(dt)     # stored, as the CPU, then normalised
            st[0] = st[0] * c.P1
            _eg_norm(w, c.dlast, xp)
        elif rule == SMORMS3:
            w = w * c.D
            st[0], st[1], st[2] = _smorms3_idle(bk, st[0], st[1], st[2], k, eps)
    W[ridx] = w.astype(dt)
    for a, x in zip(S, st):
        a[ridx] = x.astype(dt)


cdef tuple _smorms3_idle(bk, gm, g2, M, long k, double eps):
    """k zero-gradient SMORMS3 steps of every element's (g, g2, mem) (float64 arrays): the
    first SMORMS3_EXACT replayed exactly, the rest integrated as the CPU's ODE (RK4, steps of
    mem/16 per element; the loop runs until every element's interval is done)."""
    xp = bk.xp
    cdef long i, n = k if k < SMORMS3_EXACT else SMORMS3_EXACT
    for i in range(n):
        r = 1.0 / (M + 1)
        gm = gm * (1 - r)
        g2 = g2 * (1 - r)
        a = gm * gm / (g2 + eps)
        M = 1 + M * (1 - a)
    if k <= n:
        return gm, g2, M
    pos = g2 > 0
    a0 = xp.where(pos, gm * gm / xp.where(pos, g2, 1.0), 0.0)
    rem = xp.full(M.shape, <double>(k - n))
    y0, y1 = M, xp.zeros_like(M)
    while True:
        act = rem > 0
        if not bool(act.any()):
            break
        h = y0 / 16
        h = xp.where(h > rem, rem, h)
        k1 = _smorms3_field(xp, y0, y1, a0)
        k2 = _smorms3_field(xp, y0 + h / 2 * k1[0], y1 + h / 2 * k1[1], a0)
        k3 = _smorms3_field(xp, y0 + h / 2 * k2[0], y1 + h / 2 * k2[1], a0)
        k4 = _smorms3_field(xp, y0 + h * k3[0], y1 + h * k3[1], a0)
        y0 = xp.where(act, y0 + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]), y0)
        y1 = xp.where(act, y1 + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]), y1)
        rem = xp.where(act, rem - h, rem)
    e = xp.exp(y1)
    return gm * e, g2 * e, y0


cdef tuple _smorms3_field(xp, M, lp, a0):
    # the CPU's _smorms3_field: the modified equation whose unit-time flow is one step
    P = xp.exp(lp)
    rho = M / (M + 1)
    F1 = 1 - a0 * P * M * rho
    F2 = xp.log(rho)
    D1 = -a0 * P * M * (M + 2) / ((M + 1) * (M + 1)) * F1 - a0 * P * M * rho * F2
    return F1 - 0.5 * D1, F2 - 0.5 * F1 / (M * (M + 1))

# ---------------------------------------------------------------- the table (both float types)


cdef OptKernels _k
_k.run = _run
_k.run_dense_lookup = _run_dense_lookup
_k.eg_rows = _eg_rows
_k.catch_row = _catch_row
_k.grad_sq_norm = _grad_sq_norm
_k.has_nonfinite_grad = _has_nonfinite_grad
_k.catch_rows = _catch_rows
_k.run_rows = _run_rows
set_opt_kernels(DEV_GPU, 0, &_k)
set_opt_kernels(DEV_GPU, 1, &_k)
