"""Build dyn's compiled core: every src/*.pyx becomes dyn._core.<name>."""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3 vectorises the elementwise loops (-fno-trapping-math lets GCC turn
# their float selects into vector blends); no -march=native, so a build runs
# on any x86-64 machine.
COMPILE_ARGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd", "-Wno-unused-function", "-Wno-unreachable-code"]

extensions = [
    Extension(
        "dyn._core." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[numpy.get_include(), "src"],
        extra_compile_args=COMPILE_ARGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for path in sorted(glob.glob("src/*.pyx"))
]
# While working on a few modules: DYN_BUILD_ONLY=_k_nonlin,_k_math python setup.py build_ext --inplace
# rebuilds only those (the others' .so files are kept as they are).
if os.environ.get("DYN_BUILD_ONLY"):
    only = set(os.environ["DYN_BUILD_ONLY"].split(","))
    extensions = [e for e in extensions if e.name.rsplit(".", 1)[-1] in only]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=["."],
        compiler_directives={"language_level": "3", "cdivision": True, "initializedcheck": False},
        nthreads=os.cpu_count() or 1,
    ),
)
