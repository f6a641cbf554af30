"""Fused tree nodes: one graph node per tree node (the fast path of
dyn/builders/tree.py; compiled in dyn/_core/ops/treelstm.pyx, kernels in dyn/_core/cpu/treelstm.pyx).

Each node does all its gates with one matrix product per weight matrix (one
gemm for a whole batch) and a fused backward. A child of an LSTM node is the
child's stacked state ``[h; c]`` ({2H}); a child of a tree-RNN node is its h.
Positional cells (N-ary LSTM, tree RNN) give child j the weight block
``e_j = min(j, N-1)`` as DyNet's NaryTreeLSTMBuilder does, so children past
the N-th share the last block. tests/builders/test_tree_fused.py checks the
nodes against compositions of plain operations, batched and broadcast.
"""

import numpy as np

from dyn._core.ops import treelstm as _k
from dyn.ops import _check
from dyn.ops._registry import Case, op

NARY, RNN, CHILD_SUM = 0, 1, 2


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _positional_sums(children, N, H):
    """[hc_0; ...; hc_{P-1}]: per weight block, the sum of the children's first H rows."""
    P = min(len(children), N)
    out = np.zeros(P * H)
    for j, c in enumerate(children):
        m = min(j, N - 1)
        out[m * H : (m + 1) * H] += c[:H]
    return out, P


def nary_ref(x, Wx, U, b, *children, forget_bias=1.0, Uc=None):
    """numpy N-ary Tree-LSTM node (one batch element): returns [h; c]."""
    NH = U.shape[1]
    H = (U.shape[0] - NH) // 3
    N = NH // H
    hc, P = _positional_sums(children, N, H)
    R = (3 + P) * H
    a = b[:R].copy()
    if x is not None:
        a += Wx[:R] @ x
    if P:
        a += U[:R, : P * H] @ hc
        if Uc is not None:
            cc, _ = _positional_sums([c[H:] for c in children], N, H)
            a[: 2 * H] += Uc[: 2 * H, : P * H] @ cc
            a[3 * H :] += Uc[2 * H : 2 * H + P * H, : P * H] @ cc
    i, o, u = _sig(a[:H]), _sig(a[H : 2 * H]), np.tanh(a[2 * H : 3 * H])
    f = _sig(a[3 * H :] + forget_bias)
    c = i * u
    for j, ch in enumerate(children):
        m = min(j, N - 1)
        c = c + f[m * H : (m + 1) * H] * ch[H:]
    return np.concatenate([o * np.tanh(c), c])


def child_sum_ref(x, Wx, U, b, *children, forget_bias=1.0):
    """numpy child-sum Tree-LSTM node (one batch element): returns [h; c]."""
    H = U.shape[1]
    a = b.copy()
    if x is not None:
        a += Wx @ x
    hsum = sum((ch[:H] for ch in children), np.zeros(H))
    a[: 3 * H] += U[: 3 * H] @ hsum
    i, o, u = _sig(a[:H]), _sig(a[H : 2 * H]), np.tanh(a[2 * H : 3 * H])
    c = i * u
    for ch in children:
        f = _sig(a[3 * H :] + U[3 * H :] @ ch[:H] + forget_bias)
        c = c + f * ch[H:]
    return np.concatenate([o * np.tanh(c), c])


def tree_rnn_ref(x, Wx, U, b, *children):
    """numpy tree-RNN node (one batch element): returns h."""
    H = U.shape[0]
    N = U.shape[1] // H
    hc, P = _positional_sums(children, N, H)
    a = b.copy() + U[:, : P * H] @ hc
    if x is not None:
        a += Wx @ x
    return np.tanh(a)


# The weights are unbatched (shared by the batch), which the generated "all"
# and "bcast" modes cannot express: batched and broadcast x and children are
# checked in tests/builders/test_tree_fused.py.
_NONE = ("none",)


@op(
    formula="a = b + Wx x + sum_j U_{e_j} h_j; i,o,f_m = sig (f + forget_bias), u = tanh; "
    "c = i u + sum_j f_{e_j} c_j; [h; c] = [o tanh(c); c]",
    batch="x, children batch 1 or B; weights unbatched",
    reference=nary_ref,
    cases=[
        Case([(3,), (10, 3), (10, 4), (10,), (4,), (4,)], batches=_NONE),
        Case([(2,), (8, 2), (8, 2), (8,)], batches=_NONE),  # a leaf
        Case([(3,), (10, 3), (10, 4), (10,), (4,), (4,), (4,)], {"forget_bias": 0.0}, batches=_NONE),
    ],
)
def nary_tree_lstm(x, Wx, U, b, *children, forget_bias=1.0, Uc=None):
    """One node of the N-ary Tree-LSTM (Tai et al. 2015, section 3.2), fused.

    With hidden size H and N child positions, gate rows are
    ``[i; o; u; f_0; ...; f_{N-1}]``: Wx {(3+N)H, I}, U {(3+N)H, NH}, b {(3+N)H}.
    Child j (a {2H} vector ``[h_j; c_j]``) uses block ``e_j = min(j, N-1)``::

        a   = b + Wx x + sum_j U[:, e_j] h_j
        i, o = sig(a_i), sig(a_o);  u = tanh(a_u);  f_m = sig(a_{f_m} + forget_bias)
        c   = i * u + sum_j f_{e_j} * c_j;  h = o * tanh(c)

    and the node's value is ``[h; c]``. Only the rows and columns of the
    P = min(#children, N) present positions are computed. x may be None (no
    input term; Wx is then not read). Uc {(2+N)H, NH}, rows ``[i; o; f_0..]``,
    adds DyNet's cell terms ``sum_j Uc[:, e_j] c_j`` to i, o and the f_m.

    Example:
        >>> left = dy.nary_tree_lstm(x1, Wx, U, b)
        >>> right = dy.nary_tree_lstm(x2, Wx, U, b)
        >>> parent = dy.nary_tree_lstm(None, Wx, U, b, left, right)
    """
    fb = _check.number(forget_bias, "nary_tree_lstm", "forget_bias")
    return _k.tree_node(NARY, x, Wx, U, b, list(children), Uc, fb)


@op(
    formula="a = b + Wx x + [U_iou sum_j h_j; 0]; i,o = sig, u = tanh; "
    "f_j = sig(a_f + U_f h_j + forget_bias); c = i u + sum_j f_j c_j; [h; c] = [o tanh(c); c]",
    batch="x, children batch 1 or B; weights unbatched",
    reference=child_sum_ref,
    cases=[
        Case([(3,), (8, 3), (8, 2), (8,), (4,), (4,)], batches=_NONE),
        Case([(2,), (8, 2), (8, 2), (8,)], {"forget_bias": 0.5}, batches=_NONE),
    ],
)
def child_sum_tree_lstm(x, Wx, U, b, *children, forget_bias=1.0):
    """One node of the child-sum Tree-LSTM (Tai et al. 2015, section 3.1), fused.

    Gate rows are ``[i; o; u; f]``: Wx {4H, I}, U {4H, H}, b {4H}. With
    children ``[h_j; c_j]`` ({2H} each, any number, unordered)::

        h~  = sum_j h_j
        i, o, u = sig, sig, tanh of (b + Wx x + U h~) rows i, o, u
        f_j = sig(b_f + Wx_f x + U_f h_j + forget_bias)      (one per child)
        c   = i * u + sum_j f_j * c_j;  h = o * tanh(c)

    The node's value is ``[h; c]``; x may be None (no input term).

    Example:
        >>> node = dy.child_sum_tree_lstm(x, Wx, U, b, child1, child2, child3)
    """
    fb = _check.number(forget_bias, "child_sum_tree_lstm", "forget_bias")
    return _k.tree_node(CHILD_SUM, x, Wx, U, b, list(children), None, fb)


@op(
    formula="h = tanh(b + Wx x + sum_j U_{e_j} h_j)",
    batch="x, children batch 1 or B; weights unbatched",
    reference=tree_rnn_ref,
    cases=[
        Case([(3,), (4, 3), (4, 8), (4,), (4,), (4,)], batches=_NONE),
        Case([(3,), (4, 3), (4, 8), (4,), (4,), (4,), (4,)], batches=_NONE),
    ],
)
def tree_rnn(x, Wx, U, b, *children):
    """One node of a recursive tree network (the DyNet paper's Figure 2), fused.

    U {H, NH} holds one block per child position; child j (its h, {H}) uses
    block ``e_j = min(j, N-1)``::

        h = tanh(b + Wx x + sum_j U[:, e_j] h_j)

    x may be None (Figure 2's inner nodes: ``h = tanh(U [h_l; h_r] + b)``).

    Example:
        >>> h = dy.tree_rnn(None, None, U, b, h_left, h_right)
    """
    return _k.tree_node(RNN, x, Wx, U, b, list(children), None, 1.0)
