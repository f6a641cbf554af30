# The shape family's op codes, for its CPU kernels (dyn/_core/cpu/shape.pyx).
#
# select: ia[0] = dim k, ia[1] = remove dim k, ia[2] = one index per output batch element,
# ia[3] = name code; indices in idx(g, n). pick_batch_elems: batch indices in idx(g, n).
# concatenate: ia[0] = dim k. transpose: the permutation in idx(g, n). reshape: the dims, then
# the batch size, in idx(g, n). pow_const: fa[0] = the exponent.

# op codes (declared by dyn/_core/ops/shape.pyx)
cdef int OP_SEL, OP_BSEL, OP_CAT, OP_CATB, OP_TR, OP_RS, OP_POWC, OP_POW
