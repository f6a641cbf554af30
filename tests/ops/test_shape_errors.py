"""Bad inputs to the shape/selection ops raise at creation, name the op, and
leave the graph usable."""

import numpy as np
import pytest

import dyn as dy


def _m():
    return dy.inputTensor(np.arange(12.0).reshape(3, 4))


def _b():
    return dy.inputTensor(np.arange(24.0).reshape(3, 4, 2), batched=True)


def _v(n=3):
    return dy.inputVector(list(range(n)))


CASES = [
    # concatenate / concatenate_cols / concatenate_to_batch
    ("concatenate", lambda: dy.concatenate((_m(), _m())), TypeError),
    ("concatenate", lambda: dy.concatenate([]), ValueError),
    ("concatenate", lambda: dy.concatenate([_m(), _v(4)], 1), ValueError),
    ("concatenate", lambda: dy.concatenate([_m(), _m()], 7), ValueError),
    ("concatenate", lambda: dy.concatenate([_m(), _m()], -1), ValueError),
    ("concatenate", lambda: dy.concatenate([_m(), 3.0]), TypeError),
    (
        "concatenate",
        lambda: dy.concatenate([_b(), dy.inputTensor(np.ones((3, 4, 3)), batched=True)]),
        ValueError,
    ),
    ("concatenate_cols", lambda: dy.concatenate_cols([_v(3), _v(4)]), ValueError),
    ("concatenate_cols", lambda: dy.concatenate_cols((_v(3),)), TypeError),
    ("concatenate_to_batch", lambda: dy.concatenate_to_batch([_m(), _v(3)]), ValueError),
    ("concatenate_to_batch", lambda: dy.concatenate_to_batch([]), ValueError),
    ("concatenate_to_batch", lambda: dy.concatenate_to_batch((_m(),)), TypeError),
    # transpose / reshape
    ("transpose", lambda: dy.transpose(_m(), [0, 2]), ValueError),
    ("transpose", lambda: dy.transpose(_m(), (1, 0)), TypeError),
    ("transpose", lambda: dy.transpose(_m(), [0]), ValueError),
    ("transpose", lambda: dy.transpose(_m(), [1, -1]), IndexError),
    ("transpose", lambda: dy.transpose(_m(), list(range(8))), ValueError),
    ("reshape", lambda: dy.reshape(_m(), [12]), TypeError),
    ("reshape", lambda: dy.reshape(_m(), (5,)), ValueError),
    ("reshape", lambda: dy.reshape(_m(), (0, 12)), ValueError),
    ("reshape", lambda: dy.reshape(_b(), (12,), batch_size=3), ValueError),
    ("reshape", lambda: dy.reshape(_m(), (12,), batch_size=0), ValueError),
    # pick / pick_batch
    ("pick", lambda: dy.pick(_m(), 3), IndexError),
    ("pick", lambda: dy.pick(_m(), -1), IndexError),
    ("pick", lambda: dy.pick(_m(), 4, 1), IndexError),
    ("pick", lambda: dy.pick(_m(), 1.5), TypeError),
    ("pick", lambda: dy.pick(_m(), 0, 9), ValueError),
    ("pick", lambda: dy.pick(_m(), 0, "a"), TypeError),
    ("pick_batch", lambda: dy.pick_batch(_b(), [0, 1, 2]), ValueError),
    ("pick_batch", lambda: dy.pick_batch(_b(), [0, 3]), IndexError),
    ("pick_batch", lambda: dy.pick_batch(_b(), [0, -1]), IndexError),
    ("pick_batch", lambda: dy.pick_batch(_b(), []), ValueError),
    ("pick_batch", lambda: dy.pick_batch(_b(), 1), TypeError),
    ("pick_batch", lambda: dy.pick_batch(_b(), [0.0, 1.0]), TypeError),
    # batch elements
    ("pick_batch_elem", lambda: dy.pick_batch_elem(_b(), 2), IndexError),
    ("pick_batch_elem", lambda: dy.pick_batch_elem(_b(), -1), IndexError),
    ("pick_batch_elems", lambda: dy.pick_batch_elems(_b(), [0, 5]), IndexError),
    ("pick_batch_elems", lambda: dy.pick_batch_elems(_b(), []), ValueError),
    # rows / columns / ranges
    ("select_rows", lambda: dy.select_rows(_m(), [0, 3]), IndexError),
    ("select_rows", lambda: dy.select_rows(_m(), [-1]), IndexError),
    ("select_rows", lambda: dy.select_rows(_m(), []), ValueError),
    ("select_rows", lambda: dy.select_rows(_m(), "ab"), TypeError),
    ("select_cols", lambda: dy.select_cols(_m(), [4]), IndexError),
    ("select_cols", lambda: dy.select_cols(dy.inputTensor(np.ones((2, 2, 2))), [0]), ValueError),
    ("pick_range", lambda: dy.pick_range(_m(), 2, 2), ValueError),
    ("pick_range", lambda: dy.pick_range(_m(), 0, 4), IndexError),
    ("pick_range", lambda: dy.pick_range(_m(), -1, 2), IndexError),
    ("strided_select", lambda: dy.strided_select(_m(), [0], [], []), ValueError),
    ("strided_select", lambda: dy.strided_select(_m(), [1], [3], []), ValueError),
    ("strided_select", lambda: dy.strided_select(_m(), [1, 1, 1, 1], [], []), ValueError),
    ("strided_select", lambda: dy.strided_select(_m(), 1, [], []), TypeError),
    # pow and Expression operators
    ("pow", lambda: dy.pow(_m(), _v(2)), ValueError),
    ("pow", lambda: dy.pow(_b(), dy.inputTensor(np.ones((1, 3)), batched=True)), ValueError),
    ("Expression ind", lambda: _m()[3], IndexError),
    ("Expression ind", lambda: _m()[-4], IndexError),
    ("Expression ind", lambda: _m()["a"], TypeError),
    ("Expression ind", lambda: _m()[1.0], TypeError),
    ("Expression ind", lambda: _m()[(1, 2)], TypeError),
    ("Expression ind", lambda: _m()[2:2], ValueError),
    ("Expression ind", lambda: _m()[::-1], ValueError),
    ("Expression ind", lambda: _m()[:, :, :, :], IndexError),
]


@pytest.mark.parametrize("name,make,exc", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_raises_and_graph_survives(name, make, exc):
    with pytest.raises(exc, match=name):
        make()
    x = _m()
    y = dy.pick(dy.transpose(x), 1)
    assert np.allclose(y.npvalue(), [1.0, 5.0, 9.0])


def test_pow_unsupported_exponent():
    with pytest.raises(TypeError):
        _m() ** "a"


def test_set_index_checks():
    p = dy.pick(_m(), 0)
    with pytest.raises(IndexError, match="pick.set_index"):
        p.set_index(3)
    pb = dy.pick_batch(_b(), [0, 1])
    with pytest.raises(ValueError, match="pick_batch.set_index"):
        pb.set_index([0])
    with pytest.raises(IndexError, match="pick_batch.set_index"):
        pb.set_index([0, 3])
    assert np.allclose(p.npvalue(), [0, 1, 2, 3])


def test_stale_expression_as_list_element():
    x = _m()
    dy.renew_cg()
    with pytest.raises(ValueError, match="stale"):
        dy.concatenate([_m(), x])
