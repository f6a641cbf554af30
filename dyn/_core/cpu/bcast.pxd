# Broadcasting of two operands over up to 7 dims + batch (inline helpers).
from dyn._core.core.graph cimport Dim

from dyn._core.core.types cimport real, real_dtype

ctypedef struct BIter:
    int nd            # 8: seven dims and the batch
    int ext[8]        # output extents
    long sa[8]        # element strides of operand a (0 where broadcast)
    long sb[8]
    int cnt[8]
    long oa           # current offsets into a and b
    long ob


cdef inline int _ext(const Dim* d, int k) noexcept nogil:
    if k == 7:
        return d.bd
    return d.d[k] if k < d.nd else 1


cdef inline void bi_init(BIter* it, const Dim* y, const Dim* a, const Dim* b) noexcept nogil:
    """Iterate y's elements in storage order; a and b broadcast where 1."""
    cdef int k
    cdef long stra = 1, strb = 1
    it.nd = 8
    for k in range(8):
        it.ext[k] = _ext(y, k)
        it.sa[k] = stra if _ext(a, k) > 1 else 0
        it.sb[k] = strb if _ext(b, k) > 1 else 0
        stra *= _ext(a, k)
        strb *= _ext(b, k)
        it.cnt[k] = 0
    it.oa = 0
    it.ob = 0


cdef inline void bi_next(BIter* it) noexcept nogil:
    cdef int k = 0
    while k < 8:
        it.cnt[k] += 1
        it.oa += it.sa[k]
        it.ob += it.sb[k]
        if it.cnt[k] < it.ext[k]:
            return
        it.oa -= it.sa[k] * it.ext[k]
        it.ob -= it.sb[k] * it.ext[k]
        it.cnt[k] = 0
        k += 1


cdef inline bint same_shape(const Dim* a, const Dim* b) noexcept nogil:
    """Equal per-batch shapes (trailing 1s ignored): batch-only broadcasting."""
    cdef int k
    for k in range(7):
        if _ext(a, k) != _ext(b, k):
            return False
    return True
