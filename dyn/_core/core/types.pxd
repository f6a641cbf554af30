# The float types kernels are written over: every kernel is one fused function over `real`, and the
# kernel table holds its float32 and float64 specialisations (graph.pxd, set_kernels).

ctypedef fused real:
    float
    double


cdef inline int real_dtype(real* p) noexcept nogil:
    """The dtype code (0 float32, 1 float64) of a kernel's `real`, fixed when it is compiled: for the
    calls that still take one (blas), so that a kernel never reads the graph's dtype."""
    return 0 if real is float else 1
