"""Tensor: what Expression.tensor_value() returns (DyNet's Tensor)."""

import numpy as np


class Tensor:
    def __init__(self, array):
        self._a = np.asarray(array)

    def as_numpy(self):
        return self._a.copy()

    def vec_value(self):
        return self._a.ravel(order="F").tolist()

    def scalar_value(self):
        if self._a.size != 1:
            raise RuntimeError("Tensor.scalar_value: more than one element")
        return float(self._a.ravel()[0])
