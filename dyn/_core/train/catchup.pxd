# Optimizer state and the lazy catch-up of idle lookup rows
# (implementation: src/_k_catchup.pyx; the steps: src/_k_train.pyx).
cimport numpy as cnp
from libc.math cimport exp, log
from dyn._core.core.expr cimport ParamExpr
from dyn._core.core.types cimport real# float or double: the state arrays are of the pool's float type

cdef enum:
    SGD, MOMENTUM, ADAGRAD, ADADELTA, RMSPROP, ADAM, AMSGRAD, EG, SMORMS3
    NSER = 20            # max terms of Adam's eps series (8^-20 < 1e-18)
    NCACHE = 64          # catch-up intervals cached per table

ctypedef struct HP:
    int rule
    double lr, mom, eps, rho, b1, b2, l2
    double gscale, alpha, d     # this step: clip scale, bias-corrected rate, 1 - lambda
    long gstep                  # this step's global number (1-based)
    int exact
    int K                       # idle steps that matter (see src/_k_catchup.pyx)
    double rr[NSER]             # Adam's series ratios b1 b2^(-(n+1)/2) and b1 b2^(n/2)
    double ru[NSER]

ctypedef struct Coef:           # scalars of one catch-up interval (t0, t] of a table
    long t0, t, ver
    int J                       # min(t - t0, K)
    int nS, nR                  # Adam: series terms computed
    double D, dlast, A, P1, P2, thrA, thrB
    double S[NSER]
    double R[NSER]

cdef class Hyper:
    cdef HP c
    cdef object bias            # Adam/AMSGrad: sqrt(1 - b2^g) / (1 - b1^g) for g < nbias
    cdef double* biasp
    cdef long nbias, gsat       # from gsat on the bias correction is 1.0 in double
    cdef object pw, cbuf        # Adam: powers b1^j, rr[n]^j, ru[n]^j (j = 1..K); c_j scratch
    cdef double* pwp
    cdef double* cbufp
    cdef _bias_upto(self, long g)
    cdef double* _powers(self) except NULL

cdef class PState:
    cdef public ParamExpr p
    cdef public Hyper hyper
    cdef public list arrays
    cdef public object last          # int64[nrows]
    cdef public long base, tloc, ver
    cdef public object segs          # float64[cap, 5]: start, lr, logd, off, L(start - 1)
    cdef public int nseg
    cdef public bint decays
    cdef Coef cache[NCACHE]
    cdef object scratch
    cdef long sk0, sk1, skv
    cdef char* sp[3]                 # data of arrays (fixed-size, never reallocated)
    cdef cnp.int64_t* lastp
    cdef _reset_cache(self)
    cdef double* _seg(self) noexcept
    cdef _advance(self)

# Row r of s's table brought to step t: catch_row_r with vb the pool's values as its float type
# (a caller already fused over real), catch_row for the pool's float type (chosen there).
cdef int catch_row_r(PState s, int r, long t, real* vb) except -1
cdef int catch_row(PState s, int r, long t) except -1
cdef int catch_all(PState s) except -1


cdef inline real* state_at(real* base, long off) noexcept nogil:
    """Item off of a state array (base: <real*>PState.sp[i]); NULL where the rule has no such array."""
    return base + off if base != NULL else NULL


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
