# cython: language_level=3, boundscheck=False, wraparound=False
"""tree_weights' CPU kernels: the deferred weight gradients of the fused tree nodes (its
definition: dyn/_core/ops/treelstm.pyx; the tree nodes' kernels: dyn/_core/cpu/treelstm.pyx).

Tree nodes skip the products of a weight that comes through a tree_weights
node (a rank-B update per node: slow for B = 1), and the wrapper, whose
backward runs after all of theirs (it was created before them), queues them
(dyn/_core/cpu/treelstm.pyx), where they become one matrix product per group of
alike nodes: G += [D_1 D_2 ...] [X_1 X_2 ...]^T. When the weight is a
parameter, that happens at the end of backward, together with the batched
tree nodes' products of the same weight: the whole graph's gradient of that
weight is one product. Else the wrapper runs them at once. Its value is the
weight's own memory and its gradient the weight's gradient, so other
consumers of the wrapper accumulate there directly.
"""
from libc.string cimport memcpy
from dyn._core.core.graph cimport (Graph, Node, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, dim_total, arg, F_FIXED, F_AB,
                                   F_PGRAD)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.cpu.treelstm cimport Lay, _layout_isz, _piece_direct_r, Q_ALL
from dyn._core.cpu.outerq cimport outer_deferring, outer_flush
from dyn._core.ops.treelstm cimport OP_W, is_tree_op


cdef int _role_arg(Node* c, int role) noexcept:
    """Argument position of a tree node's weight in a role (0 U, 1 Wx, 2 Uc), -1 if none."""
    if role == 0:
        return 0
    if role == 1:
        return 2 if c.ia[1] else -1
    return 2 + 2 * c.ia[1] if c.ia[2] else -1


# The kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations, so neither asks which float type it runs in.

cdef void fwd_w(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    if not (n.flags & F_FIXED):
        memcpy(y, a.v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_w(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int me = <int>(n - g.nodes), k, role, part, pos
    cdef Lay L
    cdef Node* a = arg(g, n, 0)
    cdef Node* c
    for k in range(me + 1, g.n):        # the live tree nodes reading this weight (a batch's members: its own)
        c = &g.nodes[k]
        if c.g == NULL or not is_tree_op(c.op) or (c.flags & F_AB):
            continue
        for role in range(3):
            pos = _role_arg(c, role)
            if pos >= 0 and g.ipool[c.arg_off + pos] == me:
                _layout_isz(g, c, &L, sizeof(real))
                for part in range(2):
                    _piece_direct_r(&L, role, part, <real*>L.D, Q_ALL)
    if not ((n.flags & F_PGRAD) and outer_deferring()):
        # not a parameter's gradient (read before the pass ends): this weight's products now, one per
        # group of alike nodes; a parameter's wait for the end of backward with the batched nodes'
        # products of the same weight (dyn/_core/cpu/treelstm.pyx)
        outer_flush(<char*>gy, <char*>gy + <size_t>dim_total(&n.dim) * sizeof(real))
    if <void*>gy != a.g:
        _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, a.g)


set_kernels(OP_W, DEV_CPU, <kfwd_fn>fwd_w[float], <kfwd_fn>fwd_w[double],
            <kbwd_fn>bwd_w[float], <kbwd_fn>bwd_w[double])
