# C-level API of the computation graph (implementation: dyn/_core/core/graph.pyx).
#
# A graph is a table of Node records appended in creation order, so forward is
# a plain loop up to a node and backward a plain reverse loop. Values and
# gradients live in two bump-pointer arenas; parameters live in their pool and
# parameter nodes point straight at it (no copy).

from dyn._core.core.device cimport Device

cdef enum:
    MAXD = 7          # dims per tensor, as DyNet
    MAX_ELEMS = 2147483647   # elements per tensor (batch included): kernels count them in C ints
    NIA = 6           # small int attributes per node
    NFA = 2           # small float attributes per node

# node flags
cdef enum:
    F_DONE = 1        # value computed
    F_NG = 2          # depends on an updatable parameter: needs a gradient
    F_PGRAD = 4       # gradient memory is the parameter pool's (accumulates)
    F_CONST = 8       # never receives a gradient (nobackprop, inputs)
    F_FIXED = 16      # value memory set at creation (parameter pool), not the arena
    F_AB = 32         # computed inside an automatic batch: its aux belongs to the batch
    F_PTRS = 64       # a batch's argument given per member: v and g are arrays of element pointers
    F_GFRESH = 128    # gradient memory not zeroed: its one consumer's backward writes it (see mark_fresh)
    F_VIA_ALIAS = 256 # a batch's shared argument that its members read through a weight alias
                      # (AB_ALIAS): the alias's backward runs after the batch's, so a kernel may
                      # leave its part of that gradient to the alias (lstm_step: dyn/_core/cpu/rnn.pyx)
    F_BIASG = 512     # an affine_transform whose bias gradient its one consumer's backward added
                      # (pickneglogsoftmax over a fresh gradient: dyn/_core/cpu/softmax.pyx); its own
                      # backward leaves the bias out once and clears the flag

ctypedef struct Dim:
    int d[7]
    int nd
    int bd

ctypedef struct Arena:
    char* base        # current block
    size_t cap        # bytes in current block
    size_t used       # bytes used in current block
    size_t high       # bytes used over all blocks this graph
    void** old        # earlier blocks chained this graph (freed at reset)
    int nold
    int cold

ctypedef struct Touch:
    unsigned char* flag   # flag[row] = 1 when row has a pending gradient
    int* rows             # the touched rows, in touch order
    int n                 # number of touched rows
    int all               # the whole table was used as an expression

cdef inline void touch_row(Touch* t, int row) noexcept nogil:
    """Record that lookup row `row` has a pending gradient (once): what sparse updates step on."""
    if not t.flag[row]:
        t.flag[row] = 1
        t.rows[t.n] = row
        t.n += 1

ctypedef struct Node:
    int op
    int nargs
    int arg_off       # args are G.ipool[arg_off : arg_off + nargs]
    int flags
    Dim dim
    void* v           # value (forward arena, or the parameter pool)
    void* g           # gradient (backward arena, or the pool's gradient)
    void* aux         # per-op scratch in the forward arena (masks, caches)
    long naux         # scratch items: set by the shape rule, else the kernel's per-element count
    void* ptr         # per-op pointer (parameter values, touched-row record)
    void* gptr        # per-op pointer (parameter gradients)
    int ia[6]
    double fa[2]
    int idx_off       # index list (picks, lookups): G.ipool[idx_off : +nidx]
    int nidx
    int pyref         # index in the graph's Python-object list, or -1
    long serial       # unique over the process: an Expression checks it (cg_revert reuses ids)

# A large parameter's gradient held back as one product (see "Low-rank gradients" in graph.pyx):
# the trainer's Adam step then computes it block by block in registers instead of writing it to
# memory and reading it back.
cdef enum:
    LR_MAX = 8        # gradients tracked at once
    LR_ZERO = 1       # the gradient is known to be zero
    LR_PENDING = 2    # zero plus the product A B^T, not yet computed
    LR_MIXED = 3      # something written plus the product A B^T, not yet computed

ctypedef struct LowRank:
    char* C           # the gradient: a float32 parameter's, in its (CPU) pool, m x n, ld m
    long size         # its elements
    int state         # LR_ZERO, LR_PENDING or LR_MIXED
    const float* A    # pending: C += A B^T, A m x k (ld lda: a node's gradient), B n x k (ld ldb:
    const float* B    # a node's value), both in the graph's arenas until it is renewed
    int m, n, k, lda, ldb

ctypedef struct Graph:
    Node* nodes
    int n
    int cap
    int* ipool        # arguments and index lists of all nodes
    int ni
    int icap
    Arena fx          # forward values
    Arena dx          # gradients
    int computed      # nodes [0, computed) hold values
    int dtype         # 0 float32, 1 float64
    int device        # DEV_CPU (the kernel table's device axis: dev.kind)
    Device* dev       # owns the arenas' memory; clears, gathers and scatter-adds values
    int itemsize
    long version
    long serial       # the next node's serial
    long serial0      # the serial of this version's first node (older ones: renew_cg dropped them)
    int immediate
    int check
    int bwd_target    # node backward last started from, -1 if none
    int kerr          # a kernel failed (a device whose kernels can raise: see kernel_error)
    long nbwd         # backward passes started (seed_backward): what kernels key a per-pass cache on
    unsigned long long rng[2]
    LowRank lr[8]     # LR_MAX gradients of large parameters known zero or held back as a product
    int nlr

ctypedef int (*shape_fn)(Graph* g, Node* n) except -1

# ---- the kernel table: one shape rule per op, kernels per device and float type
# A device registers, per op, its float32 and float64 kernels (set_kernels): typically the two
# specialisations of one fused function over `real`, cast to these pointer types. y is the node's
# value (n.v) and gy its gradient (n.g), typed by the kernel; backward adds the gradient of
# argument i into arg(g, n, i).g (i = -1: a leaf's hook, e.g. a lookup marking its rows).
cdef enum:
    DEV_CPU = 0
    DEV_GPU = 1
    NDEV = 2

ctypedef void (*kfwd_fn)(Graph* g, Node* n, void* y) noexcept
ctypedef void (*kbwd_fn)(Graph* g, Node* n, int i, void* gy) noexcept

ctypedef struct OpKernel:
    shape_fn shape
    kfwd_fn kfwd[2][2]      # [device][dtype]
    kbwd_fn kbwd[2][2]
    int aux_bytes_per_elem   # scratch per output element (in items)
    char name[32]

# ---- automatic batching (engine: dyn/_core/core/autobatch.pyx)
# How nodes of an op run as one node whose batch is the concatenation of theirs.
cdef enum:
    AB_ON = 1          # nodes of this op can run as one batched node
    AB_BCAST = 2       # the kernel broadcasts batch-1 arguments (they may be shared)
    AB_IDX = 4         # the index list has one index per batch element (concatenated)
    AB_ALIAS = 8       # the node IS its argument 0 (same memory): batches read arg 0
    AB_PARAM = 16      # a parameter: shared by node id, never copied
    AB_AUXSLICE = 32   # aux is laid out per batch element: members get their slice
    AB_SHARE_ODD = 64  # argument 0 and the odd-numbered ones are weights (affine_transform)
    AB_AUXHEAD = 128   # aux starts with ia[5] items per batch element (state read by other nodes, see
                       # ABA_CATAUX); batch members get their elements' part of that head
    AB_PTR_ALL = 1u << 31   # ABSpec.ptrargs: every argument

# what an argument of a batch is: copied/adjacent along the batch, or one shared node
cdef enum:
    ABA_NO = 0         # this node cannot be batched
    ABA_CAT = 1
    ABA_SHARE = 2
    ABA_CATAUX = 4     # ABA_CAT, always passed per member (F_PTRS) with its members' scratch: after the
                       # bd value pointers, bd pointers to each element's aux (its AB_AUXHEAD part, or
                       # naux / bd items);
                       # in backward, after the gradient pointers, the same aux pointers (a sink for a
                       # member that takes no gradient). For kernels that read and write state kept
                       # in their argument's aux (lstm_step's c); the argument's op must be AB_AUXHEAD
                       # or AB_AUXSLICE

ctypedef int (*ab_arg_fn)(Graph* g, Node* n, int k, int* off, Dim* wd) noexcept
ctypedef void (*ab_fix_fn)(Graph* g, Node* n) noexcept

ctypedef struct ABSpec:
    int flags
    unsigned int share     # bit k: argument k is a weight, shared when its batch is 1
    int iamask             # bit j: ia[j] is part of the signature
    ab_arg_fn argfn        # per-argument rule (NULL: the flags' rule)
    ab_fix_fn fix          # adjusts the batched node's attributes (NULL: none)
    unsigned int ptrargs   # bit k (bit 31: every argument): the kernel reads argument k through
                           # elem_v/elem_g, so a batch may pass it per member (F_PTRS), not gathered

ctypedef int (*ab_fwd_hook)(int nid) except -1
ctypedef int (*ab_bwd_hook)(int nid, bint full) except -1
ctypedef void (*ab_reset_hook)(int n) noexcept

cdef ABSpec* ab_spec(int op) noexcept nogil
cdef int set_autobatch(int op, int flags, unsigned int share=*, int iamask=*, ab_arg_fn argfn=*,
                       ab_fix_fn fix=*, unsigned int ptrargs=*) except -1
cdef int set_autobatch_engine(ab_fwd_hook f, ab_bwd_hook b, ab_reset_hook r) except -1
# Work a forward pass needs done before any node runs (the trainers' deferred catch-up of idle
# lookup rows, dyn/_core/train/catchup.pyx), set by its owner; called as each forward starts.
ctypedef int (*fwd_prelude_fn)() except -1
cdef int set_forward_prelude(fwd_prelude_fn f) except -1
cdef bint autobatch_active() noexcept nogil
cdef int exec_node(int i) except -1
cdef int check_finite(int i) except -1
cdef int raise_kernel_error() except -1
cdef size_t round_up(size_t n) noexcept nogil

cdef Graph* cg() noexcept nogil
cdef OpKernel* kernel(int op) noexcept nogil
cdef int declare_op(str name, shape_fn shape, int aux=*) except -1
cdef int set_kernels(int op, int device, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32=*, kbwd_fn b64=*) except -1


cdef inline void run_fwd(Graph* g, Node* n) noexcept:
    """Node n's forward on the graph's device and float type: the one place kernels are chosen."""
    cdef OpKernel* k = kernel(n.op)
    if k.kfwd[g.device][g.dtype] != NULL:
        k.kfwd[g.device][g.dtype](g, n, n.v)


cdef inline void run_bwd(Graph* g, Node* n, int i) noexcept:
    """Node n's backward into argument i (-1: a leaf's hook), as run_fwd."""
    cdef OpKernel* k = kernel(n.op)
    if k.kbwd[g.device][g.dtype] != NULL:
        k.kbwd[g.device][g.dtype](g, n, i, n.g)

# dims
cdef inline int dim_size(const Dim* d) noexcept nogil:
    cdef int s = 1, i
    for i in range(d.nd):
        s *= d.d[i]
    return s
cdef inline int dim_total(const Dim* d) noexcept nogil:
    return dim_size(d) * d.bd
cdef int dim_rows(const Dim* d) noexcept nogil
cdef int dim_cols(const Dim* d) noexcept nogil
cdef void dim_set(Dim* d, int nd, int d0, int d1, int bd) noexcept nogil
cdef bint dim_eq_nobatch(const Dim* a, const Dim* b) noexcept nogil
cdef str dim_str(const Dim* d)
cdef Dim dim_from_tuple(object shape, object bd) except *
cdef object dim_to_py(const Dim* d)

# nodes
cdef inline Node* node(Graph* g, int i) noexcept nogil:
    return &g.nodes[i]
cdef inline Node* arg(Graph* g, Node* n, int i) noexcept nogil:
    return &g.nodes[g.ipool[n.arg_off + i]]
cdef inline int* idx(Graph* g, Node* n) noexcept nogil:
    return g.ipool + n.idx_off

cdef int new_node(int op, int nargs, const int* args) except -1
cdef int set_indices(int nid, object indices) except -1
cdef int set_indices_c(int nid, const int* v, int m) except -1
cdef int set_index_range(int nid, int start, int m) except -1
cdef int finish_node(int nid) except -1
cdef str op_name(int op)
cdef str node_desc(int nid)
cdef int forward_to(int nid) except -1
cdef int backward_from(int nid, bint full) except -1
# Called once at the end of every backward pass (ok: it completed; else a kernel error or an exception
# stopped it): kernels that defer work to the end of the pass (the tree nodes' weight products) do it
# or drop it there.
ctypedef void (*bwd_end_fn)(Graph* g, bint ok) noexcept
cdef int add_backward_end(bwd_end_fn f) except -1
cdef void mark_live(int nid, bint full, unsigned char* live) noexcept
cdef bint seed_backward(int nid, const unsigned char* live, size_t zoff) noexcept
cdef int mark_fresh(int nid, const unsigned char* live, const int* inb) except -1
cdef int set_bwd_overwrites(int op, int device) except -1
cdef void node_backward(int i, const unsigned char* live) noexcept
# The live nodes' backward, node ids from nid downwards: the plain executor's order.
cdef int backward_nodes(int nid, const unsigned char* live) except -1
# Low-rank gradients (graph.pyx): the tracked gradient whose memory holds p (-1: none)
cdef int lr_find(Graph* g, const void* p) noexcept nogil
# the trainer: a parameter's float32 gradient (size elements at C) is zero after its step
cdef int lr_mark_zero(char* C, long size) noexcept nogil
# a backward call wrote into tracked gradient r without holding it back
cdef void lr_written(Graph* g, int r) noexcept nogil
# compute every held-back product into its gradient (what reads a gradient calls first)
cdef int lr_flush() except -1
# compute region r's product (if any) and stop tracking it
cdef int lr_materialize(Graph* g, int r) except -1
# stop tracking the gradients in [lo, hi) (their memory is being freed), held back or not
cdef void lr_drop_range(const char* lo, const char* hi) noexcept nogil
# lr_flush, then forget what is known zero (a gradient's memory handed to code that may write it)
cdef int lr_forget() except -1
# the backward pass's first step: lr_flush, then keep tracked only the gradients that nothing but
# held-back products can write in this pass. shared(u, j): whether argument j of live node u runs
# as a shared argument of its automatic batch (NULL: no batches)
ctypedef bint (*lr_shared_fn)(int u, int j) noexcept
cdef int lr_prepare(int nid, const unsigned char* live, lr_shared_fn shared) except -1
# the device's float32 product C += A B^T of a held-back gradient (set by dyn/_core/cpu/arith.pyx)
ctypedef void (*lr_gemm_fn)(LowRank* r) noexcept nogil
cdef int set_lr_gemm(lr_gemm_fn f) except -1
# op's backward into argument j may hold a weight's gradient back: j odd (kind 1: affine_transform),
# j == 0 (kind 2: a matrix product)
cdef int set_bwd_lowrank(int op, int kind) except -1
cdef void* arena_alloc(Arena* a, size_t nbytes) except NULL
cdef int arena_reserve(Arena* a, size_t nbytes) except -1
cdef int pyref_add(object o) except -1
cdef object pyref_get(int i)

# random numbers (xoroshiro128+), seeded by dyn.init(random_seed=...)
cdef double rand_uniform(Graph* g) noexcept nogil
cdef double rand_normal(Graph* g) noexcept nogil


cdef inline char* elem_v(Node* a, int b, long size, int isz) noexcept nogil:
    """Batch element b ({size} items) of a's value; batch 1 broadcasts. Under automatic
    batching an argument may come per member (F_PTRS: v is an array of element pointers)."""
    if a.flags & F_PTRS:
        return (<char**>a.v)[b]
    return <char*>a.v + (<size_t>b * size * isz if a.dim.bd > 1 else 0)


cdef inline char* elem_g(Node* a, int b, long size, int isz) noexcept nogil:
    """Batch element b of a's gradient, as elem_v."""
    if a.flags & F_PTRS:
        return (<char**>a.g)[b]
    return <char*>a.g + (<size_t>b * size * isz if a.dim.bd > 1 else 0)
