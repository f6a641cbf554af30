"""GPU kernels of tree_weights (the CPU's: dyn/_core/cpu/treeweights.pyx), the alias of a weight
through which the fused tree nodes read it.

On the CPU the tree nodes leave the products of such a weight's gradient to this node's backward,
which runs them as one product per group of alike nodes. On this device the tree nodes' kernels
(dyn/_core/gpu/kernels/treelstm.py) add their weight gradients themselves, so the alias is plain:
its value is the weight's (its own memory when the weight is a parameter: the copy is then onto
itself) and its gradient goes to the weight, unless it is the weight's gradient memory already
(a parameter with updates: the graph points both at the parameter's gradient).
"""
from dyn._core.gpu.device import register


def _ptr(bk, a):
    return a.data.ptr if bk.is_gpu else a.ctypes.data


def _w(v):
    y, x = v.y, v.x(0)
    if _ptr(v.bk, y) != _ptr(v.bk, x):
        y[...] = x


def _w_bwd(v, i):
    gx = v.gx(0)
    if gx is not None and _ptr(v.bk, gx) == v.gptr_node:
        return                   # one memory: the consumers have added into it directly
    v.acc(0, v.gy)


register("tree_weights", _w, _w_bwd)
