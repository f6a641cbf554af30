"""float64 numpy references of the tree builders' equations, and tree walkers
shared by the tree tests.

A test tree is nested Python: an int is a leaf (its input is E[int]), a list
an inner node without input, a tuple ``(word, [children])`` an inner node
with input E[word].
"""

import numpy as np

import dyn as dy


def sig(v):
    return 1 / (1 + np.exp(-v))


def layer_norm(v, g, b):
    return g * (v - v.mean()) / (v.std() + 1e-8) + b


def split(t):
    """(word or None, children) of a test tree node."""
    if isinstance(t, int):
        return t, []
    if isinstance(t, tuple):
        return t[0], list(t[1])
    return None, list(t)


def dyn_encode(builder, E, t, batch=None):
    """The TreeState of test tree t (batch: leaves/inputs from lookup_batch of word + k)."""
    word, kids = split(t)
    x = None
    if word is not None:
        x = (
            E[word]
            if batch is None
            else dy.lookup_batch(E, [(word + k) % E.shape()[0] for k in range(batch)])
        )
    if not kids:
        return builder.add_input(x)
    return builder.compose([dyn_encode(builder, E, k, batch) for k in kids], x=x)


def np_encode(cell, E, t, layers=1):
    """Per-layer states of the root of t: cell(layer, x, kid_states) -> state; h is state[0]."""
    word, kids = split(t)
    ks = [np_encode(cell, E, k, layers) for k in kids]
    x = E[word] if word is not None else None
    out = []
    for layer in range(layers):
        s = cell(layer, x, [k[layer] for k in ks])
        out.append(s)
        x = s[0]
    return out


def blocks(kids, N, part):
    """{j: sum} of the children's part (0 h, 1 c) per weight block e_j = min(j, N-1)."""
    out = {}
    for j, k in enumerate(kids):
        m = min(j, N - 1)
        out[m] = out.get(m, 0) + k[part]
    return out


def nary_cell(ps, N, H, fb=1.0, cell_terms=False, ln=None):
    """The N-ary Tree-LSTM (Tai et al. section 3.2, DyNet's NaryTreeLSTMBuilder); state (h, c)."""

    def cell(layer, x, kids):
        Wx, U, b = ps[layer][:3]
        hb = blocks(kids, N, 0)
        ah = sum((U[:, m * H : (m + 1) * H] @ v for m, v in hb.items()), np.zeros(U.shape[0]))
        ax = Wx @ x if x is not None else np.zeros(U.shape[0])
        if ln is not None:  # layer norm over the rows the node uses
            R = (3 + min(len(kids), N)) * H
            g = ln[layer]
            a = b[:R] + (layer_norm(ax[:R], g["gx"][:R], g["bx"][:R]) if x is not None else 0)
            if kids:
                a = a + layer_norm(ah[:R], g["gh"][:R], g["bh"][:R])
        else:
            a = b + ax + ah
        if cell_terms:
            Uc = ps[layer][3]
            ac = sum(
                (Uc[:, m * H : (m + 1) * H] @ v for m, v in blocks(kids, N, 1).items()), np.zeros(Uc.shape[0])
            )
            a = a.copy()
            a[: 2 * H] += ac[: 2 * H]
            a[3 * H :] += ac[2 * H :][: len(a) - 3 * H]
        i, o, u = sig(a[:H]), sig(a[H : 2 * H]), np.tanh(a[2 * H : 3 * H])
        c = i * u
        for j, (_, cj) in enumerate(kids):
            m = 3 + min(j, N - 1)
            c = c + sig(a[m * H : (m + 1) * H] + fb) * cj
        tc = np.tanh(layer_norm(c, ln[layer]["gc"], ln[layer]["bc"])) if ln is not None else np.tanh(c)
        return o * tc, c

    return cell


def child_sum_cell(ps, H, fb=1.0):
    """The child-sum Tree-LSTM (Tai et al. section 3.1); state (h, c)."""

    def cell(layer, x, kids):
        Wx, U, b = ps[layer]
        a = b + (Wx @ x if x is not None else 0)
        hsum = sum((k[0] for k in kids), np.zeros(H))
        i = sig(a[:H] + U[:H] @ hsum)
        o = sig(a[H : 2 * H] + U[H : 2 * H] @ hsum)
        u = np.tanh(a[2 * H : 3 * H] + U[2 * H : 3 * H] @ hsum)
        c = i * u
        for hj, cj in kids:
            c = c + sig(a[3 * H :] + U[3 * H :] @ hj + fb) * cj
        return o * np.tanh(c), c

    return cell


def tree_rnn_cell(U, b, H, N, Wx=None):
    """Figure 2's tree RNN; state (h,). Without Wx a leaf's h is its input."""

    def cell(layer, x, kids):
        if not kids and Wx is None:
            return (x,)
        a = b + sum((U[:, m * H : (m + 1) * H] @ v for m, v in blocks(kids, N, 0).items()), np.zeros(H))
        return (np.tanh(a + (Wx @ x if x is not None else 0)),)

    return cell


def lstm_last(ps, xs, fb=1.0):
    """DyNet's VanillaLSTM (per layer [W_x, W_h, b], rows i, f, o, g) over xs: the last top-layer h."""
    for W_x, W_h, b in ps:
        H = W_h.shape[1]
        h = c = None
        outs = []
        for x in xs:
            a = b + W_x @ x + (W_h @ h if h is not None else 0)
            i, f, o, g = sig(a[:H]), sig(a[H : 2 * H] + fb), sig(a[2 * H : 3 * H]), np.tanh(a[3 * H :])
            c = i * g + (f * c if c is not None else 0)
            h = o * np.tanh(c)
            outs.append(h)
        xs = outs
    return xs[-1]


def seq_tree_cell(dirs, fb=1.0):
    """DyNet's Uni/BidirectionalTreeLSTMBuilder: LSTMs over [x, h_1..h_n] (and reversed)."""

    def cell(layer, x, kids):
        first = [x] if x is not None else []
        hs = [k[0] for k in kids]
        outs = [lstm_last(ps, first + (hs if d == 0 else hs[::-1]), fb) for d, ps in enumerate(dirs)]
        return (np.concatenate(outs),)

    return cell


def arrays(param_lists):
    """as_array of nested lists of Parameters."""
    if isinstance(param_lists, list):
        return [arrays(p) for p in param_lists]
    return param_lists.as_array()
