# cython: language_level=3, boundscheck=False, wraparound=False
"""Random sampling leaves (random_normal, random_bernoulli, random_uniform,
random_gumbel) and the dropout variants with shared masks (dropout_dim,
dropout_batch, block_dropout).

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
from libc.math cimport sqrt, log, cos, sin, M_PI
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, set_kernels, kfwd_fn, kbwd_fn, shape_fn, DEV_CPU, dim_size, dim_total, dim_str, dim_from_tuple, arg,
    new_node, rand_uniform, F_CONST)
from dyn._core.core.expr cimport node1, finish
from dyn._core.core.types cimport real

cdef enum:
    NORMAL, BERNOULLI, UNIFORM, GUMBEL

cdef int OP_DIM, OP_BATCH, OP_BLOCK

# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it
# runs in.

cdef int _op(str name, shape_fn shape, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32, kbwd_fn b64,
             int aux=0) except -1:
    cdef int op = declare_op(name, shape, aux)
    set_kernels(op, DEV_CPU, f32, f64, b32, b64)
    return op

# ---------------------------------------------------------------- leaves

cdef int _shape_leaf(Graph* g, Node* n) except -1:
    return 0    # set at creation


cdef void _sample(Graph* g, real* y, int m, int kind, double a, double b) noexcept:
    cdef int i
    cdef double r, th, u
    if kind == NORMAL:          # a = mean, b = stddev; Box-Muller, both normals of a pair
        for i in range(0, m, 2):
            r = b * sqrt(-2.0 * log(rand_uniform(g)))
            th = 2.0 * M_PI * rand_uniform(g)
            y[i] = <real>(a + r * cos(th))
            if i + 1 < m:
                y[i + 1] = <real>(a + r * sin(th))
    elif kind == BERNOULLI:     # a = p, b = scale; u in (0, 1): p = 0 never, p = 1 always
        for i in range(m):
            y[i] = <real>b if rand_uniform(g) < a else 0
    elif kind == UNIFORM:       # a = left, b = right
        for i in range(m):
            y[i] = <real>(a + (b - a) * rand_uniform(g))
    else:                       # a = mu, b = beta; u in (0, 1), so both logs are finite
        for i in range(m):
            u = rand_uniform(g)
            y[i] = <real>(a - b * log(-log(u)))


cdef void fwd_sample(Graph* g, Node* n, real* y) noexcept:
    _sample(g, y, dim_total(&n.dim), n.ia[0], n.fa[0], n.fa[1])


# one kernel, four names (so a node says which sampler it is); no backward: constants
cdef int OP_NORMAL = _op("random_normal", _shape_leaf, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double],
                         NULL, NULL)
cdef int OP_BERNOULLI = _op("random_bernoulli", _shape_leaf, <kfwd_fn>fwd_sample[float],
                            <kfwd_fn>fwd_sample[double], NULL, NULL)
cdef int OP_UNIFORM = _op("random_uniform", _shape_leaf, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double],
                          NULL, NULL)
cdef int OP_GUMBEL = _op("random_gumbel", _shape_leaf, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double],
                         NULL, NULL)
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

cdef void _drop_fwd(Graph* g, real* y, real* x, real* mask, int a, int m, int c, int bd,
                    double p) noexcept:
    cdef int b, ci, ai, mi
    cdef long size = <long>a * m * c, base, i
    cdef real scale = <real>(1.0 / (1.0 - p)) if p < 1 else 0
    cdef real r
    for b in range(bd):
        for ci in range(c):
            for ai in range(a):
                # p = 0 draws nothing (as dropout): the stream is left as it was
                r = scale if (p == 0 or rand_uniform(g) < 1.0 - p) else 0
                base = b * size + ai + <long>a * m * ci
                for mi in range(m):
                    mask[base + <long>a * mi] = r
    for i in range(size * bd):
        y[i] = x[i] * mask[i]


cdef void _mask_bwd(real* gx, real* gy, real* mask, long m) noexcept nogil:
    cdef long i
    for i in range(m):
        gx[i] += gy[i] * mask[i]


cdef void fwd_drop(Graph* g, Node* n, real* y) noexcept:
    _drop_fwd(g, y, <real*>arg(g, n, 0).v, <real*>n.aux, n.ia[0], n.ia[1], n.ia[2], n.dim.bd, n.fa[0])


cdef void bwd_drop(Graph* g, Node* n, int i, real* gy) noexcept:
    _mask_bwd(<real*>arg(g, n, 0).g, gy, <real*>n.aux, dim_total(&n.dim))


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


OP_DIM = _op("dropout_dim", _shape_dim, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
             <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double], 1)
OP_BATCH = _op("dropout_batch", _shape_whole, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
               <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double], 1)
OP_BLOCK = _op("block_dropout", _shape_whole, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
               <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double], 1)


def dropout_shared(int which, x, double p, int d=0):
    """which: 0 dropout_dim (along d), 1 dropout_batch, 2 block_dropout.
    p and d are checked by dyn/ops/random.py."""
    cdef int nid = node1((OP_DIM, OP_BATCH, OP_BLOCK)[which], x)
    cdef Node* n = &cg().nodes[nid]
    n.fa[0] = p
    n.ia[3] = d
    return finish(nid)
