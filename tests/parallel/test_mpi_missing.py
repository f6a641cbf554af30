"""Without mpi4py, dyn.parallel still imports and asking for MPI says what to install."""

import subprocess
import sys

import pytest


def test_asking_for_mpi_without_mpi4py_says_what_to_install():
    # a fresh interpreter where `import mpi4py` fails, whether or not it is installed here
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"
        "import dyn.parallel as par\n"
        "try:\n    par.MpiExchange()\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'dyn[mpi]'" in out.stdout and "mpirun -n 2" in out.stdout


REFUSALS = """
import numpy as np, pytest
from dyn.parallel import MpiExchange
ex = MpiExchange()  # a singleton MPI world of one rank
with pytest.raises(ValueError, match=r"allreduce_sum.*C-contiguous.*\\(4, 3\\)"):
    ex.allreduce_sum(np.zeros((3, 4), np.float32).T)
with pytest.raises(ValueError, match=r"broadcast.*read-only"):
    ro = np.zeros(3)
    ro.flags.writeable = False
    ex.broadcast(ro)
with pytest.raises(ValueError, match=r"allgather_rows.*\\(2,\\) and \\(3, 1\\)"):
    ex.allgather_rows(np.arange(2), np.zeros((3, 1)))
buf = np.arange(3.0)
ex.allreduce_sum(buf)  # one rank: the identity
assert (buf == np.arange(3.0)).all()
ex.close()
with pytest.raises(RuntimeError, match="closed"):
    ex.barrier()
print("refused")
"""


def test_buffers_mpi_cannot_use_in_place_are_refused():
    pytest.importorskip("mpi4py", reason="needs mpi4py: pip install 'dyn[mpi]'")
    # in a fresh interpreter: MPI is initialised there, not in the test process (whose other tests fork)
    out = subprocess.run([sys.executable, "-c", REFUSALS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "refused" in out.stdout, out.stderr
