"""The GPU device's kernels, one module per family (as dyn/_core/cpu/): each registers its ops'
forward and backward with dyn._core.gpu.device.register. A kernel receives a NodeView (see
dyn/_core/gpu/device.pyx) and writes with array code that runs on cupy (the GPU) and numpy (the
stand-in) alike: `v.xp` is the array module, `v.bk` the backend."""
import importlib

MODULES = ("leaves", "nonlin", "arith", "math", "shape", "reduce", "softmax", "loss", "loss_norm",
           "random", "linalg", "conv", "treeweights", "rnn", "lstm_gates", "treelstm")

for _m in MODULES:
    importlib.import_module("dyn._core.gpu.kernels." + _m)
