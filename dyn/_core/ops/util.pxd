# Helpers shared by the operation families (dyn/_core/ops/*.pyx): argument checks that
# name the public operation, the batch rule of most ops, shape rules several ops share
# and the constructor of a two-argument node.
from libc.math cimport exp, tanh
from dyn._core.core.graph cimport Graph, Node, Dim, cg, dim_size, shape_fn
from dyn._core.core.types cimport real
from dyn._core.core.expr cimport Expression

cdef extern from "_fastmath.h" nogil:
    void dyn_tanh_f32(float* y, const float* x, long n)
    void dyn_logistic_f32(float* y, const float* x, long n)


cdef inline Node* g_node(int nid) noexcept:
    return &cg().nodes[nid]


cdef inline long batch_off(Node* a, int b, long s) noexcept nogil:
    """Offset of batch element b in argument a (a batch-1 argument is shared)."""
    return b * s if a.dim.bd > 1 else 0


cdef inline char* batch_ptr(void* p, int b, int bd, long size, int isz) noexcept nogil:
    """Batch element b of a tensor of bd elements of `size` items (bd 1 broadcasts)."""
    return <char*>p + (<size_t>b * size * isz if bd > 1 else 0)


cdef inline void lstm_gate_act(real* a, int H, double forget_bias) noexcept nogil:
    """An LSTM's gates [i; f; o; g] (4H pre-activations, in place): i, f + forget_bias and o
    through the logistic, g through tanh."""
    cdef Py_ssize_t j
    if forget_bias != 0:
        for j in range(H, 2 * H):
            a[j] += <real>forget_bias
    if real is float:
        dyn_logistic_f32(a, a, 3 * H)
        dyn_tanh_f32(a + 3 * H, a + 3 * H, H)
    else:
        for j in range(3 * H):
            a[j] = 1 / (1 + exp(-a[j]))
        for j in range(3 * H, 4 * H):
            a[j] = tanh(a[j])


cdef inline bint looks_like_vector(const Dim* d) noexcept nogil:
    """DyNet's LooksLikeVector: every dim after the first is 1."""
    return dim_size(d) == d.d[0]


cdef inline void scalar_out(Node* n, int bd) noexcept nogil:
    """Set n's Dim to {1} x bd."""
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = bd


cdef str arg_dims(Graph* g, Node* n)
cdef int batch_rule(Graph* g, Node* n, str name) except -1


cdef inline int out_like(Graph* g, Node* n, Node* x, str name) except -1:
    """The end of most shape rules: n has x's Dim and the batch of the batch rule."""
    n.dim = x.dim
    n.dim.bd = batch_rule(g, n, name)
    return 0


cdef int declare_labelled(str name, shape_fn shape, int k, tuple labels, int aux=*) except -1
cdef int expr_arg(object x, str name) except -1
cdef int index_arg(object v, str name) except -1
cdef list indices_arg(object vs, str name, str what)
cdef double number_arg(object v, str name, str what) except? -1.0
cpdef str show(object v)
cpdef object int_arg(object v, str name, str what)
cpdef bint flag_arg(object v, str name, str what) except -1
cdef int same_dims_rule(Graph* g, Node* n, str name) except -1
cdef int vector_rule(Graph* g, Node* n, str name) except -1
cdef int picked_vector_check(Graph* g, Node* n, str single, str batch) except -1
cdef Expression binary(int op, object x, object y, str name)
cdef Expression binary_kind(int op, object x, object y, int kind, str name)
