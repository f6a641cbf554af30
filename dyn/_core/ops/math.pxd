# The elementwise math family's op codes and kinds, for its CPU kernels (dyn/_core/cpu/math.pyx).

# the function of a math_unary node: ia[0] (an index in NAMES, dyn/_core/ops/math.pyx)
cdef enum:
    SQRT, ABS, SQUARE, CUBE, ERF, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH,
    LOG_SIGMOID, LGAMMA, SOFTSIGN, ELU, SELU, SILU, ROUND, CEIL, FLOOR

# op codes (declared by dyn/_core/ops/math.pyx)
cdef int OP_UNARY     # math_unary: ia[0] the kind, ia[1] straight-through rounding, fa[0] elu/silu's a
cdef int OP_BMINMAX   # bmin, bmax (ia[0] 0, 1)
cdef int OP_ELIST     # emin, emax over a list (ia[0] 0, 1); aux: the winning argument per element
