# cython: language_level=3
"""Random sampling leaves (random_normal, random_bernoulli, random_uniform,
random_gumbel) and the dropout variants with shared masks (dropout_dim,
dropout_batch, block_dropout): their shape rules and node constructors (the
CPU kernels: dyn/_core/cpu/random.pyx).

Leaves have no arguments: their Dim is given at creation, they are constants
(no gradient) and draw fresh numbers at every forward from the graph's
generator (dyn.init(random_seed=...) / dy.reset_random_seed fix the stream).

The dropout variants draw one Bernoulli(1 - p) value per element of a
"mask Dim" (x's Dim with the shared dims collapsed to 1) and expand it into
a per-element mask in n.aux, which backward multiplies into the gradient.
Per batch element, x is viewed as a x m x c with m the shared extent
(ia[0..2]): dropout_dim(d) shares along dim d; dropout_batch and
block_dropout share along everything.
"""
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, dim_size, dim_str, dim_from_tuple, arg, new_node, F_CONST)
from dyn._core.core.expr cimport node1, finish

# ---------------------------------------------------------------- leaves

cdef int _shape_leaf(Graph* g, Node* n) except -1:
    return 0    # set at creation


# one kernel, four names (so a node says which sampler it is); no backward: constants
OP_NORMAL = declare_op("random_normal", _shape_leaf)
OP_BERNOULLI = declare_op("random_bernoulli", _shape_leaf)
OP_UNIFORM = declare_op("random_uniform", _shape_leaf)
OP_GUMBEL = declare_op("random_gumbel", _shape_leaf)
cdef int[4] OPS = [OP_NORMAL, OP_BERNOULLI, OP_UNIFORM, OP_GUMBEL]


def sample(int kind, tuple shape, object batch_size, double a, double b):
    """A random leaf: kind 0 normal(a=mean, b=stddev), 1 bernoulli(a=p, b=scale),
    2 uniform(a=left, b=right), 3 gumbel(a=mu, b=beta). Arguments are checked
    by dyn/ops/random.py."""
    cdef Dim d = dim_from_tuple(shape, batch_size)    # raises before a node exists
    cdef int nid = new_node(OPS[kind], 0, NULL)
    cdef Node* n = &cg().nodes[nid]
    n.dim = d
    n.flags = F_CONST
    n.ia[0] = kind
    n.fa[0] = a
    n.fa[1] = b
    return finish(nid)

# ---------------------------------------------------------------- shared-mask dropout

cdef int _shape_dim(Graph* g, Node* n) except -1:
    cdef Dim* x = &arg(g, n, 0).dim
    cdef int d = n.ia[3], k
    if x.nd > 3:
        raise ValueError("dropout_dim: supports tensors of order up to 3 (plus batch), got %s" % dim_str(x))
    if d >= x.nd:
        raise ValueError("dropout_dim: cannot drop along dimension %d of a tensor of order %d (%s)"
                         % (d, x.nd, dim_str(x)))
    n.dim = x[0]
    n.ia[0] = 1
    n.ia[2] = 1
    for k in range(d):
        n.ia[0] *= x.d[k]
    n.ia[1] = x.d[d]
    for k in range(d + 1, x.nd):
        n.ia[2] *= x.d[k]
    return 0


cdef int _shape_whole(Graph* g, Node* n) except -1:
    cdef Dim* x = &arg(g, n, 0).dim
    if n.op == OP_BLOCK and x.bd > 1:
        raise ValueError("block_dropout: batched input %s is not supported (use dropout_batch for one "
                         "mask value per batch element)" % dim_str(x))
    n.dim = x[0]
    n.ia[0] = 1
    n.ia[1] = dim_size(x)
    n.ia[2] = 1
    return 0


OP_DIM = declare_op("dropout_dim", _shape_dim, 1)
OP_BATCH = declare_op("dropout_batch", _shape_whole, 1)
OP_BLOCK = declare_op("block_dropout", _shape_whole, 1)


def dropout_shared(int which, x, double p, int d=0):
    """which: 0 dropout_dim (along d), 1 dropout_batch, 2 block_dropout.
    p and d are checked by dyn/ops/random.py."""
    cdef int nid = node1((OP_DIM, OP_BATCH, OP_BLOCK)[which], x)
    cdef Node* n = &cg().nodes[nid]
    n.fa[0] = p
    n.ia[3] = d
    return finish(nid)
