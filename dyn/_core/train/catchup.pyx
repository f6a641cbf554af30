# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Optimizer state (Hyper: a rule's constants; PState: a parameter's state)
and the exact lazy catch-up of idle lookup rows (the steps: src/_k_train.pyx).

Most rules move a row whose gradient is zero: momentum keeps moving it, Adam
and AMSGrad move it by their decaying first moment, RMSProp/Adadelta/SMORMS3
decay their statistics, weight decay shrinks every value. Updating only the
touched rows (DyNet) is then not the rule. Here each table keeps, per row,
`last[r]`: the table step as of which the row is current. A row idle since
step t0 is brought to step t ("caught up") before anything reads it (the
hook in src/_expr.pyx) and before it takes its next step, by applying the
k = t - t0 zero-gradient steps in closed form:

* weight decay: DyNet's lazy global scale, per row. `L(t)` is the sum of
  log(1 - lambda) over steps 1..t, i.e. log of the global scale s_t (kept as
  segments of constant lambda and learning rate), and a row stored as of
  step t0 is worth stored * s_t / s_t0 now: k idle steps multiply it by
  D = exp(L(t) - L(t0)), O(1) however long k. Rows are always stored as real
  values, so parameter and lookup nodes stay zero-copy.
* momentum: v_j = mom^j v0, the value moves by v0 * sum_j mom^j W_j where
  W_j is the decay from step t0+j to t (a closed geometric sum).
* Adam: m_j = b1^j m0, v_j = b2^j v0; the value moves by
  -m0 * sum_j c_j b1^j / (sqrt(v0) b2^(j/2) + eps), c_j = the step's
  bias-corrected learning rate times W_j. The sum is expanded in a
  geometric series in eps/(sqrt(v0) b2^(j/2)) (or in its inverse where eps
  dominates): at most 20 terms (as many as the row needs for 1e-17), whose
  j-sums are scalars shared by every element of every row idle over the
  same interval (cached per table; closed geometric forms once the bias
  correction has reached 1.0 in double, a loop over j before). Elements
  between the two regimes (sqrt(v0) within ~8x of eps) are replayed step
  by step. Terms past K steps, where (b1/sqrt(b2))^K < 1e-16, are dropped:
  the cost per row is bounded (K = 375 for the default betas) and the result
  equals the dense rule to ~1e-16 of one step, far below float32 precision.
* AMSGrad: vhat does not move (v only decays), so the sum is one scalar.
* RMSProp, Adadelta: statistics decay as rho^k; the value does not move.
* EG: h_j = mom^j h0; the per-step normalisations cancel, so k steps are
  one normalisation of x * exp(h0 * sum_j mom^j).
* SMORMS3: the value does not move; (g, g2, mem) follow a nonlinear
  recurrence with no closed form. The first 512 idle steps are replayed
  exactly; past them the recurrence is integrated as an ODE (its modified
  equation, RK4 with steps of mem/16: O(log k) work), which keeps the state
  to ~3e-7 relative (measured against the exact recurrence).
* SGD, Adagrad: nothing but weight decay moves an idle row.

With exact off (DyNet's behaviour) idle rows only get the weight decay.
"""
from libc.math cimport sqrt, exp, expm1, log, pow, ceil
cimport numpy as cnp
import numpy as np
from dyn._core.core.expr cimport ParamExpr

cnp.import_array()

cdef extern from "_fastopt.h" nogil:
    double dyn_dot_f64(const double* a, const double* b, long n)
    void dyn_adam_catchup_range_f32(const float* v, const float* m, int n, double thrA, double thrB,
                                    double* minA, double* maxB)
    int dyn_adam_catchup_a_f32(const float* v, const float* m, int n, const double* S, int nS, double eps,
                               double thrA, double* acc)
    void dyn_adam_catchup_apply_f32(float* w, float* m, float* v, int n, const double* acc, double D,
                                    double P1, double P2)

cdef enum:
    PW_MAX = 4096    # K up to which Adam's interval sums are dot products with a powers table

cdef enum:
    SMORMS3_EXACT = 512  # SMORMS3 idle steps replayed exactly
    KMAX = 1 << 20

RULES = {"sgd": SGD, "momentum": MOMENTUM, "adagrad": ADAGRAD, "adadelta": ADADELTA,
         "rmsprop": RMSPROP, "adam": ADAM, "amsgrad": AMSGRAD, "eg": EG, "smorms3": SMORMS3}
NSTATE = {SGD: 0, MOMENTUM: 1, ADAGRAD: 1, ADADELTA: 2, RMSPROP: 1, ADAM: 2, AMSGRAD: 3,
          EG: 1, SMORMS3: 3}


cdef inline bint _moves_idle(int rule) noexcept:
    return rule != SGD and rule != ADAGRAD


cdef inline bint _needs_lr(int rule) noexcept:
    return rule == ADAM or rule == AMSGRAD


cdef class Hyper:
    """A rule and its constants, shared by the states of one trainer."""

    def __init__(self, str rule, double lr, double mom=0.0, double eps=0.0, double rho=0.0,
                 double beta_1=0.0, double beta_2=0.0):
        self.c.rule = RULES[rule]
        self.c.lr, self.c.mom, self.c.eps, self.c.rho = lr, mom, eps, rho
        self.c.b1, self.c.b2 = beta_1, beta_2
        self.c.l2 = 0.0
        self.c.exact = 1
        self.c.gscale = self.c.d = 1.0
        cdef double q = 0.0
        cdef int n
        for n in range(NSER):
            self.c.rr[n] = beta_1 / pow(sqrt(beta_2), n + 1) if beta_2 > 0 else 0.0
            self.c.ru[n] = beta_1 * pow(sqrt(beta_2), n)
        if self.c.rule == MOMENTUM or self.c.rule == EG:
            q = mom
        elif self.c.rule == ADAM:
            q = beta_1 / sqrt(beta_2) if beta_1 < sqrt(beta_2) else beta_1
        elif self.c.rule == AMSGRAD:
            q = beta_1
        self.nbias = 0
        self.gsat = 0
        if _needs_lr(self.c.rule):
            # b^g < 2^-60 for both betas: the correction rounds to 1
            self.gsat = <long>ceil(max(-60 * log(2.0) / log(beta_2) if 0 < beta_2 < 1 else 0.0,
                                       -60 * log(2.0) / log(beta_1) if 0 < beta_1 < 1 else 0.0)) + 1
        if q <= 0:
            self.c.K = 0
        elif q >= 1:
            self.c.K = KMAX
        else:
            self.c.K = <int>min(<double>KMAX, ceil(log(1e-16 * (1 - q)) / log(q)) + 1)

    property lr:
        def __get__(self):
            return self.c.lr

        def __set__(self, double v):
            self.c.lr = v

    property l2:
        def __get__(self):
            return self.c.l2

        def __set__(self, double v):
            self.c.l2 = v

    property exact:
        def __get__(self):
            return bool(self.c.exact)

        def __set__(self, bint v):
            self.c.exact = v

    @property
    def K(self):
        return self.c.K

    cdef _bias_upto(self, long g):
        """Make the bias table cover steps < min(g, gsat)."""
        if g > self.gsat:
            g = self.gsat
        if g <= self.nbias:
            return
        n = max(g, 2 * self.nbias, 1024)
        n = min(n, self.gsat)
        steps = np.arange(n, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            tab = np.sqrt(1 - self.c.b2 ** steps) / (1 - self.c.b1 ** steps)
        tab[0] = 0.0
        self.bias = np.ascontiguousarray(tab)
        self.biasp = <double*>cnp.PyArray_DATA(self.bias)
        self.nbias = n

    cdef double* _powers(self) except NULL:
        """The table pw[r, j - 1] = q_r^j, j = 1..K, for q_0 = b1, q_1+n = rr[n],
        q_1+NSER+n = ru[n] (each power by repeated products, as the loop over j
        forms them), and a K-double scratch for the c_j."""
        cdef int r, j, K = self.c.K
        cdef double q, p
        cdef double* row
        if self.pwp == NULL:
            self.pw = np.zeros((1 + 2 * NSER, K))
            self.cbuf = np.zeros(K)
            self.pwp = <double*>cnp.PyArray_DATA(self.pw)
            self.cbufp = <double*>cnp.PyArray_DATA(self.cbuf)
            for r in range(1 + 2 * NSER):
                q = self.c.b1 if r == 0 else (self.c.rr[r - 1] if r <= NSER else self.c.ru[r - 1 - NSER])
                row = self.pwp + <long>r * K
                p = 1.0
                for j in range(K):
                    p *= q
                    row[j] = p
        return self.pwp

    def begin_step(self, long gstep, double lam, double gscale):
        """Constants of step number gstep (1-based): decay 1 - lam, clip scale."""
        self.c.gstep = gstep
        self.c.gscale = gscale
        self.c.d = 1.0 - lam
        self.c.alpha = self.c.lr
        if _needs_lr(self.c.rule):
            self.c.alpha = self.c.lr * sqrt(1 - pow(self.c.b2, gstep)) / (1 - pow(self.c.b1, gstep))


# ---------------------------------------------------------------- per-parameter state

cdef class PState:
    """A parameter's optimizer state: arrays of the pool's float type, and for
    a lookup table its clock (tloc), per-row last-current step and the
    schedule of (lr, decay) the catch-up needs."""

    def __init__(self, ParamExpr p, Hyper hyper):
        cdef int i
        self.p, self.hyper = p, hyper
        dt = p.pool.values.dtype
        self.arrays = [np.zeros(p.size, dt) for _ in range(NSTATE[hyper.c.rule])]
        if hyper.c.rule == SMORMS3:
            self.arrays[2][:] = 1.0           # mem starts at 1
        self.base = self.tloc = self.ver = 0
        self.nseg = 0
        self.decays = False
        self.segs = np.zeros((4, 5))
        self.sk0 = -1
        if p.is_lookup:
            self.last = np.zeros(p.nrows, np.int64)
            self.lastp = <cnp.int64_t*>cnp.PyArray_DATA(self.last)
        for i in range(3):
            self.sp[i] = <char*>cnp.PyArray_DATA(self.arrays[i]) if i < len(self.arrays) else NULL
        self._reset_cache()

    cdef _reset_cache(self):
        cdef int i
        self.ver += 1
        for i in range(NCACHE):
            self.cache[i].t0 = -1
        self.sk0 = -1

    def zero(self):
        """Restart: zero the statistics (SMORMS3's mem back to 1)."""
        for a in self.arrays:
            a[:] = 0
        if self.hyper.c.rule == SMORMS3:
            self.arrays[2][:] = 1.0
        self._reset_cache()

    def install(self):
        """Make reads of this table call our catch-up first."""
        if self.p.catch_up != NULL and self.p.catch_up_state is not self:
            self.p.catch_up(self.p.catch_up_state, NULL, -1)   # flush the previous trainer's rows
        self.p.catch_up = _hook
        self.p.catch_up_state = self

    def adopt_arrays(self, arrays):
        """Keep the state in the given arrays (e.g. shared memory, for
        dyn.parallel's asynchronous workers); the current contents are copied."""
        if len(arrays) != len(self.arrays):
            raise ValueError("PState.adopt_arrays: %d arrays for %d" % (len(arrays), len(self.arrays)))
        for a, old in zip(arrays, self.arrays):
            if not isinstance(a, np.ndarray) or a.shape != old.shape or a.dtype != old.dtype \
                    or not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError("PState.adopt_arrays: need writable contiguous %s arrays of shape %r"
                                 % (old.dtype, old.shape))
        cdef int i
        for a, old in zip(arrays, self.arrays):
            a[:] = old
        self.arrays = list(arrays)
        for i in range(3):
            self.sp[i] = <char*>cnp.PyArray_DATA(self.arrays[i]) if i < len(self.arrays) else NULL

    def flush(self):
        """Bring every row of a table up to date."""
        if self.p.is_lookup:
            catch_all(self)

    def set_schedule(self, segs, long base, long tloc):
        self.segs = np.array(segs, dtype=np.float64).reshape(-1, 5)
        self.nseg = len(self.segs)
        if self.nseg == 0:
            self.segs = np.zeros((4, 5))
        self.decays = bool(self.nseg and np.any(self.segs[:self.nseg, 2] != 0))
        self.base, self.tloc = base, tloc
        self._reset_cache()

    cdef double* _seg(self) noexcept:
        return <double*>cnp.PyArray_DATA(self.segs)

    cdef _advance(self):
        """Record the constants of table step tloc + 1 (a new segment when they change)."""
        cdef HP* h = &self.hyper.c
        cdef double lr = h.lr if _needs_lr(h.rule) else 0.0
        cdef double logd = log(h.d) if h.d != 1.0 else 0.0
        cdef double off = <double>(h.gstep - self.tloc - 1) if _needs_lr(h.rule) else 0.0
        cdef double* s
        if self.nseg:
            s = self._seg() + 5 * (self.nseg - 1)
            if s[1] == lr and s[2] == logd and s[3] == off:
                return
        if self.nseg == len(self.segs):
            self.segs = np.concatenate([self.segs, np.zeros_like(self.segs)])
        cdef double L0 = _L(self, self.tloc)
        s = self._seg() + 5 * self.nseg
        s[0], s[1], s[2], s[3], s[4] = self.tloc + 1, lr, logd, off, L0
        self.nseg += 1
        if logd != 0:
            self.decays = True


cdef int _seg_of(PState s, long tau) noexcept:
    """Index of the segment holding table step tau (>= 1), -1 before the first."""
    cdef double* sg = s._seg()
    cdef int lo = 0, hi = s.nseg - 1, mid
    if s.nseg == 0 or tau < <long>sg[0]:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if <long>sg[5 * mid] <= tau:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef double _L(PState s, long tau) noexcept:
    """Sum of log(1 - lambda) over table steps 1..tau."""
    cdef int i = _seg_of(s, tau)
    cdef double* sg
    if i < 0:
        return 0.0
    sg = s._seg() + 5 * i
    return sg[4] + (tau - <long>sg[0] + 1) * sg[2]


# ---------------------------------------------------------------- catch-up of idle rows

cdef double _geo(double rho, long J) noexcept:
    """sum_{j=1..J} rho^j (rho > 0), accurate for rho near 1."""
    cdef double lr
    if rho == 1.0:
        return <double>J
    lr = log(rho)
    return rho * expm1(J * lr) / expm1(lr)


cdef Coef* _coef(PState s, long t0, long t, int nS, int nR, double* buf, Coef* into) except NULL:
    """Scalars of the interval (t0, t] (Adam: the first nS, nR terms of its
    two series), cached per table. With buf (and `into` instead of the cache),
    c_j b1^j and b2^(j/2) for the step-by-step replay (buf[0:J], buf[J:2J]).
    Closed geometric forms when the J steps share one segment and a
    saturated bias correction, else a loop over j."""
    cdef Coef* c = into if into != NULL else &s.cache[t0 % NCACHE]
    cdef Hyper H = s.hyper
    cdef HP* h = &H.c
    if into == NULL and c.t0 == t0 and c.t == t and c.ver == s.ver and c.nS >= nS and c.nR >= nR:
        return c
    cdef long k = t - t0, tau, g = 0
    cdef int j, n, i, i0, J = <int>(k if k < h.K else h.K)
    cdef double Lt = _L(s, t), W = 1.0, Wt = 1.0, d = 1.0, cj, lr = 0.0, pb1 = 1.0, sq2 = sqrt(h.b2), A = 0.0
    cdef double pr[NSER]
    cdef double pu[NSER]
    cdef double S[NSER]
    cdef double R[NSER]
    cdef double* rr = h.rr
    cdef double* ru = h.ru
    cdef double* sg
    cdef double* pw
    c.t0, c.t, c.ver, c.J, c.nS, c.nR = t0, t, s.ver, J, nS, nR
    c.D = exp(Lt - _L(s, t0)) if s.decays else 1.0
    c.dlast = exp(Lt - _L(s, t - 1)) if s.decays else 1.0
    c.A = 0.0
    c.P1 = c.P2 = 1.0
    if h.rule == EG:
        c.P1 = pow(h.mom, k)
        c.A = _geo(h.mom, k) if h.mom > 0 else 0.0
        return c
    if h.rule == RMSPROP or h.rule == ADADELTA:
        c.P1 = pow(h.rho, k)
        return c
    if h.rule != MOMENTUM and h.rule != ADAM and h.rule != AMSGRAD:
        return c
    # the steps t0+1 .. t0+J: one segment? (then their decay is d per step)
    i0 = _seg_of(s, t0 + 1)
    sg = s._seg() + 5 * i0
    if _seg_of(s, t) == i0:
        J = <int>k if h.rule == MOMENTUM else J     # momentum: the exact sum, no truncation
        c.J = J
    if s.decays:
        Wt = exp(Lt - _L(s, t0 + J))                 # decay of the steps after t0 + J
        d = exp(sg[2])
    if h.rule == MOMENTUM:
        c.P1 = pow(h.mom, k)
        if _seg_of(s, t0 + J) == i0 and h.mom > 0:
            c.A = Wt * pow(d, J + 1) * _geo(h.mom / d, J)
            return c
        for j in range(1, J + 1):
            pb1 *= h.mom
            if s.decays:
                W = exp(Lt - _L(s, t0 + j - 1))
            c.A += pb1 * W
        return c
    c.P1, c.P2 = pow(h.b1, k), pow(h.b2, k)
    c.thrA = 8 * h.eps / pow(sq2, J)
    c.thrB = h.eps / (8 * sq2)
    if J == 0:
        return c
    g = t0 + 1 + <long>sg[3]
    if buf == NULL and _seg_of(s, t0 + J) == i0 and g >= H.gsat:
        # c_j = lr * Wt * d^(J-j+1): every sum is geometric
        lr = sg[1] * Wt * pow(d, J + 1)
        c.A = lr * _geo(h.b1 / d, J) if h.b1 > 0 else 0.0
        for n in range(nS):
            c.S[n] = lr * _geo(rr[n] / d, J)
        for n in range(nR):
            c.R[n] = lr * _geo(ru[n] / d, J)
        return c
    if buf == NULL and not s.decays and h.K <= PW_MAX and _seg_of(s, t0 + J) == i0:
        # one segment, no decay: c_j = lr * bias(t0 + j + off), and every sum is a dot
        # product of the c_j with a row of powers (the loop below, vectorised)
        pw = H._powers()
        g = <long>sg[3]
        H._bias_upto(t0 + J + g + 1)
        for j in range(J):
            tau = t0 + 1 + j + g
            H.cbufp[j] = sg[1] * (H.biasp[tau] if tau < H.nbias else 1.0)
        c.A = dyn_dot_f64(H.cbufp, pw, J)
        for n in range(nS):
            c.S[n] = dyn_dot_f64(H.cbufp, pw + <long>(1 + n) * h.K, J)
        for n in range(nR):
            c.R[n] = dyn_dot_f64(H.cbufp, pw + <long>(1 + NSER + n) * h.K, J)
        return c
    H._bias_upto(t0 + J + <long>s._seg()[5 * (s.nseg - 1) + 3] + 1)
    for n in range(NSER):
        S[n] = R[n] = 0.0
        pr[n] = pu[n] = 1.0
    i = -1
    for j in range(1, J + 1):
        tau = t0 + j
        if i < 0 or (i + 1 < s.nseg and <long>s._seg()[5 * (i + 1)] <= tau):
            i = _seg_of(s, tau)
            sg = s._seg() + 5 * i
        g = tau + <long>sg[3]
        if s.decays:
            W = exp(Lt - _L(s, tau - 1))
        cj = sg[1] * (H.biasp[g] if g < H.nbias else 1.0) * W
        pb1 *= h.b1
        A += cj * pb1
        for n in range(nS):
            pr[n] *= rr[n]
            S[n] += cj * pr[n]
        for n in range(nR):
            pu[n] *= ru[n]
            R[n] += cj * pu[n]
        if buf != NULL:
            buf[j - 1] = cj * pb1
            buf[J + j - 1] = pow(sq2, j)
    c.A = A
    for n in range(NSER):
        c.S[n], c.R[n] = S[n], R[n]
    return c


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


cdef void _series_terms(HP* h, real* v, real* m, int n, long k, int* nS, int* nR) noexcept:
    """Terms of Adam's two catch-up series this row needs for 1e-17: the
    largest ratio of each series over the row's elements fixes the count."""
    cdef int i, J = <int>(k if k < h.K else h.K)
    cdef double sq2 = sqrt(h.b2), bJ = pow(sq2, J), thrA = 8 * h.eps / bJ, thrB = h.eps / (8 * sq2)
    cdef double a0, lo = 1e300, hi = -1.0
    if real is float:      # one vector pass
        dyn_adam_catchup_range_f32(v, m, n, thrA, thrB, &lo, &hi)
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


cdef int _adam_row_f32(PState s, Coef* c, float* w, float* s0, float* s1, int n, long t0, long t) except -1:
    """_catch_row_t's Adam case for a float32 row in vector passes: series A for
    every element it covers (src/_fastopt.h, the arithmetic of _adam_idle_sum),
    _adam_idle_sum for the rest, then one pass applying the sums."""
    cdef HP* h = &s.hyper.c
    cdef double acc[CATCH_VEC]
    cdef double* buf = NULL
    cdef double a0
    cdef int i, rest
    if c.J > 0:
        rest = dyn_adam_catchup_a_f32(s1, s0, n, c.S, c.nS, h.eps, c.thrA, acc)
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
    if h.exact and h.rule == ADAM:
        _series_terms(h, s1, s0, n, k, &nS, &nR)
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
            if n <= CATCH_VEC:
                return _adam_row_f32(s, c, w, s0, s1, n, t0, t)
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


cdef double* _replay_buf(PState s, long t0, long t, int J) except NULL:
    cdef Coef tmp
    if s.sk0 != t0 or s.sk1 != t or s.skv != s.ver:
        if s.scratch is None or len(s.scratch) < 2 * J:
            s.scratch = np.zeros(2 * J)
        _coef(s, t0, t, 0, 0, <double*>cnp.PyArray_DATA(s.scratch), &tmp)
        s.sk0, s.sk1, s.skv = t0, t, s.ver
    return <double*>cnp.PyArray_DATA(s.scratch)


cdef int catch_row_r(PState s, int r, long t, real* vb) except -1:
    """Row r brought up to step t (vb: the pool's values, of the pool's float type)."""
    cdef cnp.int64_t* last = s.lastp
    cdef long t0 = last[r] if last[r] > s.base else s.base
    cdef ParamExpr p = s.p
    cdef long off = <long>r * p.rowsize
    if t0 >= t:
        return 0
    _catch_row_t(s, vb + p.off + off, state_at(<real*>s.sp[0], off), state_at(<real*>s.sp[1], off),
                 state_at(<real*>s.sp[2], off), p.rowsize, t0, t)
    last[r] = t
    return 0


# The float type is chosen here, once per call, from the pool's: catch_row_r's specialisations by dtype.
ctypedef int (*catch_fn)(PState s, int r, long t, void* vb) except -1
cdef catch_fn _CATCH[2]
_CATCH[0] = <catch_fn>catch_row_r[float]
_CATCH[1] = <catch_fn>catch_row_r[double]


cdef int catch_row(PState s, int r, long t) except -1:
    return _CATCH[s.p.pool.dtype](s, r, t, s.p.pool.vb)


cdef inline bint _idle_work(PState s) noexcept:
    return (s.hyper.c.exact and _moves_idle(s.hyper.c.rule)) or s.decays


cdef int catch_all(PState s) except -1:
    cdef int r
    cdef double* sg
    if s.base >= s.tloc:
        return 0
    if _idle_work(s):
        for r in range(s.p.nrows):
            catch_row(s, r, s.tloc)
    s.base = s.tloc
    if s.nseg > 1:  # every row is current: later catch-ups need the last segment only
        sg = s._seg()
        sg[0], sg[1], sg[2], sg[3], sg[4] = sg[5 * s.nseg - 5], sg[5 * s.nseg - 4], sg[5 * s.nseg - 3], \
            sg[5 * s.nseg - 2], sg[5 * s.nseg - 1]
        s.nseg = 1
    return 0


cdef int _hook(object state, const int* rows, int n) except -1:
    cdef PState s = <PState>state
    cdef int k
    if n < 0:
        return catch_all(s)
    if _idle_work(s):
        for k in range(n):
            catch_row(s, rows[k], s.tloc)
    return 0
