# The loss family's op codes, kinds and slicing rule, for its CPU kernels (dyn/_core/cpu/loss.pyx,
# dyn/_core/cpu/loss_norm.pyx).
from dyn._core.core.graph cimport Dim, dim_cols

# Node attributes: hinge: ia[0] 1 for hinge_batch, fa[0] the margin, the indices in idx(g, n);
# hinge_dim: ia[0] d, fa[0] the margin, one index per slice; pair_loss: ia[0] the kind (below),
# fa[0] huber's c; poisson_loss: fa[0] x, fa[1] lgamma(x + 1); pairwise_rank_loss: fa[0] the margin;
# sparsemax_loss: fa[0] |q|^2, the targets in idx(g, n); gradient_scale: fa[0] the factor;
# argmax: ia[0] 1 for straight_through_gradient.

# the pair losses (pair_loss): ia[0]
cdef enum:
    BLL, HUBER, L1


# hinge_dim's slices of x (shape rule and kernels)
cdef inline void _slices(Dim* d, int which, int* outer, int* ostr, int* inner, int* istr) noexcept nogil:
    """which=0: each column (contiguous); 1: each row (stride rows)."""
    cdef int r = d.d[0], c = dim_cols(d)
    if which == 0:
        outer[0], ostr[0], inner[0], istr[0] = c, r, r, 1
    else:
        outer[0], ostr[0], inner[0], istr[0] = r, 1, c, r


# op codes (declared by dyn/_core/ops/loss.pyx): the losses, then the probability maps,
# normalisation and gradient-flow ops
cdef int OP_HINGE, OP_HINGE_DIM, OP_PAIRLOSS, OP_POISSON, OP_PRL
cdef int OP_SPARSEMAX, OP_SPMLOSS, OP_CSM, OP_LN, OP_WN, OP_GRADSCALE, OP_ARGMAX
