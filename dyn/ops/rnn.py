"""lstm_step: a whole standard-LSTM step as one node (the fast path of
dyn/builders/lstm.py; compiled in src/_k_rnn.pyx).

The builders project a whole sequence's inputs with one matrix-matrix product
``P = b + Wx [x_1 ... x_T]`` and then run one ``lstm_step`` node per token on
column t of P; the node's value is the stacked state ``[h_t; c_t]``.
tests/builders/test_lstm_fused.py checks it against the composition of plain
operations.
"""

import numpy as np

from dyn._core.ops import rnn as _k
from dyn.ops._check import index as _index
from dyn.ops._check import number as _number
from dyn.ops._registry import Case, op


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _step_ref(p, prev=None, Wh=None, mask_h=None, mask_g=None, col=0, forget_bias=1.0):
    p = p.reshape(p.shape[0], -1)
    H = p.shape[0] // 4
    a = p[:, col].copy()
    c_prev = 0.0
    if prev is not None:
        h_prev = prev[:H] * (1 if mask_h is None else mask_h)
        a += Wh @ h_prev
        c_prev = prev[H:]
    i, f, o, g = _sig(a[:H]), _sig(a[H : 2 * H] + forget_bias), _sig(a[2 * H : 3 * H]), np.tanh(a[3 * H :])
    if mask_g is not None:
        g = g * mask_g
    c = i * g + f * c_prev
    return np.concatenate([o * np.tanh(c), c])


def _ref_dropout(p, prev, Wh, mask_h, mask_g, col=0, forget_bias=1.0):
    return _step_ref(p, prev, Wh, mask_h, mask_g, col, forget_bias)


# Wh is unbatched (shared by the batch), which the generated "all" mode cannot
# express: batched p, prev and masks are checked in tests/builders/test_lstm_fused.py.
_NONE = ("none",)


@op(
    formula="[h; c] with a = p[:, col] + Wh h_prev, i,f,o = sig (f + forget_bias), g = tanh, "
    "c = i g + f c_prev, h = o tanh(c)",
    batch="p, prev batch 1 or B; Wh unbatched",
    reference=_step_ref,
    cases=[
        Case([(8, 3), (4,), (8, 2)], {"col": 1}, batches=_NONE),
        Case([(12,), (6,), (12, 3)], {"forget_bias": 0.0}, batches=_NONE),
    ],
)
def lstm_step(p, prev, Wh, col=0, forget_bias=1.0):
    """One standard LSTM step from a precomputed input projection, as one node.

    With hidden size H and gate rows in DyNet's order [i; f; o; g]:

        a = p[:, col] + Wh h_prev          (p = b + Wx x, computed beforehand)
        i = sig(a_i), f = sig(a_f + forget_bias), o = sig(a_o), g = tanh(a_g)
        c = i g + f c_prev,  h = o tanh(c)

    Args:
        p: {4H} or {4H, T}: the input projections (bias included) of one step
            or of a whole sequence; column ``col`` is used.
        prev: the previous step's value [h_prev; c_prev] {2H}, or None on a
            first step (no recurrent terms; then Wh is None too).
        Wh: {4H, H} recurrent weights, unbatched.
        col: the column of p.
        forget_bias: added to the forget gate's pre-activation.

    Returns:
        [h; c], {2H} per batch element (pick_range(s, 0, H) is h).

    Example:
        >>> P = dy.affine_transform([b, Wx, dy.concatenate_cols(xs)])
        >>> s = dy.lstm_step(P, None, None, col=0)
        >>> s = dy.lstm_step(P, s, Wh, col=1)
    """
    if type(col) is not int:
        col = _index(col, "lstm_step", "col")
    return _k.lstm_step(
        p, prev, Wh, None, None, col, _number(forget_bias, "lstm_step", "forget_bias"), "lstm_step"
    )


@op(
    formula="lstm_step with h_prev * mask_h and g * mask_g",
    batch="p, prev, masks batch 1 or B; Wh unbatched",
    reference=_ref_dropout,
    cases=[Case([(8, 2), (4,), (8, 2), (2,), (2,)], {"col": 1}, batches=_NONE)],
)
def lstm_step_dropout(p, prev, Wh, mask_h, mask_g, col=0, forget_bias=1.0):
    """lstm_step with dropout masks: ``h_prev * mask_h`` feeds the recurrent
    product (variational dropout, Gal & Ghahramani) and ``g * mask_g`` the
    cell update (recurrent dropout, Semeniuta et al.). Either mask may be
    None; prev None (a first step) needs mask_h None.

    Example:
        >>> s = dy.lstm_step_dropout(P, s, Wh, z_h, z_g, col=t)
    """
    name = "lstm_step_dropout"
    if type(col) is not int:
        col = _index(col, name, "col")
    return _k.lstm_step(p, prev, Wh, mask_h, mask_g, col, _number(forget_bias, name, "forget_bias"), name)


def _part_ref(s, which):
    H = s.shape[0] // 2
    return s[:H] if which == 0 else s[H:]


@op(
    formula="h = s[0:H] of s = [h; c]",
    batch="per element",
    reference=lambda s: _part_ref(s, 0),
    cases=[Case([(6,)], batches=("none", "all"))],
)
def lstm_step_h(s):
    """h_t of an lstm_step value s = [h_t; c_t] (a cheap copy node).

    Example:
        >>> h = dy.lstm_step_h(dy.lstm_step(P, s, Wh, col=t))
    """
    return _k.lstm_step_part(s, 0, "lstm_step_h")


@op(
    formula="c = s[H:2H] of s = [h; c]",
    batch="per element",
    reference=lambda s: _part_ref(s, 1),
    cases=[Case([(6,)], batches=("none", "all"))],
)
def lstm_step_c(s):
    """c_t of an lstm_step value s = [h_t; c_t].

    Example:
        >>> c = dy.lstm_step_c(s)
    """
    return _k.lstm_step_part(s, 1, "lstm_step_c")


@op(
    formula="W = Wh (the same memory); backward: dWh = sum_t d_t h_{t-1}^T of its lstm_step nodes",
    batch="unbatched only (a weight)",
    reference=lambda w: w,
    cases=[Case([(8, 2)], batches=("none",))],
    direct=_k.lstm_step_weight,
)
def lstm_step_weight(Wh):
    """The recurrent matrix {4H,H} of a sequence of lstm_step nodes.

    Its value is Wh itself (no copy). Passed as the Wh of lstm_step nodes,
    it gathers their weight gradient into one matrix-matrix product over
    all the steps at the end of backward, instead of one rank-1 update of
    the whole matrix per step (what makes long sequences and large hidden
    sizes fast).

    Example:
        >>> W = dy.lstm_step_weight(Wh)
        >>> s = dy.lstm_step(P, s, W, col=t)
    """
