"""What the GPU kernel modules share."""
import functools


class quiet:
    """numpy warns on overflow, invalid values and division by zero, which IEEE results here are
    meant to be (the CPU kernels give the same inf/NaN); cupy never warns. `with quiet(xp):`."""

    def __init__(self, xp):
        self.np = xp if xp.__name__ == "numpy" else None

    def __enter__(self):
        if self.np is not None:
            self.old = self.np.seterr(all="ignore")

    def __exit__(self, *a):
        if self.np is not None:
            self.np.seterr(**self.old)


def quiet_kernel(fn):
    """A kernel (view first) run under quiet."""
    @functools.wraps(fn)
    def run(v, *a):
        with quiet(v.xp):
            return fn(v, *a)
    return run
