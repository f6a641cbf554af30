# Arithmetic's op codes and kinds, for its CPU kernels (dyn/_core/cpu/arith.pyx).

# the elementwise binary op of a cwise node: ia[0]
cdef enum:
    ADD, SUB, MUL, DIV

# op codes (declared by dyn/_core/ops/arith.pyx)
cdef int OP_CW        # add, subtract, cmult, cdiv (ia[0]), with broadcasting
cdef int OP_AFFS      # x * fa[0] + fa[1]
cdef int OP_MM        # matrix product
cdef int OP_AFFINE    # affine_transform
cdef int OP_ESUM
cdef int OP_RED       # sum_elems, squared_norm, l2_norm (ia[0] 0, 1, 2)
cdef int OP_PAIR      # dot_product, squared_distance (ia[0] 0, 1)
cdef int OP_SUMB      # sum_batches
