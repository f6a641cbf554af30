# cython: language_level=3
"""The GPU device: the Device of dyn/_core/core/device.pxd and the DEV_GPU column of the kernel table,
over a backend (dyn/_core/gpu/backend.py) that owns the memory and runs the kernels' array code:
cupy on a CUDA GPU, or numpy in the stand-in that runs the same code paths on the CPU (tests, CI).

The graph, its node table, scheduling, liveness and the autobatching plan stay on the host; the
arenas are blocks of device memory (node values are offsets into them) and the parameter pool is
one device array per float type. A node's kernel is a Python function (dyn/_core/gpu/kernels/) that
receives a NodeView: the node's dims and attributes, and its values, gradients and scratch as
device arrays over the arena (views: nothing is allocated per node). Kernels cannot raise through
the table's C signature: an exception is handed to the graph (graph.kernel_error), which raises it
where the kernel ran.
"""
from libc.string cimport strncpy
cimport numpy as cnp
import numpy as np
from dyn._core.core.device cimport Device, register_device
from dyn._core.core.graph cimport (
    Graph, Node, Dim, Touch, touch_row, DEV_GPU, F_PTRS, set_kernels, kfwd_fn, kbwd_fn, dim_size, dim_total, cg, node_desc)
from dyn._core.core import graph as _graph

cnp.import_array()

cdef object BK = None           # the backend (backend.py): set by install()
cdef dict FWD = {}              # op code -> forward(view)
cdef dict BWD = {}              # op code -> backward(view, i)

# ---------------------------------------------------------------- the Device (memory)


cdef void* _alloc(size_t nbytes) noexcept nogil:
    with gil:
        try:
            return <void*><size_t>BK.alloc(nbytes)
        except BaseException:
            return NULL


cdef void _release(void* p) noexcept nogil:
    if p != NULL:
        with gil:
            try:
                BK.release(<size_t>p)
            except BaseException:
                pass


cdef void _zero(void* p, size_t nbytes) noexcept nogil:
    if nbytes:
        with gil:
            BK.zero(<size_t>p, nbytes)


cdef void _copy(void* dst, const void* src, size_t nbytes) noexcept nogil:
    if nbytes:
        with gil:
            BK.copy(<size_t>dst, <size_t>src, nbytes)


cdef void _to_host(void* host, const void* src, size_t nbytes) noexcept nogil:
    if nbytes:
        with gil:
            BK.to_host(<size_t>host, <size_t>src, nbytes)


cdef void _from_host(void* dst, const void* host, size_t nbytes) noexcept nogil:
    if nbytes:
        with gil:
            BK.from_host(<size_t>dst, <size_t>host, nbytes)


cdef void _gather(char* dst, char** srcs, const long* lens, int m, int isz) noexcept nogil:
    with gil:
        BK.gather(<size_t>dst, [<size_t>srcs[j] for j in range(m)], [lens[j] for j in range(m)], isz)


cdef void _scatter_add(char** dsts, const char* src, const long* lens, int m, int dtype) noexcept nogil:
    with gil:
        BK.scatter_add([<size_t>dsts[j] for j in range(m)], <size_t>src, [lens[j] for j in range(m)],
                       dtype)


cdef void _add_scalar(void* p, double v, int dtype) noexcept nogil:
    with gil:
        BK.add_scalar(<size_t>p, v, dtype)


cdef long _find_nonfinite(const void* p, long n, int dtype) noexcept nogil:
    with gil:
        return BK.find_nonfinite(<size_t>p, n, dtype)


cdef Device GPU


def install(backend, str name="GPU:0"):
    """Make `backend` the GPU device's and register it as `name` (device.pxd's registry) with its
    array functions (the parameter pool's memory)."""
    global BK
    BK = backend
    GPU.kind = DEV_GPU
    strncpy(GPU.name, name.encode()[:15], 15)
    GPU.alloc = _alloc
    GPU.release = _release
    GPU.zero = _zero
    GPU.copy = _copy
    GPU.to_host = _to_host
    GPU.from_host = _from_host
    GPU.gather = _gather
    GPU.scatter_add = _scatter_add
    GPU.add_scalar = _add_scalar
    GPU.find_nonfinite = _find_nonfinite
    GPU.lazy = 0                    # device memory is taken whole when allocated
    register_device(name, &GPU)
    from dyn._core.core.device import register_arrays
    register_arrays(name, backend.zeros, backend.to_host_array, backend.asarray, backend.scatter_add_rows)


def current_backend():
    return BK

# ---------------------------------------------------------------- host views of numpy memory


def host_view(size_t ptr, shape, dtype):
    """A numpy array over host memory at ptr (the stand-in's wrap): column-major, no copy."""
    cdef cnp.npy_intp n = 1
    for s in shape:
        n *= s
    dt = np.dtype(dtype)
    if n == 0 or ptr == 0:
        return np.zeros(shape, dt, order="F")
    flat = cnp.PyArray_SimpleNewFromData(1, &n, dt.num, <void*>ptr)
    return flat.reshape(shape, order="F")

# ---------------------------------------------------------------- the kernels' view of a node


cdef tuple _dims(Dim* d):
    return tuple([d.d[i] for i in range(d.nd)])


cdef class NodeView:
    """What a GPU kernel sees of the node it runs: valid only during the kernel's call.

    Arrays are column-major device arrays of shape dims + (batch,) (the batch last: the arena's
    layout), views over the arena or the parameter pool. An argument passed per member by the
    autobatching engine (its elements scattered over the arena) is read as a stacked copy and its
    gradient is added member by member (acc)."""
    cdef Graph* g
    cdef Node* n
    cdef public object xp, dtype, bk

    @property
    def op(self):
        return self.n.op

    @property
    def dims(self):
        return _dims(&self.n.dim)

    @property
    def bd(self):
        return self.n.dim.bd

    @property
    def shape(self):
        return _dims(&self.n.dim) + (self.n.dim.bd,)

    @property
    def size(self):
        """Items per batch element."""
        return dim_size(&self.n.dim)

    @property
    def ia(self):
        return tuple([self.n.ia[i] for i in range(6)])

    @property
    def fa(self):
        return (self.n.fa[0], self.n.fa[1])

    @property
    def nargs(self):
        return self.n.nargs

    @property
    def ptr(self):
        return <size_t>self.n.ptr

    @property
    def gptr(self):
        return <size_t>self.n.gptr

    @property
    def vptr(self):
        """The node's value memory (a device address)."""
        return <size_t>self.n.v

    @property
    def gptr_node(self):
        return <size_t>self.n.g

    def alias_arg(self, int i):
        """Make the node's value argument i's memory (an F_FIXED node that is a view of its argument,
        as lstm_step_weight): set in forward, no copy."""
        self.n.v = self._arg(i).v

    def touch(self, rows):
        """Record rows of a lookup table as having a gradient (its touched-row record is the
        node's aux, a host structure): what the trainers' sparse update reads."""
        cdef Touch* t = <Touch*>self.n.aux
        cdef int r
        if t == NULL:
            return
        for r in rows:
            touch_row(t, r)

    def touch_all(self):
        """A lookup table used whole: every row may have a gradient."""
        if self.n.aux != NULL:
            (<Touch*>self.n.aux).all = 1

    @property
    def itemsize(self):
        return self.g.itemsize

    def desc(self):
        return _graph.op_name_of(self.n.op)

    def idx(self):
        """The node's index list (picks, lookups...) as a host int32 array (a copy)."""
        cdef int k
        cdef int* p = self.g.ipool + self.n.idx_off
        return np.array([p[k] for k in range(self.n.nidx)], np.int32)

    cdef Node* _arg(self, int i) except NULL:
        if i < 0 or i >= self.n.nargs:
            raise IndexError("argument %d of a node with %d" % (i, self.n.nargs))
        return &self.g.nodes[self.g.ipool[self.n.arg_off + i]]

    def arg_dims(self, int i):
        return _dims(&self._arg(i).dim)

    def arg_bd(self, int i):
        return self._arg(i).dim.bd

    def arg_shape(self, int i):
        cdef Node* a = self._arg(i)
        return _dims(&a.dim) + (a.dim.bd,)

    def arg_size(self, int i):
        return dim_size(&self._arg(i).dim)

    def per_member(self, int i):
        """Whether argument i comes per member (an array of element pointers: F_PTRS)."""
        return bool(self._arg(i).flags & F_PTRS)

    def has_grad(self, int i):
        return self._arg(i).g != NULL

    def wrap(self, size_t ptr, shape):
        """A device array of this graph's float type over ptr (column-major)."""
        return self.bk.wrap(ptr, tuple(shape), self.dtype)

    @property
    def y(self):
        return self.bk.wrap(<size_t>self.n.v, self.shape, self.dtype)

    @property
    def gy(self):
        return self.bk.wrap(<size_t>self.n.g, self.shape, self.dtype)

    def aux(self, shape=None):
        """The node's scratch (naux items), flat or of the given shape (column-major)."""
        return self.bk.wrap(<size_t>self.n.aux, (self.n.naux,) if shape is None else tuple(shape),
                            self.dtype)

    def arg_aux(self, int i, shape=None):
        cdef Node* a = self._arg(i)
        return self.bk.wrap(<size_t>a.aux, (a.naux,) if shape is None else tuple(shape), self.dtype)

    def member_ptrs(self, int i, bint grad=False, bint with_aux=False):
        """Argument i passed per member: its element pointers (value, or gradient with grad), as a
        list of ints: bd of them, then (with_aux: the op's argument is ABA_CATAUX) bd pointers to
        the elements' aux."""
        cdef Node* a = self._arg(i)
        cdef size_t* p = <size_t*>(a.g if grad else a.v)
        cdef int k, m = a.dim.bd
        if not (a.flags & F_PTRS):
            raise ValueError("argument %d is not passed per member" % i)
        return [p[k] for k in range(2 * m if with_aux else m)]

    def x(self, int i):
        """Argument i's value: shape arg_dims + (arg_bd,)."""
        cdef Node* a = self._arg(i)
        cdef int k, sz = dim_size(&a.dim)
        cdef size_t* p
        shape = _dims(&a.dim)
        if a.flags & F_PTRS:
            p = <size_t*>a.v
            return self.xp.stack([self.bk.wrap(p[k], shape, self.dtype) for k in range(a.dim.bd)],
                                 axis=-1)
        return self.bk.wrap(<size_t>a.v, shape + (a.dim.bd,), self.dtype)

    def gx(self, int i):
        """Argument i's gradient as one array (None where it takes none, or comes per member: use
        acc)."""
        cdef Node* a = self._arg(i)
        if a.g == NULL or (a.flags & F_PTRS):
            return None
        return self.bk.wrap(<size_t>a.g, _dims(&a.dim) + (a.dim.bd,), self.dtype)

    def acc(self, int i, d):
        """Add d into argument i's gradient. d has the argument's dims and a batch axis of the
        argument's batch or the node's: a batch-1 argument broadcast over the node's batch gets the
        sum over it."""
        cdef Node* a = self._arg(i)
        cdef int k
        cdef size_t* p
        if a.g == NULL:
            return
        shape = _dims(&a.dim)
        d = self.xp.asarray(d, dtype=self.dtype)
        d = d.reshape(shape + (-1,), order="F")
        if a.dim.bd == 1 and d.shape[-1] != 1:
            d = d.sum(axis=-1, keepdims=True)
        if a.flags & F_PTRS:
            p = <size_t*>a.g
            for k in range(a.dim.bd):
                g = self.bk.wrap(p[k], shape, self.dtype)
                g += d[..., k]
            return
        g = self.bk.wrap(<size_t>a.g, shape + (a.dim.bd,), self.dtype)
        g += d


cdef NodeView _view(Graph* g, Node* n):
    cdef NodeView v = NodeView.__new__(NodeView)
    v.g = g
    v.n = n
    v.bk = BK
    v.xp = BK.xp
    v.dtype = np.float32 if g.dtype == 0 else np.float64
    return v


cdef void _fwd(Graph* g, Node* n, void* y) noexcept:
    cdef NodeView v = None
    try:
        v = _view(g, n)
        BK.launches += 1
        FWD[n.op](v)
    except BaseException as e:
        _graph.kernel_error(e)
    finally:
        if v is not None:
            v.g = NULL
            v.n = NULL


cdef void _bwd(Graph* g, Node* n, int i, void* gy) noexcept:
    cdef NodeView v = None
    try:
        v = _view(g, n)
        BK.launches += 1
        BWD[n.op](v, i)
    except BaseException as e:
        _graph.kernel_error(e)
    finally:
        if v is not None:
            v.g = NULL
            v.n = NULL


def register(str op, fwd, bwd=None):
    """The GPU kernels of op (its name in the kernel table): fwd(view), bwd(view, i) adding the
    gradient of argument i (i = -1: a leaf's hook). Both float types run the same code."""
    cdef int code = _graph.op_code(op)
    FWD[code] = fwd
    if bwd is not None:
        BWD[code] = bwd
        set_kernels(code, DEV_GPU, <kfwd_fn>_fwd, <kfwd_fn>_fwd, <kbwd_fn>_bwd, <kbwd_fn>_bwd)
    else:
        set_kernels(code, DEV_GPU, <kfwd_fn>_fwd, <kfwd_fn>_fwd)


def kernels_of(str op):
    """The GPU kernels (forward, backward) registered for op."""
    cdef int code = _graph.op_code(op)
    return FWD.get(code), BWD.get(code)


def registered():
    """The op names with GPU kernels."""
    return sorted(_graph.op_name_of(c) for c in FWD)
