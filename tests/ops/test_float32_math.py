"""float32 tanh/logistic use vectorised approximations (src/_fastmath.h):
check them against float64 references over the whole float range."""

import numpy as np

import dyn as dy


def _grid():
    x = np.concatenate(
        [
            np.linspace(-30, 30, 60001),
            [-1e30, -1e4, -100, -88.7, 88.7, 100, 1e4, 1e30],
            np.geomspace(1e-8, 1e-2, 50),
            -np.geomspace(1e-8, 1e-2, 50),
            [0.0],
        ]
    )
    return x.astype(np.float32)


def test_tanh_float32_accuracy():
    x = _grid()
    y = dy.tanh(dy.inputVector(x)).npvalue()
    want = np.tanh(x.astype(np.float64))
    assert np.all(np.abs(y - want) <= 4e-7 * np.maximum(np.abs(want), 1e-30) + 1e-37)


def test_logistic_float32_accuracy():
    x = _grid()
    y = dy.logistic(dy.inputVector(x)).npvalue()
    with np.errstate(over="ignore"):  # exp(1e30) = inf is the right limit here
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    assert np.all(np.abs(y - want) <= 4e-7 * want + 1e-37)


def test_special_values_float32():
    x = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    t = dy.tanh(dy.inputVector(x)).npvalue()
    s = dy.logistic(dy.inputVector(x)).npvalue()
    assert t[0] == 1.0 and t[1] == -1.0 and np.isnan(t[2])
    assert s[0] == 1.0 and s[1] == 0.0 and np.isnan(s[2])
