# The linear-algebra family's definition (dyn/_core/ops/linalg.pyx), shared with its CPU kernels
# (dyn/_core/cpu/linalg.pyx): the op codes and the kinds the constructors set in ia[0].

cdef enum:
    INVERSE, LOGDET     # inverse_logdet, ia[0]

cdef enum:
    CONV, CORR          # circ_conv_corr, ia[0]

cdef int OP_CWA         # colwise_add
cdef int OP_C31         # contract3d_1d(_bias)
cdef int OP_C311        # contract3d_1d_1d(_bias); aux: x.y (I x J) | dt z^T scratch (I x J)
cdef int OP_SQUARE      # inverse, logdet; aux (bytes): LU n*n doubles | inverse n*n doubles |
                        # pivots n ints (8-aligned) | n*n items (backward scratch)
cdef int OP_TOP         # trace_of_product
cdef int OP_CIRC        # circ_conv, circ_corr
cdef int OP_KMH         # kmh_ngram; ia[0] n
cdef int OP_TODEV       # to_device
