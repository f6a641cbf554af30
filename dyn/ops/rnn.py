"""The fused LSTM nodes (defined in dyn/_core/ops/rnn.pyx): lstm_step and its
parts, and DyNet's vanilla_lstm_gates / vanilla_lstm_c / vanilla_lstm_h.

lstm_step: a whole standard-LSTM step as one node (the fast path of
dyn/builders/lstm.py).

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


# ---------------------------------------------------------------- fused LSTM gates
# (DyNet's CompactVanillaLSTMBuilder: vanilla_lstm_gates, vanilla_lstm_c, vanilla_lstm_h)

_SAME = ("none", "all")  # arguments must have equal batch sizes


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _gates_ref(x, h, wx, wh, b, mask_x=None, mask_h=None, weightnoise_std=0.0):
    if mask_x is not None:
        x, h = x * mask_x, h * mask_h
    a = wx @ x.reshape(-1) + wh @ h.reshape(-1) + b.reshape(-1)
    n = h.shape[0]
    a[n : 2 * n] += 1.0
    return np.concatenate([_sigmoid(a[: 3 * n]), np.tanh(a[3 * n :])])


# Wx, Wh and b are unbatched (DyNet shares them over the batch), which the
# generated batch modes cannot express: batched x, h and masks are checked in
# test_linalg_errors.py.
_GATES = [
    Case([(3,), (2,), (8, 3), (8, 2), (8,)], batches=_NONE),
    Case([(1,), (3,), (12, 1), (12, 3), (12,)], {"weightnoise_std": 0.0}, batches=_NONE),
]
_GATES_DROP = [Case([(3,), (2,), (8, 3), (8, 2), (8,), (3,), (2,)], batches=_NONE)]


@op(
    formula="[i;f;o;g] = [sig;sig(+1);sig;tanh](Wx x + Wh h + b)",
    batch="x, h batch 1 or B; weights unbatched",
    reference=_gates_ref,
    cases=_GATES,
    direct=_k.vanilla_lstm_gates,
)
def vanilla_lstm_gates(x_t, h_tm1, Wx, Wh, b, weightnoise_std=0.0):
    """Fused LSTM gates of one step: a {4H} vector per batch element.

    Rows are DyNet's [i; f; o; g] for hidden size H: i, f, o = sigmoid (f with
    a forget bias of 1 inside), g = tanh of Wx x + Wh h + b, computed as one
    node (one matrix product per weight matrix for the whole batch). x_t and
    h_tm1 have batch 1 or B; Wx {4H,I}, Wh {4H,H} and b {4H} are unbatched.
    weightnoise_std > 0 adds fresh N(0, std^2) noise to Wx, Wh and b at every
    forward (used by backward too).

    Example:
        >>> gates = dy.vanilla_lstm_gates(x, h, Wx, Wh, b)
        >>> c = dy.vanilla_lstm_c(c_prev, gates); h = dy.vanilla_lstm_h(c, gates)
    """


@op(
    formula="vanilla_lstm_gates(concatenate(x_t_list), ...)",
    batch="x, h batch 1 or B; weights unbatched",
    reference=_gates_ref,
    cases=_GATES,
    direct=_k.vanilla_lstm_gates_concat,
)
def vanilla_lstm_gates_concat(x_t_list, h_tm1, Wx, Wh, b, weightnoise_std=0.0):
    """vanilla_lstm_gates of the concatenation of the vectors x_t_list (without
    building the concatenation node). A single Expression counts as a
    one-element list.

    Example:
        >>> gates = dy.vanilla_lstm_gates_concat([word, char], h, Wx, Wh, b)
    """


@op(
    formula="vanilla_lstm_gates(x m_x, h m_h, ...)",
    batch="x, h, masks batch 1 or B; weights unbatched",
    reference=_gates_ref,
    cases=_GATES_DROP,
    direct=_k.vanilla_lstm_gates_dropout,
)
def vanilla_lstm_gates_dropout(x_t, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std=0.0):
    """vanilla_lstm_gates with x_t and h_tm1 multiplied elementwise by dropout
    masks {I} and {H} (variational dropout: the masks are inputs, sampled once
    per sequence by the caller). The masks get gradients too (DyNet's none).

    Example:
        >>> gates = dy.vanilla_lstm_gates_dropout(x, h, Wx, Wh, b, mask_x, mask_h)
    """


@op(
    formula="vanilla_lstm_gates(concatenate(x_t_list) m_x, h m_h, ...)",
    batch="x, h, masks batch 1 or B; weights unbatched",
    reference=_gates_ref,
    cases=_GATES_DROP,
    direct=_k.vanilla_lstm_gates_dropout_concat,
)
def vanilla_lstm_gates_dropout_concat(
    x_t_list, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std=0.0
):
    """vanilla_lstm_gates_dropout of the concatenation of the vectors x_t_list.

    Example:
        >>> gates = dy.vanilla_lstm_gates_dropout_concat([w, c], h, Wx, Wh, b, mx, mh)
    """


def _cell_ref(c, gates):
    n = c.shape[0]
    return gates[:n] * gates[3 * n :] + gates[n : 2 * n] * c


def _hidden_ref(c, gates):
    n = c.shape[0]
    return gates[2 * n : 3 * n] * np.tanh(c)


@op(
    formula="c_t = i g + f c_tm1",
    batch="equal batch sizes (as DyNet)",
    reference=_cell_ref,
    cases=[Case([(3,), (12,)], batches=_SAME)],
    direct=_k.vanilla_lstm_c,
)
def vanilla_lstm_c(c_tm1, gates_t):
    """LSTM cell update from the fused gates [i; f; o; g]: c_t = i g + f c_tm1.

    Example:
        >>> c = dy.vanilla_lstm_c(c_prev, gates)
    """


@op(
    formula="h_t = o tanh(c_t)",
    batch="equal batch sizes (as DyNet)",
    reference=_hidden_ref,
    cases=[Case([(3,), (12,)], batches=_SAME)],
    direct=_k.vanilla_lstm_h,
)
def vanilla_lstm_h(c_t, gates_t):
    """LSTM output from the cell and the fused gates [i; f; o; g]: h_t = o tanh(c_t).

    Example:
        >>> h = dy.vanilla_lstm_h(c, gates)
    """
