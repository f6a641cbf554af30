# cython: language_level=3
"""Shape, selection and batch manipulation: concatenation (along a dim or the
batch), transpose, reshape, selection along one dim (pick, pick_batch,
select_rows/cols, ranges, strides), batch-element selection, and x ** c.

The definitions: shape rules, argument checks, node constructors, labels and
batching specs. The kernels (they move data; backward scatters the gradient
back with +=) are in dyn/_core/cpu/shape.pyx. Selections share one "gather
along dim k" op: per batch element the input is viewed as inner x L x outer
(L = size of dim k) and the output as inner x K x outer, K = number of
indices (1 for per-batch-element picks).
"""
from operator import index as _index
from numpy import bool_ as _np_bool
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_PTR_ALL, ABA_NO, ABA_CAT
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, dim_size, dim_total, dim_str, arg, idx, set_indices, set_index_range, finish_node,
    dim_eq_nobatch, MAXD)
from dyn._core.core.expr cimport node1, node2, noden, finish, Expression
from dyn._core.cpu.bcast cimport _ext
from dyn._core.ops.util cimport arg_dims, declare_labelled

# Names for messages: one kernel serves several public ops (code in ia[3]).
cdef tuple NAMES = ("pick", "pick_batch", "select_rows", "select_cols", "pick_range",
                    "strided_select", "Expression indexing", "pick_batch_elem",
                    "pick_batch_elems", "concatenate", "concatenate_cols")
cdef dict _CODES = {name: i for i, name in enumerate(NAMES)}
# the same codes name the nodes in graph dumps (x[i] is a pick)
cdef tuple _LABELS = tuple(["pick" if name == "Expression indexing" else name for name in NAMES])

# ---------------------------------------------------------------- helpers

cdef inline Node* _node(int nid) noexcept:
    return &cg().nodes[nid]


cdef inline _as_int(object i, str name, str what):
    """A Python int from an int-like (numpy ints too): a bool, a float or an
    array is a TypeError naming the op."""
    if isinstance(i, (bool, float, _np_bool)) or not hasattr(i, "__index__"):
        raise TypeError("%s: %s must be an integer, got %s %r" % (name, what, type(i).__name__, i))
    try:
        return _index(i)
    except TypeError:      # a numpy array of more than one element
        raise TypeError("%s: %s must be an integer, got %s %r"
                        % (name, what, type(i).__name__, i)) from None


def check_index(object i, str name, str what="index"):
    """A non-negative Python int from an int-like (numpy ints too)."""
    if type(i) is int and 0 <= i <= 0x7fffffff:     # the common case
        return i
    i = _as_int(i, name, what)
    if i < 0:
        raise IndexError("%s: %s %d is negative (indices are unsigned)" % (name, what, i))
    if i > 0x7fffffff:
        raise IndexError("%s: %s %d is out of range" % (name, what, i))
    return i


def check_indices(object xs, str name):
    """A non-empty list of non-negative ints from any iterable of int-likes."""
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__iter__"):
        raise TypeError("%s: expected a list of integer indices, got %s" % (name, type(xs).__name__))
    out = [check_index(i, name) for i in xs]
    if not out:
        raise ValueError("%s: empty index list" % name)
    return out


cdef int _check_list(object xs, str name) except -1:
    # noden's own TypeError does not name the op; say which op and which element
    if isinstance(xs, list):
        for k in range(len(xs)):
            if not isinstance(xs[k], Expression):
                raise TypeError("%s: element %d of the list is a %s, not an Expression"
                                % (name, k, type(xs[k]).__name__))
    return 0


cpdef int check_dim(object d, str name, str what="dim") except -1:
    if type(d) is int and 0 <= d < MAXD:     # the common case, without hasattr and operator.index
        return d
    d = _as_int(d, name, what)
    if d < 0 or d >= MAXD:
        raise ValueError("%s: %s %d is out of range (0 <= %s < %d)" % (name, what, d, what, MAXD))
    return d

# ---------------------------------------------------------------- gather along one dim
# ia[0] = dim k, ia[1] = remove dim k, ia[2] = one index per output batch
# element, ia[3] = name code; indices in idx(g, n).

cdef int _shape_sel(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k = n.ia[0], L = _ext(&x.dim, k), m = n.nidx, j
    cdef int* ix = idx(g, n)
    cdef str name = NAMES[n.ia[3]]
    for j in range(m):
        if ix[j] >= L:
            raise IndexError("%s: index %d is out of range for dim %d of size %d (expression dim %s)"
                             % (name, ix[j], k, L, dim_str(&x.dim)))
    n.dim = x.dim
    if n.ia[2]:
        if x.dim.bd != 1 and x.dim.bd != m:
            raise ValueError("%s: %d indices for an expression of dim %s: give one index per batch "
                             "element (or use a batch-1 expression)" % (name, m, dim_str(&x.dim)))
        n.dim.bd = m
    if n.ia[1]:
        if k < x.dim.nd:
            for j in range(k, x.dim.nd - 1):
                n.dim.d[j] = x.dim.d[j + 1]
            n.dim.nd = x.dim.nd - 1
            if n.dim.nd == 0:
                n.dim.nd = 1
                n.dim.d[0] = 1
    else:
        for j in range(x.dim.nd, k + 1):
            n.dim.d[j] = 1
        if n.dim.nd < k + 1:
            n.dim.nd = k + 1
        n.dim.d[k] = m
    return 0


OP_SEL = declare_labelled("select", _shape_sel, 3, _LABELS)


# Automatic batching: selections of the same slices (the indices are part of the signature) from
# arguments of one Dim run as one select over the members' arguments joined along the batch (a
# Tree-LSTM cell in plain operations picks the same gate rows at every tree node). Per-batch-element
# picks (pick_batch, ia[2]) run alone.
cdef int _ab_arg_sel(Graph* g, Node* n, int k, int* off, Dim* wd) noexcept:
    if n.ia[2] or arg(g, n, k).dim.bd != n.dim.bd:
        return ABA_NO
    return ABA_CAT


cdef void _ab_fix_sel(Graph* g, Node* n) noexcept:
    # the engine concatenated the members' (equal) index lists: the batched node keeps one of them
    n.nidx = 1 if n.ia[1] else n.dim.d[n.ia[0]]


set_autobatch(OP_SEL, AB_ON, 0, 0x3f, _ab_arg_sel, _ab_fix_sel)


cdef int _expr_arg(object x, str name) except -1:
    # the core's own TypeError names the shared kernel ("select"), not the op the user called
    if not isinstance(x, Expression):
        raise TypeError("%s: expected an Expression (or Parameters), got %s" % (name, type(x).__name__))
    return 0


cdef int _sel_new(object x, int k, bint remove, bint perbatch, str label) except -1:
    """A select node over x (its index list still to set): dim k, the flags, the label's code."""
    cdef int nid = node1(OP_SEL, x)
    cdef Node* n = _node(nid)
    n.ia[0] = k
    n.ia[1] = remove
    n.ia[2] = perbatch
    n.ia[3] = _CODES[label]
    return nid


cdef int _sel_node(object x, int k, list ix, bint remove, bint perbatch, str name) except -1:
    _expr_arg(x, name)
    cdef int nid = _sel_new(x, k, remove, perbatch, name)
    set_indices(nid, ix)
    return finish_node(nid)


cdef class PickExpression(Expression):
    """Result of pick / pick_batch: set_index() points it at another slice."""

    def set_index(self, index):
        """Change the index (pick) or the per-batch indices (pick_batch) and
        invalidate the graph so the next value request recomputes."""
        cdef Graph* g = cg()
        cdef Node* n = &g.nodes[self.node_id(False)]
        cdef str name = NAMES[n.ia[3]] + ".set_index"
        cdef int L = _ext(&arg(g, n, 0).dim, n.ia[0]), j
        if n.ia[2]:
            ix = check_indices(index, name)
            if len(ix) != n.nidx:
                raise ValueError("%s: %d indices for a batch of %d" % (name, len(ix), n.nidx))
        else:
            ix = [check_index(index, name)]
        for j in range(len(ix)):
            if ix[j] >= L:
                raise IndexError("%s: index %d is out of range for dim %d of size %d"
                                 % (name, ix[j], n.ia[0], L))
        for j in range(len(ix)):
            idx(g, n)[j] = ix[j]
        from dyn._core.core.graph import invalidate
        invalidate()


cdef PickExpression _picker(int nid):
    cdef PickExpression e = PickExpression.__new__(PickExpression)
    e._set_node(nid)
    return e


def pick(e, index=0, dim=0):
    """Slice `index` along `dim`, that dim removed (same index for every batch element)."""
    cdef list ix = [check_index(index, "pick")]
    return _picker(_sel_node(e, check_dim(dim, "pick"), ix, True, False, "pick"))


def pick_batch(e, indices, dim=0):
    """One slice per batch element: result batch = len(indices)."""
    cdef list ix = check_indices(indices, "pick_batch")
    return _picker(_sel_node(e, check_dim(dim, "pick_batch"), ix, True, True, "pick_batch"))


def select(x, dim, indices, str name):
    """The slices `indices` (in order, repeats allowed) along `dim`, kept as a dim."""
    cdef list ix
    if type(indices) is range:
        # a range needs no per-element check (pick_range, slices): its smallest
        # element bounds it below and the shape rule checks the top
        ix = list(indices)
        if not ix:
            raise ValueError("%s: empty index list" % name)
        low = min(ix[0], ix[len(ix) - 1])
        if low < 0:
            raise IndexError("%s: negative index %d" % (name, low))
    else:
        ix = check_indices(indices, name)
    return finish(_sel_node(x, check_dim(dim, name), ix, False, False, name))

def pick_range(x, int s, int e, int k, str name):
    """pick_range/pickrange with int arguments (the caller checked 0 <= s < e and 0 <= k < MAXD):
    the top checked against the size, the node made with its indices s .. e-1 written straight
    into the index pool (no Python list: a Tree-LSTM cell in plain operations makes five of these
    per tree node)."""
    _expr_arg(x, name)
    cdef int size = _ext(&_node((<Expression>x).node_id(True)).dim, k)
    if e > size:
        raise IndexError("%s: end %d is out of range for dim %d of size %d (expression dim %s)"
                         % (name, e, k, size, x.dim()))
    cdef int nid = _sel_new(x, k, False, False, "pick_range")    # labelled pick_range (pickrange: its alias)
    set_index_range(nid, s, e - s)
    return finish(finish_node(nid))

# ---------------------------------------------------------------- batch elements

cdef int _shape_bsel(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int j
    cdef int* ix = idx(g, n)
    for j in range(n.nidx):
        if ix[j] >= x.dim.bd:
            raise IndexError("%s: batch index %d is out of range for an expression of dim %s "
                             "(batch size %d)" % (NAMES[n.ia[3]], ix[j], dim_str(&x.dim), x.dim.bd))
    n.dim = x.dim
    n.dim.bd = n.nidx
    return 0


OP_BSEL = declare_labelled("pick_batch_elems", _shape_bsel, 3, _LABELS)


def batch_select(x, indices, str name):
    """Batch elements `indices` of x (in order, repeats allowed) as a new batch."""
    _expr_arg(x, name)
    cdef list ix = check_indices(indices, name)
    cdef int nid = node1(OP_BSEL, x)
    _node(nid).ia[3] = _CODES[name]
    set_indices(nid, ix)
    return finish(nid)

# ---------------------------------------------------------------- concatenate along dim k

cdef int _shape_cat(Graph* g, Node* n) except -1:
    cdef int k = n.ia[0], i, j, nd = k + 1, b = 1, L = 0
    cdef Node* a0 = arg(g, n, 0)
    cdef Node* a
    cdef str name = NAMES[n.ia[3]]
    for i in range(n.nargs):
        a = arg(g, n, i)
        if a.dim.nd > nd:
            nd = a.dim.nd
        for j in range(MAXD):
            if j != k and _ext(&a.dim, j) != _ext(&a0.dim, j):
                raise ValueError("%s: along dim %d every other dim must be equal, got %s"
                                 % (name, k, arg_dims(g, n)))
        L += _ext(&a.dim, k)
        if a.dim.bd != 1:
            if b != 1 and b != a.dim.bd:
                raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
            b = a.dim.bd
    n.dim.nd = nd
    for j in range(nd):
        n.dim.d[j] = _ext(&a0.dim, j)
    n.dim.d[k] = L
    n.dim.bd = b
    return 0


OP_CAT = declare_labelled("concatenate", _shape_cat, 3, _LABELS)


cdef Expression _concatenate(xs, int k, str name):
    _check_list(xs, name)
    cdef int nid = noden(OP_CAT, xs, name)
    _node(nid).ia[0] = k
    _node(nid).ia[3] = _CODES[name]
    return finish(nid)


def concatenate(xs, d=0):
    return _concatenate(xs, check_dim(d, "concatenate", "d"), "concatenate")


def concatenate_cols(xs):
    return _concatenate(xs, 1, "concatenate_cols")

# ---------------------------------------------------------------- concatenate along the batch

cdef int _shape_catb(Graph* g, Node* n) except -1:
    cdef Node* a0 = arg(g, n, 0)
    cdef int i, b = 0
    for i in range(n.nargs):
        if not dim_eq_nobatch(&a0.dim, &arg(g, n, i).dim):
            raise ValueError("concatenate_to_batch: every expression must have the same "
                             "per-example dims, got %s" % arg_dims(g, n))
        b += arg(g, n, i).dim.bd
    n.dim = a0.dim
    n.dim.bd = b
    return 0


OP_CATB = declare_op("concatenate_to_batch", _shape_catb)


def concatenate_to_batch(xs):
    _check_list(xs, "concatenate_to_batch")
    return finish(noden(OP_CATB, xs, "concatenate_to_batch"))

# ---------------------------------------------------------------- transpose (any permutation)

cdef int _shape_tr(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int m = n.nidx, j
    cdef int* p = idx(g, n)
    for j in range(m, x.dim.nd):
        if x.dim.d[j] != 1:
            raise ValueError("transpose: dims %s has %d entries but the expression has dim %s"
                             % ([p[i] for i in range(m)], m, dim_str(&x.dim)))
    n.dim.nd = m
    for j in range(m):
        n.dim.d[j] = _ext(&x.dim, p[j])
    n.dim.bd = x.dim.bd
    return 0


OP_TR = declare_op("transpose", _shape_tr)


def transpose(x, dims):
    if not isinstance(dims, list):
        raise TypeError("transpose: dims must be a list, got %s" % type(dims).__name__)
    p = [check_index(v, "transpose", "dims entry") for v in dims]
    if not p or len(p) > MAXD or sorted(p) != list(range(len(p))):
        raise ValueError("transpose: dims %r is not a permutation of 0..n-1 (n <= %d)" % (dims, MAXD))
    cdef int nid = node1(OP_TR, x)
    set_indices(nid, p)
    return finish(nid)

# ---------------------------------------------------------------- reshape (copy)

cdef int _shape_rs(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int* d = idx(g, n)
    cdef int m = n.nidx - 1, bs = d[m], j
    cdef long prod = 1
    for j in range(m):
        prod *= d[j]
    n.dim.nd = m
    for j in range(m):
        n.dim.d[j] = d[j]
    if prod * bs == dim_total(&x.dim):
        n.dim.bd = bs
    elif bs == 1 and prod == dim_size(&x.dim):
        n.dim.bd = x.dim.bd
    else:
        raise ValueError("reshape: cannot reshape %s (%d elements per batch element, %d in all) "
                         "to %s with batch size %d" % (dim_str(&x.dim), dim_size(&x.dim),
                                                       dim_total(&x.dim), dim_str(&n.dim), bs))
    return 0


OP_RS = declare_op("reshape", _shape_rs)


def reshape(x, d, batch_size=1):
    if not isinstance(d, tuple):
        raise TypeError("reshape: d must be a tuple of dims, got %s" % type(d).__name__)
    if not 1 <= len(d) <= MAXD:
        raise ValueError("reshape: d must have 1 to %d dims, got %r" % (MAXD, d))
    dims = []
    for v in d:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        v = _as_int(v, "reshape", "each dim")
        if v <= 0 or v > 0x7fffffff:
            raise ValueError("reshape: dims must be positive integers that fit in 32 bits, got %r" % (d,))
        dims.append(v)
    bs = _as_int(batch_size, "reshape", "batch_size")
    if bs <= 0 or bs > 0x7fffffff:
        raise ValueError("reshape: batch_size must be a positive integer, got %r" % (batch_size,))
    cdef int nid = node1(OP_RS, x)
    set_indices(nid, dims + [bs])
    return finish(nid)

# ---------------------------------------------------------------- x ** c (number) and pow(x, y)

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0


OP_POWC = declare_op("pow_const", _shape_same)


def pow_const(x, double c):
    cdef int nid = node1(OP_POWC, x)
    _node(nid).fa[0] = c
    return finish(nid)


cdef int _shape_pow(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* e = arg(g, n, 1)
    if dim_size(&e.dim) != 1:
        raise ValueError("pow: the exponent must be a single-element expression, got dims %s"
                         % arg_dims(g, n))
    if x.dim.bd != 1 and e.dim.bd != 1 and x.dim.bd != e.dim.bd:
        raise ValueError("pow: batch sizes differ (%s)" % arg_dims(g, n))
    n.dim = x.dim
    n.dim.bd = x.dim.bd if x.dim.bd > e.dim.bd else e.dim.bd
    return 0


OP_POW = declare_op("pow", _shape_pow)


def pow(x, y):
    return finish(node2(OP_POW, x, y))

# ---------------------------------------------------------------- automatic batching (dyn/_core/core/autobatch.pyx)
set_autobatch(OP_CAT, AB_ON, 0, 0x3f, NULL, NULL, AB_PTR_ALL)   # _cat reads per-member arguments
