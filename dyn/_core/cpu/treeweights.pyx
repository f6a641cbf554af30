# cython: language_level=3, boundscheck=False, wraparound=False
"""tree_weights' CPU kernels: the deferred weight gradients of the fused tree nodes (its
definition: dyn/_core/ops/treelstm.pyx; the tree nodes' kernels: dyn/_core/cpu/treelstm.pyx).

Tree nodes skip the products of a weight that comes through a tree_weights
node (a rank-B update per node: slow for B = 1), and the wrapper, whose
backward runs after all of theirs (it was created before them), does them as
one matrix product per group of alike nodes: G += [D_1 D_2 ...] [X_1 X_2 ...]^T.
Its value is the weight's own memory and its gradient the weight's gradient,
so other consumers of the wrapper accumulate there directly. When the weight
is a parameter, the wrapper queues the products instead, with those of the
batched tree nodes (dyn/_core/cpu/treelstm.pyx): the whole tree's gradient of
that weight is then one product at the end of backward.
"""
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from dyn._core.core.graph cimport (Graph, Node, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, dim_total, arg, F_FIXED, F_AB,
                                   F_PGRAD)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.cpu.treelstm cimport Lay, _layout_isz, _outer_r, _piece_direct_r, _deferring
from dyn._core.ops.treelstm cimport CSUM, OP_W, is_tree_op


ctypedef struct Piece:
    int m, k, ncol, ldg
    char* G


cdef bint _piece(Lay* L, int role, int part, Piece* P, char* DD, char* XX) noexcept:
    """One node's share G[:m, :k] += DD XX^T (DD m x ncol, XX k x ncol); copies them when DD is not NULL."""
    cdef int H = L.H, R = L.R, isz = L.isz, B = L.B, b
    if role == 0 and L.mode == CSUM:
        if L.p == 0:
            return False
        if part == 0:
            P.m, P.k, P.ncol, P.G = 3 * H, H, B, <char*>L.U.g
            if DD != NULL:
                for b in range(B):
                    memcpy(DD + <size_t>b * 3 * H * isz, L.D + <size_t>b * R * isz, <size_t>3 * H * isz)
                memcpy(XX, L.HC, <size_t>H * B * isz)
        else:
            P.m, P.k, P.ncol, P.G = H, H, L.p * B, <char*>L.U.g + <size_t>3 * H * isz
            if DD != NULL:
                memcpy(DD, L.DF, <size_t>H * L.p * B * isz)
                memcpy(XX, L.HM, <size_t>H * L.p * B * isz)
        P.ldg = L.Rt
        return True
    if part:
        return False
    if role == 0:
        if L.K == 0:
            return False
        P.m, P.k, P.ncol, P.G, P.ldg = R, L.K, B, <char*>L.U.g, L.Rt
        if DD != NULL:
            memcpy(DD, L.D, <size_t>R * B * isz)
            memcpy(XX, L.HC, <size_t>L.K * B * isz)
    elif role == 1:
        P.m, P.k, P.ncol, P.G, P.ldg = R, L.I, B, <char*>L.Wx.g, L.Rt
        if DD != NULL:
            memcpy(DD, L.D, <size_t>R * B * isz)
            memcpy(XX, L.X, <size_t>L.I * B * isz)
    else:
        if L.K == 0:
            return False
        P.m, P.k, P.ncol, P.G, P.ldg = R - H, L.K, B, <char*>L.Uc.g, L.Uc.dim.d[0]
        if DD != NULL:
            for b in range(B):
                memcpy(DD + <size_t>b * (R - H) * isz, L.D + <size_t>b * R * isz, <size_t>2 * H * isz)
                memcpy(DD + (<size_t>b * (R - H) + 2 * H) * isz, L.D + (<size_t>b * R + 3 * H) * isz,
                       <size_t>(R - 3 * H) * isz)
            memcpy(XX, L.CC, <size_t>L.K * B * isz)
    return True


cdef char* _scr = NULL
cdef size_t _scrcap = 0


cdef char* _scratch(size_t nbytes) noexcept:
    global _scr, _scrcap
    if nbytes > _scrcap:
        free(_scr)
        _scr = <char*>malloc(nbytes)
        _scrcap = nbytes if _scr != NULL else 0
    return _scr


cdef int _role_arg(Node* c, int role) noexcept:
    """Argument position of a tree node's weight in a role (0 U, 1 Wx, 2 Uc), -1 if none."""
    if role == 0:
        return 0
    if role == 1:
        return 2 if c.ia[1] else -1
    return 2 + 2 * c.ia[1] if c.ia[2] else -1


cdef void _flush(Graph* g, int me, int* ent, int ne, real* gy) noexcept:
    """Runs the deferred products of the entries (node, role, part), one product per alike group
    (gy, the wrapper's gradient, only fixes the float type)."""
    cdef int e, e2, col, mode, isz = sizeof(real)
    cdef Lay L
    cdef Piece P0, P
    cdef char* DD
    cdef char* XX
    cdef unsigned char* done = <unsigned char*>malloc(ne + 1)
    if done == NULL:
        return
    memset(done, 0, ne + 1)
    for e in range(ne):
        if done[e]:
            continue
        done[e] = 1
        _layout_isz(g, &g.nodes[ent[3 * e]], &L, isz)
        if not _piece(&L, ent[3 * e + 1], ent[3 * e + 2], &P0, NULL, NULL):
            continue
        mode = L.mode
        col = P0.ncol
        for e2 in range(e + 1, ne):     # the group: same role, part, mode and block sizes
            if done[e2] or ent[3 * e2 + 1] != ent[3 * e + 1] or ent[3 * e2 + 2] != ent[3 * e + 2]:
                continue
            _layout_isz(g, &g.nodes[ent[3 * e2]], &L, isz)
            if L.mode == mode and _piece(&L, ent[3 * e2 + 1], ent[3 * e2 + 2], &P, NULL, NULL) \
                    and P.m == P0.m and P.k == P0.k:
                col += P.ncol
                done[e2] = 2            # member of the current group
        DD = _scratch(<size_t>(P0.m + P0.k) * col * isz)
        if DD == NULL:
            col = 0
        XX = DD + <size_t>P0.m * col * isz
        col = 0
        for e2 in range(e, ne):
            if e2 == e or done[e2] == 2:
                if e2 != e:
                    done[e2] = 1
                _layout_isz(g, &g.nodes[ent[3 * e2]], &L, isz)
                if DD == NULL:          # no scratch memory: one product per node (all parts)
                    _piece_direct_r(&L, ent[3 * e2 + 1], ent[3 * e2 + 2], <real*>L.D)
                    continue
                _piece(&L, ent[3 * e2 + 1], ent[3 * e2 + 2], &P, DD + <size_t>P0.m * col * isz,
                       XX + <size_t>P0.k * col * isz)
                col += P.ncol
        if DD != NULL:
            _outer_r(P0.m, P0.k, col, <real*>DD, P0.m, <real*>XX, P0.k, <real*>P0.G, P0.ldg)
    free(done)


# The kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations, so neither asks which float type it runs in.

cdef void fwd_w(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    if not (n.flags & F_FIXED):
        memcpy(y, a.v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_w(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int me = <int>(n - g.nodes), k, role, part, ne = 0, pos
    cdef Lay L
    cdef Node* a = arg(g, n, 0)
    cdef Node* c
    cdef int* ent
    for k in range(me + 1, g.n):        # the live tree nodes reading this weight
        c = &g.nodes[k]
        if c.g != NULL and is_tree_op(c.op) and not (c.flags & F_AB):
            ne += 6
    ent = <int*>malloc(<size_t>(3 * ne + 3) * sizeof(int))
    if ent == NULL:
        return
    ne = 0
    for k in range(me + 1, g.n):
        c = &g.nodes[k]
        if c.g == NULL or not is_tree_op(c.op) or (c.flags & F_AB):
            continue
        for role in range(3):
            pos = _role_arg(c, role)
            if pos >= 0 and g.ipool[c.arg_off + pos] == me:
                for part in range(2):
                    ent[3 * ne] = k
                    ent[3 * ne + 1] = role
                    ent[3 * ne + 2] = part
                    ne += 1
    if (n.flags & F_PGRAD) and _deferring():
        # a parameter's gradient: queued with the batched nodes' products of the same weight, all
        # done as one product at the end of backward (dyn/_core/cpu/treelstm.pyx)
        for k in range(ne):
            _layout_isz(g, &g.nodes[ent[3 * k]], &L, sizeof(real))
            _piece_direct_r(&L, ent[3 * k + 1], ent[3 * k + 2], <real*>L.D)
    else:
        _flush(g, me, ent, ne, gy)
    free(ent)
    if <void*>gy != a.g:
        _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, a.g)


set_kernels(OP_W, DEV_CPU, <kfwd_fn>fwd_w[float], <kfwd_fn>fwd_w[double],
            <kbwd_fn>bwd_w[float], <kbwd_fn>bwd_w[double])
