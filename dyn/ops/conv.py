"""Convolution and pooling (compiled in dyn/_core/ops/conv.pyx and dyn/_core/cpu/conv.pyx).

Layout as DyNet: a batch element of ``x`` is H x W x C, column-major (a 2-D
``x`` has C = 1); a conv2d filter is FH x FW x Ci x Co. ``stride`` and
``ksize`` are [rows, columns]. VALID output: ceil((X - F + 1) / s); SAME:
ceil(X / s), zero-padded as TensorFlow (the odd padding pixel goes last).

DyNet's Python API has no conv1d_* functions (they are C++ only); the 1-D
filter it does expose is :func:`filter1d_narrow`.
"""

from __future__ import annotations

import numpy as np

from dyn._core.ops import conv as _k
from dyn.ops import _check
from dyn.ops._registry import Case, op


def _strides(stride, name):
    # the kernel checks the rest; True is an int to Python, never a stride here
    if isinstance(stride, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in stride):
        raise TypeError("%s: stride must be a list of two integers, got %r" % (name, stride))


def _geometry(X, F, s, is_valid):
    """Output size and padding before, as in the kernel."""
    if is_valid:
        return -(-(X - F + 1) // s), 0
    out = -(-X // s)
    return out, max((out - 1) * s + F - X, 0) // 2


def _windows(x, kh, kw, stride, is_valid, fill):
    """x (H, W, C) -> windows (OH, OW, kh, kw, C), padding filled with `fill`."""
    H, W, _ = x.shape
    (OH, pt), (OW, pl) = _geometry(H, kh, stride[0], is_valid), _geometry(W, kw, stride[1], is_valid)
    Hp, Wp = max(H + pt, (OH - 1) * stride[0] + kh), max(W + pl, (OW - 1) * stride[1] + kw)
    xp = np.full((Hp, Wp, x.shape[2]), fill)
    xp[pt : pt + H, pl : pl + W] = x
    return np.array(
        [
            [xp[i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw] for j in range(OW)]
            for i in range(OH)
        ]
    )


def _conv_ref(x, f, stride, is_valid=True, b=None):
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    win = _windows(x3, f.shape[0], f.shape[1], stride, is_valid, 0.0)
    y = np.einsum("ijhwc,hwco->ijo", win, f)
    return y if b is None else y + b


def _pool_ref(x, ksize, stride, is_valid=True):
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    y = _windows(x3, ksize[0], ksize[1], stride, is_valid, -np.inf).max(axis=(2, 3))
    return y.reshape(y.shape[:2]) if x.ndim == 2 else y


def _f1d_ref(x, f):
    x2 = x.reshape(x.shape[0], -1)
    f3 = f.reshape(f.shape[0], f.shape[1] if f.ndim > 1 else 1, -1)
    d = f3.shape[1]
    return np.array(
        [
            [np.sum(x2[:, j : j + d] * f3[:, :, k]) for j in range(x2.shape[1] - d + 1)]
            for k in range(f3.shape[2])
        ]
    )


_CONV = [
    Case([(5, 4, 2), (3, 2, 2, 3)], {"stride": [1, 1]}),
    Case([(6, 5), (2, 3, 1, 2)], {"stride": [2, 2]}),
    Case([(5, 4, 2), (3, 2, 2, 2)], {"stride": [1, 1], "is_valid": False}),
    Case([(6, 7, 1), (3, 2, 1, 2)], {"stride": [2, 3], "is_valid": False}),
    Case([(4, 4, 3), (4, 4, 3, 1)], {"stride": [1, 1]}),
]


@op(
    formula="y[i,j,o] = sum_{h,w,c} x[i s0 + h - p0, j s1 + w - p1, c] f[h,w,c,o]",
    batch="batch 1 broadcasts (a batched filter: one filter per batch element)",
    reference=_conv_ref,
    cases=_CONV,
)
def conv2d(x, f, stride, is_valid=True):
    """2-D convolution (cross-correlation, as DyNet and TensorFlow).

    im2col and one BLAS gemm for the whole batch; backward is two gemms and
    col2im.

    Args:
        x: H x W x Ci (or H x W: Ci = 1) per batch element.
        f: FH x FW x Ci x Co filters.
        stride: [row stride, column stride], positive.
        is_valid: True: VALID (no padding), output ceil((X - F + 1) / s);
            False: SAME, output ceil(X / s), zero padding split as TensorFlow.

    Returns:
        OH x OW x Co per batch element.

    Example:
        >>> h = dy.rectify(dy.conv2d(img, F, [1, 1], is_valid=False))
    """
    _strides(stride, "conv2d")
    return _k.conv2d(x, f, stride, _check.flag(is_valid, "conv2d", "is_valid"))


@op(
    formula="y[i,j,o] = conv2d(x, f)[i,j,o] + b[o]",
    batch="batch 1 broadcasts",
    reference=lambda x, f, b, stride, is_valid=True: _conv_ref(x, f, stride, is_valid, b),
    cases=[
        Case([(5, 4, 2), (3, 2, 2, 3), (3,)], {"stride": [1, 1]}),
        Case([(5, 5, 1), (2, 2, 1, 2), (2,)], {"stride": [2, 1], "is_valid": False}),
    ],
)
def conv2d_bias(x, f, b, stride, is_valid=True):
    """conv2d plus a bias per output channel.

    Args:
        x: H x W x Ci (or H x W) per batch element.
        f: FH x FW x Ci x Co filters.
        b: bias vector of Co elements.
        stride: [row stride, column stride].
        is_valid: VALID (True) or SAME (False) padding, as conv2d.

    Example:
        >>> h = dy.rectify(dy.conv2d_bias(img, F, b, [1, 1]))
    """
    _strides(stride, "conv2d_bias")
    return _k.conv2d(x, f, stride, _check.flag(is_valid, "conv2d_bias", "is_valid"), b)


@op(
    formula="y[i,j,c] = max_{h<kh, w<kw} x[i s0 + h - p0, j s1 + w - p1, c] (padding ignored)",
    batch="per batch element",
    reference=_pool_ref,
    cases=[
        Case([(4, 6, 2)], {"ksize": [2, 2], "stride": [2, 2]}, batches=("none", "all")),
        Case([(5, 5)], {"ksize": [3, 2], "stride": [1, 2]}, batches=("none", "all")),
        Case([(5, 4, 2)], {"ksize": [2, 3], "stride": [2, 2], "is_valid": False}, batches=("none", "all")),
    ],
    direct=_k.maxpooling2d,
)
def maxpooling2d(x, ksize, stride, is_valid=True):
    """2-D max pooling over H x W, channel by channel.

    The gradient goes to the (first) maximum of each window. With SAME
    padding the padded positions never win.

    Args:
        x: H x W x C (or H x W) per batch element.
        ksize: [window rows, window columns].
        stride: [row stride, column stride].
        is_valid: VALID (True) or SAME (False) output size, as conv2d.

    Example:
        >>> p = dy.maxpooling2d(h, [2, 2], [2, 2])
    """


@op(
    formula="y[k, j] = sum_{i, t} f[i, t, k] x[i, j + t]",
    batch="batch 1 broadcasts (DyNet: unbatched only)",
    reference=_f1d_ref,
    cases=[Case([(3, 6), (3, 2, 4)]), Case([(2, 5), (2, 3)]), Case([(4, 3), (4, 3, 2)])],
    direct=_k.filter1d_narrow,
)
def filter1d_narrow(x, f):
    """Narrow 1-D correlation of the columns of x with each filter.

    Args:
        x: n x s (n features over s positions).
        f: n x d (one filter) or n x d x fids; d <= s.

    Returns:
        fids x (s - d + 1).

    Example:
        >>> feats = dy.filter1d_narrow(sentence, filters)   # fids x (s - d + 1)
    """
