# The conv family's op codes and output geometry, for its CPU kernels (dyn/_core/cpu/conv.pyx).
from dyn._core.core.graph cimport Dim

# Node attributes: ia[0], ia[1] the strides (rows, columns), ia[2] VALID (1) or SAME (0),
# ia[3], ia[4] the pooling window (maxpooling2d), ia[5] the state of the scratch Col (the kernels').

cdef inline int _out(int X, int F, int s, bint valid) noexcept nogil:
    if valid:
        return (X - F + s) // s     # ceil((X - F + 1) / s)
    return (X + s - 1) // s         # ceil(X / s)


cdef inline int _dim(const Dim* d, int k) noexcept nogil:
    return d.d[k] if k < d.nd else 1


# op codes (declared by dyn/_core/ops/conv.pyx)
cdef int OP_CONV, OP_CONVB, OP_POOL, OP_F1D
