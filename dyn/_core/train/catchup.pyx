# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Optimizer state (Hyper: a rule's constants; PState: a parameter's state)
and the exact lazy catch-up of idle lookup rows (the steps: dyn/_core/train/update.pyx).
This module keeps the schedules, the per-interval coefficients and the bookkeeping of
which rows are current; the loops over parameter memory are a device's, reached through
the table opt_kernels reads (the CPU's: dyn/_core/cpu/optim.pyx).

Most rules move a row whose gradient is zero: momentum keeps moving it, Adam
and AMSGrad move it by their decaying first moment, RMSProp/Adadelta/SMORMS3
decay their statistics, weight decay shrinks every value. Updating only the
touched rows (DyNet) is then not the rule. Here each table keeps, per row,
`last[r]`: the table step as of which the row is current. A row idle since
step t0 is brought to step t ("caught up") before anything reads it (the
hook in dyn/_core/core/expr.pyx) and before it takes its next step, by applying the
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
from libc.stdlib cimport calloc, free, realloc
cimport numpy as cnp
import numpy as np
from dyn._core.core.expr cimport ParamExpr, Pool, array_ptr
from dyn._core.core.graph cimport DEV_CPU, DEV_GPU, NDEV, set_forward_prelude
from dyn._core.core import device as _device

cnp.import_array()

cdef extern from "_fastopt.h" nogil:
    double dyn_dot_f64(const double* a, const double* b, long n)

cdef enum:
    PW_MAX = 4096    # K up to which Adam's interval sums are dot products with a powers table

cdef enum:
    KMAX = 1 << 20

RULES = {"sgd": SGD, "momentum": MOMENTUM, "adagrad": ADAGRAD, "adadelta": ADADELTA,
         "rmsprop": RMSPROP, "adam": ADAM, "amsgrad": AMSGRAD, "eg": EG, "smorms3": SMORMS3}
NSTATE = {SGD: 0, MOMENTUM: 1, ADAGRAD: 1, ADADELTA: 2, RMSPROP: 1, ADAM: 2, AMSGRAD: 3,
          EG: 1, SMORMS3: 3}


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
        self.device = p.pool.device
        if self.device == "CPU":
            self.arrays = [np.zeros(p.size, dt) for _ in range(NSTATE[hyper.c.rule])]
        else:   # the pool's device memory (numpy on the stand-in, cupy on a GPU)
            self.arrays = [_device.zeros(self.device, p.size, dt) for _ in range(NSTATE[hyper.c.rule])]
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
            self.pflag = <unsigned char*>calloc(p.nrows, 1)
            if self.pflag == NULL:
                raise MemoryError("PState: the pending-row flags of a %d-row table" % p.nrows)
        for i in range(3):
            self.sp[i] = array_ptr(self.arrays[i]) if i < len(self.arrays) else NULL
        self._reset_cache()

    def __dealloc__(self):
        free(self.pend)
        free(self.pflag)

    cdef _reset_cache(self):
        cdef int i
        self.ver += 1
        for i in range(NCACHE):
            self.cache[i].t0 = -1
        self.sk0 = -1

    def host_array(self, int i):
        """State array i as a new host (numpy) array (a copy on every device)."""
        a = self.arrays[i]
        return np.array(_device.to_host(self.device, a))

    def set_array(self, int i, host):
        """Write the host array into state array i (through the device array)."""
        a = self.arrays[i]
        a[...] = _device.from_host(self.device, np.asarray(host, dtype=a.dtype))

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
        if self.device != "CPU":
            raise ValueError("PState.adopt_arrays: the state of a parameter on %s stays there" % self.device)
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
        if t0 + J + g < H.nbias:    # every c_j / lr in the bias table: dot products with its slice
            cj = sg[1]
            c.A = cj * dyn_dot_f64(H.biasp + t0 + 1 + g, pw, J)
            for n in range(nS):
                c.S[n] = cj * dyn_dot_f64(H.biasp + t0 + 1 + g, pw + <long>(1 + n) * h.K, J)
            for n in range(nR):
                c.R[n] = cj * dyn_dot_f64(H.biasp + t0 + 1 + g, pw + <long>(1 + NSER + n) * h.K, J)
            return c
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


cdef double* _replay_buf(PState s, long t0, long t, int J) except NULL:
    cdef Coef tmp
    if s.sk0 != t0 or s.sk1 != t or s.skv != s.ver:
        if s.scratch is None or len(s.scratch) < 2 * J:
            s.scratch = np.zeros(2 * J)
        _coef(s, t0, t, 0, 0, <double*>cnp.PyArray_DATA(s.scratch), &tmp)
        s.sk0, s.sk1, s.skv = t0, t, s.ver
    return <double*>cnp.PyArray_DATA(s.scratch)


# ---------------------------------------------------------------- the devices' loops
# Each device's loops over parameter memory, per float type (the pool's dtype: 0 float32,
# 1 float64), filled by the device's module at import (the CPU's: dyn/_core/cpu/optim.pyx).

cdef OptKernels _OPT[NDEV][2]


cdef int set_opt_kernels(int device, int dtype, OptKernels* k) except -1:
    _OPT[device][dtype] = k[0]
    return 0


cdef object _OPT_ERR = None


cdef int opt_error(object e) except -1:
    global _OPT_ERR
    if _OPT_ERR is None:
        _OPT_ERR = e
    return 0


cdef int raise_opt_error() except -1:
    global _OPT_ERR
    cdef object e = _OPT_ERR
    if e is not None:
        _OPT_ERR = None
        raise e
    return 0


cdef OptKernels* opt_kernels(Pool pool) except NULL:
    """The loops for the pool's float type, on the device of its memory: the CPU's for host
    arrays, the GPU device's (dyn/_core/gpu/optim.pyx) for a pool on any other device."""
    cdef OptKernels* k = &_OPT[DEV_CPU if pool.device == "CPU" else DEV_GPU][pool.dtype]
    if k.run == NULL:
        raise NotImplementedError("dyn: no optimizer kernels for this device and float type")
    return k


cdef int catch_row(PState s, int r, long t) except -1:
    """Row r brought up to step t."""
    return catch_row_k(s, opt_kernels(s.p.pool), r, t)


cdef inline bint _idle_work(PState s) noexcept:
    return (s.hyper.c.exact and _moves_idle(s.hyper.c.rule)) or s.decays


cdef int catch_all(PState s) except -1:
    cdef int r
    cdef double* sg
    cdef OptKernels* K
    _drop_pending(s)                 # (every row is brought up to date here)
    if s.base >= s.tloc:
        return 0
    if _idle_work(s):
        K = opt_kernels(s.p.pool)
        if K.catch_rows != NULL:
            K.catch_rows(s, s.p.pool.vb, NULL, s.p.nrows, s.tloc)
        else:
            for r in range(s.p.nrows):
                catch_row_k(s, K, r, s.tloc)
    s.base = s.tloc
    if s.nseg > 1:  # every row is current: later catch-ups need the last segment only
        sg = s._seg()
        sg[0], sg[1], sg[2], sg[3], sg[4] = sg[5 * s.nseg - 5], sg[5 * s.nseg - 4], sg[5 * s.nseg - 3], \
            sg[5 * s.nseg - 2], sg[5 * s.nseg - 1]
        s.nseg = 1
    return 0


# ---------------------------------------------------------------- deferred catch-up
# A lookup (E[w], lookup_batch) does not catch its rows up when it is made: it notes them as
# pending and fetches their values and state towards the caches, and every pending row is caught
# up when the next forward pass starts (the graph's forward prelude), before any node reads a
# table, or when the row's table is read whole or takes a step (flush_pending, catch_all). A row
# of a table idle for a while lies in memory, not in the caches: caught up at once, each lookup
# waited for its weights and moments to arrive (a row looked up after 375 idle steps took 1.6 us
# against 0.2 for a current one); noted while the graph is built, they arrive while the program
# builds the rest of it. The values are the same: the rows are brought to the same step, as every
# read of a table, value or state, comes after the flush.

cdef list _PENDING = []              # the states with pending rows (PState.listed)
cdef bint _defer_on = True


def _set_deferred(bint on):
    """Measurements and tests: lookups defer their rows' catch-up to the next forward pass (on, the
    default) or catch them up at once (off); returns the previous setting."""
    global _defer_on
    cdef bint old = _defer_on
    _defer_on = on
    return old

cdef extern from *:
    void __builtin_prefetch(const void* p, int rw, int locality) nogil


cdef inline void _prefetch_row(PState s, int r) noexcept:
    """Start fetching row r's weights and optimizer state (a host pool) towards the caches."""
    cdef ParamExpr p = s.p
    cdef long nb = <long>p.rowsize * p.pool.itemsize, off = <long>r * nb, o
    cdef int i
    cdef char* base
    for o in range(0, nb, 64):
        __builtin_prefetch(p.pool.vb + p.off * p.pool.itemsize + off + o, 1, 3)
    for i in range(3):
        base = s.sp[i]
        if base != NULL:
            for o in range(0, nb, 64):
                __builtin_prefetch(base + off + o, 1, 3)


cdef int _defer(PState s, const int* rows, int n) except -1:
    """Note rows[0..n) of s's table as pending (those not current and not pending already)."""
    cdef int k, r
    cdef long t0
    cdef int* q
    cdef bint host = s.device == "CPU"
    for k in range(n):
        r = rows[k]
        if s.pflag[r]:
            continue
        t0 = s.lastp[r] if s.lastp[r] > s.base else s.base
        if t0 >= s.tloc:
            continue
        if s.npend == s.cpend:
            q = <int*>realloc(s.pend, (2 * s.cpend + 16) * sizeof(int))
            if q == NULL:
                raise MemoryError("catch-up: the list of pending rows")
            s.pend = q
            s.cpend = 2 * s.cpend + 16
        s.pend[s.npend] = r
        s.npend += 1
        s.pflag[r] = 1
        if not s.listed:
            _PENDING.append(s)
            s.listed = True
        if host:
            _prefetch_row(s, r)
    return 0


cdef void _drop_pending(PState s) noexcept:
    """Forget s's pending rows (they are caught up by whoever calls this)."""
    cdef int k
    for k in range(s.npend):
        s.pflag[s.pend[k]] = 0
    s.npend = 0


cdef int flush_pending(PState s) except -1:
    cdef int k, n = s.npend
    cdef OptKernels* K
    if n == 0:
        return 0
    try:
        K = opt_kernels(s.p.pool)
        if K.catch_rows != NULL:
            K.catch_rows(s, s.p.pool.vb, s.pend, n, s.tloc)
        else:
            for k in range(n):
                catch_row_k(s, K, s.pend[k], s.tloc)
    finally:
        _drop_pending(s)
    return 0


cdef int _flush_all() except -1:
    """The forward prelude: every pending row of every table up to date."""
    global _PENDING
    cdef PState s
    if not _PENDING:
        return 0
    states, _PENDING = _PENDING, []
    for s in states:
        s.listed = False
    for s in states:
        flush_pending(s)
    return 0


set_forward_prelude(_flush_all)


def _pending_rows():
    """Tests: {table name: pending rows} of the states with pending rows."""
    cdef PState s
    cdef int k
    out = {}
    for s in _PENDING:
        if s.npend:
            out[s.p.name()] = sorted([s.pend[k] for k in range(s.npend)])
    return out


cdef int _hook(object state, const int* rows, int n) except -1:
    cdef PState s = <PState>state
    if n < 0:
        return catch_all(s)
    if not _idle_work(s):
        return 0
    if _defer_on:
        return _defer(s, rows, n)
    flush_pending(s)
    cdef OptKernels* K = opt_kernels(s.p.pool)
    cdef int k
    if K.catch_rows != NULL:
        K.catch_rows(s, s.p.pool.vb, rows, n, s.tloc)
        return 0
    for k in range(n):
        catch_row_k(s, K, rows[k], s.tloc)
    return 0
