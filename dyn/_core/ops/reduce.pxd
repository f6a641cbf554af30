# The reduce family's op codes and node layout, for its CPU kernels (dyn/_core/cpu/reduce.pyx).

# what is accumulated per output (ia[0])
cdef enum:
    K_SUM, K_POW, K_STD, K_MAX, K_MIN, K_LSE

# Node attributes of a reduction:
#   ia[0] kind, ia[1] mask of reduced axes (bits 0-6 dims, bit 7 batch),
#   ia[2] reduce the batch too, ia[3] D_ALL (every dim) or a bad-d code,
#   ia[4] moment order r (fold_rows: nrows), ia[5] divide by the count,
#   fa[0] divisor override (0: the number of reduced elements), fa[1] bad d.
# Scratch (n.aux) per output: acc (double), cen (double), arg index (int).
# cumsum: ia[0] = d; kmax_pooling: ia[0] = d, ia[1] = k, scratch one int per output.
cdef enum:
    AUX_BYTES = 20

# op codes (declared by dyn/_core/ops/reduce.pyx): the reductions share one kernel pair
cdef int OP_SUM_DIM, OP_MEAN_DIM, OP_STD_DIM, OP_MOMENT_DIM
cdef int OP_MEAN_ELEMS, OP_STD_ELEMS, OP_MOMENT_ELEMS
cdef int OP_MEAN_BATCHES, OP_STD_BATCHES, OP_MOMENT_BATCHES
cdef int OP_MAX_DIM, OP_MIN_DIM, OP_LSE_DIM, OP_FOLD
cdef int OP_CUMSUM, OP_KMAX
