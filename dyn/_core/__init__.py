"""The compiled core, by role: core/ (graph, expressions, executor, autobatching, the device
interface), ops/ (operation families), cpu/ (the CPU device: memory, kernels, BLAS), train/
(optimizer kernels). Each .pxd sits beside its .pyx."""

import importlib.machinery
import importlib.util
import os
import sys


def _preload_cython_blas():
    """Load scipy's cython_blas extension by file, not through `scipy.linalg`.

    The kernels cimport BLAS from scipy.linalg.cython_blas; importing it the
    usual way runs scipy.linalg's package init (0.4 s), most of `import dyn`.
    The extension itself needs none of that. If anything here fails, the
    normal import happens instead.
    """
    name = "scipy.linalg.cython_blas"
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec("scipy")
        folder = os.path.join(os.path.dirname(spec.origin), "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "cython_blas" + suffix)
            if os.path.exists(path):
                blas_spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(blas_spec)
                sys.modules[name] = module
                blas_spec.loader.exec_module(module)
                return
    except Exception:  # noqa: BLE001 (any failure: use the normal import)
        sys.modules.pop(name, None)


_preload_cython_blas()
