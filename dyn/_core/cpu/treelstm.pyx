# cython: language_level=3, boundscheck=False, wraparound=False
"""The fused tree nodes' CPU kernels (their definition: dyn/_core/ops/treelstm.pyx).

A node reads its input x, the states of its children and the weights; all its
gates come from one matrix product per weight matrix (one gemm for a whole
batch), and its backward is fused the same way: the pre-activation gradients
are computed once, at the first argument backward asks for, and every
argument's gradient is a product with them. A weight that comes through a
tree_weights alias (OP_W) leaves its product to that node
(dyn/_core/cpu/treeweights.pyx).

In the positional (N-ary) cells child j uses the weight block e_j = min(j, N-1)
(DyNet: extra children share the last block), so the block inputs are the sums
hc_m = sum over the children with e_j = m of h_j, and only the blocks of the
P = min(#children, N) present positions (a prefix) take part in the products.

Gate rows of the N-ary LSTM: [i; o; u; f_0 .. f_{N-1}] ((3 + N) H); of the
child-sum LSTM: [i; o; u; f] (4H).
"""
from libc.math cimport exp, tanh
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset
from dyn._core.core.graph cimport (Graph, Node, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, arg, elem_v, elem_g, F_PGRAD)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.cpu.outerq cimport outer_now, outer_queue, outer_deferring
from dyn._core.cpu.outerq import _set_deferred, _last_flush  # noqa: F401  (the tests' hooks, as before)
from dyn._core.ops.treelstm cimport NARY, RNN, CSUM, OP_NARY, OP_RNN, OP_CSUM, OP_PART, OP_W, _rows

cdef extern from "_fastmath.h" nogil:
    void dyn_tanh_f32(float* y, const float* x, long n)
    void dyn_logistic_f32(float* y, const float* x, long n)
    void dyn_colsum_acc_f32(float* y, const float* G, long m, long C)


cdef inline int _pos(int j, int N) noexcept nogil:
    return j if j < N else N - 1


cdef void _layout_isz(Graph* g, Node* n, Lay* L, int isz) noexcept:
    """The node's layout for items of isz bytes (a kernel's sizeof(real))."""
    cdef int k = 2, B = n.dim.bd
    cdef size_t q, pm
    L.n = n
    L.mode = n.ia[0]
    L.hx = n.ia[1]
    L.huc = n.ia[2]
    L.I = n.ia[3]
    L.H = n.ia[4]
    L.N = n.ia[5]
    L.B = B
    L.isz = isz
    L.U = arg(g, n, 0)
    L.b = arg(g, n, 1)
    L.Wx = L.x = L.Uc = NULL
    if L.hx:
        L.Wx = arg(g, n, 2)
        L.x = arg(g, n, 3)
        k = 4
    if L.huc:
        L.Uc = arg(g, n, k)
        k += 1
    L.c0 = k
    L.p = n.nargs - k
    L.P = L.p if L.p < L.N else L.N
    L.Rt = L.U.dim.d[0]
    L.R = _rows(L.mode, L.H, L.P)
    L.K = L.P * L.H if L.mode != CSUM else (L.H if L.p > 0 else 0)
    q = <size_t>B * isz
    pm = L.p if L.mode == CSUM else 0
    L.X = <char*>n.aux
    L.HC = L.X + L.I * q
    L.CC = L.HC + L.K * q
    L.HM = L.CC + (L.K if L.huc else 0) * q
    L.A = L.HM + L.H * pm * q
    L.F = L.A + L.R * q
    L.T = L.F + L.H * pm * q
    L.D = L.T + L.H * q
    L.DF = L.D + L.R * q
    L.DC = L.DF + L.H * pm * q
    L.S = L.DC + L.H * q


# ---------------------------------------------------------------- BLAS with leading dimensions

cdef void _gm(char ta, int m, int n, int k, real* A, int lda, real* X, int ldx, double beta,
              real* Y, int ldy) noexcept:
    """Y (m x n, ld ldy) = op(A) X + beta Y with X k x n (ld ldx): gemv for one column."""
    if m <= 0 or n <= 0 or k <= 0:    # never with beta 0: every caller has k > 0 then
        return
    if n == 1:
        if ta == b'N':
            _blas.gemv(real_dtype(Y), b'N', m, k, 1.0, A, lda, X, beta, Y)
        else:
            _blas.gemv(real_dtype(Y), b'T', k, m, 1.0, A, lda, X, beta, Y)
    else:
        _blas.gemm(real_dtype(Y), ta, b'N', m, n, k, 1.0, A, lda, X, ldx, beta, Y, ldy)


# ---------------------------------------------------------------- the weight products
#
# A node's share of a weight gradient, G += D X^T, goes to the queue of dyn/_core/cpu/outerq.pyx
# (one product per weight over all the queued columns, at the end of backward for a parameter's
# gradient, or when tree_weights reads it).

cdef void _outer_d(Node* w, int mode, int m, int k, int n, real* D, int ldd, real* X, int ldx, real* G,
                   int ldg) noexcept:
    """G += D X^T, queued when mode is Q_ALL, or Q_PARAM and G is parameter w's gradient (and the queue
    can grow); now otherwise."""
    if m <= 0 or k <= 0 or n <= 0:
        return
    if mode == Q_NONE or (mode == Q_PARAM and not (outer_deferring() and (w.flags & F_PGRAD))) \
            or not outer_queue(<char*>G, <char*>D, ldd, <char*>X, ldx, m, k, n, ldg, sizeof(real)):
        outer_now(m, k, n, D, ldd, X, ldx, G, ldg)


# ---------------------------------------------------------------- elementwise pieces


cdef void _sigm(real* y, long m) noexcept nogil:
    cdef long i
    if real is float:
        dyn_logistic_f32(y, y, m)
    else:
        for i in range(m):
            y[i] = 1 / (1 + exp(-y[i]))


cdef void _tanh(real* y, const real* x, long m) noexcept nogil:
    cdef long i
    if real is float:
        dyn_tanh_f32(y, x, m)
    else:
        for i in range(m):
            y[i] = tanh(x[i])


cdef void _acc(real* y, const real* x, long m) noexcept nogil:
    cdef long i
    for i in range(m):
        y[i] += x[i]


cdef inline Node* _child(Graph* g, Lay* L, int j) noexcept:
    return arg(g, L.n, L.c0 + j)


cdef void _gather_x(Graph* g, Lay* L) noexcept:
    cdef int b
    for b in range(L.B):
        memcpy(L.X + <size_t>b * L.I * L.isz, elem_v(L.x, b, L.I, L.isz), <size_t>L.I * L.isz)


cdef void _gather(Graph* g, Lay* L, real* buf, int ld, bint by_pos, int part) noexcept:
    """buf (ld x B) = per-position sums of the children's h (part 0) or c (part 1) (by_pos;
    else the sum of them all), zero where no child sits."""
    cdef int j, b, m
    cdef Node* c
    for b in range(L.B):
        memset(buf + <size_t>b * ld, 0, <size_t>ld * L.isz)
    for j in range(L.p):
        c = _child(g, L, j)
        m = _pos(j, L.N) if by_pos else 0
        for b in range(L.B):
            _acc(buf + <size_t>b * ld + m * L.H, <real*>elem_v(c, b, c.dim.d[0], L.isz) + part * L.H,
                 L.H)


cdef void _gather_each(Graph* g, Lay* L, real* buf) noexcept:
    """buf (H x pB): column b*p + j = child j's h in batch element b (child-sum forget gates)."""
    cdef int j, b
    cdef Node* c
    for j in range(L.p):
        c = _child(g, L, j)
        for b in range(L.B):
            memcpy(buf + <size_t>(b * L.p + j) * L.H, elem_v(c, b, c.dim.d[0], L.isz),
                   <size_t>L.H * L.isz)


cdef void _scatter(Node* a, int isz, int off, const real* s, int size, int B) noexcept nogil:
    """Items off..off+size of each batch element of a's gradient (batch 1 sums the batch) += s (size x B)."""
    cdef int b
    for b in range(B):
        _acc(<real*>elem_g(a, b, a.dim.d[0], isz) + off, s + <size_t>b * size, size)


cdef void _scatter_dc(Node* c, int isz, int H, const real* dc, const real* f, int fstride, int B) noexcept nogil:
    """The child's c gradient (rows H..2H of its [h; c]) += dc * f (f: fstride items per batch element)."""
    cdef int b
    cdef Py_ssize_t k
    cdef real* px
    for b in range(B):
        px = <real*>elem_g(c, b, 2 * H, isz) + H
        for k in range(H):
            px[k] += dc[<size_t>b * H + k] * f[<size_t>b * fstride + k]

# ---------------------------------------------------------------- elementwise forward / gradients


cdef void _cell_fwd(Graph* g, Lay* L, real* A, real* Fg, real* Y, real* T) noexcept:
    """Gates' nonlinearities, c = i u + sum_j f_j c_j, h = o tanh(c), written to Y = [h; c]."""
    cdef int b, j, p = L.p
    cdef Py_ssize_t k, H = L.H, R = L.R
    cdef real fb = <real>L.n.fa[0]
    cdef real* bias = <real*>L.b.v
    cdef real* a
    cdef real* y
    cdef real* t
    cdef real* f
    cdef real* cc
    cdef Node* ch
    for b in range(L.B):
        a = A + <size_t>b * R
        if L.mode == RNN:
            _tanh(a, a, H)
            continue
        if L.mode == NARY:         # (fwd_tree left the bias out of A)
            for k in range(3 * H):
                a[k] += bias[k]
            for k in range(3 * H, R):
                a[k] += bias[k] + fb
        _sigm(a, 2 * H)
        _tanh(a + 2 * H, a + 2 * H, H)
        if L.mode == NARY:
            _sigm(a + 3 * H, R - 3 * H)
        y = Y + <size_t>b * 2 * H
        for k in range(H):
            y[H + k] = a[k] * a[2 * H + k]
        for j in range(p):
            ch = _child(g, L, j)
            cc = <real*>elem_v(ch, b, 2 * H, L.isz) + H
            if L.mode == NARY:
                f = a + (3 + _pos(j, L.N)) * H
            else:
                f = Fg + <size_t>(b * p + j) * H
                for k in range(H):
                    f[k] += a[3 * H + k] + fb
                _sigm(f, H)
            for k in range(H):
                y[H + k] += f[k] * cc[k]
        t = T + <size_t>b * H
        _tanh(t, y + H, H)
        for k in range(H):
            y[k] = a[H + k] * t[k]


cdef void _cell_d(Graph* g, Lay* L, real* A, real* Fg, real* Y, real* T, real* GY, real* D, real* DF,
                  real* DC) noexcept:
    """Pre-activation gradients D (child-sum: also DF per child) and the cell's DC from the output's GY."""
    cdef int b, j, p = L.p
    cdef Py_ssize_t k, H = L.H, R = L.R, r0      # (int indices kept GCC from vectorising)
    cdef real* a
    cdef real* d
    cdef real* gy
    cdef real* t
    cdef real* dc
    cdef real* cc
    cdef real* f
    cdef real* df
    cdef real one = 1     # typed: Cython writes a literal 1 as 1.0, a double, and these loops ran in double
    cdef Node* ch
    for b in range(L.B):
        a = A + <size_t>b * R
        d = D + <size_t>b * R
        if L.mode == RNN:
            gy = GY + <size_t>b * H
            for k in range(H):
                d[k] = gy[k] * (one - a[k] * a[k])
            continue
        gy = GY + <size_t>b * 2 * H
        t = T + <size_t>b * H
        dc = DC + <size_t>b * H
        # one output array per loop, so that each vectorises
        for k in range(H):
            dc[k] = gy[H + k] + gy[k] * a[H + k] * (one - t[k] * t[k])
        for k in range(H):
            d[k] = dc[k] * a[2 * H + k] * a[k] * (one - a[k])
        for k in range(H):
            d[H + k] = gy[k] * t[k] * a[H + k] * (one - a[H + k])
        for k in range(H):
            d[2 * H + k] = dc[k] * a[k] * (one - a[2 * H + k] * a[2 * H + k])
        memset(d + 3 * H, 0, <size_t>(R - 3 * H) * L.isz)
        for j in range(p):
            ch = _child(g, L, j)
            cc = <real*>elem_v(ch, b, 2 * H, L.isz) + H
            if L.mode == NARY:
                r0 = (3 + _pos(j, L.N)) * H
                for k in range(H):
                    d[r0 + k] += dc[k] * cc[k]
            else:
                f = Fg + <size_t>(b * p + j) * H
                df = DF + <size_t>(b * p + j) * H
                for k in range(H):
                    df[k] = dc[k] * cc[k] * f[k] * (one - f[k])
                    d[3 * H + k] += df[k]
        if L.mode == NARY:
            for k in range(3 * H, R):
                d[k] *= a[k] * (one - a[k])

# ---------------------------------------------------------------- forward


# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.

cdef void fwd_tree(Graph* g, Node* n, real* y) noexcept:
    cdef Lay L
    cdef int b, H, R, isz
    cdef double beta
    cdef real* A
    _layout_isz(g, n, &L, sizeof(real))
    H = L.H
    R = L.R
    isz = L.isz
    A = y if L.mode == RNN else <real*>L.A     # the tree RNN's h is its activated pre-activation
    if L.hx:
        _gather_x(g, &L)
    if L.p:
        _gather(g, &L, <real*>L.HC, L.K, L.mode != CSUM, 0)
        if L.huc:
            _gather(g, &L, <real*>L.CC, L.K, True, 1)
        if L.mode == CSUM:
            _gather_each(g, &L, <real*>L.HM)
    # the N-ary cell's first product writes every row of A (beta 0) and _cell_fwd adds the bias in
    # the pass it makes anyway; the others start from the bias
    beta = 0.0 if L.mode == NARY else 1.0
    if beta != 0:
        for b in range(L.B):
            memcpy(A + <size_t>b * R, L.b.v, <size_t>R * isz)
    if L.hx:
        _gm(c'N', R, L.B, L.I, <real*>L.Wx.v, L.Rt, <real*>L.X, L.I, beta, A, R)
        beta = 1.0
    if L.p:
        if L.mode == CSUM:     # i, o, u see the sum of the children's h; each f_j its own h_j
            _gm(c'N', 3 * H, L.B, H, <real*>L.U.v, L.Rt, <real*>L.HC, H, 1.0, A, R)
            _gm(c'N', H, L.p * L.B, H, <real*>L.U.v + <size_t>3 * H, L.Rt, <real*>L.HM, H, 0.0, <real*>L.F, H)
        else:
            _gm(c'N', R, L.B, L.K, <real*>L.U.v, L.Rt, <real*>L.HC, L.K, beta, A, R)
        if L.huc:              # DyNet's cell terms feed i, o and the f_m, not u
            _gm(c'N', 2 * H, L.B, L.K, <real*>L.Uc.v, L.Uc.dim.d[0], <real*>L.CC, L.K, 1.0, A, R)
            _gm(c'N', R - 3 * H, L.B, L.K, <real*>L.Uc.v + <size_t>2 * H, L.Uc.dim.d[0], <real*>L.CC, L.K,
                1.0, A + <size_t>3 * H, R)
    _cell_fwd(g, &L, A, <real*>L.F, y, <real*>L.T)

# ---------------------------------------------------------------- backward


cdef int _first_live(Graph* g, Node* n) noexcept:
    cdef int j
    for j in range(n.nargs):
        if arg(g, n, j).g != NULL:
            return j
    return -1


cdef void _to(Node* a, int off, real* s, int size, int B) noexcept:
    _scatter(a, sizeof(real), off, s, size, B)


cdef void _child_grad(Graph* g, Lay* L, int j, real* D) noexcept:
    """Child j's gradient from D (the node's pre-activation gradients, L.D)."""
    cdef Node* c = _child(g, L, j)
    cdef int H = L.H, R = L.R, m = _pos(j, L.N), UcR
    cdef real* U = <real*>L.U.v
    cdef real* S = <real*>L.S
    cdef real* f
    cdef int fstride
    if L.mode == CSUM:          # dh_j = U_iou^T d_iou + U_f^T df_j
        _gm(c'T', H, L.B, 3 * H, U, L.Rt, D, R, 0.0, S, H)
        _gm(c'T', H, L.B, H, U + <size_t>3 * H, L.Rt, <real*>L.DF + <size_t>j * H, L.p * H, 1.0, S, H)
        f = <real*>L.F + <size_t>j * H
        fstride = L.p * H
    else:                       # dh_j = U_{e_j}^T d
        _gm(c'T', H, L.B, R, U + <size_t>m * H * L.Rt, L.Rt, D, R, 0.0, S, H)
        f = <real*>L.A + <size_t>(3 + m) * H
        fstride = R
    _to(c, 0, S, H, L.B)
    if L.mode == RNN:
        return
    _scatter_dc(c, sizeof(real), H, <real*>L.DC, f, fstride, L.B)     # dc_j = dc f_j
    if L.huc:                   # dc_j += Uc_{e_j}^T d over the rows the cell terms feed
        UcR = L.Uc.dim.d[0]
        _gm(c'T', H, L.B, 2 * H, <real*>L.Uc.v + <size_t>m * H * UcR, UcR, D, R, 0.0, S, H)
        _gm(c'T', H, L.B, R - 3 * H, <real*>L.Uc.v + (<size_t>m * H * UcR + 2 * H), UcR,
            D + <size_t>3 * H, R, 1.0, S, H)
        _to(c, H, S, H, L.B)


cdef void _piece_direct_r(Lay* L, int role, int part, real* D, int mode) noexcept:
    """One node's share of a weight gradient, G += D (its input)^T, from the node's own buffers
    (D: L.D, typed; part 1: the child-sum forget rows of U); done now or queued as mode says."""
    cdef int H = L.H, R = L.R, k
    if role == 0 and L.mode == CSUM:
        if L.p and part == 0:
            _outer_d(L.U, mode, 3 * H, H, L.B, D, R, <real*>L.HC, H, <real*>L.U.g, L.Rt)
        elif L.p:
            _outer_d(L.U, mode, H, H, L.p * L.B, <real*>L.DF, H, <real*>L.HM, H, <real*>L.U.g + <size_t>3 * H, L.Rt)
        return
    if part:
        return
    if role == 0:
        _outer_d(L.U, mode, R, L.K, L.B, D, R, <real*>L.HC, L.K, <real*>L.U.g, L.Rt)
    elif role == 1:
        _outer_d(L.Wx, mode, R, L.I, L.B, D, R, <real*>L.X, L.I, <real*>L.Wx.g, L.Rt)
    else:
        k = L.Uc.dim.d[0]
        _outer_d(L.Uc, mode, 2 * H, L.K, L.B, D, R, <real*>L.CC, L.K, <real*>L.Uc.g, k)
        _outer_d(L.Uc, mode, R - 3 * H, L.K, L.B, D + <size_t>3 * H, R, <real*>L.CC, L.K,
                 <real*>L.Uc.g + <size_t>2 * H, k)


cdef void bwd_tree(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Lay L
    cdef int b, H, R
    cdef real* D
    _layout_isz(g, n, &L, sizeof(real))
    H = L.H
    R = L.R
    D = <real*>L.D
    if L.mode == RNN:
        L.A = <char*>n.v
    if i == _first_live(g, n):      # once per backward pass: everything else is products with D
        _cell_d(g, &L, <real*>L.A, <real*>L.F, <real*>n.v, <real*>L.T, gy, D, <real*>L.DF, <real*>L.DC)
    if i == 0:                      # U
        if L.U.op != OP_W:
            _piece_direct_r(&L, 0, 0, D, Q_PARAM)
            _piece_direct_r(&L, 0, 1, D, Q_PARAM)
    elif i == 1:                    # b: the columns of D summed (as affine_transform's bias)
        if real is float:
            dyn_colsum_acc_f32(<float*>L.b.g, D, R, L.B)
        else:
            for b in range(L.B):
                _blas.axpy(real_dtype(D), R, 1.0, D + <size_t>b * R, L.b.g)
    elif L.hx and i == 2:           # Wx
        if L.Wx.op != OP_W:
            _piece_direct_r(&L, 1, 0, D, Q_PARAM)
            _piece_direct_r(&L, 1, 1, D, Q_PARAM)
    elif L.hx and i == 3:           # x
        _gm(c'T', L.I, L.B, R, <real*>L.Wx.v, L.Rt, D, R, 0.0, <real*>L.S, L.I)
        _to(L.x, 0, <real*>L.S, L.I, L.B)
    elif L.huc and i == L.c0 - 1:   # Uc
        if L.Uc.op != OP_W:
            _piece_direct_r(&L, 2, 0, D, Q_PARAM)
            _piece_direct_r(&L, 2, 1, D, Q_PARAM)
    else:
        _child_grad(g, &L, i - L.c0, D)

# ---------------------------------------------------------------- tree_state_part: h or c of [h; c]


cdef void fwd_part(Graph* g, Node* n, real* y) noexcept:
    cdef int b, H = n.dim.d[0], isz = sizeof(real)
    cdef Node* a = arg(g, n, 0)
    for b in range(n.dim.bd):
        memcpy(y + <size_t>b * H, elem_v(a, b, 2 * H, isz) + <size_t>n.ia[0] * H * isz,
               <size_t>H * isz)


cdef void bwd_part(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int b, H = n.dim.d[0], isz = sizeof(real)
    cdef Node* a = arg(g, n, 0)
    for b in range(n.dim.bd):
        _blas.vadd(real_dtype(gy), H, gy + <size_t>b * H, elem_g(a, b, 2 * H, isz) + <size_t>n.ia[0] * H * isz)


# ---------------------------------------------------------------- the kernel table


set_kernels(OP_NARY, DEV_CPU, <kfwd_fn>fwd_tree[float], <kfwd_fn>fwd_tree[double],
            <kbwd_fn>bwd_tree[float], <kbwd_fn>bwd_tree[double])
set_kernels(OP_RNN, DEV_CPU, <kfwd_fn>fwd_tree[float], <kfwd_fn>fwd_tree[double],
            <kbwd_fn>bwd_tree[float], <kbwd_fn>bwd_tree[double])
set_kernels(OP_CSUM, DEV_CPU, <kfwd_fn>fwd_tree[float], <kfwd_fn>fwd_tree[double],
            <kbwd_fn>bwd_tree[float], <kbwd_fn>bwd_tree[double])
set_kernels(OP_PART, DEV_CPU, <kfwd_fn>fwd_part[float], <kfwd_fn>fwd_part[double],
            <kbwd_fn>bwd_part[float], <kbwd_fn>bwd_part[double])
