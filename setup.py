"""Build dyn's compiled core: every dyn/**/*.pyx becomes the module its path names."""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3 vectorises the elementwise loops (-fno-trapping-math lets GCC turn
# their float selects into vector blends); no -march=native, so a build runs
# on any x86-64 machine.
COMPILE_ARGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd", "-Wno-unused-function", "-Wno-unreachable-code"]

# Every .pyx of the package is a module named by its path (dyn/_core/core/graph.pyx ->
# dyn._core.core.graph); its .pxd sits beside it.
extensions = [
    Extension(
        os.path.splitext(path)[0].replace(os.sep, "."),
        [path],
        include_dirs=[numpy.get_include(), "dyn/_core/cpu"],
        extra_compile_args=COMPILE_ARGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for path in sorted(glob.glob("dyn/**/*.pyx", recursive=True))
]
# While working on a few modules: DYN_BUILD_ONLY=ops.nonlin,cpu.blas python setup.py build_ext --inplace
# rebuilds only those (the others' .so files are kept as they are).
if os.environ.get("DYN_BUILD_ONLY"):
    only = set(os.environ["DYN_BUILD_ONLY"].split(","))
    extensions = [e for e in extensions if any(e.name.endswith("." + o) for o in only)]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=["."],
        compiler_directives={"language_level": "3", "cdivision": True, "initializedcheck": False},
        nthreads=os.cpu_count() or 1,
    ),
)
