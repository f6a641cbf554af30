# Optimizer state, schedules and the lazy catch-up of idle lookup rows (implementation:
# dyn/_core/train/catchup.pyx; the steps: dyn/_core/train/update.pyx), and the table through which
# both reach a device's loops over parameter memory (the CPU's: dyn/_core/cpu/optim.pyx).
cimport numpy as cnp
from dyn._core.core.expr cimport ParamExpr, Pool
from dyn._core.core.graph cimport Touch, LowRank
from dyn._core.core.types cimport real  # float or double: the state arrays are of the pool's float type

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
    int K                       # idle steps that matter (see dyn/_core/train/catchup.pyx)
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
    cdef public object device        # the pool's device name ("CPU": host arrays)
    cdef int* pend                   # rows looked up but not yet caught up (see "Deferred catch-up")
    cdef int npend, cpend
    cdef bint listed                 # in the list of states with pending rows
    cdef unsigned char* pflag        # nrows flags: row pending
    cdef _reset_cache(self)
    cdef double* _seg(self) noexcept
    cdef _advance(self)

# The coefficients of the idle steps (t0, t] (cached per table; with buf, the replay's per-step
# coefficients instead) and the replay's coefficients kept in s's scratch.
cdef Coef* _coef(PState s, long t0, long t, int nS, int nR, double* buf, Coef* into) except NULL
cdef double* _replay_buf(PState s, long t0, long t, int J) except NULL

# Row r of s's table brought to step t; every row of it brought to its current step.
cdef int catch_row(PState s, int r, long t) except -1
cdef int catch_all(PState s) except -1
# The rows of s looked up since its last flush, caught up now (before its step, for instance).
cdef int flush_pending(PState s) except -1


cdef inline bint _moves_idle(int rule) noexcept:
    return rule != SGD and rule != ADAGRAD


cdef inline real* state_at(real* base, long off) noexcept nogil:
    """Item off of a state array (base: <real*>PState.sp[i]); NULL where the rule has no such array."""
    return base + off if base != NULL else NULL

# ---------------------------------------------------------------- the loops over parameter memory
# A device's, per float type (0 float32, 1 float64): vb / gb are the pool's values / gradients.
# The CPU's (dyn/_core/cpu/optim.pyx) fill the table at import; trainers reach them through
# opt_kernels, the one place that chooses the device and the float type.

# One rule step on elements [off, off + n) of s's parameter (its gradient consumed).
ctypedef void (*run_fn)(PState s, void* vb, long off, long n) noexcept
# A dense step over a whole lookup table whose touched rows are tc.
ctypedef void (*dense_lookup_fn)(PState s, void* vb, Touch* tc) noexcept
# EG's normalisation of the rows of rowsize elements in [off, off + n).
ctypedef void (*eg_rows_fn)(PState s, void* vb, long off, long n, long rowsize) noexcept
# The idle steps (t0, t] applied to the row at element offset off of s's table.
ctypedef int (*catch_fn)(PState s, void* vb, long off, long t0, long t) except -1
# Squared L2 norm of p's gradient; whether it holds a NaN or an infinity.
ctypedef double (*sq_norm_fn)(ParamExpr p, void* gb) noexcept
ctypedef bint (*nonfinite_fn)(ParamExpr p, void* gb) noexcept
# Optional (NULL: the caller loops over rows with catch_row / run): a device whose per-call cost is
# high does many rows in one call. catch_rows brings the n rows (rows NULL: every row) to step t
# and sets their last[r] = t; run_rows is a sparse step of the touched rows of tc: each caught up to
# s.tloc, then one rule step (EG: and its row normalisation); the caller does the bookkeeping.
ctypedef int (*catch_rows_fn)(PState s, void* vb, const int* rows, int n, long t) except -1
ctypedef int (*run_rows_fn)(PState s, void* vb, Touch* tc) except -1
# Optional (NULL: none): a dense step of s's parameter whose gradient is the product R holds back
# (dyn/_core/core/graph.pyx, "Low-rank gradients"), computed as the step goes; False: not done
# (the rule or the memory did not allow it), nothing changed.
ctypedef bint (*lowrank_fn)(PState s, void* vb, LowRank* R) noexcept

ctypedef struct OptKernels:
    run_fn run
    dense_lookup_fn run_dense_lookup
    eg_rows_fn eg_rows
    catch_fn catch_row
    sq_norm_fn grad_sq_norm
    nonfinite_fn has_nonfinite_grad
    catch_rows_fn catch_rows
    run_rows_fn run_rows
    lowrank_fn run_lowrank

cdef int set_opt_kernels(int device, int dtype, OptKernels* k) except -1
# Loops whose signature cannot raise (run, run_dense_lookup, eg_rows, grad_sq_norm,
# has_nonfinite_grad) but which can fail (a device's array code) record the error here; the entry
# points (dyn/_core/train/update.pyx) raise it after the call.
cdef int opt_error(object e) except -1
cdef int raise_opt_error() except -1
cdef OptKernels* opt_kernels(Pool pool) except NULL


cdef inline int catch_row_k(PState s, OptKernels* K, int r, long t) except -1:
    """catch_row with the loops K already chosen (a caller's per-row loop)."""
    cdef cnp.int64_t* last = s.lastp
    cdef long t0 = last[r] if last[r] > s.base else s.base
    cdef ParamExpr p = s.p
    if t0 >= t:
        return 0
    K.catch_row(s, p.pool.vb, <long>r * p.rowsize, t0, t)
    last[r] = t
    return 0
