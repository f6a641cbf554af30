"""GPU kernels of the conv family (the CPU's: dyn/_core/cpu/conv.pyx): conv2d / conv2d_bias,
maxpooling2d, filter1d_narrow.

conv2d is im2col + a matrix product: the patches are gathered with fancy indexing from a
zero-padded copy of x (rows: output pixel, columns: filter tap (fh, fw, ci)), Y = Col F batched
over the batch (a batch-1 x or filter broadcast by matmul). Backward: dF = Col^T dY and
dCol = dY F^T, added back into the padded image tap by tap (windows of one tap never overlap).
maxpooling2d picks, as the CPU, the first maximum of a window in (fw, fh) order, a NaN winning,
padding never; the pick's offset inside the window is kept in the node's scratch for backward.
"""
import numpy as np

from dyn._core.gpu.device import register

# ---------------------------------------------------------------- geometry (dyn/_core/ops/conv.pxd)


def _out(X, F, s, valid):
    return (X - F + s) // s if valid else (X + s - 1) // s


def _pad(X, F, s, out, valid):
    if valid:
        return 0
    total = (out - 1) * s + F - X
    return total // 2 if total > 0 else 0


class _Geo:
    def __init__(self, v, FH, FW):
        d = v.arg_dims(0)
        self.H, self.W = d[0], d[1]
        self.C = d[2] if len(d) > 2 else 1
        self.xb = v.arg_bd(0)
        self.sh, self.sw = v.ia[0], v.ia[1]
        valid = bool(v.ia[2])
        self.FH, self.FW = FH, FW
        self.OH = _out(self.H, FH, self.sh, valid)
        self.OW = _out(self.W, FW, self.sw, valid)
        self.pt = _pad(self.H, FH, self.sh, self.OH, valid)
        self.pl = _pad(self.W, FW, self.sw, self.OW, valid)
        # the padded image holds every window
        self.Hp = max((self.OH - 1) * self.sh + FH, self.pt + self.H)
        self.Wp = max((self.OW - 1) * self.sw + FW, self.pl + self.W)

    def padded(self, xp, x, fill, dtype):
        """x (H, W, C, xb) inside a (Hp, Wp, C, xb) array of `fill`."""
        p = xp.full((self.Hp, self.Wp, self.C, self.xb), fill, dtype=dtype)
        p[self.pt:self.pt + self.H, self.pl:self.pl + self.W] = x
        return p

    def windows(self, xp, p):
        """p[oh * sh + fh, ow * sw + fw] as (OH, OW, FH, FW, C, xb) (a gather)."""
        r = np.arange(self.OH)[:, None, None, None] * self.sh + np.arange(self.FH)[None, None, :, None]
        c = np.arange(self.OW)[None, :, None, None] * self.sw + np.arange(self.FW)[None, None, None, :]
        return p[xp.asarray(r), xp.asarray(c)]

    def unpad(self, p):
        return p[self.pt:self.pt + self.H, self.pl:self.pl + self.W]

    def add_windows(self, p, d):
        """The transpose of windows, accumulated: p[oh * sh + fh, ow * sw + fw] += d[oh, ow, fh, fw]
        (d: (OH, OW, FH, FW, C, xb)). A host loop over the filter taps: within a tap the windows'
        pixels are distinct, so each is one strided slice update."""
        for fh in range(self.FH):
            for fw in range(self.FW):
                p[fh:fh + (self.OH - 1) * self.sh + 1:self.sh,
                  fw:fw + (self.OW - 1) * self.sw + 1:self.sw] += d[:, :, fh, fw]

# ---------------------------------------------------------------- conv2d


def _conv_geo(v):
    fd = v.arg_dims(1)
    return _Geo(v, fd[0], fd[1]), fd[3], v.arg_bd(1)


def _x4(v, q):
    return v.x(0).reshape(q.H, q.W, q.C, q.xb, order="F")


def _col(v, q):
    """Col: (xb, P, K), P = (oh, ow), K = (fh, fw, ci)."""
    xp = v.xp
    w = q.windows(xp, q.padded(xp, _x4(v, q), 0, v.dtype))          # (OH, OW, FH, FW, C, xb)
    return xp.ascontiguousarray(w.transpose(5, 0, 1, 2, 3, 4)).reshape(
        q.xb, q.OH * q.OW, q.FH * q.FW * q.C)


def _filt(v, q, Co, fb):
    """F: (fb, K, Co) in Col's tap order."""
    f = v.x(1)                                                       # (FH, FW, C, Co, fb)
    return v.xp.ascontiguousarray(f.transpose(4, 0, 1, 2, 3)).reshape(fb, q.FH * q.FW * q.C, Co)


def _conv(v):
    q, Co, fb = _conv_geo(v)
    col = _col(v, q)
    F = _filt(v, q, Co, fb)
    if fb == 1 and q.xb > 1:     # one product for the whole batch
        Y = (col.reshape(q.xb * q.OH * q.OW, -1) @ F[0]).reshape(q.xb, q.OH * q.OW, Co)
    else:
        Y = col @ F                                                  # (Bc, P, Co)
    Y = Y.reshape(-1, q.OH, q.OW, Co).transpose(1, 2, 3, 0)          # (OH, OW, Co, Bc)
    if v.nargs == 3:
        Y = Y + v.x(2).reshape(1, 1, Co, -1)
    v.y[...] = Y


def _conv_bwd(v, i):
    xp = v.xp
    gy = v.gy                                                        # (OH, OW, Co, B)
    if i == 2:
        v.acc(2, gy.sum(axis=(0, 1)))
        return
    q, Co, fb = _conv_geo(v)
    Bc = max(q.xb, fb)
    if Bc < v.bd:                # only the bias was batched
        gy = gy.sum(axis=-1, keepdims=True)
    dY = xp.ascontiguousarray(gy.transpose(3, 0, 1, 2)).reshape(Bc, q.OH * q.OW, Co)
    if i == 1:                   # dF = Col^T dY
        col = _col(v, q)
        if fb == 1 and q.xb == Bc:
            K = col.shape[2]
            d = (col.reshape(-1, K).T @ dY.reshape(-1, Co))[None]
        else:
            d = col.transpose(0, 2, 1) @ dY                          # (Bc, K, Co)
        d = d.reshape(-1, q.FH, q.FW, q.C, Co).transpose(1, 2, 3, 4, 0)
        v.acc(1, d)
        return
    F = _filt(v, q, Co, fb)
    dcol = dY @ F.transpose(0, 2, 1)                                 # (Bc, P, K)
    if q.xb < Bc:
        dcol = dcol.sum(axis=0, keepdims=True)
    d = dcol.reshape(q.xb, q.OH, q.OW, q.FH, q.FW, q.C).transpose(1, 2, 3, 4, 5, 0)
    p = xp.zeros((q.Hp, q.Wp, q.C, q.xb), dtype=v.dtype)
    q.add_windows(p, d)
    v.acc(0, q.unpad(p))


register("conv2d", _conv, _conv_bwd)
register("conv2d_bias", _conv, _conv_bwd)

# ---------------------------------------------------------------- maxpooling2d
# scratch (one item per output element): the pick's offset fh + FH * fw inside its window


def _pool(v):
    xp = v.xp
    q = _Geo(v, v.ia[3], v.ia[4])
    x = _x4(v, q)
    w = q.windows(xp, q.padded(xp, x, 0, v.dtype))                  # (OH, OW, FH, FW, C, xb)
    n = q.FH * q.FW
    w = w.transpose(0, 1, 3, 2, 4, 5).reshape(q.OH, q.OW, n, q.C, q.xb)   # taps in (fw, fh) order
    fw = np.arange(q.FW)[None, None, :, None]
    fh = np.arange(q.FH)[None, None, None, :]
    ih = np.arange(q.OH)[:, None, None, None] * q.sh + fh - q.pt
    iw = np.arange(q.OW)[None, :, None, None] * q.sw + fw - q.pl
    valid = (ih >= 0) & (ih < q.H) & (iw >= 0) & (iw < q.W)          # (OH, OW, FW, FH): host
    valid = xp.asarray(valid.reshape(q.OH, q.OW, n, 1, 1))
    m = xp.max(xp.where(valid, w, -xp.inf), axis=2)                 # a NaN propagates
    hit = valid & ((w == m[:, :, None]) | (xp.isnan(w) & xp.isnan(m)[:, :, None]))
    at = xp.argmax(hit.astype(np.int8), axis=2)                     # the first pick
    v.y.reshape(q.OH, q.OW, q.C, q.xb, order="F")[...] = m
    v.aux(v.shape).reshape(q.OH, q.OW, q.C, q.xb, order="F")[...] = at


def _pool_bwd(v, i):
    xp = v.xp
    q = _Geo(v, v.ia[3], v.ia[4])
    at = v.aux(v.shape).reshape(q.OH, q.OW, q.C, q.xb, order="F").astype(np.int64)
    fw, fh = at // q.FH, at % q.FH
    oh = xp.arange(q.OH).reshape(-1, 1, 1, 1)
    ow = xp.arange(q.OW).reshape(1, -1, 1, 1)
    ih = oh * q.sh + fh - q.pt
    iw = ow * q.sw + fw - q.pl
    c = xp.arange(q.C).reshape(1, 1, -1, 1)
    b = xp.arange(q.xb).reshape(1, 1, 1, -1)
    flat = ih + q.H * (iw + q.W * (c + q.C * b))                    # column-major offset in x
    d = xp.zeros((q.H * q.W * q.C * q.xb,), dtype=v.dtype)
    v.bk.scatter_add_rows(d, flat.reshape(-1), v.gy.reshape(q.OH, q.OW, q.C, q.xb, order="F").reshape(-1))
    v.acc(0, d.reshape(q.H, q.W, q.C, q.xb, order="F"))


register("maxpooling2d", _pool, _pool_bwd)

# ---------------------------------------------------------------- filter1d_narrow
# x: n x s, f: n x d x fids; y[fid, j] = sum_{i,k} f[i, k, fid] x[i, j + k]


def _f1d_geo(v):
    xd, fd = v.arg_dims(0), v.arg_dims(1)
    rows = xd[0]
    s = xd[1] if len(xd) > 1 else 1
    d = fd[1] if len(fd) > 1 else 1
    fids = fd[2] if len(fd) > 2 else 1
    return rows, s, d, fids, s - d + 1, v.arg_bd(0), v.arg_bd(1)


def _f1d_col(v, rows, s, d, ofl, xb):
    """Col: (xb, ofl, K), K = (i, k): x[i, j + k]."""
    xp = v.xp
    x = v.x(0).reshape(rows, s, xb, order="F")
    J = np.arange(ofl)[:, None] + np.arange(d)[None, :]
    w = x[:, xp.asarray(J)]                                          # (rows, ofl, d, xb)
    return xp.ascontiguousarray(w.transpose(3, 1, 0, 2)).reshape(xb, ofl, rows * d)


def _f1d_filt(v, rows, d, fids, fb):
    f = v.x(1).reshape(rows, d, fids, fb, order="F")
    return v.xp.ascontiguousarray(f.transpose(3, 0, 1, 2)).reshape(fb, rows * d, fids)


def _f1d(v):
    rows, s, d, fids, ofl, xb, fb = _f1d_geo(v)
    Y = _f1d_col(v, rows, s, d, ofl, xb) @ _f1d_filt(v, rows, d, fids, fb)   # (B, ofl, fids)
    v.y[...] = Y.transpose(2, 1, 0)


def _f1d_bwd(v, i):
    xp = v.xp
    rows, s, d, fids, ofl, xb, fb = _f1d_geo(v)
    dY = v.gy.transpose(2, 1, 0)                                     # (B, ofl, fids)
    if i == 1:                   # dF = Col^T dY
        col = _f1d_col(v, rows, s, d, ofl, xb)
        dF = col.transpose(0, 2, 1) @ dY                             # (B, K, fids)
        v.acc(1, dF.reshape(-1, rows, d, fids).transpose(1, 2, 3, 0))
        return
    dcol = dY @ _f1d_filt(v, rows, d, fids, fb).transpose(0, 2, 1)   # (B, ofl, K)
    if xb < dcol.shape[0]:
        dcol = dcol.sum(axis=0, keepdims=True)
    dcol = dcol.reshape(xb, ofl, rows, d)
    dx = xp.zeros((rows, s, xb), dtype=v.dtype)
    for k in range(d):           # a host loop over the filter's width: the runs overlap
        dx[:, k:k + ofl] += dcol[:, :, :, k].transpose(2, 1, 0)
    v.acc(0, dx)


register("filter1d_narrow", _f1d, _f1d_bwd)
