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


MAXD = 7    # dims of a Dim


def ext(dims):
    """dims padded with 1s to the 7 dims of a Dim (_ext of the CPU)."""
    return tuple(dims) + (1,) * (MAXD - len(dims))


def cols(a):
    """An array of the batch-last layout (dims + (bd,)) as (items per element, bd)."""
    return a.reshape((-1, a.shape[-1]), order="F")


def sum_to(d, bd):
    """d (items, B) for an argument of batch bd: summed over the batch when bd is 1 and B is not."""
    return d if d.shape[-1] == bd else d.sum(axis=-1, keepdims=True)


def sigmoid(xp, a):
    with quiet(xp):
        return 1 / (1 + xp.exp(-a))


def copy_fwd(v):
    """y = argument 0 (copies, identities)."""
    v.y[...] = v.x(0)


def identity_bwd(v, i):
    v.acc(0, v.gy)


def part_fwd(v, o):
    """y = rows [o, o + H) of each batch element of argument 0 (H: y's rows): h or c of [h; c]."""
    H, B = v.dims[0], v.bd
    v.y.reshape((H, B), order="F")[...] = cols(v.x(0))[o:o + H]


def part_bwd(v, o):
    H, B = v.dims[0], v.bd
    gy = v.gy.reshape((H, B), order="F")
    g = v.gx(0)
    if g is not None:
        g = cols(g)
        g[o:o + H] += sum_to(gy, g.shape[-1])
        return
    full = v.xp.zeros((v.arg_size(0), B), v.dtype)    # an argument passed per member
    full[o:o + H] = gy
    v.acc(0, full)
