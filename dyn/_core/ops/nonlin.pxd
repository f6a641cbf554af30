# The nonlinearities' op codes and kinds, for their CPU kernels (dyn/_core/cpu/nonlin.pyx and
# dyn/_core/cpu/softmax.pyx).

# the function of a nonlin_unary node: ia[0]
cdef enum:
    TANH, LOGISTIC, RECTIFY, EXP, LOG

# op codes (declared by dyn/_core/ops/nonlin.pyx)
cdef int OP_UNARY         # tanh, logistic, rectify, exp, log (ia[0])
cdef int OP_SOFTMAX       # ia[0]: 0 normalise columns, 1 rows; ia[1] = 0
cdef int OP_LOGSOFTMAX    # as softmax, ia[1] = 1
cdef int OP_RLOGSOFTMAX   # log_softmax over the entries of the index list
cdef int OP_LSE           # logsumexp over the arguments; aux: one scratch item per element
cdef int OP_PNLS          # pickneglogsoftmax(_batch): ia[0] batch form; aux: (max, log sum) per element
cdef int OP_DROPOUT       # fa[0] = p; aux: the mask
cdef int OP_NOISE         # fa[0] = stddev
cdef int OP_NOBACKPROP
