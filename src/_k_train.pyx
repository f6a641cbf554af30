# cython: language_level=3, boundscheck=False, wraparound=False
"""Optimizer kernels over the parameter pool: gradient norms and SGD steps
for dense parameters and for the touched rows of lookup tables."""
from libc.math cimport isfinite
from libc.string cimport memset
from dyn._core._expr cimport Pool, ParamExpr
from dyn._core._graph cimport Touch
from dyn._core cimport _blas


cdef inline char* _v(Pool pool, long off) noexcept:
    return pool.vb + off * pool.itemsize


cdef inline char* _g(Pool pool, long off) noexcept:
    return pool.gb + off * pool.itemsize


def grad_sq_norm(ParamExpr p, bint sparse):
    """Squared L2 norm of p's gradient: whole parameter, or (sparse lookup)
    its touched rows only. NaN/Inf propagate so callers can name p."""
    cdef Pool pool = p.pool
    cdef Touch* t
    cdef int k
    cdef double s = 0
    if p.is_lookup and sparse and not p.touch_ptr().all:
        t = p.touch_ptr()
        for k in range(t.n):
            s += _blas.nrm2sq(pool.dtype, p.rowsize, _g(pool, p.off + <long>t.rows[k] * p.rowsize))
        return s
    return _blas.nrm2sq(pool.dtype, p.size, _g(pool, p.off))


def sgd_step(ParamExpr p, double lr, bint sparse):
    """v -= lr * g, then g = 0: over the whole parameter, or over the touched
    rows of a lookup table when sparse (the cost is the rows touched)."""
    cdef Pool pool = p.pool
    cdef Touch* t
    cdef int k
    cdef long off
    if p.is_lookup and sparse and not p.touch_ptr().all:
        t = p.touch_ptr()
        for k in range(t.n):
            off = p.off + <long>t.rows[k] * p.rowsize
            _blas.axpy(pool.dtype, p.rowsize, -lr, _g(pool, off), _v(pool, off))
            memset(_g(pool, off), 0, p.rowsize * pool.itemsize)
            t.flag[t.rows[k]] = 0
        t.n = 0
        return
    _blas.axpy(pool.dtype, p.size, -lr, _g(pool, p.off), _v(pool, p.off))
    memset(_g(pool, p.off), 0, p.size * pool.itemsize)
    if p.is_lookup:
        t = p.touch_ptr()
        for k in range(t.n):
            t.flag[t.rows[k]] = 0
        t.n = 0
        t.all = 0


def has_nonfinite_grad(ParamExpr p):
    cdef Pool pool = p.pool
    cdef long k
    if pool.dtype == 0:
        for k in range(p.size):
            if not isfinite((<float*>_g(pool, p.off))[k]):
                return True
    else:
        for k in range(p.size):
            if not isfinite((<double*>_g(pool, p.off))[k]):
                return True
    return False
