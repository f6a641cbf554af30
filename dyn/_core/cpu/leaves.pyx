# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the leaf operations (input, constant, parameter, lookup, lookup_batch; declared in
dyn/_core/core/expr.pyx). Kernels are fused over `real`: y is the node's value, gy its gradient."""
from libc.string cimport memcpy
from dyn._core.core.graph cimport (
    Graph, Node, Touch, DEV_CPU, dim_size, dim_total, idx, set_kernels, kfwd_fn, kbwd_fn, touch_row)
from dyn._core.core.expr cimport OP_INPUT, OP_CONST, OP_PARAM, OP_LOOKUP, OP_LOOKUPB
from dyn._core.core.types cimport real


cdef void _fwd_none(Graph* g, Node* n, real* y) noexcept:
    pass

cdef void _fwd_const(Graph* g, Node* n, real* y) noexcept:
    cdef int k, total = dim_total(&n.dim)
    cdef real c = <real>n.fa[0]
    for k in range(total):
        y[k] = c

cdef void _bwd_param(Graph* g, Node* n, int i, real* gy) noexcept:
    # a lookup table used whole, as a matrix: every row may have a gradient
    if n.aux != NULL:
        (<Touch*>n.aux).all = 1

cdef void _bwd_lookup(Graph* g, Node* n, int i, real* gy) noexcept:
    touch_row(<Touch*>n.aux, n.ia[0])

cdef void _fwd_lookupb(Graph* g, Node* n, real* y) noexcept:
    cdef int b, d = dim_size(&n.dim)
    cdef int* rows = idx(g, n)
    for b in range(n.dim.bd):
        memcpy(y + <size_t>b * d, <real*>n.ptr + <size_t>rows[b] * d, d * sizeof(real))

cdef void _bwd_lookupb(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int b, k, d = dim_size(&n.dim)
    cdef int* rows = idx(g, n)
    cdef real* gt
    for b in range(n.dim.bd):
        gt = <real*>n.gptr + <size_t>rows[b] * d
        for k in range(d):
            gt[k] += gy[<size_t>b * d + k]
        touch_row(<Touch*>n.aux, rows[b])


set_kernels(OP_INPUT, DEV_CPU, <kfwd_fn>_fwd_none[float], <kfwd_fn>_fwd_none[double])
set_kernels(OP_CONST, DEV_CPU, <kfwd_fn>_fwd_const[float], <kfwd_fn>_fwd_const[double])
set_kernels(OP_PARAM, DEV_CPU, <kfwd_fn>_fwd_none[float], <kfwd_fn>_fwd_none[double],
            <kbwd_fn>_bwd_param[float], <kbwd_fn>_bwd_param[double])
set_kernels(OP_LOOKUP, DEV_CPU, <kfwd_fn>_fwd_none[float], <kfwd_fn>_fwd_none[double],
            <kbwd_fn>_bwd_lookup[float], <kbwd_fn>_bwd_lookup[double])
set_kernels(OP_LOOKUPB, DEV_CPU, <kfwd_fn>_fwd_lookupb[float], <kfwd_fn>_fwd_lookupb[double],
            <kbwd_fn>_bwd_lookupb[float], <kbwd_fn>_bwd_lookupb[double])
