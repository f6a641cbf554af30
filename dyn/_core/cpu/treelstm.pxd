# The fused tree nodes' CPU kernels (dyn/_core/cpu/treelstm.pyx), shared with the deferred weight
# products of tree_weights (dyn/_core/cpu/treeweights.pyx): a tree node's layout of its aux scratch.
from dyn._core.core.graph cimport Graph, Node
from dyn._core.core.types cimport real

ctypedef struct Lay:
    int mode, hx, huc, I, H, N, p, P, B, R, K, Rt, isz, c0
    Node* n
    Node* U
    Node* b
    Node* Wx
    Node* x
    Node* Uc
    char* X       # I x B        gathered input
    char* HC      # K x B        per-position child h sums (child-sum: sum of all, H x B)
    char* CC      # K x B        per-position child c sums (cell terms)
    char* HM      # H x pB       child-sum: every child's h, column b*p + j
    char* A       # R x B        gates after their nonlinearities (child-sum: 4H x B)
    char* F       # H x pB       child-sum: per-child forget gates
    char* T       # H x B        tanh(c)
    char* D       # R x B        gradient of the pre-activations (child-sum: 4H x B)
    char* DF      # H x pB       child-sum: per-child forget pre-activation gradients
    char* DC      # H x B        gradient of c
    char* S       # max(I, H) x B  scratch

# A node's share of a weight gradient is done now (Q_NONE), queued (Q_ALL: flushed by
# outer_flush, dyn/_core/cpu/outerq.pyx), or queued when the weight is a parameter and deferring is
# on (Q_PARAM: done at the end of backward).
cdef enum:
    Q_NONE = 0
    Q_PARAM = 1
    Q_ALL = 2

# The layout for items of isz bytes (a kernel's sizeof(real)), and a node's share of a weight
# gradient (D: L.D typed), fused over the float type as the kernels are.
cdef void _layout_isz(Graph* g, Node* n, Lay* L, int isz) noexcept
cdef void _piece_direct_r(Lay* L, int role, int part, real* D, int mode) noexcept
