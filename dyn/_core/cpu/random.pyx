# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the random family (declared in dyn/_core/ops/random.pyx): the samplers of the
random leaves and the shared-mask dropout variants, drawing from the graph's generator.

Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the kernel
table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.
"""
from libc.math cimport sqrt, log, cos, sin, M_PI
from dyn._core.core.graph cimport (
    Graph, Node, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_total, arg, rand_uniform)
from dyn._core.core.types cimport real
from dyn._core.ops.random cimport (
    NORMAL, BERNOULLI, UNIFORM, GUMBEL, OP_NORMAL, OP_BERNOULLI, OP_UNIFORM, OP_GUMBEL, OP_DIM,
    OP_BATCH, OP_BLOCK)

# ---------------------------------------------------------------- leaves

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
set_kernels(OP_NORMAL, DEV_CPU, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double], NULL, NULL)
set_kernels(OP_BERNOULLI, DEV_CPU, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double], NULL, NULL)
set_kernels(OP_UNIFORM, DEV_CPU, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double], NULL, NULL)
set_kernels(OP_GUMBEL, DEV_CPU, <kfwd_fn>fwd_sample[float], <kfwd_fn>fwd_sample[double], NULL, NULL)

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


set_kernels(OP_DIM, DEV_CPU, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
            <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double])
set_kernels(OP_BATCH, DEV_CPU, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
            <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double])
set_kernels(OP_BLOCK, DEV_CPU, <kfwd_fn>fwd_drop[float], <kfwd_fn>fwd_drop[double],
            <kbwd_fn>bwd_drop[float], <kbwd_fn>bwd_drop[double])
