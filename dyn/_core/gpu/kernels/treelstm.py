"""GPU kernels of the fused tree nodes: nary_tree_lstm, tree_rnn, child_sum_tree_lstm and
tree_state_part (the CPU's: dyn/_core/cpu/treelstm.pyx; their definition:
dyn/_core/ops/treelstm.pyx).

A node reads its input x, its children's states and the weights; its gates come from one matrix
product per weight matrix for the whole batch, and its backward is fused the same way: the
pre-activation gradients (D, and the child-sum forget gates' DF) and the cell's DC are computed
once, at the first argument backward asks for, and kept in aux; every argument's gradient is a
product with them. In the positional (N-ary) cells child j uses the weight block e_j = min(j, N-1),
so the block inputs are the per-position sums of the children's h (HC) and c (CC), and only the
blocks of the P = min(#children, N) present positions take part.

Gate rows of the N-ary LSTM: [i; o; u; f_0 .. f_{N-1}] ((3 + N) H); of the child-sum LSTM:
[i; o; u; f] (4H).

aux (items, the CPU's layout, which tree_weights reads): X (I x B) | HC (K x B) | CC (K x B, with
Uc) | HM (H x pB, child-sum: column b p + j = child j's h in element b) | A (R x B) | F (H x pB) |
T (H x B) | D (R x B) | DF (H x pB) | DC (H x B) | S.

Weights that come through a tree_weights alias: the CPU leaves their products to the alias's
backward (it scans the graph for its tree nodes, which a NodeView cannot); here every node adds its
own weight gradients into its weight argument (the alias's gradient: the weight's own)."""
from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import cols as _cols
from dyn._core.gpu.kernels._util import part_bwd, part_fwd
from dyn._core.gpu.kernels._util import sigmoid as _sigmoid

NARY, RNN, CSUM = 0, 1, 2


class _Lay:
    """A tree node's arguments and aux regions (the CPU's _layout_isz)."""

    def __init__(self, v):
        self.v = v
        self.mode, self.hx, self.huc = v.ia[0], v.ia[1], v.ia[2]
        self.I, self.H, self.N = v.ia[3], v.ia[4], v.ia[5]
        self.B = B = v.bd
        k = 2
        self.Wx = self.x = self.Uc = None
        if self.hx:
            self.Wx, self.x, k = 2, 3, 4
        if self.huc:
            self.Uc = k
            k += 1
        self.c0 = k
        self.p = p = v.nargs - k
        self.P = P = min(p, self.N)
        H = self.H
        self.Rt = v.arg_dims(0)[0]
        self.R = R = (3 + P) * H if self.mode == NARY else (H if self.mode == RNN else 4 * H)
        self.K = K = P * H if self.mode != CSUM else (H if p > 0 else 0)
        pm = p if self.mode == CSUM else 0
        aux = v.aux()
        o = 0
        for name, rows, cols in (("X", self.I, B), ("HC", K, B), ("CC", K if self.huc else 0, B),
                                 ("HM", H, pm * B), ("A", R, B), ("F", H, pm * B), ("T", H, B),
                                 ("D", R, B), ("DF", H, pm * B), ("DC", H, B)):
            setattr(self, name, aux[o:o + rows * cols].reshape((rows, cols), order="F"))
            o += rows * cols
        if pm:      # column b p + j: child j of element b
            for name in ("HM", "F", "DF"):
                setattr(self, name + "3", getattr(self, name).reshape((H, p, B), order="F"))

    def w(self, i):
        """Weight argument i as a matrix."""
        d = self.v.arg_dims(i)
        return self.v.x(i).reshape((d[0], -1), order="F")

    def child(self, j):
        return _cols(self.v.x(self.c0 + j))

    def pos(self, j):
        return j if j < self.N else self.N - 1


def _gather(L):
    """X, HC (per position, or the sum), CC, HM from the arguments (a loop over the children)."""
    v, H = L.v, L.H
    if L.hx:
        L.X[...] = _cols(v.x(L.x))
    if not L.p:
        return
    by_pos = L.mode != CSUM
    L.HC[...] = 0
    if L.huc:
        L.CC[...] = 0
    for j in range(L.p):
        c = L.child(j)
        m = L.pos(j) if by_pos else 0
        L.HC[m * H:(m + 1) * H] += c[:H]
        if L.huc:
            L.CC[m * H:(m + 1) * H] += c[H:2 * H]
        if L.mode == CSUM:
            L.HM3[:, j, :] = c[:H]


def _tree(v):
    xp = v.xp
    L = _Lay(v)
    H, R, B, K = L.H, L.R, L.B, L.K
    y = v.y.reshape((-1, B), order="F")
    A = y if L.mode == RNN else L.A     # the tree RNN's h is its activated pre-activation
    _gather(L)
    U = L.w(0)
    b = _cols(v.x(1))
    if L.mode == NARY:                  # the bias (and forget bias) in the activation's pass
        A[...] = 0
    else:
        A[...] = b
    if L.hx:
        A += L.w(L.Wx)[:R] @ L.X
    if L.p:
        if L.mode == CSUM:     # i, o, u see the sum of the children's h; each f_j its own h_j
            A[:3 * H] += U[:3 * H] @ L.HC
            L.F[...] = U[3 * H:4 * H] @ L.HM
        else:
            A += U[:R, :K] @ L.HC
        if L.huc:              # DyNet's cell terms feed i, o and the f_m, not u
            Uc = L.w(L.Uc)
            A[:2 * H] += Uc[:2 * H, :K] @ L.CC
            A[3 * H:] += Uc[2 * H:2 * H + R - 3 * H, :K] @ L.CC
    if L.mode == RNN:
        xp.tanh(A, out=A)
        return
    a = A
    if L.mode == NARY:
        a[:3 * H] += b[:3 * H]
        a[3 * H:] += b[3 * H:R] + v.fa[0]
    a[:2 * H] = _sigmoid(xp, a[:2 * H])
    xp.tanh(a[2 * H:3 * H], out=a[2 * H:3 * H])
    if L.mode == NARY:
        a[3 * H:] = _sigmoid(xp, a[3 * H:])
    c = a[:H] * a[2 * H:3 * H]
    for j in range(L.p):       # a loop over the children (arguments)
        cc = L.child(j)[H:2 * H]
        if L.mode == NARY:
            m = L.pos(j)
            f = a[(3 + m) * H:(4 + m) * H]
        else:
            f = L.F3[:, j, :]
            f[...] = _sigmoid(xp, f + (a[3 * H:] + v.fa[0]))
        c = c + f * cc
    y[H:] = c
    xp.tanh(y[H:], out=L.T)
    y[:H] = a[H:2 * H] * L.T


def _cell_d(v, L):
    """D (child-sum: also DF per child) and DC from the output's gradient."""
    H, B = L.H, L.B
    gy = v.gy.reshape((-1, B), order="F")
    D = L.D
    if L.mode == RNN:
        a = v.y.reshape((H, B), order="F")
        D[...] = gy * (1 - a * a)
        return
    a, t, dc = L.A, L.T, L.DC
    gh, gc = gy[:H], gy[H:]
    i, o, u = a[:H], a[H:2 * H], a[2 * H:3 * H]
    dc[...] = gc + gh * o * (1 - t * t)
    D[:H] = dc * u * i * (1 - i)
    D[H:2 * H] = gh * t * o * (1 - o)
    D[2 * H:3 * H] = dc * i * (1 - u * u)
    D[3 * H:] = 0
    for j in range(L.p):
        cc = L.child(j)[H:2 * H]
        if L.mode == NARY:
            r0 = (3 + L.pos(j)) * H
            D[r0:r0 + H] += dc * cc
        else:
            f = L.F3[:, j, :]
            df = L.DF3[:, j, :]
            df[...] = dc * cc * f * (1 - f)
            D[3 * H:] += df
    if L.mode == NARY:
        D[3 * H:] *= a[3 * H:] * (1 - a[3 * H:])


def _acc_block(v, i, r0, r1, c0, c1, d):
    """Rows r0..r1, columns c0..c1 of (unbatched) weight argument i's gradient += d."""
    g = v.gx(i)
    dims = v.arg_dims(i)
    if g is not None:
        g = g.reshape((dims[0], -1), order="F")
        g[r0:r1, c0:c1] += d
        return
    full = v.xp.zeros((dims[0], v.arg_size(i) // dims[0]), v.dtype)
    full[r0:r1, c0:c1] = d
    v.acc(i, full)


def _tree_bwd(v, i):
    L = _Lay(v)
    H, R, K = L.H, L.R, L.K
    first = 0
    while not v.has_grad(first):
        first += 1
    if i == first:              # once per backward pass: everything else is products with D
        _cell_d(v, L)
    D = L.D
    if i == 0:                  # U
        if L.mode == CSUM:
            if L.p:
                _acc_block(v, 0, 0, 3 * H, 0, H, D[:3 * H] @ L.HC.T)
                _acc_block(v, 0, 3 * H, 4 * H, 0, H, L.DF @ L.HM.T)
        elif K:
            _acc_block(v, 0, 0, R, 0, K, D @ L.HC.T)
    elif i == 1:                # b: the columns of D summed
        _acc_block(v, 1, 0, R, 0, 1, D.sum(axis=1, keepdims=True))
    elif L.hx and i == 2:       # Wx
        _acc_block(v, 2, 0, R, 0, L.I, D @ L.X.T)
    elif L.hx and i == 3:       # x
        v.acc(3, L.w(L.Wx)[:R].T @ D)
    elif L.huc and i == L.c0 - 1:   # Uc
        if K:
            _acc_block(v, i, 0, 2 * H, 0, K, D[:2 * H] @ L.CC.T)
            _acc_block(v, i, 2 * H, 2 * H + R - 3 * H, 0, K, D[3 * H:] @ L.CC.T)
    else:
        _child_grad(v, L, i - L.c0)


def _child_grad(v, L, j):
    xp = v.xp
    H, R = L.H, L.R
    U = L.w(0)
    D = L.D
    m = L.pos(j)
    if L.mode == CSUM:          # dh_j = U_iou^T d_iou + U_f^T df_j
        S = U[:3 * H].T @ D[:3 * H] + U[3 * H:4 * H].T @ L.DF3[:, j, :]
        f = L.F3[:, j, :]
    else:                       # dh_j = U_{e_j}^T d
        S = U[:R, m * H:(m + 1) * H].T @ D
        f = L.A[(3 + m) * H:(4 + m) * H]
    if L.mode == RNN:
        v.acc(L.c0 + j, S)
        return
    dc = L.DC * f               # dc_j = dc f_j
    if L.huc:                   # dc_j += Uc_{e_j}^T d over the rows the cell terms feed
        Uc = L.w(L.Uc)
        blk = Uc[:, m * H:(m + 1) * H]
        dc = dc + (blk[:2 * H].T @ D[:2 * H] + blk[2 * H:2 * H + R - 3 * H].T @ D[3 * H:])
    v.acc(L.c0 + j, xp.concatenate([S, dc], axis=0))


register("nary_tree_lstm", _tree, _tree_bwd)
register("tree_rnn", _tree, _tree_bwd)
register("child_sum_tree_lstm", _tree, _tree_bwd)

# ---------------------------------------------------------------- tree_state_part: h or c of [h; c]


def _part(v):
    part_fwd(v, v.ia[0] * v.dims[0])


def _part_bwd(v, i):
    part_bwd(v, v.ia[0] * v.dims[0])


register("tree_state_part", _part, _part_bwd)
