# cython: language_level=3, boundscheck=False, wraparound=False
"""Shape, selection and batch manipulation: concatenation (along a dim or the
batch), transpose, reshape, selection along one dim (pick, pick_batch,
select_rows/cols, ranges, strides), batch-element selection, and x ** c.

Everything here moves data; backward scatters the gradient back with +=, so
repeated indices and batch-1 (broadcast) arguments accumulate by construction.
Selections share one "gather along dim k" kernel: per batch element the input
is viewed as inner x L x outer (L = size of dim k) and the output as
inner x K x outer, K = number of indices (1 for per-batch-element picks).
"""
from libc.math cimport pow as cpow, log
from libc.string cimport memcpy
from operator import index as _index
from numpy import bool_ as _np_bool
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_PTR_ALL, elem_v, elem_g
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, set_kernels, kfwd_fn, kbwd_fn, shape_fn, DEV_CPU, dim_size,
    dim_total, dim_str, arg, idx, set_indices, finish_node, dim_eq_nobatch, MAXD)
from dyn._core.core.expr cimport node1, node2, noden, finish, Expression
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu.bcast cimport _ext
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport arg_dims

# Names for messages: one kernel serves several public ops (code in ia[3]).
cdef tuple NAMES = ("pick", "pick_batch", "select_rows", "select_cols", "pick_range",
                    "strided_select", "Expression indexing", "pick_batch_elem",
                    "pick_batch_elems", "concatenate", "concatenate_cols")
cdef dict _CODES = {name: i for i, name in enumerate(NAMES)}
# the same codes name the nodes in graph dumps (x[i] is a pick)
cdef tuple _LABELS = tuple(["pick" if name == "Expression indexing" else name for name in NAMES])

# ---------------------------------------------------------------- helpers

cdef inline long _prod(const Dim* d, int lo, int hi) noexcept nogil:
    cdef long s = 1
    cdef int k
    for k in range(lo, hi):
        s *= _ext(d, k)
    return s


cdef inline void _move(real* dst, real* src, long m, bint acc) noexcept nogil:
    """dst = src, or dst += src (backward)."""
    cdef long q
    if acc:
        for q in range(m):
            dst[q] += src[q]
    else:
        for q in range(m):
            dst[q] = src[q]


cdef inline Node* _node(int nid) noexcept:
    return &cg().nodes[nid]


# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations, so no kernel asks which float type it runs in.
cdef int _op(str name, shape_fn shape, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32, kbwd_fn b64) except -1:
    cdef int op = declare_op(name, shape)
    set_kernels(op, DEV_CPU, f32, f64, b32, b64)
    return op


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


cdef void _sel(real* y, real* x, Node* n, Node* a, int* ix, bint back) noexcept nogil:
    cdef int k = n.ia[0]
    cdef long inner = _prod(&a.dim, 0, k), L = _ext(&a.dim, k), outer = _prod(&a.dim, k + 1, 7)
    cdef long K = 1 if n.ia[2] else n.nidx
    cdef long s = inner * L * outer, t = inner * K * outer, b, o, j, i
    cdef real* xb
    cdef real* yb
    for b in range(n.dim.bd):
        xb = x + (b * s if a.dim.bd > 1 else 0)
        yb = y + b * t
        for o in range(outer):
            for j in range(K):
                i = ix[b] if n.ia[2] else ix[j]
                if back:
                    _move(xb + (o * L + i) * inner, yb + (o * K + j) * inner, inner, True)
                else:
                    _move(yb + (o * K + j) * inner, xb + (o * L + i) * inner, inner, False)


cdef void fwd_sel(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sel(y, <real*>a.v, n, a, idx(g, n), False)


cdef void bwd_sel(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sel(gy, <real*>a.g, n, a, idx(g, n), True)


cdef int OP_SEL = _op("select", _shape_sel, <kfwd_fn>fwd_sel[float], <kfwd_fn>fwd_sel[double],
                      <kbwd_fn>bwd_sel[float], <kbwd_fn>bwd_sel[double])
set_labels("select", 3, _LABELS)


cdef int _expr_arg(object x, str name) except -1:
    # the core's own TypeError names the shared kernel ("select"), not the op the user called
    if not isinstance(x, Expression):
        raise TypeError("%s: expected an Expression (or Parameters), got %s" % (name, type(x).__name__))
    return 0


cdef int _sel_node(object x, int k, list ix, bint remove, bint perbatch, str name) except -1:
    _expr_arg(x, name)
    cdef int nid = node1(OP_SEL, x)
    cdef Node* n = _node(nid)
    n.ia[0] = k
    n.ia[1] = remove
    n.ia[2] = perbatch
    n.ia[3] = _CODES[name]
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


cdef void fwd_bsel(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef size_t s = <size_t>dim_size(&n.dim)
    cdef int b
    cdef int* ix = idx(g, n)
    for b in range(n.nidx):
        memcpy(y + b * s, <real*>a.v + ix[b] * s, s * sizeof(real))


cdef void bwd_bsel(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef int m = dim_size(&n.dim), b
    cdef size_t s = <size_t>m
    cdef int* ix = idx(g, n)
    for b in range(n.nidx):
        _blas.axpy(real_dtype(gy), m, 1.0, gy + b * s, <real*>a.g + ix[b] * s)


cdef int OP_BSEL = _op("pick_batch_elems", _shape_bsel, <kfwd_fn>fwd_bsel[float], <kfwd_fn>fwd_bsel[double],
                       <kbwd_fn>bwd_bsel[float], <kbwd_fn>bwd_bsel[double])
set_labels("pick_batch_elems", 3, _LABELS)


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


cdef void _cat(real* y, Node* a, Node* n, long off, bint back) noexcept nogil:
    """Argument a's block sits at offset `off` of dim k in the output; y is the output's value
    (forward) or gradient (back), and a's value or gradient is read by element (elem_v/elem_g:
    an automatic batch may pass it per member)."""
    cdef int k = n.ia[0]
    cdef long inner = _prod(&n.dim, 0, k), La = _ext(&a.dim, k), L = n.dim.d[k]
    cdef long outer = _prod(&n.dim, k + 1, 7), s = inner * La * outer, t = inner * L * outer
    cdef long b, o
    cdef real* xb
    cdef real* yb
    for b in range(n.dim.bd):
        xb = <real*>(elem_g(a, b, s, sizeof(real)) if back else elem_v(a, b, s, sizeof(real)))
        yb = y + b * t
        for o in range(outer):
            if back:
                _move(xb + o * La * inner, yb + (o * L + off) * inner, La * inner, True)
            else:
                _move(yb + (o * L + off) * inner, xb + o * La * inner, La * inner, False)


cdef void fwd_cat(Graph* g, Node* n, real* y) noexcept:
    cdef long off = 0
    cdef int i
    cdef Node* a
    for i in range(n.nargs):
        a = arg(g, n, i)
        _cat(y, a, n, off, False)
        off += _ext(&a.dim, n.ia[0])


cdef void bwd_cat(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef long off = 0
    cdef int j
    cdef Node* a = arg(g, n, i)
    for j in range(i):
        off += _ext(&arg(g, n, j).dim, n.ia[0])
    _cat(gy, a, n, off, True)


cdef int OP_CAT = _op("concatenate", _shape_cat, <kfwd_fn>fwd_cat[float], <kfwd_fn>fwd_cat[double],
                      <kbwd_fn>bwd_cat[float], <kbwd_fn>bwd_cat[double])
set_labels("concatenate", 3, _LABELS)


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


cdef void fwd_catb(Graph* g, Node* n, real* y) noexcept:
    cdef size_t off = 0, m
    cdef int i
    for i in range(n.nargs):
        m = <size_t>dim_total(&arg(g, n, i).dim)
        memcpy(y + off, arg(g, n, i).v, m * sizeof(real))
        off += m


cdef void bwd_catb(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef size_t off = 0
    cdef int j
    for j in range(i):
        off += <size_t>dim_total(&arg(g, n, j).dim)
    _blas.axpy(real_dtype(gy), dim_total(&arg(g, n, i).dim), 1.0, gy + off, arg(g, n, i).g)


cdef int OP_CATB = _op("concatenate_to_batch", _shape_catb, <kfwd_fn>fwd_catb[float], <kfwd_fn>fwd_catb[double],
                       <kbwd_fn>bwd_catb[float], <kbwd_fn>bwd_catb[double])


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


cdef void _tr(real* y, real* x, Node* n, Node* a, int* p, bint back) noexcept nogil:
    cdef long st[7]
    cdef long so[7]
    cdef int ext[7]
    cdef int cnt[7]
    cdef int m = n.dim.nd, j
    cdef long s = dim_size(&n.dim), acc = 1, b, i, off, r, c
    cdef real* xb
    cdef real* yb
    for j in range(7):
        st[j] = acc
        acc *= _ext(&a.dim, j)
    for j in range(m):
        so[j] = st[p[j]]
        ext[j] = n.dim.d[j]
    for b in range(n.dim.bd):
        xb = x + b * s
        yb = y + b * s
        if m == 2 and p[0] == 1:
            # plain matrix transpose: y (r x c) from x (c x r)
            r = ext[0]
            c = ext[1]
            for j in range(c):
                for i in range(r):
                    if back:
                        xb[j + i * c] += yb[i + j * r]
                    else:
                        yb[i + j * r] = xb[j + i * c]
            continue
        off = 0
        for j in range(m):
            cnt[j] = 0
        for i in range(s):
            if back:
                xb[off] += yb[i]
            else:
                yb[i] = xb[off]
            j = 0
            while j < m:
                cnt[j] += 1
                off += so[j]
                if cnt[j] < ext[j]:
                    break
                off -= so[j] * ext[j]
                cnt[j] = 0
                j += 1


cdef void fwd_tr(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _tr(y, <real*>a.v, n, a, idx(g, n), False)


cdef void bwd_tr(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _tr(gy, <real*>a.g, n, a, idx(g, n), True)


cdef int OP_TR = _op("transpose", _shape_tr, <kfwd_fn>fwd_tr[float], <kfwd_fn>fwd_tr[double],
                     <kbwd_fn>bwd_tr[float], <kbwd_fn>bwd_tr[double])


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


cdef void fwd_rs(Graph* g, Node* n, real* y) noexcept:
    memcpy(y, arg(g, n, 0).v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_rs(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, arg(g, n, 0).g)


cdef int OP_RS = _op("reshape", _shape_rs, <kfwd_fn>fwd_rs[float], <kfwd_fn>fwd_rs[double],
                     <kbwd_fn>bwd_rs[float], <kbwd_fn>bwd_rs[double])


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


cdef void _powc(real* y, real* x, real* gy, real* gx, long m, double c, bint back) noexcept nogil:
    cdef long i
    if not back:
        for i in range(m):
            y[i] = cpow(x[i], c)
    elif c != 0:
        for i in range(m):
            gx[i] += gy[i] * c * cpow(x[i], c - 1)


cdef void fwd_powc(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _powc(y, <real*>a.v, NULL, NULL, dim_total(&n.dim), n.fa[0], False)


cdef void bwd_powc(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _powc(NULL, <real*>a.v, gy, <real*>a.g, dim_total(&n.dim), n.fa[0], True)


cdef int OP_POWC = _op("pow_const", _shape_same, <kfwd_fn>fwd_powc[float], <kfwd_fn>fwd_powc[double],
                       <kbwd_fn>bwd_powc[float], <kbwd_fn>bwd_powc[double])


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


cdef void _pow(real* y, real* x, real* e, real* gy, real* gx, Node* n, Node* a, Node* b,
               int which) noexcept nogil:
    """which -1: forward; 0: gx += gy e x^(e-1); 1: ge += sum gy y log x."""
    cdef long s = dim_size(&n.dim), k, i
    cdef real* xb
    cdef real* yb
    cdef double c, acc
    for k in range(n.dim.bd):
        xb = x + (k * s if a.dim.bd > 1 else 0)
        yb = y + k * s
        c = e[k if b.dim.bd > 1 else 0]
        if which == -1:
            for i in range(s):
                yb[i] = cpow(xb[i], c)
        elif which == 0:
            if c != 0:
                for i in range(s):
                    gx[(k * s if a.dim.bd > 1 else 0) + i] += gy[k * s + i] * c * cpow(xb[i], c - 1)
        else:
            acc = 0
            for i in range(s):
                if yb[i] != 0:
                    acc += gy[k * s + i] * <double>yb[i] * log(xb[i])
            gx[k if b.dim.bd > 1 else 0] += acc


cdef void fwd_pow(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _pow(y, <real*>a.v, <real*>b.v, NULL, NULL, n, a, b, -1)


cdef void bwd_pow(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef void* gx = a.g if i == 0 else b.g
    _pow(<real*>n.v, <real*>a.v, <real*>b.v, gy, <real*>gx, n, a, b, i)


cdef int OP_POW = _op("pow", _shape_pow, <kfwd_fn>fwd_pow[float], <kfwd_fn>fwd_pow[double],
                      <kbwd_fn>bwd_pow[float], <kbwd_fn>bwd_pow[double])


def pow(x, y):
    return finish(node2(OP_POW, x, y))

# ---------------------------------------------------------------- automatic batching (src/_autobatch.pyx)
set_autobatch(OP_CAT, AB_ON, 0, 0x3f, NULL, NULL, AB_PTR_ALL)   # _cat reads per-member arguments
