# The random family's op codes and sampler kinds, for its CPU kernels (dyn/_core/cpu/random.pyx).

# the sampler of a random leaf: ia[0]
cdef enum:
    NORMAL, BERNOULLI, UNIFORM, GUMBEL

# op codes (declared by dyn/_core/ops/random.pyx)
cdef int OP_NORMAL, OP_BERNOULLI, OP_UNIFORM, OP_GUMBEL   # the leaves: one kernel, four names
cdef int OP_DIM, OP_BATCH, OP_BLOCK                        # the dropout variants with shared masks
