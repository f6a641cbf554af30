# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Optimizer steps over the parameter pool (used by dyn/trainers.py): the entry points and the
bookkeeping of touched rows; the loops over parameter memory are a device's (the CPU's:
dyn/_core/cpu/optim.pyx), reached through the table of dyn/_core/train/catchup.pxd.

One fused pass per parameter reads value, gradient and the rule's state,
writes them back and consumes (zeroes) the gradient. A lookup table takes a
step only on the rows touched since the last update: the cost of a step is
the rows touched, not the vocabulary. Rows left idle are brought up to date
lazily and exactly by dyn/_core/train/catchup.pyx (which also holds the state types).
"""
cimport numpy as cnp
from dyn._core.core.expr cimport Pool, ParamExpr
from dyn._core.core.graph cimport (Touch, Graph, cg, lr_find, lr_flush, lr_materialize, lr_mark_zero,
                                   LR_PENDING, LR_ZERO)
from dyn._core.train.catchup cimport (HP, PState, OptKernels, opt_kernels, catch_row_k, catch_all, EG, ADAM,
                                      raise_opt_error, flush_pending)

cnp.import_array()

# ---------------------------------------------------------------- a trainer step
# K: the loops for the pool's device and float type (chosen once per call); vb: the pool's values.


# ---------------------------------------------------------------- low-rank gradients
# A dense parameter's gradient that the backward pass held back as one product (see "Low-rank
# gradients" in dyn/_core/core/graph.pyx) is computed by the step itself where the device has such
# a step (K.run_lowrank: the CPU's float32 Adam); otherwise it is computed into the gradient's
# memory first. After a step that has one, a parameter of LR_MIN elements and more is tracked as
# zero, so that the next backward pass may hold its gradient back.

cdef long LR_MIN = 1 << 20


def _set_lowrank_min(long n):
    """Tests: the fewest elements of a parameter whose gradient is tracked (default 2^20); returns
    the previous value."""
    global LR_MIN
    cdef long old = LR_MIN
    LR_MIN = n if n > 0 else 1
    return old


cdef bint _lowrank_step(PState s, OptKernels* K, void* vb) except -1:
    """s's step through K.run_lowrank when its gradient is held back; False when the step is still
    to be taken (any held-back product computed into the gradient first)."""
    cdef Graph* g = cg()
    cdef ParamExpr p = s.p
    cdef char* C
    cdef int r
    if g.nlr == 0:
        return False
    C = p.pool.gb + p.off * p.pool.itemsize
    r = lr_find(g, C)
    if r < 0:
        return False
    if g.lr[r].state == LR_PENDING and g.lr[r].C == C and g.lr[r].size == p.size \
            and K.run_lowrank != NULL and K.run_lowrank(s, vb, &g.lr[r]):
        g.lr[r].state = LR_ZERO
        return True
    lr_materialize(g, r)
    return False


cdef int _param_step(PState s, bint sparse) except -1:
    """One step of s's parameter."""
    cdef ParamExpr p = s.p
    cdef HP* h = &s.hyper.c
    cdef OptKernels* K = opt_kernels(p.pool)
    cdef void* vb = p.pool.vb
    cdef Touch* tc
    cdef cnp.int64_t* last
    cdef int k, r
    if not p.is_lookup:
        if _lowrank_step(s, K, vb):
            return 0
        K.run(s, vb, 0, p.size)
        if h.rule == EG:
            K.eg_rows(s, vb, 0, p.size, p.size)
        if K.run_lowrank != NULL and h.rule == ADAM and p.size >= LR_MIN:
            lr_mark_zero(p.pool.gb + p.off * p.pool.itemsize, p.size)   # (the step zeroed it)
        return 0
    tc = p.touch_ptr()
    flush_pending(s)                # (rows looked up since the last forward pass: up to date first)
    if sparse and not tc.all:
        s._advance()
        last = s.lastp
        if K.run_rows != NULL:      # the device steps every touched row in one call
            K.run_rows(s, vb, tc)
            for k in range(tc.n):
                r = tc.rows[k]
                last[r] = s.tloc + 1
                tc.flag[r] = 0
            tc.n = 0
            s.tloc += 1
            return 0
        for k in range(tc.n):
            r = tc.rows[k]
            catch_row_k(s, K, r, s.tloc)
            K.run(s, vb, <long>r * p.rowsize, p.rowsize)
            if h.rule == EG:
                K.eg_rows(s, vb, <long>r * p.rowsize, p.rowsize, p.rowsize)
            last[r] = s.tloc + 1
            tc.flag[r] = 0
        tc.n = 0
        s.tloc += 1
        return 0
    catch_all(s)
    s._advance()
    K.run_dense_lookup(s, vb, tc)
    if h.rule == EG:
        K.eg_rows(s, vb, 0, p.size, p.rowsize)
    s.tloc += 1
    s.base = s.tloc
    p.clear_touched()
    return 0


def step(PState s, bint sparse):
    """One step of s's parameter from its gradient (consumed). A lookup table
    steps on its touched rows when sparse (and not used whole), else on all
    rows; idle rows are left to the catch-up."""
    _param_step(s, sparse)
    raise_opt_error()


def grad_sq_norm(ParamExpr p):
    """Squared L2 norm of p's gradient (a lookup table not used whole: its
    touched rows, the only ones with a gradient). NaN/Inf propagate."""
    lr_flush()
    cdef double r = opt_kernels(p.pool).grad_sq_norm(p, p.pool.gb)
    raise_opt_error()
    return r


def has_nonfinite_grad(ParamExpr p):
    lr_flush()
    cdef bint r = opt_kernels(p.pool).has_nonfinite_grad(p, p.pool.gb)
    raise_opt_error()
    return r
