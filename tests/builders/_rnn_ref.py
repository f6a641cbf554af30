"""float64 numpy references of the recurrent builders' equations (one layer,
one sequence of unbatched vectors), written straight from DyNet's documented builder equations."""

import numpy as np


def sig(x):
    return 1 / (1 + np.exp(-x))


def ln(v, g, b):
    return g * (v - v.mean()) / (v.std() + 1e-8) + b


def _mask(masks, k, n):
    m = (masks or {}).get(k)
    return np.ones(n) if m is None else m


def simple(ps, xs, h=None, masks=None):
    Wx, Wh, b = ps
    out = []
    for x in xs:
        a = b + Wx @ (x * _mask(masks, "x", len(x)))
        if h is not None:
            a = a + Wh @ (h * _mask(masks, "h", len(h)))
        h = np.tanh(a)
        out.append((h,))
    return out


def gru(ps, xs, h=None, masks=None, reset_bias=0.0, update_bias=0.0, extra=None):
    Wxz, Whz, bz, Wxr, Whr, br, Wxh, Whh, bh = ps
    H = len(bz)
    out = []
    for x in xs:
        x = x * _mask(masks, "x", len(x))
        if extra:  # layer norm
            px = ln(np.concatenate([Wxz @ x, Wxr @ x, Wxh @ x]), extra["gx"], extra["bx"])
            az, ar, ah = bz + px[:H], br + px[H : 2 * H], bh + px[2 * H :]
        else:
            az, ar, ah = bz + Wxz @ x, br + Wxr @ x, bh + Wxh @ x
        if h is None:
            z = sig(az + update_bias)
            hn = z * np.tanh(ah) * _mask(masks, "g", H)
        else:
            hm = h * _mask(masks, "h", H)
            if extra:
                hz = ln(np.concatenate([Whz @ hm, Whr @ hm]), extra["gh"], extra["bh"])
                z, r = sig(az + hz[:H] + update_bias), sig(ar + hz[H:] + reset_bias)
                cand = np.tanh(ah + ln(Whh @ (r * hm), extra["ghh"], extra["bhh"]))
            else:
                z, r = sig(az + Whz @ hm + update_bias), sig(ar + Whr @ hm + reset_bias)
                cand = np.tanh(ah + Whh @ (r * hm))
            hn = (1 - z) * h + z * cand * _mask(masks, "g", H)
        h = hn
        out.append((h,))
    return out


def vanilla(ps, xs, state=None, masks=None, forget_bias=1.0, extra=None):
    """state: (c, h) or None; returns [(c, h)] per step."""
    Wx, Wh, b = ps[:3]
    H = len(b) // 4
    c, h = state if state is not None else (None, None)
    out = []
    for x in xs:
        x = x * _mask(masks, "x", len(x))
        if extra:
            a = b + ln(Wx @ x, extra["gx"], extra["bx"])
            if h is not None:
                a = a + ln(Wh @ (h * _mask(masks, "h", H)), extra["gh"], extra["bh"])
        else:
            a = b + Wx @ x
            if h is not None:
                a = a + Wh @ (h * _mask(masks, "h", H))
        i, f, o = sig(a[:H]), sig(a[H : 2 * H] + forget_bias), sig(a[2 * H : 3 * H])
        g = np.tanh(a[3 * H :]) * _mask(masks, "g", H)
        c = i * g + (f * c if c is not None else 0)
        h = o * np.tanh(ln(c, extra["gc"], extra["bc"]) if extra else c)
        out.append((c, h))
    return out


def coupled(ps, xs, state=None, masks=None, peephole=True, forget_bias=0.0):
    Wxi, Whi, Wci, bi, Wxo, Who, Wco, bo, Wxc, Whc, bc = ps
    H = len(bi)
    c, h = state if state is not None else (None, None)
    out = []
    mc = _mask(masks, "c", H)
    for x in xs:
        x = x * _mask(masks, "x", len(x))
        ai, ao, ac = bi + Wxi @ x, bo + Wxo @ x, bc + Wxc @ x
        if h is not None:
            hm = h * _mask(masks, "h", H)
            ai, ao, ac = ai + Whi @ hm, ao + Who @ hm, ac + Whc @ hm
        if c is not None and peephole:
            ai = ai + Wci @ (c * mc)
        i = sig(ai - forget_bias)
        g = np.tanh(ac) * _mask(masks, "g", H)
        c = i * g if c is None else (1 - i) * c + i * g
        o = sig(ao + (Wco @ (c * mc) if peephole else 0))
        h = o * np.tanh(c)
        out.append((c, h))
    return out


def stack(step, layer_params, xs, **kw):
    """Several layers: each layer's h sequence feeds the next; returns per layer."""
    per_layer = []
    for ps in layer_params:
        states = step(ps, xs, **kw)
        per_layer.append(states)
        xs = [s[-1] for s in states]
    return per_layer


def arrays(builder):
    return [[p.as_array() for p in ps] for ps in builder.get_parameters()]
