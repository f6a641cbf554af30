# Expressions, the parameter pool and leaf nodes (implementation: expr.pyx; the leaves' CPU kernels:
# dyn/_core/cpu/leaves.pyx).
from dyn._core.core.graph cimport Dim, Touch

cdef class Expression:
    cdef long ver                  # graph version (for messages)
    cdef long serial               # its node's serial: the node is still there while they match
    cdef int nid
    cdef int node_id(self, bint as_arg) except -1
    cdef void _set_node(self, int nid) noexcept
    cdef bint _alive(self) noexcept

cdef int OP_INPUT, OP_CONST, OP_PARAM, OP_LOOKUP, OP_LOOKUPB, OP_XPARAM    # the leaf operations (OP_XPARAM: a parameter of another device)

cdef Expression wrap(int nid)
cdef int arg_id(object x, int op=*) except -1

# Where an array of a pool's device keeps its data: a numpy array's buffer, or the address a device
# array publishes (__cuda_array_interface__). The pool's and the trainers' state arrays.
cdef char* array_ptr(object a) except? NULL

cdef class Pool:
    """Values and gradients of every parameter of one float type, contiguous, in one device's
    memory (arrays made by that device's zeros; host code reads them through host_values)."""
    cdef public object values      # numpy 1-D array
    cdef object _grads             # (the property grads hands them out)
    cdef char* vb
    cdef char* gb
    cdef long gbytes               # the gradients' bytes at gb
    cdef public long used          # elements in use
    cdef public int dtype
    cdef public int itemsize
    cdef public list members       # every ParamExpr, in creation order
    cdef public str device         # whose memory holds values and grads (core/device.pyx: zeros)
    cdef _set(self, values, grads)

# Trainer hook: a trainer whose rule moves idle lookup rows (momentum,
# Adam, weight decay ...) updates them lazily; before anything reads rows of a
# table it calls catch_up(state, rows, n) to bring them up to date (n < 0: all
# rows). Set by dyn/_core/train; NULL means the rows are always current.
ctypedef int (*catch_up_fn)(object state, const int* rows, int n) except -1

cdef class ParamExpr(Expression):
    cdef public Pool pool
    cdef public long off           # element offset in the pool
    cdef public long size          # elements
    cdef Dim pdim                  # DyNet dim: (rows, cols) or (d..., N) for lookups
    cdef public bint is_lookup
    cdef public int nrows          # lookups: number of rows; else 0
    cdef public int rowsize        # lookups: elements per row
    cdef public bint updated       # trainers update it
    cdef Touch touch
    cdef public object touch_flag  # numpy arrays backing `touch`
    cdef public object touch_rows
    cdef long cver                 # graph version of cached nodes
    cdef int pnid                  # updatable parameter node in that graph
    cdef int cnid                  # constant parameter node in that graph
    cdef catch_up_fn catch_up      # trainer hook (see above)
    cdef public object catch_up_state
    cdef int param_node(self, bint update) except -1
    cdef Touch* touch_ptr(self) noexcept
    cdef Expression _lookup_c(self, object row, bint update)

cdef int node1(int op, object x) except -1
cdef int node2(int op, object x, object y) except -1
cdef int noden(int op, object xs, str opname) except -1
cdef Expression finish(int nid)

# Expression operators call these C functions (set by the kernel modules).
ctypedef object (*binop_fn)(object, object)
cdef enum:
    BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, NBINOPS
cdef void set_binop(int which, binop_fn f) noexcept
