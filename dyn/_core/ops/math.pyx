# cython: language_level=3
"""Elementwise math: one unary node for sqrt, abs, powers, erf, the trig and
hyperbolic families, log_sigmoid, lgamma, softsign, elu/selu/silu and
rounding (its kind in ia[0]); bmin/bmax of two same-Dim expressions; and
emax/emin over a list. Each op: shape rule, node constructor, labels and
automatic batching (the CPU kernels: dyn/_core/cpu/math.pyx).
"""
from dyn._core.core.graph cimport set_autobatch, AB_ON
from dyn._core.core.graph cimport (
    Graph, Node, cg, dim_size, dim_str, arg, dim_eq_nobatch, F_NG, F_CONST)
from dyn._core.core.expr cimport node1, noden, finish
from dyn._core.ops.util cimport binary_kind, declare_labelled, expr_arg, number_arg

NAMES = ("sqrt", "abs", "square", "cube", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
         "cosh", "asinh", "acosh", "atanh", "log_sigmoid", "lgamma", "softsign", "elu", "selu", "silu",
         "round", "ceil", "floor")
KINDS = {name: k for k, name in enumerate(NAMES)}

# ---------------------------------------------------------------- elementwise unary

cdef int _shape_unary(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if n.ia[0] == SOFTSIGN and dim_size(&x.dim) != x.dim.d[0]:
        # DyNet's SoftSign node accepts only vectors (LooksLikeVector)
        raise ValueError("softsign: input must look like a vector (every dimension after the first 1), "
                         "got %s" % dim_str(&x.dim))
    n.dim = x.dim
    return 0


OP_UNARY = declare_labelled("math_unary", _shape_unary, 0, NAMES)


def unary(x, int kind, a=0.0):
    """The node for kind (an index in NAMES); a is elu's alpha or silu's beta."""
    name = NAMES[kind]
    expr_arg(x, name)
    cdef double av = number_arg(a, name, "alpha" if kind == ELU else "beta") if kind in (ELU, SILU) else 0
    cdef int nid = node1(OP_UNARY, x)
    cdef Node* n = &cg().nodes[nid]
    n.ia[0] = kind
    n.ia[1] = 0
    n.fa[0] = av
    return finish(nid)


def rounding(x, int kind, gradient_mode):
    """round/ceil/floor; gradient_mode 'zero_gradient' or 'straight_through_gradient'."""
    name = NAMES[kind]
    expr_arg(x, name)
    if gradient_mode == "straight_through_gradient":
        straight = 1
    elif gradient_mode == "zero_gradient":
        straight = 0
    else:
        raise ValueError("%s: unknown gradient_mode %r (use 'zero_gradient' or 'straight_through_gradient')"
                         % (name, gradient_mode))
    cdef int nid = node1(OP_UNARY, x)
    cdef Node* n = &cg().nodes[nid]
    n.ia[0] = kind
    n.ia[1] = straight
    n.fa[0] = 0
    if not straight:
        # a zero gradient: backward need not walk through this node at all
        n.flags = (n.flags & ~F_NG) | F_CONST
    return finish(nid)

# ---------------------------------------------------------------- bmin, bmax

cdef int _shape_bminmax(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    if not dim_eq_nobatch(&x.dim, &y.dim) or x.dim.bd != y.dim.bd:
        raise ValueError("%s: x and y must have the same dimensions and batch size, got %s and %s"
                         % ("bmax" if n.ia[0] else "bmin", dim_str(&x.dim), dim_str(&y.dim)))
    n.dim = x.dim
    return 0


OP_BMINMAX = declare_labelled("bminmax", _shape_bminmax, 0, ("bmin", "bmax"))


def bminmax(x, y, bint mx):
    return binary_kind(OP_BMINMAX, x, y, mx, "bmax" if mx else "bmin")

# ---------------------------------------------------------------- emax, emin over a list

cdef int _shape_elist(Graph* g, Node* n) except -1:
    cdef int i
    cdef Node* a = arg(g, n, 0)
    for i in range(1, n.nargs):
        if not dim_eq_nobatch(&a.dim, &arg(g, n, i).dim) or a.dim.bd != arg(g, n, i).dim.bd:
            raise ValueError("%s: all expressions must have the same dimensions and batch size, got %s"
                             % ("emax" if n.ia[0] else "emin",
                                ", ".join([dim_str(&arg(g, n, k).dim) for k in range(n.nargs)])))
    n.dim = a.dim
    return 0


# one scratch item per element: the winning argument's index (exact in float up to 2^24)
OP_ELIST = declare_labelled("emax_emin", _shape_elist, 0, ("emin", "emax"), 1)


def elist(xs, bint mx):
    cdef str name = "emax" if mx else "emin"
    if not isinstance(xs, list):      # DyNet types it `list xs`
        raise TypeError("%s: expected a list of expressions, got %s" % (name, type(xs).__name__))
    for x in xs:
        expr_arg(x, name)
    cdef int nid = noden(OP_ELIST, xs, name)
    cg().nodes[nid].ia[0] = mx
    return finish(nid)

# ---------------------------------------------------------------- automatic batching (dyn/_core/core/autobatch.pyx)
set_autobatch(OP_UNARY, AB_ON)
set_autobatch(OP_BMINMAX, AB_ON)
