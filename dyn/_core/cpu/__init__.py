"""The CPU device: its memory operations (memory), the per-family kernels (loops registered in the
kernel table for the operations dyn/_core/ops declares), BLAS and the vectorised C headers.

Importing this package registers the device and every kernel module in it.
"""

import importlib
import pkgutil


def _register_kernels():
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(__name__ + "." + info.name)


_register_kernels()
