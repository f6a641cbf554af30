"""GPU kernels of the leaves (input, constant, parameter, lookup, lookup_batch; the CPU's:
dyn/_core/cpu/leaves.pyx). Inputs are copied from the host once per graph; parameters and lookups
of the graph's device point into the parameter pool (no copy); lookup_batch gathers rows."""
from dyn._core.gpu.device import register


def _input(v):
    v.bk.from_host(v.vptr, v.ptr, v.size * v.bd * v.itemsize)


def _constant(v):
    v.y.fill(v.fa[0])


def _none(v):
    pass


def _param_bwd(v, i):
    v.touch_all()


def _lookup_bwd(v, i):
    v.touch((v.ia[0],))


def _lookupb(v):
    rows = v.idx()
    t = v.bk.wrap(v.ptr, (v.size, int(rows.max()) + 1), v.dtype)
    v.y.reshape(v.size, v.bd, order="F")[...] = t[:, v.xp.asarray(rows)]


def _lookupb_bwd(v, i):
    rows = v.idx()
    t = v.bk.wrap(v.gptr, (v.size, int(rows.max()) + 1), v.dtype)
    v.bk.scatter_add_rows(t.T, rows, v.gy.reshape(v.size, v.bd, order="F").T)
    v.touch(rows.tolist())


register("input", _input)
register("constant", _constant)
register("parameter", _none, _param_bwd)
register("lookup", _none, _lookup_bwd)
register("lookup_batch", _lookupb, _lookupb_bwd)
