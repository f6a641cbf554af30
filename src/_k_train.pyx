# cython: language_level=3, boundscheck=False, wraparound=False
"""Optimizer kernels over the parameter pool: gradient norms and SGD steps
for dense parameters and for the touched rows of lookup tables."""
from libc.math cimport isfinite, sqrt
cimport numpy as cnp
from dyn._core._bcast cimport real
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


cdef void _adam(real* v, real* g, real* mom, real* var, long n, double lr, double b1, double b2,
                double eps) noexcept nogil:
    cdef long i
    cdef real gi
    for i in range(n):
        gi = g[i]
        mom[i] = b1 * mom[i] + (1 - b1) * gi
        var[i] = b2 * var[i] + (1 - b2) * gi * gi
        v[i] -= lr * mom[i] / (sqrt(var[i]) + eps)
        g[i] = 0


def adam_step(ParamExpr p, cnp.ndarray mom, cnp.ndarray var, double lr, double b1, double b2, double eps,
              double grad_scale):
    """One Adam step over the whole parameter (lr already bias-corrected).
    grad_scale applies clipping to the gradient first."""
    cdef Pool pool = p.pool
    if grad_scale != 1.0:
        _blas.scal(pool.dtype, p.size, grad_scale, _g(pool, p.off))
    if pool.dtype == 0:
        _adam(<float*>_v(pool, p.off), <float*>_g(pool, p.off), <float*>cnp.PyArray_DATA(mom),
              <float*>cnp.PyArray_DATA(var), p.size, lr, b1, b2, eps)
    else:
        _adam(<double*>_v(pool, p.off), <double*>_g(pool, p.off), <double*>cnp.PyArray_DATA(mom),
              <double*>cnp.PyArray_DATA(var), p.size, lr, b1, b2, eps)
    if p.is_lookup:
        p.clear_touched()
