"""GPU kernels of lstm_step (one whole step of a standard LSTM as one node: the builders' fast
path), lstm_step_weight, lstm_state_c and lstm_step_h/_c (the CPU's: dyn/_core/cpu/rnn.pyx; their
definitions: dyn/_core/ops/rnn.pyx).

A step: gates from column `col` of the input projections P plus Wh h_{t-1} (one product for the
whole batch), the nonlinearities, the cell and the output. Gate rows are DyNet's order
[i; f; o; g]. The builders' steps (HVAL) have h_t as their value and keep c_t in the head of their
aux, [c_t; DCIN] per batch element, where the next step reads c_{t-1} and adds its gradient (DCIN:
zeroed in forward, read and cleared by the node's own backward). An h-valued previous step that
the autobatching engine passes per member (ABA_CATAUX) comes with pointers to each member's head.

aux (items, the CPU's layout): the head (HVAL: 2H per element), then regions of B columns:
gates after the nonlinearities 4H | d of the pre-activations 4H | tanh(c_t) H | d c_t H |
(masked) h_{t-1} when not read in place H | Wh^T d H.

The recurrent weight's gradient: each step adds d_t h_{t-1}^T into its Wh argument (one product
per step for the whole batch); through an lstm_step_weight alias that is the alias's gradient,
which the alias's backward adds into Wh (the CPU defers the products to the alias instead, which
scans the graph for its steps: a NodeView cannot)."""
from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import cols as _cols
from dyn._core.gpu.kernels._util import part_bwd, part_fwd
from dyn._core.gpu.kernels._util import sigmoid as _sigmoid
from dyn._core.gpu.kernels._util import sum_to as _sum_to

PREV, MASK_H, MASK_G, HVAL, PSTEP = 1, 2, 4, 8, 16


class _Step:
    """A step's arguments and aux regions (the CPU's _layout)."""

    def __init__(self, v):
        self.v = v
        self.H = H = v.ia[3]
        self.B = B = v.bd
        self.T = v.ia[2]
        self.col = v.ia[0]
        self.flags = f = v.ia[1]
        self.prev = self.Wh = self.mh = self.mg = None
        k = 1
        if f & PREV:
            self.prev, self.Wh, k = 1, 2, 3
        if f & MASK_H:
            self.mh = k
            k += 1
        if f & MASK_G:
            self.mg = k
        aux = v.aux()
        o = 2 * H * B if f & HVAL else 0
        self.head = aux[:o].reshape((2 * H, B), order="F") if o else None
        for name, n in (("G", 4 * H), ("D", 4 * H), ("TC", H), ("DC", H), ("HM", H), ("TMP", H)):
            setattr(self, name, aux[o:o + n * B].reshape((n, B), order="F"))
            o += n * B

    def wh(self):
        return self.v.x(self.Wh).reshape((4 * self.H, self.H), order="F")

    def prev_h(self):
        """h_{t-1}: H x (prev's batch)."""
        x = _cols(self.v.x(self.prev))
        return x if self.flags & PSTEP else x[:self.H]

    def prev_c(self):
        """c_{t-1}: from prev's value [h; c], or an h-valued prev's head (per member: its pointers)."""
        v, H, i = self.v, self.H, self.prev
        if not (self.flags & PSTEP):
            return _cols(v.x(i))[H:]
        if v.per_member(i):
            bd = v.arg_bd(i)
            ptrs = v.member_ptrs(i, False, True)
            # per member: one view per element's head (pointers, not one array)
            return v.xp.stack([v.wrap(ptrs[bd + k], (H,)) for k in range(bd)], axis=-1)
        return v.arg_aux(i, (2 * H, v.arg_bd(i)))[:H]

    def x_used(self):
        """The h_{t-1} the product reads (masked): prev's value in place, or HM."""
        if self.v.ia[4] and not self.v.per_member(self.prev):
            return self.prev_h()
        return self.HM

    def mask(self, k):
        return _cols(self.v.x(k))


def _step(v):
    xp = v.xp
    L = _Step(v)
    H, B = L.H, L.B
    P = v.x(0)
    P = P.reshape((4 * H, L.T, P.shape[-1]), order="F")[:, L.col, :]
    G = L.G
    G[...] = P
    pc = None
    if L.prev is not None:
        X = L.x_used()
        if X is L.HM:
            h = L.prev_h()
            L.HM[...] = h * L.mask(L.mh) if L.mh is not None else h
        G += L.wh() @ X
        pc = L.prev_c()
    fb = v.fa[0]
    if fb != 0:
        G[H:2 * H] += fb
    G[:3 * H] = _sigmoid(xp, G[:3 * H])
    xp.tanh(G[3 * H:], out=G[3 * H:])
    g = G[3 * H:]
    if L.mg is not None:
        g = g * L.mask(L.mg)
    c = G[:H] * g
    if pc is not None:
        c = c + G[H:2 * H] * pc
    y = v.y.reshape((-1, B), order="F")
    if L.flags & HVAL:
        L.head[:H] = c
        L.head[H:] = 0          # DCIN
        c = L.head[:H]
        h = y
    else:
        y[H:] = c
        c = y[H:]
        h = y[:H]
    xp.tanh(c, out=L.TC)
    h[...] = G[2 * H:3 * H] * L.TC


def _dgates(v, L):
    """D and DC, once per backward pass; an h-valued step's DCIN is read here and cleared."""
    H, B = L.H, L.B
    gy = v.gy.reshape((-1, B), order="F")
    if L.flags & HVAL:
        dh, dcx = gy, L.head[H:]
    else:
        dh, dcx = gy[:H], gy[H:]
    a, t, D, DC = L.G, L.TC, L.D, L.DC
    i, f, o, g = a[:H], a[H:2 * H], a[2 * H:3 * H], a[3 * H:]
    DC[...] = dcx + dh * o * (1 - t * t)
    D[2 * H:3 * H] = dh * t * o * (1 - o)
    if L.mg is None:
        D[:H] = DC * g * i * (1 - i)
        D[3 * H:] = DC * i * (1 - g * g)
    else:
        m = L.mask(L.mg)
        D[:H] = DC * g * m * i * (1 - i)
        D[3 * H:] = DC * i * m * (1 - g * g)
    if L.prev is None:
        D[H:2 * H] = 0
    else:
        D[H:2 * H] = DC * L.prev_c() * f * (1 - f)
    if L.flags & HVAL:
        dcx[...] = 0


def _step_bwd(v, i):
    xp = v.xp
    L = _Step(v)
    H, B = L.H, L.B
    first = 0
    while not v.has_grad(first):
        first += 1
    if i == first:
        _dgates(v, L)
    D, DC = L.D, L.DC
    if i == 0:                  # column col of each batch element of P
        g = v.gx(0)
        if g is not None:
            g = g.reshape((4 * H, L.T, g.shape[-1]), order="F")
            g[:, L.col, :] += _sum_to(D, g.shape[-1])
        else:
            full = xp.zeros((4 * H, L.T, B), v.dtype)
            full[:, L.col, :] = D
            v.acc(0, full)
    elif L.prev is not None and i == 2:     # dWh += d h_{t-1}^T, summed over the batch
        X = L.x_used()
        v.acc(2, D @ xp.broadcast_to(X, (H, B)).T)
    elif i == L.mg:
        v.acc(i, DC * L.G[:H] * L.G[3 * H:])
    else:                       # prev or mask_h: both need Wh^T d
        t = L.TMP
        t[...] = L.wh().T @ D
        if i == L.mh:
            v.acc(i, t * L.prev_h())
            return
        dh = t * L.mask(L.mh) if L.mh is not None else t
        dc = DC * L.G[H:2 * H]
        if not (L.flags & PSTEP):
            v.acc(1, xp.concatenate([dh, dc], axis=0))
            return
        v.acc(1, dh)
        if v.per_member(1):     # into each member's DCIN (per member: pointers)
            bd = v.arg_bd(1)
            ptrs = v.member_ptrs(1, True, True)
            off = H * v.itemsize
            for k in range(bd):
                q = v.wrap(ptrs[bd + k] + off, (H,))
                q += dc[:, k]
        else:
            bd = v.arg_bd(1)
            v.arg_aux(1, (2 * H, bd))[H:] += _sum_to(dc, bd)


register("lstm_step", _step, _step_bwd)

# ---------------------------------------------------------------- lstm_step_weight
# The recurrent matrix as seen by a sequence's steps: its argument's memory (no copy); its gradient
# (the steps' products) goes into Wh.


def _weight(v):
    v.alias_arg(0)


def _weight_bwd(v, i):
    v.acc(0, v.gy)


register("lstm_step_weight", _weight, _weight_bwd)

# ---------------------------------------------------------------- lstm_state_c
# c_t of an h-valued step: a copy out of its aux head; backward adds into the step's DCIN.


def _cell(v):
    H, B = v.dims[0], v.bd
    v.y.reshape((H, B), order="F")[...] = v.arg_aux(0, (2 * H, v.arg_bd(0)))[:H]


def _cell_bwd(v, i):
    H, B = v.dims[0], v.bd
    v.arg_aux(0, (2 * H, v.arg_bd(0)))[H:] += _sum_to(v.gy.reshape((H, B), order="F"), v.arg_bd(0))


register("lstm_state_c", _cell, _cell_bwd)

# ---------------------------------------------------------------- lstm_step_h, lstm_step_c
# y = rows [off, off + H) of each batch element of s ({2H}); ia[0] = off


def _part(v):
    part_fwd(v, v.ia[0])


def _part_bwd(v, i):
    part_bwd(v, v.ia[0])


register("lstm_step_part", _part, _part_bwd)
