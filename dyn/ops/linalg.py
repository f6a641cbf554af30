"""Linear algebra, circular convolution, n-gram sums, to_device and the fused
LSTM nodes (compiled in src/_k_linalg.pyx and src/_k_lstm.pyx)."""

from __future__ import annotations

import numpy as np

from dyn._core.ops import linalg as _k
from dyn._core.ops import lstm as _kl
from dyn.ops._registry import Case, op

_NONE = ("none",)  # DyNet runs these on unbatched tensors only
_SAME = ("none", "all")  # arguments must have equal batch sizes


# ---------------------------------------------------------------- matrix and tensor products


@op(
    formula="y_ij = x_ij + v_i",
    batch="batch 1 broadcasts",
    reference=lambda x, y: x + y.reshape(-1, 1),
    cases=[Case([(3, 4), (3,)]), Case([(2, 1), (2,)]), Case([(4, 2), (4, 1)], batches=_SAME)],
    direct=_k.colwise_add,
)
def colwise_add(x, y):
    """Add the vector y (M) to every column of the M x N matrix x.

    Example:
        >>> scores = dy.colwise_add(W * H, b)
    """


def _c31_ref(x, y, b=None):
    out = np.tensordot(x, y.reshape(-1), axes=([2], [0]))
    return out if b is None else out + b.reshape(out.shape)


@op(
    formula="z_ij = sum_k x_ijk y_k",
    batch="batch 1 broadcasts",
    reference=_c31_ref,
    cases=[Case([(2, 3, 4), (4,)]), Case([(3, 1, 2), (2,)], batches=_SAME)],
    direct=_k.contract3d_1d,
)
def contract3d_1d(x, y):
    """Contract the third dimension of the 3-d tensor x {I,J,K} with the vector
    y {K}: an I x J matrix.

    Example:
        >>> M = dy.contract3d_1d(T, v)
    """


@op(
    formula="z_ij = sum_k x_ijk y_k + b_ij",
    batch="batch 1 broadcasts",
    reference=_c31_ref,
    cases=[Case([(2, 3, 4), (4,), (2, 3)])],
    direct=_k.contract3d_1d_bias,
)
def contract3d_1d_bias(x, y, b):
    """contract3d_1d(x, y) + b for a bias b {I,J}.

    Example:
        >>> M = dy.contract3d_1d_bias(T, v, B)
    """


def _c311_ref(x, y, z, b=None):
    out = np.einsum("ijk,k,j->i", x, y.reshape(-1), z.reshape(-1))
    return out if b is None else out + b.reshape(-1)


@op(
    formula="t_i = sum_jk x_ijk y_k z_j",
    batch="unbatched only (as DyNet)",
    reference=_c311_ref,
    cases=[Case([(2, 3, 4), (4,), (3,)], batches=_NONE), Case([(3, 2, 1), (1,), (2,)], batches=_NONE)],
    direct=_k.contract3d_1d_1d,
)
def contract3d_1d_1d(x, y, z):
    """Contract the 3-d tensor x {I,J,K} with y {K} (third dimension) and z {J}
    (second): a vector {I}.

    Example:
        >>> t = dy.contract3d_1d_1d(T, u, v)
    """


@op(
    formula="t_i = sum_jk x_ijk y_k z_j + b_i",
    batch="unbatched only (as DyNet)",
    reference=_c311_ref,
    cases=[Case([(2, 3, 4), (4,), (3,), (2,)], batches=_NONE)],
    direct=_k.contract3d_1d_1d_bias,
)
def contract3d_1d_1d_bias(x, y, z, b):
    """contract3d_1d_1d(x, y, z) + b for a bias b {I}.

    Example:
        >>> t = dy.contract3d_1d_1d_bias(T, u, v, b)
    """


# ---------------------------------------------------------------- square matrices
# Gradients are checked in test_linalg_errors.py on well-conditioned inputs:
# the generated and hypothesis-drawn matrices can be near singular, where
# finite differences are meaningless.
_SQUARE = [
    Case([(3, 3)], batches=_NONE, grad=False),
    Case([(2, 2)], batches=_NONE, grad=False),
    Case([(4, 4)], batches=_NONE, grad=False),
    Case([(1, 1)], batches=_NONE, grad=False),
]


@op(
    formula="Y = X^-1; dX = -Y^T dY Y^T",
    batch="unbatched only (as DyNet)",
    reference=np.linalg.inv,
    cases=_SQUARE,
    direct=_k.inverse,
)
def inverse(x):
    """Inverse of a square matrix (LU with partial pivoting; a singular matrix
    gives inf/nan entries).

    Example:
        >>> Sinv = dy.inverse(S)
    """


@op(
    formula="y = log |det X|; dX = X^-T",
    batch="unbatched only (as DyNet)",
    reference=lambda x: np.array([np.linalg.slogdet(x)[1]]),
    cases=_SQUARE,
    direct=_k.logdet,
)
def logdet(x):
    """Log of the absolute determinant of a square matrix, {1} (DyNet's
    returns NaN for a negative determinant; this returns log|det|).

    Example:
        >>> nll = 0.5 * dy.logdet(Sigma) + ...
    """


@op(
    formula="y = tr(x y^T) = sum_ij x_ij y_ij",
    batch="unbatched only (as DyNet)",
    reference=lambda x, y: np.array([np.sum(x * y)]),
    cases=[Case([(3, 4), (3, 4)], batches=_NONE), Case([(5,), (5,)], batches=_NONE)],
    direct=_k.trace_of_product,
)
def trace_of_product(x, y):
    """trace(x y^T) of two same-shaped tensors, {1}.

    Example:
        >>> t = dy.trace_of_product(A, B)
    """


# ---------------------------------------------------------------- sequence filters


def _circ_ref(u, v, sign):
    a, b, n = u.reshape(-1), v.reshape(-1), u.shape[0]
    return np.array([sum(a[i] * b[(sign * i + k) % n] for i in range(n)) for k in range(n)]).reshape(u.shape)


# a column vector {n,1} counts as a vector {n} (DyNet's LooksLikeVector); the
# unequal shapes also keep these out of test_hypothesis.py, whose drawn
# shapes and batches these unbatched vector ops reject too often
_CIRC = [
    Case([(5,), (5, 1)], batches=_NONE),
    Case([(4, 1), (4,)], batches=_NONE),
    Case([(1,), (1, 1)], batches=_NONE),
]


@op(
    formula="y_k = sum_i u_i v_((k - i) mod n)",
    batch="unbatched only (as DyNet)",
    reference=lambda u, v: _circ_ref(u, v, -1),
    cases=_CIRC,
    direct=_k.circ_conv,
)
def circ_conv(u, v):
    """Circular convolution of two vectors of the same size.

    Example:
        >>> bound = dy.circ_conv(role, filler)
    """


@op(
    formula="y_k = sum_i u_i v_((i + k) mod n)",
    batch="unbatched only (as DyNet)",
    reference=lambda u, v: _circ_ref(u, v, 1),
    cases=_CIRC,
    direct=_k.circ_corr,
)
def circ_corr(u, v):
    """Circular correlation of two vectors of the same size (the inverse
    binding of circ_conv in holographic representations).

    Example:
        >>> filler = dy.circ_corr(role, bound)
    """


def _kmh_ref(x, n):
    return np.stack([x[:, j : j + n].sum(axis=1) for j in range(x.shape[1] - n + 1)], axis=1)


@op(
    formula="y_:j = sum_{k<n} x_:(j+k)",
    batch="unbatched only (as DyNet)",
    reference=_kmh_ref,
    cases=[
        Case([(3, 5)], {"n": 2}, batches=_NONE),
        Case([(2, 4)], {"n": 4}, batches=_NONE),
        Case([(2, 3)], {"n": 1}, batches=_NONE),
    ],
    direct=_k.kmh_ngram,
)
def kmh_ngram(x, n):
    """n-gram sums of the columns of a matrix: column j of the result is the sum
    of columns j .. j+n-1 of x (cols - n + 1 columns).

    Example:
        >>> bigrams = dy.kmh_ngram(embeddings, 2)
    """


@op(
    formula="y = x (copied to the device)",
    batch="per element",
    reference=lambda x, device_str: x,
    cases=[Case([(3, 2)], {"device_str": "CPU"}, batches=_SAME)],
    direct=_k.to_device,
)
def to_device(e, device_str):
    """Copy an expression to a device. This build has only the CPU: 'CPU' gives
    a copy (gradients pass through), a GPU device raises ValueError.

    Example:
        >>> y = dy.to_device(x, "CPU")
    """


# ---------------------------------------------------------------- fused LSTM


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
    direct=_kl.vanilla_lstm_gates,
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
    direct=_kl.vanilla_lstm_gates_concat,
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
    direct=_kl.vanilla_lstm_gates_dropout,
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
    direct=_kl.vanilla_lstm_gates_dropout_concat,
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
    direct=_kl.vanilla_lstm_c,
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
    direct=_kl.vanilla_lstm_h,
)
def vanilla_lstm_h(c_t, gates_t):
    """LSTM output from the cell and the fused gates [i; f; o; g]: h_t = o tanh(c_t).

    Example:
        >>> h = dy.vanilla_lstm_h(c, gates)
    """
