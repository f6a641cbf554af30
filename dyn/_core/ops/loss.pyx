# cython: language_level=3
"""Losses: hinge (single, batch, along a dimension), binary log loss, Huber
and L1 distances, Poisson loss, pairwise rank loss; the sparse probability
maps (sparsemax, sparsemax_loss, constrained_softmax), normalisation
(layer_norm, weight_norm) and the gradient-flow ops (flip_gradient,
scale_gradient, argmax).

The definitions: shape rules, argument checks, node constructors, labels and
declare_op. The kernels are in dyn/_core/cpu/loss.pyx (the losses) and
dyn/_core/cpu/loss_norm.pyx (probability maps, normalisation, gradient flow).

Where DyNet rejects a batch (binary_log_loss, huber_distance, sparsemax,
constrained_softmax, weight_norm, ...) these ops treat each batch element
separately, and an argument of batch 1 is shared by every batch element (its
gradient is summed over the batch).
"""
from dyn._core.core.graph cimport (
    Graph, Node, declare_op, dim_size, dim_total, dim_str, arg, idx, set_indices, dim_eq_nobatch, F_NG,
    F_CONST)
from dyn._core.core.expr cimport node1, node2, noden, finish, Expression
from dyn._core.ops.util cimport (
    batch_rule, binary, declare_labelled, expr_arg, g_node, index_arg, indices_arg, int_arg,
    looks_like_vector, number_arg, out_like, picked_vector_check, scalar_out, vector_rule)

# ---------------------------------------------------------------- hinge, hinge_batch

cdef int _shape_hinge(Graph* g, Node* n) except -1:
    picked_vector_check(g, n, "hinge", "hinge_batch")
    scalar_out(n, n.nidx)
    return 0


OP_HINGE = declare_op("hinge", _shape_hinge)


cdef double _margin(object m, str name) except? -1.0:
    cdef double mv = number_arg(m, name, "m")
    if not mv >= 0:
        raise ValueError("%s: the margin m must be >= 0, got %r" % (name, m))
    return mv


def hinge(x, v, m=1.0):
    expr_arg(x, "hinge")
    cdef int i = index_arg(v, "hinge")
    cdef double mv = _margin(m, "hinge")
    cdef int nid = node1(OP_HINGE, x)
    g_node(nid).ia[0] = 0
    g_node(nid).fa[0] = mv
    set_indices(nid, [i])
    return finish(nid)


def hinge_batch(x, vs, m=1.0):
    expr_arg(x, "hinge_batch")
    v = indices_arg(vs, "hinge_batch", "vs")
    cdef double mv = _margin(m, "hinge_batch")
    cdef int nid = node1(OP_HINGE, x)
    g_node(nid).ia[0] = 1
    g_node(nid).fa[0] = mv
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- hinge_dim

# (the slices: _slices, in loss.pxd)

cdef int _shape_hdim(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k, outer, ostr, inner, istr
    cdef int* v = idx(g, n)
    if x.dim.nd > 2:
        raise ValueError("hinge_dim: x must have at most 2 dimensions, got %s" % dim_str(&x.dim))
    _slices(&x.dim, n.ia[0], &outer, &ostr, &inner, &istr)
    if n.nidx != outer:
        raise ValueError("hinge_dim: %d indices for x of dim %s with d=%d; give one index per %s (%d)"
                         % (n.nidx, dim_str(&x.dim), n.ia[0], "column" if n.ia[0] == 0 else "row", outer))
    for k in range(n.nidx):
        if v[k] >= inner:
            raise IndexError("hinge_dim: index %d out of range along dimension %d of x of dim %s"
                             % (v[k], n.ia[0], dim_str(&x.dim)))
    n.dim.nd = 1
    n.dim.d[0] = outer
    n.dim.bd = x.dim.bd
    return 0


OP_HINGE_DIM = declare_op("hinge_dim", _shape_hdim)


def hinge_dim(x, v, d=0, m=1.0):
    expr_arg(x, "hinge_dim")
    vs = indices_arg(v, "hinge_dim", "v")
    d = int_arg(d, "hinge_dim", "d")
    if d != 0 and d != 1:
        raise ValueError("hinge_dim: d must be 0 (each column) or 1 (each row), got %d" % d)
    cdef double mv = _margin(m, "hinge_dim")
    cdef int nid = node1(OP_HINGE_DIM, x)
    g_node(nid).ia[0] = d
    g_node(nid).fa[0] = mv
    set_indices(nid, vs)
    return finish(nid)

# ---------------------------------------------------------------- pairwise reductions to {1}: binary_log_loss, huber_distance, l1_distance

# (the kinds BLL, HUBER, L1: ia[0], in loss.pxd)

cdef tuple _PAIR_NAMES = ("binary_log_loss", "huber_distance", "l1_distance")


cdef int _shape_pairloss(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef str name = _PAIR_NAMES[n.ia[0]]
    if not dim_eq_nobatch(&a.dim, &b.dim):
        raise ValueError("%s: dimensions must match, got %s and %s" % (name, dim_str(&a.dim), dim_str(&b.dim)))
    scalar_out(n, batch_rule(g, n, name))
    return 0


OP_PAIRLOSS = declare_labelled("pair_loss", _shape_pairloss, 0, _PAIR_NAMES)


cdef Expression _pairloss(int kind, object x, object y, double c):
    cdef str name = _PAIR_NAMES[kind]
    expr_arg(x, name)
    expr_arg(y, name)
    cdef int nid = node2(OP_PAIRLOSS, x, y)
    g_node(nid).ia[0] = kind
    g_node(nid).fa[0] = c
    return finish(nid)


def binary_log_loss(x, y):
    return _pairloss(BLL, x, y, 0.0)


def huber_distance(x, y, c=1.345):
    cdef double cv = number_arg(c, "huber_distance", "c")
    if not cv > 0:
        raise ValueError("huber_distance: c must be > 0, got %r" % (c,))
    return _pairloss(HUBER, x, y, cv)


def l1_distance(x, y):
    return _pairloss(L1, x, y, 0.0)

# ---------------------------------------------------------------- poisson_loss

cdef int _shape_poisson(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if dim_size(&x.dim) != 1:
        raise ValueError("poisson_loss: log_lambda must have one element per batch element, got %s"
                         % dim_str(&x.dim))
    n.dim = x.dim
    return 0


OP_POISSON = declare_op("poisson_loss", _shape_poisson)


def poisson_loss(log_lambda, x, double lgamma_x1):
    expr_arg(log_lambda, "poisson_loss")
    cdef int nid = node1(OP_POISSON, log_lambda)
    g_node(nid).fa[0] = x
    g_node(nid).fa[1] = lgamma_x1
    return finish(nid)

# ---------------------------------------------------------------- pairwise_rank_loss

cdef int _shape_prl(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    if a.dim.nd > 2 or a.dim.d[0] != 1 or not dim_eq_nobatch(&a.dim, &b.dim):
        raise ValueError("pairwise_rank_loss: x and y must be scalars or row vectors {1,n} of the same "
                         "dimensions, got %s and %s" % (dim_str(&a.dim), dim_str(&b.dim)))
    return out_like(g, n, a, "pairwise_rank_loss")


OP_PRL = declare_op("pairwise_rank_loss", _shape_prl)


def pairwise_rank_loss(x, y, m=1.0):
    expr_arg(x, "pairwise_rank_loss")
    expr_arg(y, "pairwise_rank_loss")
    cdef double mv = number_arg(m, "pairwise_rank_loss", "m")
    cdef int nid = node2(OP_PRL, x, y)
    g_node(nid).fa[0] = mv
    return finish(nid)

# ---------------------------------------------------------------- sparsemax, sparsemax_loss

cdef int _shape_sparsemax(Graph* g, Node* n) except -1:
    return vector_rule(g, n, "sparsemax")


# aux: one sort-scratch item per element
OP_SPARSEMAX = declare_op("sparsemax", _shape_sparsemax, 1)


def sparsemax(x):
    expr_arg(x, "sparsemax")
    return finish(node1(OP_SPARSEMAX, x))


cdef int _shape_spmloss(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k, m = x.dim.d[0]
    cdef int* v = idx(g, n)
    if not looks_like_vector(&x.dim):
        raise ValueError("sparsemax_loss: x must be a vector (every dimension after the first 1), got %s"
                         % dim_str(&x.dim))
    for k in range(n.nidx):
        if v[k] >= m:
            raise IndexError("sparsemax_loss: target index %d out of range for x of dim %s"
                             % (v[k], dim_str(&x.dim)))
    scalar_out(n, x.dim.bd)
    n.naux = 2 * <long>dim_total(&x.dim)     # sort scratch, then sparsemax(x) for backward
    return 0


OP_SPMLOSS = declare_op("sparsemax_loss", _shape_spmloss)


def sparsemax_loss(x, target_support):
    expr_arg(x, "sparsemax_loss")
    v = indices_arg(target_support, "sparsemax_loss", "target_support")
    # |q|^2 for q = (count of j in the list) / len(list): 1 / len for distinct targets
    counts = {}
    for i in v:
        counts[i] = counts.get(i, 0) + 1
    cdef double qsq = sum([c * c for c in counts.values()]) / float(len(v) * len(v))
    cdef int nid = node1(OP_SPMLOSS, x)
    g_node(nid).fa[0] = qsq
    set_indices(nid, v)
    return finish(nid)

# ---------------------------------------------------------------- constrained_softmax

cdef int _shape_csm(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* u = arg(g, n, 1)
    if not looks_like_vector(&x.dim) or not dim_eq_nobatch(&x.dim, &u.dim):
        raise ValueError("constrained_softmax: x and the bounds y must be vectors of the same dimensions, "
                         "got %s and %s" % (dim_str(&x.dim), dim_str(&u.dim)))
    return out_like(g, n, x, "constrained_softmax")


# aux: the clipped-set mask, one item per output element
OP_CSM = declare_op("constrained_softmax", _shape_csm, 1)


def constrained_softmax(x, y):
    return binary(OP_CSM, x, y, "constrained_softmax")

# ---------------------------------------------------------------- layer_norm

cdef int _shape_ln(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if not dim_eq_nobatch(&x.dim, &arg(g, n, 1).dim) or not dim_eq_nobatch(&x.dim, &arg(g, n, 2).dim):
        raise ValueError("layer_norm: g and b must have the dimensions of x, got x %s, g %s, b %s"
                         % (dim_str(&x.dim), dim_str(&arg(g, n, 1).dim), dim_str(&arg(g, n, 2).dim)))
    return out_like(g, n, x, "layer_norm")


OP_LN = declare_op("layer_norm", _shape_ln)


def layer_norm(x, g, b):
    for e in (x, g, b):
        expr_arg(e, "layer_norm")
    return finish(noden(OP_LN, [x, g, b], "layer_norm"))

# ---------------------------------------------------------------- weight_norm

cdef int _shape_wn(Graph* g, Node* n) except -1:
    cdef Node* w = arg(g, n, 0)
    cdef Node* gn = arg(g, n, 1)
    if dim_size(&gn.dim) != 1:
        raise ValueError("weight_norm: g must have a single element, got %s (w is %s)"
                         % (dim_str(&gn.dim), dim_str(&w.dim)))
    return out_like(g, n, w, "weight_norm")


OP_WN = declare_op("weight_norm", _shape_wn)


def weight_norm(w, g):
    return binary(OP_WN, w, g, "weight_norm")

# ---------------------------------------------------------------- flip_gradient, scale_gradient

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0


OP_GRADSCALE = declare_op("gradient_scale", _shape_same)


cdef Expression _gradscale(object x, double lambd, str name):
    expr_arg(x, name)
    cdef int nid = node1(OP_GRADSCALE, x)
    g_node(nid).fa[0] = lambd
    return finish(nid)


def flip_gradient(x):
    return _gradscale(x, -1.0, "flip_gradient")


def scale_gradient(x, lambd=1.0):
    return _gradscale(x, number_arg(lambd, "scale_gradient", "lambd"), "scale_gradient")

# ---------------------------------------------------------------- argmax

cdef int _shape_argmax(Graph* g, Node* n) except -1:
    return vector_rule(g, n, "argmax")


OP_ARGMAX = declare_op("argmax", _shape_argmax)


def argmax(x, gradient_mode):
    expr_arg(x, "argmax")
    if not isinstance(gradient_mode, str):
        raise TypeError("argmax: gradient_mode must be a string, got %s" % type(gradient_mode).__name__)
    if gradient_mode not in ("zero_gradient", "straight_through_gradient"):
        raise ValueError("argmax: gradient_mode must be 'zero_gradient' or 'straight_through_gradient', "
                         "got %r" % gradient_mode)
    cdef int nid = node1(OP_ARGMAX, x)
    g_node(nid).ia[0] = gradient_mode == "straight_through_gradient"
    if not g_node(nid).ia[0]:
        # like nobackprop: backward skips this node and what feeds only it
        g_node(nid).flags = (g_node(nid).flags & ~F_NG) | F_CONST
    return finish(nid)
