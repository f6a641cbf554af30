"""GPU kernels of the fused LSTM nodes of DyNet's CompactVanillaLSTMBuilder: vanilla_lstm_gates
(and its concat / dropout variants), vanilla_lstm_c and vanilla_lstm_h (the CPU's:
dyn/_core/cpu/lstm_gates.pyx; their definition: dyn/_core/ops/rnn.pyx).

The gates node does a whole step's affine transform and nonlinearities with one matrix product
per weight matrix for the whole batch; its backward recomputes the pre-activation gradient d
(4H x B, elementwise) and makes every argument's gradient one product with it. Gate rows are
DyNet's order [i; f; o; g]: i, f (forget bias 1 inside), o sigmoid, g tanh.

aux (items, the CPU's layout): d (4H x B) | x (I x B, when not read in place) | h (H x B, likewise)
| scratch (max(I, H) x B) | the noisy Wx, Wh, b (weight noise: drawn on the device, kept for
backward)."""
from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import cols as _cols
from dyn._core.gpu.kernels._util import sigmoid as _sigmoid

DROP = 1
CELL, HIDDEN = 0, 1


def _mat(a, rows):
    """An unbatched weight (dims + (1,)) as a rows x cols matrix."""
    return a.reshape((rows, -1), order="F")


def _lay(v):
    m, NI, H, B = v.ia[0], v.ia[2], v.ia[3], v.bd
    mx = NI if NI > H else H
    aux = v.aux()
    o = 0
    lay = {}
    for name, n in (("d", 4 * H * B), ("x", NI * B), ("h", H * B), ("tmp", mx * B)):
        lay[name] = aux[o:o + n]
        o += n
    lay["d"] = lay["d"].reshape((4 * H, B), order="F")
    lay["x"] = lay["x"].reshape((NI, B), order="F")
    lay["h"] = lay["h"].reshape((H, B), order="F")
    drop = v.ia[1] & DROP
    if v.fa[0] > 0:
        Wxn = aux[o:o + 4 * H * NI].reshape((4 * H, NI), order="F")
        o += 4 * H * NI
        Whn = aux[o:o + 4 * H * H].reshape((4 * H, H), order="F")
        o += 4 * H * H
        bn = aux[o:o + 4 * H].reshape((4 * H, 1), order="F")
    else:
        Wxn, Whn, bn = (_mat(v.x(m + 1), 4 * H), _mat(v.x(m + 2), 4 * H),
                        v.x(m + 3).reshape((4 * H, 1), order="F"))
    lay.update(m=m, NI=NI, H=H, B=B, drop=drop, Wx=Wxn, Wh=Whn, b=bn)
    return lay


def _inputs(v, L):
    """The concatenated, masked input (I x bx) and the masked previous state (H x bh)."""
    xp, m = v.xp, L["m"]
    xs = [_cols(v.x(k)) for k in range(m)]
    X = xs[0] if m == 1 else xp.concatenate(xs, axis=0)
    h = _cols(v.x(m))
    if L["drop"]:
        X = X * _cols(v.x(m + 4))
        h = h * _cols(v.x(m + 5))
    return X, h


def _gates(v):
    xp = v.xp
    L = _lay(v)
    m, H, B = L["m"], L["H"], L["B"]
    X, Hp = _inputs(v, L)
    if not v.ia[4]:
        L["x"][...] = X
    if not v.ia[5]:
        L["h"][...] = Hp
    if v.fa[0] > 0:
        # fresh N(0, std^2) on every weight for this step (DyNet's weight noise)
        sd = v.fa[0]
        NI = L["NI"]
        L["Wx"][...] = _mat(v.x(m + 1), 4 * H) + sd * v.bk.normal((4 * H, NI), v.dtype)
        L["Wh"][...] = _mat(v.x(m + 2), 4 * H) + sd * v.bk.normal((4 * H, H), v.dtype)
        L["b"][...] = v.x(m + 3).reshape((4 * H, 1), order="F") + sd * v.bk.normal((4 * H, 1), v.dtype)
    y = v.y.reshape((4 * H, B), order="F")
    y[...] = L["b"]
    y += L["Wx"] @ X
    y += L["Wh"] @ Hp
    y[H:2 * H] += 1.0                   # the forget bias
    y[:3 * H] = _sigmoid(xp, y[:3 * H])
    xp.tanh(y[3 * H:], out=y[3 * H:])


def _gates_bwd(v, i):
    xp = v.xp
    L = _lay(v)
    m, H, B, NI = L["m"], L["H"], L["B"], L["NI"]
    y = v.y.reshape((4 * H, B), order="F")
    gy = v.gy.reshape((4 * H, B), order="F")
    # d is recomputed for each argument: 4H x B elementwise, small next to the products
    d = L["d"]
    d[:3 * H] = gy[:3 * H] * y[:3 * H] * (1 - y[:3 * H])
    d[3 * H:] = gy[3 * H:] * (1 - y[3 * H:] * y[3 * H:])
    if i < m:                   # dx_i = (Wx columns of x_i)^T d (times its mask)
        off = sum(v.arg_size(k) for k in range(i))
        s = v.arg_size(i)
        t = L["Wx"][:, off:off + s].T @ d
        if L["drop"]:
            t = t * _cols(v.x(m + 4))[off:off + s]
        v.acc(i, t)
    elif i == m:                # dh = Wh^T d (times its mask)
        t = L["Wh"].T @ d
        if L["drop"]:
            t = t * _cols(v.x(m + 5))
        v.acc(i, t)
    elif i == m + 1:            # dWx = d X^T, summed over the batch
        X = _cols(v.x(0)) if v.ia[4] else L["x"]
        v.acc(i, d @ xp.broadcast_to(X, (NI, B)).T)
    elif i == m + 2:
        Hp = _cols(v.x(m)) if v.ia[5] else L["h"]
        v.acc(i, d @ xp.broadcast_to(Hp, (H, B)).T)
    elif i == m + 3:
        v.acc(i, d.sum(axis=1, keepdims=True))
    elif i == m + 4:            # masks (DyNet gives them none): d mask_x = x * (Wx^T d)
        xs = [_cols(v.x(k)) for k in range(m)]
        X = xs[0] if m == 1 else xp.concatenate([xp.broadcast_to(x, (x.shape[0], xs[0].shape[1]))
                                                 for x in xs], axis=0)
        v.acc(i, (L["Wx"].T @ d) * X)
    else:
        v.acc(i, (L["Wh"].T @ d) * _cols(v.x(m)))


register("vanilla_lstm_gates", _gates, _gates_bwd)

# ---------------------------------------------------------------- vanilla_lstm_c, vanilla_lstm_h
# c_t = i * g + f * c_tm1;  h_t = o * tanh(c_t)  (aux of h: tanh(c_t), kept for backward)


def _acc_rows(v, i, lo, hi, d):
    """Rows lo..hi of argument i's gradient (rows x batch) += d."""
    g = v.gx(i)
    if g is not None:
        g = _cols(g)
        if g.shape[1] == d.shape[1]:
            g[lo:hi] += d
        else:
            g[lo:hi] += d.sum(axis=1, keepdims=True)
        return
    full = v.xp.zeros((v.arg_size(i), d.shape[1]), v.dtype)
    full[lo:hi] = d
    v.acc(i, full)


def _ch(v):
    xp = v.xp
    c = _cols(v.x(0))
    gt = _cols(v.x(1))
    H, B = c.shape[0], v.bd
    y = v.y.reshape((H, B), order="F")
    if v.ia[0] == CELL:
        y[...] = gt[:H] * gt[3 * H:] + gt[H:2 * H] * c
    else:
        t = v.aux((H, B))
        xp.tanh(c, out=t)
        y[...] = gt[2 * H:3 * H] * t


def _ch_bwd(v, i):
    c = _cols(v.x(0))
    gt = _cols(v.x(1))
    H, B = c.shape[0], v.bd
    gy = v.gy.reshape((H, B), order="F")
    if v.ia[0] == CELL:
        if i == 0:
            v.acc(0, gy * gt[H:2 * H])
        else:
            d = v.xp.zeros((4 * H, B), v.dtype)
            d[:H] = gy * gt[3 * H:]
            d[H:2 * H] = gy * c
            d[3 * H:] = gy * gt[:H]
            v.acc(1, d)
    else:
        t = v.aux((H, B))
        if i == 0:
            v.acc(0, gy * gt[2 * H:3 * H] * (1 - t * t))
        else:
            _acc_rows(v, 1, 2 * H, 3 * H, gy * t)


register("vanilla_lstm_c_h", _ch, _ch_bwd)
