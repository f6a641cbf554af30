# cython: language_level=3
"""Expression objects, leaf nodes (inputs, constants, parameters, lookups),
the parameter pool, and values read back to Python.

An Expression is a node id and the node's serial (unique over the process).
Using one from an earlier graph, or one whose node cg_revert() dropped (and
another node may have taken its id), raises instead of silently reading
another node.
"""
import numpy as np
cimport numpy as cnp
from dyn._core.core import device as _device
from libc.stdint cimport uintptr_t
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.long cimport PyLong_AsLongAndOverflow
from cpython.number cimport PyNumber_Index
from dyn._core.core.graph cimport (
    Graph, Node, Dim, Touch, cg, new_node, finish_node, forward_to, backward_from,
    declare_op, dim_total, dim_size, dim_str, dim_from_tuple, dim_to_py, node_desc,
    set_indices, pyref_add, pyref_get, op_name, F_NG, F_PGRAD, F_CONST, F_FIXED, F_DONE, F_PTRS, idx,
    set_autobatch, AB_PARAM, DEV_CPU, DEV_GPU, set_kernels, kfwd_fn, kbwd_fn, touch_row, lr_flush, lr_forget,
    lr_drop_range)
from dyn.errors import StaleExpressionError

cnp.import_array()


# ---------------------------------------------------------------- Expression

cdef inline bint _holds(Graph* g, int nid, long serial) noexcept:
    """Node nid is still the one an expression was made for (not dropped, its id not reused)."""
    return nid < g.n and g.nodes[nid].serial == serial


cdef class Expression:
    """A node of the current computation graph (DyNet's Expression)."""

    # numpy gives way to Expression's own operators: `x + ndarray` raises TypeError (dyn's operators
    # take Expressions and numbers) instead of numpy broadcasting it into an object array
    __array_ufunc__ = None

    cdef int node_id(self, bint as_arg) except -1:
        cdef Graph* g = cg()
        if _holds(g, self.nid, self.serial):
            return self.nid
        if self.serial >= g.serial0:
            msg = ("node %d was dropped by cg_revert() (it was made after the cg_checkpoint() "
                   "that was reverted)" % self.nid)
        else:
            msg = ("node %d of graph %d; the current graph is %d: renew_cg() was called since"
                   % (self.nid, self.ver, g.version))
        if as_arg:
            raise StaleExpressionError("Attempt to use a stale expression (%s)" % msg)
        raise StaleExpressionError("Stale Expression: %s" % msg)

    cdef void _set_node(self, int nid) noexcept:
        cdef Graph* g = cg()
        self.ver = g.version
        self.serial = g.nodes[nid].serial
        self.nid = nid

    cdef bint _alive(self) noexcept:
        return _holds(cg(), self.nid, self.serial)

    def is_alive(self):
        """Whether this expression's node is still in the graph (not dropped by
        renew_cg() or cg_revert()); using a dead one raises."""
        return self._alive()

    # Display (dyn/display.py): the text form names the op, dim and, once computed,
    # a value summary; notebooks get the graph drawn. None of them runs forward.
    def __repr__(self):
        from dyn import display
        return display.expression_text(self)

    def _repr_html_(self):
        from dyn import display
        return display.expression_html(self)

    def _repr_svg_(self):
        from dyn import display
        return display.expression_svg(self)

    def _node_ref(self):
        """(node id, graph version, alive) without raising on a stale expression."""
        return self.nid, self.ver, self._alive()

    def dim(self):
        """((d0, d1, ...), batch_size)."""
        return dim_to_py(&cg().nodes[self.node_id(False)].dim)

    def forward(self, recalculate=False):
        cdef int i = self.node_id(False)
        if recalculate:
            from dyn._core.core.graph import invalidate
            invalidate()
        forward_to(i)
        return self

    def npvalue(self, recalculate=False):
        """Value as a float64 numpy array (column-major; batch is a trailing axis)."""
        self.forward(recalculate)
        return _to_numpy(self.nid, False)

    def value(self, recalculate=False):
        """float for one element, list for a vector, numpy array for a matrix+."""
        self.forward(recalculate)
        cdef Dim* d = &cg().nodes[self.nid].dim
        if d.nd >= 2:
            return _to_numpy(self.nid, False)
        v = self.vec_value()
        return v[0] if len(v) == 1 else v

    def scalar_value(self, recalculate=False):
        self.forward(recalculate)
        cdef Node* n = &cg().nodes[self.nid]
        if dim_total(&n.dim) != 1:
            raise RuntimeError("scalar_value: Input tensor has more than one element (%s)"
                               % node_desc(self.nid))
        cdef double d = 0
        cdef float f = 0
        if cg().dtype == 0:
            cg().dev.to_host(&f, n.v, sizeof(float))
            return float(f)
        cg().dev.to_host(&d, n.v, sizeof(double))
        return d

    def vec_value(self, recalculate=False):
        """All elements as a flat list (column-major, batch last)."""
        self.forward(recalculate)
        return _flat(self.nid, False).tolist()

    def tensor_value(self, recalculate=False):
        from dyn.tensor import Tensor
        return Tensor(self.npvalue(recalculate))

    def gradient(self):
        """dE/d(this node) after backward(); zeros off the gradient path."""
        cdef int i = self.node_id(False)
        if cg().bwd_target < i:
            raise RuntimeError(
                "gradient(): no backward() has covered %s (call backward() on a node "
                "created after it)" % node_desc(i))
        if cg().nodes[i].g == NULL:
            return np.zeros(_np_shape(&cg().nodes[i].dim))
        return _to_numpy(i, True)

    def backward(self, full=False):
        """Back-propagate from this scalar node; parameters accumulate gradients."""
        backward_from(self.node_id(False), full)

    # Arithmetic operators call C functions registered by dyn/_core/ops/arith.pyx:
    # no dictionary lookup or Python-level call per node.
    def __add__(x, y):
        return BINOPS[BIN_ADD](x, y)

    def __radd__(x, y):
        return BINOPS[BIN_ADD](y, x)

    def __sub__(x, y):
        return BINOPS[BIN_SUB](x, y)

    def __rsub__(x, y):
        return BINOPS[BIN_SUB](y, x)

    def __mul__(x, y):
        return BINOPS[BIN_MUL](x, y)

    def __rmul__(x, y):
        return BINOPS[BIN_MUL](y, x)

    def __truediv__(x, y):
        return BINOPS[BIN_DIV](x, y)

    def __neg__(x):
        return _OPS["neg"](x)

    def __pow__(x, y, z):
        return _OPS["pow"](x, y)

    def __getitem__(self, i):
        return _OPS["getitem"](self, i)


cdef dict _OPS = {}
cdef binop_fn BINOPS[4]


cdef object _unbound(object x, object y):
    raise RuntimeError("dyn: arithmetic kernels are not loaded (import dyn, not dyn._core)")


BINOPS[0] = BINOPS[1] = BINOPS[2] = BINOPS[3] = _unbound


cdef void set_binop(int which, binop_fn f) noexcept:
    BINOPS[which] = f

def bind_operator(str name, fn):
    """Make `fn` the implementation of an Expression operator."""
    _OPS[name] = fn


cdef Expression wrap(int nid):
    cdef Expression e = Expression.__new__(Expression)
    e._set_node(nid)
    return e


def all_alive(obj):
    """Whether every Expression in obj (an Expression, None, or lists, tuples and
    dicts of them, nested) is still in the graph: what caches expressions across
    calls (the builders) checks after cg_revert()."""
    if obj is None:
        return True
    if isinstance(obj, Expression):
        return (<Expression>obj)._alive()
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, (list, tuple)):
        raise TypeError("all_alive: expected Expressions in lists, tuples or dicts, got %s"
                        % type(obj).__name__)
    for x in obj:
        if not all_alive(x):
            return False
    return True


cdef int arg_id(object x, int op=-1) except -1:
    """Node id of an operation argument (Expression or Parameters)."""
    if isinstance(x, Expression):
        return (<Expression>x).node_id(True)
    raise TypeError("%sexpected an Expression (or Parameters), got %s"
                    % (op_name(op) + ": " if op >= 0 else "", type(x).__name__))


cdef tuple _np_shape(Dim* d):
    s = tuple([d.d[i] for i in range(d.nd)])
    return s + (d.bd,) if d.bd > 1 else s


cdef object _flat(int nid, bint grad):
    cdef Node* n = &cg().nodes[nid]
    cdef int total = dim_total(&n.dim)
    cdef void* p = n.g if grad else n.v
    if grad:
        lr_flush()      # (a parameter's gradient may be held back as a product)
    out = np.empty(total, dtype=np.float32 if cg().dtype == 0 else np.float64)
    cg().dev.to_host(cnp.PyArray_DATA(out), p, <size_t>total * cg().itemsize)
    return out.astype(np.float64, copy=False)


cdef object _to_numpy(int nid, bint grad):
    return _flat(nid, grad).reshape(_np_shape(&cg().nodes[nid].dim), order="F")


def node_of(x):
    """Node id of an argument (for the Python side of ops)."""
    return arg_id(x)


def graph_leaves():
    """What the current graph reads: ([parameter objects], [(node id, input
    data array)]). The arrays are the memory input nodes read (column-major)."""
    cdef Graph* g = cg()
    cdef Node* n
    cdef int i
    params, inputs, seen = [], [], set()
    for i in range(g.n):
        n = &g.nodes[i]
        if n.pyref < 0:
            continue
        o = pyref_get(n.pyref)
        if isinstance(o, ParamExpr):
            if id(o) not in seen:
                seen.add(id(o))
                params.append(o)
        elif n.op == OP_INPUT:
            inputs.append((i, o))
    return params, inputs


def node_parameters():
    """{node id: parameter object} for the current graph's nodes that read a parameter or a lookup
    table (for display: the names a user gave them)."""
    cdef Graph* g = cg()
    cdef int i
    out = {}
    for i in range(g.n):
        if g.nodes[i].pyref >= 0:
            o = pyref_get(g.nodes[i].pyref)
            if isinstance(o, ParamExpr):
                out[i] = o
    return out


def wrap_node(int nid):
    return wrap(nid)


def peek(int nid, bint grad):
    """Node nid's value (grad: its gradient) as a numpy array if it is already
    computed, else None: for display, which must never run forward/backward."""
    cdef Graph* g = cg()
    if nid < 0 or nid >= g.n:
        return None
    cdef Node* n = &g.nodes[nid]
    if grad:
        if g.bwd_target < nid or n.g == NULL or (n.flags & F_PTRS):
            return None
        return _to_numpy(nid, True)
    if nid >= g.computed or n.v == NULL or not (n.flags & F_DONE) or (n.flags & F_PTRS):
        return None
    return _to_numpy(nid, False)


def graph_state():
    """(nodes, nodes computed, node backward last started from or -1, version)."""
    cdef Graph* g = cg()
    return g.n, g.computed, g.bwd_target, g.version


# ---------------------------------------------------------------- leaf kernels

cdef int _shape_leaf(Graph* g, Node* n) except -1:
    return 0    # a leaf's Dim is given when it is created

# The leaf operations (their kernels: dyn/_core/cpu/leaves.pyx).
OP_INPUT = declare_op("input", _shape_leaf)
OP_CONST = declare_op("constant", _shape_leaf)
OP_PARAM = declare_op("parameter", _shape_leaf)
OP_LOOKUP = declare_op("lookup", _shape_leaf)
OP_LOOKUPB = declare_op("lookup_batch", _shape_leaf)
set_autobatch(OP_PARAM, AB_PARAM)     # inside automatic batches: shared by node id, never copied

# ---------------------------------------------------------------- inputs

cdef object _as_data(object arr):
    """A float array of the graph's type, column-major flattened."""
    dt = np.float32 if cg().dtype == 0 else np.float64
    return np.ascontiguousarray(np.asarray(arr, dtype=dt).ravel(order="F"))


cdef class InputExpression(Expression):
    """An input node whose data can be replaced with set() (static-graph reuse)."""
    cdef object data
    cdef public bint settable

    cdef _bind(self, object data):
        cdef Node* n = &cg().nodes[self.nid]
        if len(data) != dim_total(&n.dim):
            raise ValueError("set: expected %d values for %s, got %d"
                             % (dim_total(&n.dim), dim_str(&n.dim), len(data)))
        self.data = data
        n.pyref = pyref_add(data)    # keeps the data alive; graph_leaves() finds it
        n.ptr = cnp.PyArray_DATA(data)
        if n.flags & F_FIXED:        # the CPU reads the data where it lies; another device's input
            n.v = n.ptr              # kernel copies it into the arena (once per graph)

    def set(self, values):
        """Replace the values (column-major flat list) and invalidate the graph."""
        cdef int i = self.node_id(False)
        if not self.settable:
            raise ValueError("this inputTensor was not created with reusable_expr=True")
        if isinstance(values, (int, float)):
            values = [values]
        elif not (isinstance(values, np.ndarray) and values.dtype.kind == "f"):
            from dyn.ops._check import real_array    # complex, None, strings: a named TypeError
            values = real_array(values, "set")
        self._bind(_as_data(values))
        from dyn._core.core.graph import invalidate
        invalidate()


def make_input(object data, tuple shape, object bd, bint settable=True):
    """Input node over `data` (anything numpy takes; column-major order)."""
    cdef Dim d = dim_from_tuple(shape, bd)
    flat = _as_data(data)
    if len(flat) != dim_total(&d):
        raise ValueError("input: %d values do not fill dim %s" % (len(flat), dim_str(&d)))
    cdef int nid = new_node(OP_INPUT, 0, NULL)
    cdef Node* n = &cg().nodes[nid]
    n.dim = d
    n.flags = F_CONST | (F_FIXED if cg().device == DEV_CPU else 0)
    cdef InputExpression e = InputExpression.__new__(InputExpression)
    e._set_node(nid)
    e.settable = settable
    e._bind(flat)
    finish_node(nid)
    return e


def make_constant(object shape, double value, object batch_size=1):
    cdef Dim d = dim_from_tuple(shape, batch_size)
    cdef int nid = new_node(OP_CONST, 0, NULL)
    cdef Node* n = &cg().nodes[nid]
    n.dim = d
    n.flags = F_CONST
    n.fa[0] = value
    finish_node(nid)
    return wrap(nid)

# ---------------------------------------------------------------- parameters

cdef char* array_ptr(object a) except? NULL:
    """Where an array of the pool's device keeps its data: a numpy array's buffer, or the address a
    device array publishes (__cuda_array_interface__)."""
    if isinstance(a, np.ndarray):
        return <char*>cnp.PyArray_DATA(a)
    return <char*><size_t>a.__cuda_array_interface__["data"][0]


cdef class Pool:
    def __init__(self, int dtype, str device="CPU"):
        self.dtype = dtype
        self.itemsize = 4 if dtype == 0 else 8
        self.used = 0
        self.members = []
        self.device = device
        dt = np.float32 if dtype == 0 else np.float64
        self._set(_device.zeros(device, 1024, dt), _device.zeros(device, 1024, dt))

    def host_values(self):
        """The values as a host (numpy) array: the pool itself on the CPU, a copy on a device whose
        memory is not the host's. What io and other host code read parameters through."""
        return _device.to_host(self.device, self.values)

    def host_grads(self):
        """The gradients as a host array (see host_values)."""
        return _device.to_host(self.device, self.grads)

    def host_range(self, bint grad, long a, long b):
        """Elements [a, b) of the values (or gradients) as a host array: a view that writes through
        on the CPU, a copy on a device (write it back with put)."""
        return _device.to_host(self.device, (self.grads if grad else self.values)[a:b])

    def put(self, bint grad, long off, a):
        """Write the host array a (flat) into the values (or gradients) from element off: how host
        code changes parameters on any device."""
        dst = self.grads if grad else self.values
        a = _device.from_host(self.device, np.asarray(a, dtype=dst.dtype))
        dst[off:off + len(a)] = a

    @property
    def grads(self):
        """The gradients, a 1-D array in the device's memory. Whoever takes it may read or write it,
        so the gradients held back as products are computed into it first, and none is taken to be
        zero any more (see "Low-rank gradients" in dyn/_core/core/graph.pyx)."""
        lr_forget()
        return self._grads

    cdef _set(self, values, grads):
        lr_forget()     # (the tracked gradients' memory moves)
        self.values = values
        self._grads = grads
        self.vb = array_ptr(values)
        self.gb = array_ptr(grads)
        self.gbytes = len(grads) * self.itemsize

    def __dealloc__(self):
        lr_drop_range(self.gb, self.gb + self.gbytes)   # (its memory may be freed with it)

    def alloc(self, long n):
        """Offset of n new elements (16-element aligned); the pool grows by copying,
        and nodes of the current graph that point into it are moved along."""
        cdef long off = (self.used + 15) // 16 * 16
        cdef long cap = len(self.values)
        if off + n > cap:
            while cap < off + n:
                cap *= 2
            oldv, oldg = self.values, self.grads
            newv = _device.zeros(self.device, cap, oldv.dtype)
            newg = _device.zeros(self.device, cap, oldg.dtype)
            newv[:len(oldv)] = oldv
            newg[:len(oldg)] = oldg
            ov, og = self.vb, self.gb
            self._set(newv, newg)
            _relocate(ov, ov + len(oldv) * self.itemsize, self.vb)
            _relocate(og, og + len(oldg) * self.itemsize, self.gb)
        self.used = off + n
        return off

    def adopt(self, values, grads):
        """Move the pool into the given 1-D buffers (e.g. shared memory, for
        dyn.parallel): the contents are copied, every parameter and every node
        of the current graph then points into them. Each buffer must be a
        writable C-contiguous array of the pool's dtype, at least as long as
        the pool; a later growth (new parameters) copies out of them again."""
        cdef long cap = len(self.values)
        for name, a in (("values", values), ("grads", grads)):
            if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != self.values.dtype \
                    or not a.flags.c_contiguous or not a.flags.writeable or len(a) < cap:
                raise ValueError("Pool.adopt: %s must be a writable contiguous 1-D %s array of at "
                                 "least %d elements, got %r" % (name, self.values.dtype, cap,
                                                                getattr(a, "shape", type(a))))
        if values is grads or np.shares_memory(values, grads):
            raise ValueError("Pool.adopt: values and grads must not overlap")
        values[:cap] = self.values
        grads[:cap] = self.grads
        values[cap:] = 0
        grads[cap:] = 0
        ov, og = self.vb, self.gb
        self._set(values, grads)
        _relocate(ov, ov + cap * self.itemsize, self.vb)
        _relocate(og, og + cap * self.itemsize, self.gb)


cdef void _shift(void** p, char* lo, char* hi, char* nb) noexcept:
    if p[0] != NULL and <char*>p[0] >= lo and <char*>p[0] < hi:
        p[0] = nb + (<char*>p[0] - lo)


cdef void _relocate(char* lo, char* hi, char* nb) noexcept:
    cdef Graph* g = cg()
    cdef int i
    for i in range(g.n):
        _shift(&g.nodes[i].v, lo, hi, nb)
        _shift(&g.nodes[i].g, lo, hi, nb)
        _shift(&g.nodes[i].ptr, lo, hi, nb)
        _shift(&g.nodes[i].gptr, lo, hi, nb)


POOLS = {}

def pool_for_current_dtype(device=None):
    """The parameter pool of the current float type on `device` (a name; None: the device graphs run
    on), made on first use."""
    cdef int dt = cg().dtype
    if device is None:
        device = (<bytes>cg().dev.name).decode()
    key = dt if device == "CPU" else (dt, device)
    if key not in POOLS:
        POOLS[key] = Pool(dt, device)
    return POOLS[key]


# ---------------------------------------------------------------- trainer catch-up hook
# Owner: the trainers. Trainers update lookup tables lazily: a row no
# minibatch touched is brought up to date only when something reads it. Every
# read path of a table calls _catch_up first: a lookup/lookup_batch being
# created or re-pointed (set), the whole-table parameter node, value_view()
# (as_array, rows_as_array, saving). rows = NULL, n = -1: the whole table.

cdef inline int _catch_up(ParamExpr p, const int* rows, int n) except -1:
    if p.catch_up != NULL:
        p.catch_up(p.catch_up_state, rows, n)
    return 0

def _catch_up_graph():
    """A graph about to be recomputed (static-graph reuse: set() and a new
    value request) reads its tables again: bring every row it reads up to date."""
    cdef Graph* g = cg()
    cdef Node* n
    cdef int i
    for i in range(g.n):
        n = &g.nodes[i]
        if n.pyref < 0 or not (n.op == OP_LOOKUP or n.op == OP_LOOKUPB or n.op == OP_PARAM):
            continue
        table = pyref_get(n.pyref)
        if not isinstance(table, ParamExpr) or not (<ParamExpr>table).is_lookup:
            continue
        if n.op == OP_LOOKUP:
            _catch_up(<ParamExpr>table, &n.ia[0], 1)
        elif n.op == OP_LOOKUPB:
            _catch_up(<ParamExpr>table, idx(g, n), n.nidx)
        else:
            _catch_up(<ParamExpr>table, NULL, -1)

# ---------------------------------------------------------------- (end of the hook region)


cdef class ParamExpr(Expression):
    """Storage and graph node of a parameter (base of Parameters and
    LookupParameters in dyn/params.py)."""

    def _setup(self, Pool pool, tuple shape, bint is_lookup):
        """shape is the DyNet dim: (rows, cols...) or, for lookups, (d..., N)."""
        self.pool = pool
        self.pdim = dim_from_tuple(shape, 1)
        self.size = dim_size(&self.pdim)
        self.is_lookup = is_lookup
        self.updated = True
        self.cver = -1
        if is_lookup:
            self.nrows = self.pdim.d[self.pdim.nd - 1]
            self.rowsize = self.size // self.nrows
            self.touch_flag = np.zeros(self.nrows, dtype=np.uint8)
            self.touch_rows = np.zeros(self.nrows, dtype=np.int32)
            self.touch.flag = <unsigned char*>cnp.PyArray_DATA(self.touch_flag)
            self.touch.rows = <int*>cnp.PyArray_DATA(self.touch_rows)
            self.touch.n = 0
            self.touch.all = 0
        self.off = pool.alloc(self.size)
        pool.members.append(self)

    cdef Touch* touch_ptr(self) noexcept:
        return &self.touch

    # touched-row record, read by trainers
    def touched_rows(self):
        return self.touch_rows[:self.touch.n].copy()

    def touched_all(self):
        return bool(self.touch.all)

    def clear_touched(self):
        cdef int k
        for k in range(self.touch.n):
            self.touch.flag[self.touch.rows[k]] = 0
        self.touch.n = 0
        self.touch.all = 0

    def mark_all_touched(self):
        self.touch.all = 1

    def set_touched(self, rows):
        """Make `rows` (distinct row indices) the touched set, e.g. the union
        of every worker's rows after dyn.parallel merged their gradients."""
        cdef cnp.ndarray[cnp.int64_t, ndim=1] r = np.ascontiguousarray(rows, dtype=np.int64).ravel()
        cdef long k, n = len(r)
        if n and (r.min() < 0 or r.max() >= self.nrows):
            raise IndexError("set_touched: rows out of range for %s with %d rows" % (self.name(), self.nrows))
        if n > self.nrows:
            raise ValueError("set_touched: %d rows for a table of %d" % (n, self.nrows))
        self.clear_touched()
        for k in range(n):
            if self.touch.flag[r[k]]:
                self.clear_touched()
                raise ValueError("set_touched: row %d given twice" % r[k])
            self.touch.flag[r[k]] = 1
            self.touch.rows[k] = r[k]
        self.touch.n = n

    def value_view(self):
        """This parameter's values in the pool's host view (see Pool.host_values; on the CPU a view
        that writes through)."""
        _catch_up(self, NULL, -1)    # trainer hook: idle rows up to date
        return self.pool.host_values()[self.off:self.off + self.size]

    def grad_view(self):
        """This parameter's gradient in the pool's host view."""
        return self.pool.host_grads()[self.off:self.off + self.size]

    def write_values(self, flat):
        """Set the values from a flat host array (column-major; a table: row after row), on
        whichever device the pool lives: value_view() is a copy on a device."""
        _catch_up(self, NULL, -1)    # trainer hook: idle rows current before they are overwritten
        a = np.asarray(flat, dtype=self.pool.values.dtype).ravel()
        if len(a) != self.size:
            raise ValueError("%d values for a parameter of %d" % (len(a), self.size))
        self.pool.put(False, self.off, a)

    def write_grads(self, flat):
        """Set the gradient from a flat host array (a scalar fills it)."""
        a = np.asarray(flat, dtype=self.pool.grads.dtype)
        a = np.full(self.size, a, a.dtype) if a.ndim == 0 else a.ravel()
        if len(a) != self.size:
            raise ValueError("%d gradient values for a parameter of %d" % (len(a), self.size))
        self.pool.put(True, self.off, a)

    def dyn_dim(self):
        return dim_to_py(&self.pdim)[0]

    def _values_of_rows(self, rows):
        """Host copy of the values: all (rows None) or of the given rows, flat in node order."""
        a = self.pool.values[self.off:self.off + self.size]
        if rows is not None:
            a = a.reshape(self.nrows, self.rowsize)[_device.from_host(self.pool.device, rows)]
        return _device.to_host(self.pool.device, a).ravel()

    def _add_grads_of_rows(self, rows, host):
        """Add the host array into the gradient (all, or of the given rows; repeated rows add up),
        marking the rows a trainer then updates."""
        cdef int r
        g = self.pool.grads[self.off:self.off + self.size]
        h = _device.from_host(self.pool.device, np.asarray(host, dtype=g.dtype))
        if rows is None:
            g += h
            if self.is_lookup:
                self.touch.all = 1
            return
        _device.add_rows(self.pool.device, g.reshape(self.nrows, self.rowsize), rows,
                         h.reshape(len(rows), self.rowsize))
        for r in rows:
            touch_row(&self.touch, r)

    cdef int param_node(self, bint update) except -1:
        cdef Graph* g = cg()
        cdef int nid
        cdef Node* n
        if self.pool.dtype != g.dtype:
            raise TypeError(
                "parameter %s is %s but the graph is %s: create parameters after "
                "choosing the precision" % (self.name(), "float32" if self.pool.dtype == 0
                                            else "float64", "float32" if g.dtype == 0 else "float64"))
        if self.cver != g.version:
            self.cver = g.version
            self.pnid = -1
            self.cnid = -1
        update = update and self.updated
        # a cached node must still be this parameter's: cg_revert() may have
        # dropped it (and another node taken its id) since it was created
        if update and self.pnid >= 0 and _is_param_node(g, self.pnid, self):
            return self.pnid
        if not update and self.cnid >= 0 and _is_param_node(g, self.cnid, self):
            return self.cnid
        if self.is_lookup:
            _catch_up(self, NULL, -1)    # trainer hook: the whole table is read
        nid = new_node(OP_PARAM, 0, NULL)
        n = &g.nodes[nid]
        n.dim = self.pdim
        n.v = self.pool.vb + self.off * self.pool.itemsize
        n.ptr = n.v
        n.gptr = self.pool.gb + self.off * self.pool.itemsize
        n.flags = F_FIXED | ((F_NG | F_PGRAD) if update else F_CONST)
        n.aux = &self.touch if self.is_lookup else NULL
        n.pyref = pyref_add(self)    # the table, for _catch_up_graph
        _foreign(g, n, self, XP_WHOLE)
        finish_node(nid)
        if update:
            self.pnid = nid
        else:
            self.cnid = nid
        return nid

    cdef int node_id(self, bint as_arg) except -1:
        return self.param_node(True)

    def _expr(self, bint update):
        return wrap(self.param_node(update))

    def _lookup(self, row, bint update):
        """Row `row` as an expression pointing straight into the table."""
        return self._lookup_c(row, update)

    def _row(self, row):
        """LookupParameters.__getitem__ (``E[i]``): row i, updated by trainers."""
        return self._lookup_c(row, True)

    cdef Expression _lookup_c(self, object row, bint update):
        cdef int r = _check_row(self, row)
        cdef Graph* g = cg()
        if self.pool.dtype != g.dtype:
            self.param_node(True)   # raises the dtype error
        _catch_up(self, &r, 1)    # trainer hook: row r up to date
        cdef int nid = new_node(OP_LOOKUP, 0, NULL)
        cdef Node* n = &g.nodes[nid]
        n.dim = self.pdim
        n.dim.nd -= 1
        if n.dim.nd == 0:
            n.dim.nd = 1
            n.dim.d[0] = 1
        n.ia[0] = r
        n.v = self.pool.vb + (self.off + <long>r * self.rowsize) * self.pool.itemsize
        n.ptr = n.v
        n.gptr = self.pool.gb + (self.off + <long>r * self.rowsize) * self.pool.itemsize
        update = update and self.updated
        n.flags = F_FIXED | ((F_NG | F_PGRAD) if update else F_CONST)
        n.aux = &self.touch
        n.pyref = pyref_add(self)    # the table, for _catch_up_graph
        _foreign(g, n, self, XP_ROW)
        finish_node(nid)
        return _lookup_expr(nid, self, update)

    def _lookup_batch(self, rows, bint update):
        cdef Graph* g = cg()
        rows = [_check_row(self, r, "lookup_batch") for r in rows]
        if len(rows) == 0:
            raise ValueError("lookup_batch: empty index list")
        if self.pool.dtype != g.dtype:
            self.param_node(True)
        cdef int nid = new_node(OP_LOOKUPB, 0, NULL)
        cdef Node* n = &g.nodes[nid]
        n.dim = self.pdim
        n.dim.nd -= 1
        if n.dim.nd == 0:
            n.dim.nd = 1
            n.dim.d[0] = 1
        n.dim.bd = len(rows)
        n.ptr = self.pool.vb + self.off * self.pool.itemsize
        n.gptr = self.pool.gb + self.off * self.pool.itemsize
        update = update and self.updated
        n.flags = F_NG if update else F_CONST
        n.aux = &self.touch
        set_indices(nid, rows)
        _catch_up(self, idx(g, n), n.nidx)    # trainer hook: rows up to date
        n.pyref = pyref_add(self)    # the table, for _catch_up_graph
        _foreign(g, n, self, XP_ROWS)
        finish_node(nid)
        return _lookup_expr(nid, self, update)


cdef inline bint _is_param_node(Graph* g, int nid, ParamExpr p) noexcept:
    return nid < g.n and (g.nodes[nid].op == OP_PARAM or g.nodes[nid].op == OP_XPARAM) and \
        g.nodes[nid].ptr == <void*>(p.pool.vb + p.off * p.pool.itemsize)


cdef int _check_row(ParamExpr p, object row, str name="lookup") except -1:
    """Row `row` of table p as a C int: TypeError unless an integer (numpy's included, not a bool),
    IndexError naming the op unless in range (huge ints included). One C call for an int."""
    cdef int overflow = 0
    cdef long r
    if type(row) is not int:
        try:
            if isinstance(row, bool):      # (an int to PyNumber_Index)
                raise TypeError
            row = PyNumber_Index(row)      # numpy integers; not floats, strings or arrays
        except TypeError:
            raise TypeError("%s: index must be an integer, got %s %r" % (name, type(row).__name__, row)) from None
    r = PyLong_AsLongAndOverflow(row, &overflow)
    if overflow == 0 and 0 <= r < p.nrows:
        return <int>r
    raise IndexError("%s: row %d is out of range for %s with %d rows" % (name, row, p.name(), p.nrows))


cdef class LookupExpression(Expression):
    """lookup/lookup_batch result; set() changes the row(s)."""
    cdef ParamExpr table
    cdef bint update


    def set(self, index):
        """Point this lookup at other row(s) and invalidate the graph."""
        cdef int i = self.node_id(False)
        cdef Node* n = &cg().nodes[i]
        cdef int r, k
        if n.op == OP_XPARAM and n.ia[1] == XP_ROW:
            r = _check_row(self.table, index)
            _catch_up(self.table, &r, 1)    # trainer hook
            n.ia[0] = r
        elif n.op == OP_LOOKUP:
            r = _check_row(self.table, index)
            _catch_up(self.table, &r, 1)    # trainer hook
            n.ia[0] = r
            n.v = self.table.pool.vb + (self.table.off + <long>r * self.table.rowsize) * self.table.pool.itemsize
            n.ptr = n.v
            n.gptr = self.table.pool.gb + (self.table.off + <long>r * self.table.rowsize) * self.table.pool.itemsize
        else:
            rows = [_check_row(self.table, r, "lookup_batch") for r in index]
            if len(rows) != n.nidx:
                raise ValueError("lookup_batch.set: %d indices for a batch of %d" % (len(rows), n.nidx))
            for k in range(n.nidx):
                idx(cg(), n)[k] = rows[k]
            _catch_up(self.table, idx(cg(), n), n.nidx)    # trainer hook
        from dyn._core.core.graph import invalidate
        invalidate()


# ---------------------------------------------------------------- parameters of another device
# A graph runs on one device. A parameter whose pool lives on another device (a collection made
# before the graph's device was chosen, or add_parameters(device=...)) enters it as a
# foreign_parameter node: its value (the whole parameter, one row or a list of rows) is copied into
# the graph's arena once per graph, and backward adds its gradient into the pool's, marking rows.

cdef enum:
    XP_WHOLE = 0
    XP_ROW = 1       # ia[0]
    XP_ROWS = 2      # the index list


cdef str _graph_device(Graph* g):
    return (<bytes>g.dev.name).decode().upper()


cdef int _foreign(Graph* g, Node* n, ParamExpr p, int kind) except -1:
    """Make the node a copy of p's memory when p's pool is not on the graph's device."""
    if g.device == DEV_CPU and p.pool.device == "CPU":   # (the CPU program's case: no string made)
        return 0
    if p.pool.device.upper() == _graph_device(g):
        return 0
    n.op = OP_XPARAM
    n.ia[1] = kind
    n.flags &= ~(F_FIXED | F_PGRAD)
    n.v = NULL
    return 0


cdef object _xrows(Graph* g, Node* n):
    if n.ia[1] == XP_WHOLE:
        return None
    if n.ia[1] == XP_ROW:
        return np.array([n.ia[0]], np.int64)
    return np.array([idx(g, n)[k] for k in range(n.nidx)], np.int64)


cdef void _xparam_fwd(Graph* g, Node* n, void* y) noexcept:
    try:
        p = <ParamExpr>pyref_get(n.pyref)
        host = np.ascontiguousarray(p._values_of_rows(_xrows(g, n)))
        g.dev.from_host(n.v, cnp.PyArray_DATA(host), <size_t>dim_total(&n.dim) * g.itemsize)
    except BaseException as e:
        from dyn._core.core.graph import kernel_error
        kernel_error(e)


cdef void _xparam_bwd(Graph* g, Node* n, int i, void* gy) noexcept:
    try:
        p = <ParamExpr>pyref_get(n.pyref)
        host = np.empty(dim_total(&n.dim), np.float32 if g.dtype == 0 else np.float64)
        g.dev.to_host(cnp.PyArray_DATA(host), n.g, <size_t>dim_total(&n.dim) * g.itemsize)
        p._add_grads_of_rows(_xrows(g, n), host)
    except BaseException as e:
        from dyn._core.core.graph import kernel_error
        kernel_error(e)


OP_XPARAM = declare_op("foreign_parameter", _shape_leaf)
set_kernels(OP_XPARAM, DEV_CPU, _xparam_fwd, _xparam_fwd, _xparam_bwd, _xparam_bwd)
set_kernels(OP_XPARAM, DEV_GPU, _xparam_fwd, _xparam_fwd, _xparam_bwd, _xparam_bwd)


cdef LookupExpression _lookup_expr(int nid, ParamExpr table, bint update):
    cdef LookupExpression e = LookupExpression.__new__(LookupExpression)
    e._set_node(nid)
    e.table = table
    e.update = update
    return e

# ---------------------------------------------------------------- building nodes
# Kernel modules build nodes with these: new node from arguments, set its
# attributes, then finish (shape check, which may raise) and wrap.

cdef int node1(int op, object x) except -1:
    cdef int a = arg_id(x, op)
    return new_node(op, 1, &a)


cdef int node2(int op, object x, object y) except -1:
    cdef int a[2]
    a[0] = arg_id(x, op)
    a[1] = arg_id(y, op)
    return new_node(op, 2, a)


cdef int noden(int op, object xs, str opname) except -1:
    cdef int k, m
    cdef int buf[16]
    cdef int* ids = buf
    if not isinstance(xs, list):
        raise TypeError("%s: expected a list of expressions, got %s" % (opname, type(xs).__name__))
    m = len(xs)
    if m == 0:
        raise ValueError("%s: empty list of expressions" % opname)
    if m > 16:
        ids = <int*>PyMem_Malloc(m * sizeof(int))
    try:
        for k in range(m):
            ids[k] = arg_id(xs[k], op)
        return new_node(op, m, ids)
    finally:
        if ids != buf:
            PyMem_Free(ids)


cdef Expression finish(int nid):
    finish_node(nid)
    return wrap(nid)


from dyn._core.core.graph import on_invalidate  # noqa: E402
on_invalidate(_catch_up_graph)
