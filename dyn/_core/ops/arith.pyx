# cython: language_level=3, boundscheck=False, wraparound=False
"""Arithmetic: elementwise (+, -, cmult, cdiv with broadcasting), scalar
affine (x*a + c), matrix product, affine_transform, dot products, sums and
norms. Each op: shape rule, forward, backward (accumulating), side by side.
"""
from libc.math cimport sqrt
from libc.string cimport memset, memcpy
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_BCAST, AB_SHARE_ODD
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, set_kernels, kfwd_fn, kbwd_fn, shape_fn, DEV_CPU, dim_size,
    dim_total, dim_cols, dim_str, arg, dim_eq_nobatch, F_NG)
from dyn._core.core.expr cimport (
    node1, node2, noden, finish, Expression, set_binop, binop_fn, BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu.bcast cimport BIter, bi_init, bi_next, same_shape, _ext
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport arg_dims, batch_rule, expr_arg, g_node, number_arg

cdef extern from "_fastmath.h" nogil:
    # a bias gradient over a whole batch in one pass (float32)
    void dyn_colsum_acc_f32(float* y, const float* G, long m, long C)

cdef enum:
    ADD, SUB, MUL, DIV

# ---------------------------------------------------------------- helpers
# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in (the _blas calls take real_dtype(p), a compile-time constant).

cdef int _op(str name, shape_fn shape, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32, kbwd_fn b64,
             int aux=0) except -1:
    cdef int op = declare_op(name, shape, aux)
    set_kernels(op, DEV_CPU, f32, f64, b32, b64)
    return op

# ---------------------------------------------------------------- elementwise binary

cdef int _shape_cw(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef int k, ea, eb, nd = a.dim.nd if a.dim.nd > b.dim.nd else b.dim.nd
    cdef str name = ("add", "subtract", "cmult", "cdiv")[n.ia[0]]
    n.dim.nd = nd
    for k in range(7):
        ea = _ext(&a.dim, k)
        eb = _ext(&b.dim, k)
        if ea != eb and (eb != 1 if n.ia[0] == DIV else (ea != 1 and eb != 1)):
            raise ValueError("%s: dimensions %s and %s do not broadcast (each dim equal%s)"
                             % (name, dim_str(&a.dim), dim_str(&b.dim),
                                ", or 1 in the right operand" if n.ia[0] == DIV else " or 1"))
        if k < nd:
            n.dim.d[k] = ea if ea > eb else eb
    if n.ia[0] == DIV and b.dim.bd != 1 and b.dim.bd != a.dim.bd:
        raise ValueError("cdiv: batch sizes %s and %s (the right operand's batch must be 1 or equal)"
                         % (dim_str(&a.dim), dim_str(&b.dim)))
    n.dim.bd = batch_rule(g, n, name)
    return 0


cdef void _cw_fwd(int kind, real* y, real* a, real* b, const Dim* dy, const Dim* da,
                  const Dim* db) noexcept nogil:
    cdef int s = dim_size(dy), i, k
    cdef real* pa
    cdef real* pb
    cdef real* py
    cdef BIter it
    if same_shape(da, db) and same_shape(da, dy):
        for k in range(dy.bd):
            pa = a + (k * s if da.bd > 1 else 0)
            pb = b + (k * s if db.bd > 1 else 0)
            py = y + k * s
            if kind == ADD:
                for i in range(s):
                    py[i] = pa[i] + pb[i]
            elif kind == SUB:
                for i in range(s):
                    py[i] = pa[i] - pb[i]
            elif kind == MUL:
                for i in range(s):
                    py[i] = pa[i] * pb[i]
            else:
                for i in range(s):
                    py[i] = pa[i] / pb[i]
        return
    bi_init(&it, dy, da, db)
    for i in range(s * dy.bd):
        if kind == ADD:
            y[i] = a[it.oa] + b[it.ob]
        elif kind == SUB:
            y[i] = a[it.oa] - b[it.ob]
        elif kind == MUL:
            y[i] = a[it.oa] * b[it.ob]
        else:
            y[i] = a[it.oa] / b[it.ob]
        bi_next(&it)


cdef void _cw_bwd(int kind, int which, real* gx, real* gy, real* a, real* b, const Dim* dy,
                  const Dim* da, const Dim* db) noexcept nogil:
    cdef int s = dim_size(dy), i, k
    cdef long oa, ob
    cdef real* pa
    cdef real* pb
    cdef real* pg
    cdef real* px
    cdef BIter it
    if same_shape(da, db) and same_shape(da, dy):
        for k in range(dy.bd):
            oa = k * s if da.bd > 1 else 0
            ob = k * s if db.bd > 1 else 0
            pa = a + oa
            pb = b + ob
            pg = gy + k * s
            px = gx + (oa if which == 0 else ob)
            if kind == ADD or (kind == SUB and which == 0):
                for i in range(s):
                    px[i] += pg[i]
            elif kind == SUB:
                for i in range(s):
                    px[i] -= pg[i]
            elif kind == MUL:
                if which == 0:
                    for i in range(s):
                        px[i] += pg[i] * pb[i]
                else:
                    for i in range(s):
                        px[i] += pg[i] * pa[i]
            elif which == 0:
                for i in range(s):
                    px[i] += pg[i] / pb[i]
            else:
                for i in range(s):
                    px[i] -= pg[i] * pa[i] / (pb[i] * pb[i])
        return
    bi_init(&it, dy, da, db)
    for i in range(s * dy.bd):
        oa = it.oa
        ob = it.ob
        if kind == ADD or (kind == SUB and which == 0):
            gx[oa if which == 0 else ob] += gy[i]
        elif kind == SUB:
            gx[ob] -= gy[i]
        elif kind == MUL:
            if which == 0:
                gx[oa] += gy[i] * b[ob]
            else:
                gx[ob] += gy[i] * a[oa]
        elif which == 0:
            gx[oa] += gy[i] / b[ob]
        else:
            gx[ob] -= gy[i] * a[oa] / (b[ob] * b[ob])
        bi_next(&it)


cdef void fwd_cw(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _cw_fwd(n.ia[0], y, <real*>a.v, <real*>b.v, &n.dim, &a.dim, &b.dim)


cdef void bwd_cw(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef real* gx = <real*>(a.g if i == 0 else b.g)
    _cw_bwd(n.ia[0], i, gx, gy, <real*>a.v, <real*>b.v, &n.dim, &a.dim, &b.dim)


cdef int OP_CW = _op("cwise", _shape_cw, <kfwd_fn>fwd_cw[float], <kfwd_fn>fwd_cw[double],
                     <kbwd_fn>bwd_cw[float], <kbwd_fn>bwd_cw[double])
set_labels("cwise", 0, ("+", "-", "cmult", "cdiv"))   # ADD, SUB, MUL, DIV


cdef tuple _CW_NAMES = ("+", "-", "cmult", "cdiv")     # ADD, SUB, MUL, DIV
cdef tuple _RED_NAMES = ("sum_elems", "squared_norm", "l2_norm")
cdef tuple _PAIR_NAMES = ("dot_product", "squared_distance")


cdef int _name_bad_arg(tuple args, str name) except -1:
    # after node1/node2 refused an argument: their TypeError names the shared
    # kernel ("cwise"); say which op the user called (nothing on the good path)
    for a in args:
        expr_arg(a, name)
    return 0


cdef Expression _cwise(int kind, object x, object y):
    cdef int nid
    try:
        nid = node2(OP_CW, x, y)
    except TypeError:
        _name_bad_arg((x, y), _CW_NAMES[kind])
        raise
    g_node(nid).ia[0] = kind
    return finish(nid)


def cmult(x, y):
    return _cwise(MUL, x, y)


def cdiv(x, y):
    return _cwise(DIV, x, y)

# ---------------------------------------------------------------- x * a + c

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0


cdef void _aff_fwd(real* y, real* x, int m, real a, real c) noexcept nogil:
    cdef int i
    for i in range(m):
        y[i] = a * x[i] + c


cdef void fwd_affs(Graph* g, Node* n, real* y) noexcept:
    _aff_fwd(y, <real*>arg(g, n, 0).v, dim_total(&n.dim), <real>n.fa[0], <real>n.fa[1])


cdef void bwd_affs(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), n.fa[0], gy, arg(g, n, 0).g)


cdef int OP_AFFS = _op("scalar_affine", _shape_same, <kfwd_fn>fwd_affs[float], <kfwd_fn>fwd_affs[double],
                       <kbwd_fn>bwd_affs[float], <kbwd_fn>bwd_affs[double])


cdef Expression _affs(object x, double a, double c):
    """x * a + c elementwise (numbers in +, -, *, / and unary minus: a and c already floats)."""
    cdef int nid = node1(OP_AFFS, x)
    g_node(nid).fa[0] = a
    g_node(nid).fa[1] = c
    return finish(nid)


def scalar_affine(x, a, c):
    """The public op: a and c are numbers (not Cython's double conversion, which names no op
    and takes True as 1.0)."""
    return _affs(x, number_arg(a, "scalar_affine", "a"), number_arg(c, "scalar_affine", "c"))


cdef bint _num(object x):
    """A real number: Python's, numpy's scalars (np.float32(2)) and 0-d arrays."""
    if isinstance(x, (int, float)):
        return True
    if isinstance(x, (Expression, complex)) or not hasattr(x, "__float__"):
        return False
    return getattr(x, "shape", ()) == () and getattr(getattr(x, "dtype", None), "kind", "f") in "biuf"


cdef object _other(str op, object x, object y):
    """NotImplemented for what Python may still pair with an Expression; a clear TypeError for an
    array, which numpy would otherwise broadcast into an object array of Expressions."""
    for v in (x, y):
        if not isinstance(v, Expression) and getattr(v, "shape", ()) != ():
            raise TypeError(
                "Expression %s %s: dyn's operators take Expressions and numbers, not an array of "
                "shape %s (make it an expression with dy.inputTensor)" % (op, type(v).__name__, v.shape))
    return NotImplemented


cpdef object add(object x, object y):
    if isinstance(y, Expression) and isinstance(x, Expression):
        return _cwise(ADD, x, y)
    if _num(y):
        return _affs(x, 1.0, float(y))
    if _num(x):
        return _affs(y, 1.0, float(x))
    return _other("+", x, y)


cpdef object sub(object x, object y):
    if isinstance(y, Expression) and isinstance(x, Expression):
        return _cwise(SUB, x, y)
    if _num(y):
        return _affs(x, 1.0, -float(y))
    if _num(x):
        return _affs(y, -1.0, float(x))
    return _other("-", x, y)


cpdef object mul(object x, object y):
    if isinstance(y, Expression) and isinstance(x, Expression):
        return matmul(x, y)
    if _num(y):
        return _affs(x, float(y), 0.0)
    if _num(x):
        return _affs(y, float(x), 0.0)
    return _other("*", x, y)


cpdef object div(object x, object y):
    if isinstance(x, Expression) and _num(y):
        return _affs(x, 1.0 / float(y), 0.0)
    raise NotImplementedError(
        "Expression / %s: only division by a number is supported (use dy.cdiv for "
        "elementwise division)" % type(y).__name__)


def neg(x):
    return _affs(x, -1.0, 0.0)


set_binop(BIN_ADD, <binop_fn>add)
set_binop(BIN_SUB, <binop_fn>sub)
set_binop(BIN_MUL, <binop_fn>mul)
set_binop(BIN_DIV, <binop_fn>div)

# ---------------------------------------------------------------- matrix product

cdef int _mm_check(Dim* a, Dim* b, str name) except -1:
    if a.nd > 2 or b.nd > 2:
        raise ValueError("%s: operands must have at most 2 dimensions, got %s and %s"
                         % (name, dim_str(a), dim_str(b)))
    if dim_cols(a) != b.d[0]:
        raise ValueError("%s: %s * %s: the left operand's %d columns do not match the "
                         "right operand's %d rows" % (name, dim_str(a), dim_str(b), dim_cols(a), b.d[0]))
    return 0


cdef int _shape_mm(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _mm_check(&a.dim, &b.dim, "matrix product (*)")
    n.dim.d[0] = a.dim.d[0]
    n.dim.d[1] = dim_cols(&b.dim)
    n.dim.nd = b.dim.nd
    n.dim.bd = batch_rule(g, n, "matrix product (*)")
    return 0


cdef void mm_fwd(Graph* g, real* y, int ybd, Node* W, Node* x, double beta) noexcept:
    """y (+)= W x per batch element; one gemm when W is shared over the batch."""
    cdef int m = W.dim.d[0], k = dim_cols(&W.dim), n = dim_cols(&x.dim), b, dt = real_dtype(y)
    cdef int N = n * ybd
    cdef real* Wb
    cdef real* xb
    if W.dim.bd == 1 and x.dim.bd == ybd:
        if N == 1:
            _blas.gemv(dt, b'N', m, k, 1.0, W.v, m, x.v, beta, y)
        else:
            _blas.gemm(dt, b'N', b'N', m, N, k, 1.0, W.v, m, x.v, k, beta, y, m)
        return
    for b in range(ybd):
        Wb = <real*>W.v + (<size_t>b * m * k if W.dim.bd > 1 else 0)
        xb = <real*>x.v + (<size_t>b * k * n if x.dim.bd > 1 else 0)
        _blas.gemm(dt, b'N', b'N', m, n, k, 1.0, Wb, m, xb, k, beta, y + <size_t>b * m * n, m)


cdef void mm_bwd(Graph* g, real* gy, int ybd, Node* W, Node* x, int which) noexcept:
    """Accumulate gW += gy x^T (which 0) or gx += W^T gy (which 1)."""
    cdef int m = W.dim.d[0], k = dim_cols(&W.dim), n = dim_cols(&x.dim), b, dt = real_dtype(gy)
    cdef int N = n * ybd
    cdef real* gyb
    if W.dim.bd == 1 and x.dim.bd == ybd:
        if which == 0 and N == 1:
            _blas.ger(dt, m, k, 1.0, gy, x.v, W.g, m)
        elif which == 0:
            _blas.gemm(dt, b'N', b'T', m, k, N, 1.0, gy, m, x.v, k, 1.0, W.g, m)
        elif N == 1:
            _blas.gemv(dt, b'T', m, k, 1.0, W.v, m, gy, 1.0, x.g)
        else:
            _blas.gemm(dt, b'T', b'N', k, N, m, 1.0, W.v, m, gy, m, 1.0, x.g, k)
        return
    for b in range(ybd):
        gyb = gy + <size_t>b * m * n
        if which == 0:
            _blas.gemm(dt, b'N', b'T', m, k, n, 1.0, gyb, m,
                       <real*>x.v + (<size_t>b * k * n if x.dim.bd > 1 else 0), k, 1.0,
                       <real*>W.g + (<size_t>b * m * k if W.dim.bd > 1 else 0), m)
        else:
            _blas.gemm(dt, b'T', b'N', k, n, m, 1.0,
                       <real*>W.v + (<size_t>b * m * k if W.dim.bd > 1 else 0), m, gyb, m, 1.0,
                       <real*>x.g + (<size_t>b * k * n if x.dim.bd > 1 else 0), k)


cdef void fwd_mm(Graph* g, Node* n, real* y) noexcept:
    mm_fwd(g, y, n.dim.bd, arg(g, n, 0), arg(g, n, 1), 0.0)


cdef void bwd_mm(Graph* g, Node* n, int i, real* gy) noexcept:
    mm_bwd(g, gy, n.dim.bd, arg(g, n, 0), arg(g, n, 1), i)


cdef int OP_MM = _op("matmul", _shape_mm, <kfwd_fn>fwd_mm[float], <kfwd_fn>fwd_mm[double],
                     <kbwd_fn>bwd_mm[float], <kbwd_fn>bwd_mm[double])


cpdef Expression matmul(object x, object y):
    return finish(node2(OP_MM, x, y))

# ---------------------------------------------------------------- affine_transform

cdef int _shape_affine(Graph* g, Node* n) except -1:
    cdef Node* b = arg(g, n, 0)
    cdef int i, rows, cols
    if n.nargs % 2 != 1:
        raise ValueError("affine_transform: expected [b, W1, x1, W2, x2, ...] (an odd number "
                         "of expressions), got %d" % n.nargs)
    n.dim = b.dim
    for i in range(1, n.nargs, 2):
        W = arg(g, n, i)
        x = arg(g, n, i + 1)
        _mm_check(&W.dim, &x.dim, "affine_transform")
        rows = W.dim.d[0]
        cols = dim_cols(&x.dim)
        if rows != b.dim.d[0] or (dim_cols(&b.dim) != cols and dim_cols(&b.dim) != 1):
            raise ValueError("affine_transform: term %d is %dx%d but the bias is %s (%s)"
                             % (i // 2, rows, cols, dim_str(&b.dim), arg_dims(g, n)))
        if cols != 1 or x.dim.nd > 1:
            n.dim.nd = 2
            n.dim.d[1] = cols
    n.dim.bd = batch_rule(g, n, "affine_transform")
    return 0


cdef void fwd_affine(Graph* g, Node* n, real* y) noexcept:
    cdef Node* b = arg(g, n, 0)
    cdef int i, k, s = dim_size(&n.dim), bs = dim_size(&b.dim)
    # bias, broadcast over the batch and (for a column bias) over columns
    for k in range(n.dim.bd):
        for i in range(0, s, bs):
            memcpy(y + (<size_t>k * s + i),
                   <real*>b.v + (<size_t>k * bs if b.dim.bd > 1 else 0), bs * sizeof(real))
    for i in range(1, n.nargs, 2):
        mm_fwd(g, y, n.dim.bd, arg(g, n, i), arg(g, n, i + 1), 1.0)


cdef void bwd_affine(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* b
    cdef int k, j, s, bs
    if i == 0:
        b = arg(g, n, 0)
        s = dim_size(&n.dim)
        bs = dim_size(&b.dim)
        if real is float:
            if b.dim.bd == 1:  # one bias for every column of the batch: one pass
                dyn_colsum_acc_f32(<float*>b.g, gy, bs, <long>n.dim.bd * (s // bs))
                return
        for k in range(n.dim.bd):
            for j in range(0, s, bs):
                _blas.axpy(real_dtype(gy), bs, 1.0, gy + (<size_t>k * s + j),
                           <real*>b.g + (<size_t>k * bs if b.dim.bd > 1 else 0))
        return
    j = i if i % 2 == 1 else i - 1
    mm_bwd(g, gy, n.dim.bd, arg(g, n, j), arg(g, n, j + 1), 0 if i % 2 == 1 else 1)


cdef int OP_AFFINE = _op("affine_transform", _shape_affine, <kfwd_fn>fwd_affine[float],
                         <kfwd_fn>fwd_affine[double], <kbwd_fn>bwd_affine[float], <kbwd_fn>bwd_affine[double])


def affine_transform(exprs):
    return finish(noden(OP_AFFINE, exprs, "affine_transform"))

# ---------------------------------------------------------------- esum

cdef int _shape_esum(Graph* g, Node* n) except -1:
    cdef int i
    cdef Node* a = arg(g, n, 0)
    for i in range(1, n.nargs):
        if not dim_eq_nobatch(&a.dim, &arg(g, n, i).dim):
            raise ValueError("esum: all expressions must have the same dimensions, got %s"
                             % arg_dims(g, n))
    n.dim = a.dim
    n.dim.bd = batch_rule(g, n, "esum")
    return 0


cdef void fwd_esum(Graph* g, Node* n, real* y) noexcept:
    cdef int i, k, s = dim_size(&n.dim)
    cdef Node* a
    memset(y, 0, <size_t>s * n.dim.bd * sizeof(real))
    for i in range(n.nargs):
        a = arg(g, n, i)
        if a.dim.bd == n.dim.bd:
            _blas.axpy(real_dtype(y), s * n.dim.bd, 1.0, a.v, y)
        else:
            for k in range(n.dim.bd):
                _blas.axpy(real_dtype(y), s, 1.0, a.v, y + <size_t>k * s)


cdef void bwd_sumlike(Graph* g, Node* n, int i, real* gy) noexcept:
    """gx += gy, summing over the batch when x was broadcast."""
    cdef Node* a = arg(g, n, i)
    cdef int k, s = dim_size(&n.dim)
    if a.dim.bd == n.dim.bd:
        _blas.axpy(real_dtype(gy), s * n.dim.bd, 1.0, gy, a.g)
    else:
        for k in range(n.dim.bd):
            _blas.axpy(real_dtype(gy), s, 1.0, gy + <size_t>k * s, a.g)


cdef int OP_ESUM = _op("esum", _shape_esum, <kfwd_fn>fwd_esum[float], <kfwd_fn>fwd_esum[double],
                       <kbwd_fn>bwd_sumlike[float], <kbwd_fn>bwd_sumlike[double])


def esum(xs):
    return finish(noden(OP_ESUM, xs, "esum"))

# ---------------------------------------------------------------- reductions to one value per batch element

cdef int _shape_scalar(Graph* g, Node* n) except -1:
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = arg(g, n, 0).dim.bd
    return 0


cdef void _sum_fwd(real* y, real* x, int s, int bd, int kind) noexcept nogil:
    # kind 0: sum, 1: sum of squares, 2: l2 norm
    cdef int b, i
    cdef double acc
    for b in range(bd):
        acc = 0
        if kind == 0:
            for i in range(s):
                acc += x[b * s + i]
        else:
            for i in range(s):
                acc += x[b * s + i] * <double>x[b * s + i]
        y[b] = sqrt(acc) if kind == 2 else acc


cdef void _sum_bwd(real* gx, real* gy, real* x, real* y, int s, int bd, int kind) noexcept nogil:
    cdef int b, i
    cdef real c
    for b in range(bd):
        if kind == 0:
            c = gy[b]
            for i in range(s):
                gx[b * s + i] += c
        else:
            if kind == 1:
                c = 2 * gy[b]
            else:
                c = gy[b] / y[b] if y[b] != 0 else 0    # a NaN norm: NaN gradients
            for i in range(s):
                gx[b * s + i] += c * x[b * s + i]


cdef void fwd_red(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sum_fwd(y, <real*>a.v, dim_size(&a.dim), a.dim.bd, n.ia[0])


cdef void bwd_red(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    _sum_bwd(<real*>a.g, gy, <real*>a.v, <real*>n.v, dim_size(&a.dim), a.dim.bd, n.ia[0])


cdef int OP_RED = _op("reduce_elems", _shape_scalar, <kfwd_fn>fwd_red[float], <kfwd_fn>fwd_red[double],
                      <kbwd_fn>bwd_red[float], <kbwd_fn>bwd_red[double])
set_labels("reduce_elems", 0, ("sum_elems", "squared_norm", "l2_norm"))


cdef Expression _reduce(object x, int kind):
    cdef int nid
    try:
        nid = node1(OP_RED, x)
    except TypeError:
        _name_bad_arg((x,), _RED_NAMES[kind])
        raise
    g_node(nid).ia[0] = kind
    return finish(nid)


def sum_elems(x):
    return _reduce(x, 0)


def squared_norm(x):
    return _reduce(x, 1)


def l2_norm(x):
    return _reduce(x, 2)

# ---------------------------------------------------------------- dot_product, squared_distance

cdef int _shape_pair_scalar(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef str name = "dot_product" if n.ia[0] == 0 else "squared_distance"
    if not dim_eq_nobatch(&a.dim, &b.dim):
        raise ValueError("%s: dimensions must match, got %s and %s" % (name, dim_str(&a.dim), dim_str(&b.dim)))
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = batch_rule(g, n, name)
    return 0


cdef void _pair_fwd(real* y, real* a, real* b, int s, int bd, int ba, int bb, int kind) noexcept nogil:
    cdef int k, i
    cdef real* pa
    cdef real* pb
    cdef double acc
    for k in range(bd):
        pa = a + (k * s if ba > 1 else 0)
        pb = b + (k * s if bb > 1 else 0)
        acc = 0
        if kind == 0:
            for i in range(s):
                acc += pa[i] * <double>pb[i]
        else:
            for i in range(s):
                acc += (pa[i] - <double>pb[i]) * (pa[i] - <double>pb[i])
        y[k] = acc


cdef void _pair_bwd(real* gx, real* gy, real* a, real* b, int s, int bd, int ba, int bb,
                    int kind, int which) noexcept nogil:
    cdef int k, i
    cdef real* pa
    cdef real* pb
    cdef real* px
    cdef real c
    for k in range(bd):
        pa = a + (k * s if ba > 1 else 0)
        pb = b + (k * s if bb > 1 else 0)
        px = gx + (k * s if (ba if which == 0 else bb) > 1 else 0)
        if kind == 0:
            for i in range(s):
                px[i] += gy[k] * (pb[i] if which == 0 else pa[i])
        else:
            c = 2 * gy[k] if which == 0 else -2 * gy[k]
            for i in range(s):
                px[i] += c * (pa[i] - pb[i])


cdef void fwd_pair(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _pair_fwd(y, <real*>a.v, <real*>b.v, dim_size(&a.dim), n.dim.bd, a.dim.bd, b.dim.bd, n.ia[0])


cdef void bwd_pair(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef real* gx = <real*>(a.g if i == 0 else b.g)
    _pair_bwd(gx, gy, <real*>a.v, <real*>b.v, dim_size(&a.dim), n.dim.bd, a.dim.bd, b.dim.bd, n.ia[0], i)


cdef int OP_PAIR = _op("pair_reduce", _shape_pair_scalar, <kfwd_fn>fwd_pair[float], <kfwd_fn>fwd_pair[double],
                       <kbwd_fn>bwd_pair[float], <kbwd_fn>bwd_pair[double])
set_labels("pair_reduce", 0, ("dot_product", "squared_distance"))


cdef Expression _pair(object x, object y, int kind):
    cdef int nid
    try:
        nid = node2(OP_PAIR, x, y)
    except TypeError:
        _name_bad_arg((x, y), _PAIR_NAMES[kind])
        raise
    g_node(nid).ia[0] = kind
    return finish(nid)


def dot_product(x, y):
    return _pair(x, y, 0)


def squared_distance(x, y):
    return _pair(x, y, 1)

# ---------------------------------------------------------------- sum_batches

cdef int _shape_sumb(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    n.dim.bd = 1
    return 0


cdef void fwd_sumb(Graph* g, Node* n, real* y) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef int k, s = dim_size(&n.dim)
    memset(y, 0, <size_t>s * sizeof(real))
    for k in range(a.dim.bd):
        _blas.axpy(real_dtype(y), s, 1.0, <real*>a.v + <size_t>k * s, y)


cdef void bwd_sumb(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, 0)
    cdef int k, s = dim_size(&n.dim)
    for k in range(a.dim.bd):
        _blas.axpy(real_dtype(gy), s, 1.0, gy, <real*>a.g + <size_t>k * s)


cdef int OP_SUMB = _op("sum_batches", _shape_sumb, <kfwd_fn>fwd_sumb[float], <kfwd_fn>fwd_sumb[double],
                       <kbwd_fn>bwd_sumb[float], <kbwd_fn>bwd_sumb[double])


def sum_batches(x):
    return finish(node1(OP_SUMB, x))

# ---------------------------------------------------------------- automatic batching (src/_autobatch.pyx)
set_autobatch(OP_CW, AB_ON | AB_BCAST)
set_autobatch(OP_AFFS, AB_ON)
set_autobatch(OP_MM, AB_ON | AB_BCAST, 1)              # W x_1, W x_2, ... -> W [x_1 x_2 ...]
set_autobatch(OP_AFFINE, AB_ON | AB_BCAST | AB_SHARE_ODD)  # b and the W_i shared, the x_i concatenated
set_autobatch(OP_ESUM, AB_ON | AB_BCAST)
set_autobatch(OP_RED, AB_ON)
set_autobatch(OP_PAIR, AB_ON | AB_BCAST)
