# cython: language_level=3
"""Nonlinearities (tanh, logistic, rectify, exp, log), the softmax family
(softmax, log_softmax, logsumexp, pickneglogsoftmax) and the gradient-flow
ops (dropout, noise, nobackprop). Each op: shape rule, node constructors,
labels and automatic batching (the CPU kernels: dyn/_core/cpu/nonlin.pyx,
dyn/_core/cpu/softmax.pyx).
"""
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_BCAST, AB_IDX, AB_AUXSLICE
from dyn._core.core.graph cimport (
    Graph, Node, declare_op, dim_size, dim_str, arg, idx, set_indices, set_indices_c,
    F_NG, F_CONST)
from dyn._core.core.expr cimport node1, noden, finish, Expression
from dyn._core.ops.util cimport (
    expr_arg, g_node, index_arg, int_arg, number_arg, picked_vector_check, same_dims_rule)

# ---------------------------------------------------------------- elementwise unary

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0


OP_UNARY = declare_op("nonlin_unary", _shape_same)

cdef tuple _UNARY_NAMES = ("tanh", "logistic", "rectify", "exp", "log")
set_labels("nonlin_unary", 0, _UNARY_NAMES)


cdef Expression _unary(object x, int kind):
    expr_arg(x, _UNARY_NAMES[kind])
    cdef int nid = node1(OP_UNARY, x)
    g_node(nid).ia[0] = kind
    return finish(nid)


def tanh(x):
    return _unary(x, TANH)


def logistic(x):
    return _unary(x, LOGISTIC)


def rectify(x):
    return _unary(x, RECTIFY)


def exp(x):
    return _unary(x, EXP)


def log(x):
    return _unary(x, LOG)

# ---------------------------------------------------------------- softmax, log_softmax

cdef int _shape_sm(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if x.dim.nd > 2:
        raise ValueError("%s: input must have at most 2 dimensions, got %s"
                         % ("log_softmax" if n.ia[1] else "softmax", dim_str(&x.dim)))
    n.dim = x.dim
    return 0


OP_SOFTMAX = declare_op("softmax", _shape_sm)
OP_LOGSOFTMAX = declare_op("log_softmax", _shape_sm)


def softmax(x, d=0):
    expr_arg(x, "softmax")
    d = int_arg(d, "softmax", "d")
    if d != 0 and d != 1:
        raise ValueError("softmax: d must be 0 (columns) or 1 (rows), got %d" % d)
    cdef int nid = node1(OP_SOFTMAX, x)
    g_node(nid).ia[0] = d
    g_node(nid).ia[1] = 0
    return finish(nid)

# ---------------------------------------------------------------- log_softmax restricted to some entries

cdef int _shape_rlsm(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k, m = x.dim.d[0]
    cdef int* v = idx(g, n)
    if dim_size(&x.dim) != m or x.dim.bd != 1:
        raise ValueError("log_softmax: with restrict, the input must be an unbatched vector, got %s"
                         % dim_str(&x.dim))
    for k in range(n.nidx):
        if v[k] >= m:
            raise IndexError("log_softmax: restrict index %d out of range for %s" % (v[k], dim_str(&x.dim)))
    n.dim = x.dim
    return 0


OP_RLOGSOFTMAX = declare_op("restricted_log_softmax", _shape_rlsm)


def log_softmax(x, restrict=None):
    expr_arg(x, "log_softmax")
    cdef int nid
    if restrict is None:
        nid = node1(OP_LOGSOFTMAX, x)
        g_node(nid).ia[0] = 0
        g_node(nid).ia[1] = 1
        return finish(nid)
    if not isinstance(restrict, list):      # DyNet types it `list restrict`
        raise TypeError("log_softmax: restrict must be a list of indices, got %s" % type(restrict).__name__)
    if not restrict:
        raise ValueError("log_softmax: restrict is an empty list")
    # a set of entries: a repeated index would count twice in the normaliser
    v = sorted(set([index_arg(i, "log_softmax") for i in restrict]))
    nid = node1(OP_RLOGSOFTMAX, x)
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- logsumexp over a list

cdef int _shape_lse(Graph* g, Node* n) except -1:
    return same_dims_rule(g, n, "logsumexp")


OP_LSE = declare_op("logsumexp", _shape_lse, 1)


def logsumexp(xs):
    try:
        nid = noden(OP_LSE, xs, "logsumexp")
    except TypeError as e:
        raise TypeError(str(e) if str(e).startswith("logsumexp") else "logsumexp: %s" % e) from None
    return finish(nid)

# ---------------------------------------------------------------- pickneglogsoftmax(_batch)

cdef int _shape_pnls(Graph* g, Node* n) except -1:
    picked_vector_check(g, n, "pickneglogsoftmax", "pickneglogsoftmax_batch")
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = n.nidx
    n.naux = 2 * n.nidx   # max and log shifted sum per element: backward recomputes the softmax
    return 0


OP_PNLS = declare_op("pickneglogsoftmax", _shape_pnls)


def pickneglogsoftmax(x, v):
    expr_arg(x, "pickneglogsoftmax")
    cdef int i = index_arg(v, "pickneglogsoftmax")
    cdef int nid = node1(OP_PNLS, x)
    g_node(nid).ia[0] = 0
    set_indices_c(nid, &i, 1)
    return finish(nid)


def pickneglogsoftmax_batch(x, vs):
    expr_arg(x, "pickneglogsoftmax_batch")
    try:
        it = iter(vs)
    except TypeError:
        raise TypeError("pickneglogsoftmax_batch: vs must be a sequence of indices, got %s"
                        % type(vs).__name__) from None
    v = [index_arg(i, "pickneglogsoftmax_batch") for i in it]
    if not v:
        raise ValueError("pickneglogsoftmax_batch: vs is empty (one index per batch element needed)")
    cdef int nid = node1(OP_PNLS, x)
    g_node(nid).ia[0] = 1
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- dropout, noise

OP_DROPOUT = declare_op("dropout", _shape_same, 1)


def dropout(x, p):
    expr_arg(x, "dropout")
    cdef double pv = number_arg(p, "dropout", "p")      # not float(p): '0.5' and True are no probability
    if not 0.0 <= pv <= 1.0:
        raise ValueError("dropout: p must be in [0, 1], got %r" % pv)
    cdef int nid = node1(OP_DROPOUT, x)
    g_node(nid).fa[0] = pv
    return finish(nid)


OP_NOISE = declare_op("noise", _shape_same)


def noise(x, stddev):
    expr_arg(x, "noise")
    cdef double sd = number_arg(stddev, "noise", "stddev")
    if not sd >= 0.0:
        raise ValueError("noise: stddev must be >= 0, got %r" % sd)
    cdef int nid = node1(OP_NOISE, x)
    g_node(nid).fa[0] = sd
    return finish(nid)

# ---------------------------------------------------------------- nobackprop

OP_NOBACKPROP = declare_op("nobackprop", _shape_same)


def nobackprop(x):
    expr_arg(x, "nobackprop")
    cdef int nid = node1(OP_NOBACKPROP, x)
    # not on any path to a parameter, so backward skips it and what feeds it
    g_node(nid).flags = (g_node(nid).flags & ~F_NG) | F_CONST
    return finish(nid)

# ---------------------------------------------------------------- automatic batching (dyn/_core/core/autobatch.pyx)
set_autobatch(OP_UNARY, AB_ON)
set_autobatch(OP_SOFTMAX, AB_ON)
set_autobatch(OP_LOGSOFTMAX, AB_ON)
set_autobatch(OP_PNLS, AB_ON | AB_BCAST | AB_IDX)      # one index per batch element: concatenated
set_autobatch(OP_DROPOUT, AB_ON | AB_AUXSLICE)         # each member still gets its own mask values
set_autobatch(OP_NOISE, AB_ON)
set_autobatch(OP_NOBACKPROP, AB_ON)
