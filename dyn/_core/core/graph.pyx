# cython: language_level=3
"""The computation graph: node table, arenas, incremental forward, backward.

One global graph (as DyNet): ``renew()`` empties it by moving pointers back to
zero. Nodes are appended in creation order, so forward is a loop up to a node
and backward is a reverse loop. Every node's value lives in the forward arena
(or, for parameters, in their pool); gradients in the backward arena, zeroed
with one ``memset`` per backward call (or, for parameters, in the pool's
gradient, where they accumulate until the trainer consumes them).
"""
from libc.stdlib cimport realloc, free, calloc, malloc
from libc.string cimport memset, memcpy, strncpy
from libc.math cimport sqrt, log, cos, M_PI
from dyn._core.core.device cimport find_device, Device, ALIGN
from dyn._core.cpu.memory cimport cpu_device

cdef Graph G
cdef OpKernel KT[256]
cdef ABSpec ABT[256]
cdef ab_fwd_hook AB_FWD = NULL
cdef ab_bwd_hook AB_BWD = NULL
cdef ab_reset_hook AB_RESET = NULL
cdef fwd_prelude_fn FWD_PRELUDE = NULL
cdef int AB_ENABLED = 0     # this graph runs through the autobatching engine
cdef int NK = 0
cdef dict OPCODES = {}
cdef list PYREFS = []
cdef size_t INITIAL_BYTES = 1 << 20

# ---------------------------------------------------------------- dims

cdef int dim_rows(const Dim* d) noexcept nogil:
    return d.d[0]

cdef int dim_cols(const Dim* d) noexcept nogil:
    return d.d[1] if d.nd > 1 else 1

cdef void dim_set(Dim* d, int nd, int d0, int d1, int bd) noexcept nogil:
    d.nd = nd
    d.d[0] = d0
    d.d[1] = d1
    d.bd = bd

cdef bint dim_eq_nobatch(const Dim* a, const Dim* b) noexcept nogil:
    """Equal shapes, ignoring trailing 1s (DyNet's truncate) and batch."""
    cdef int i, n = a.nd if a.nd > b.nd else b.nd
    cdef int x, y
    for i in range(n):
        x = a.d[i] if i < a.nd else 1
        y = b.d[i] if i < b.nd else 1
        if x != y:
            return False
    return True

cdef str dim_str(const Dim* d):
    s = "{" + ",".join([str(d.d[i]) for i in range(d.nd)]) + "}"
    if d.bd > 1:
        s += "x%d" % d.bd
    return s

cdef Dim dim_from_tuple(object shape, object bd) except *:
    cdef Dim d
    cdef int i
    if isinstance(shape, (int,)) or hasattr(shape, "__index__"):
        shape = (int(shape),)
    shape = tuple(shape)
    if len(shape) == 0:
        shape = (1,)
    if len(shape) > MAXD:
        raise ValueError("a Dim has at most %d dimensions, got %r" % (MAXD, shape))
    d.nd = len(shape)
    total = 1
    for i in range(d.nd):
        v = shape[i]
        if isinstance(v, float) and v == int(v):
            v = int(v)
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError("dimensions must be integers, got %r" % (shape,))
        v = v.__index__()
        if v <= 0:
            raise ValueError("dimensions must be positive, got %r" % (shape,))
        total *= v
        if total > MAX_ELEMS:
            raise ValueError("shape %r has more than %d elements, the most a tensor may hold"
                             % (shape, MAX_ELEMS))
        d.d[i] = v
    if isinstance(bd, bool) or not hasattr(bd, "__index__"):
        raise TypeError("batch size must be an integer, got %r" % (bd,))
    bd = bd.__index__()
    if bd <= 0:
        raise ValueError("batch size must be positive, got %d" % bd)
    if total * bd > MAX_ELEMS:
        raise ValueError("shape %r with batch size %d has %d elements, more than the %d a tensor "
                         "may hold" % (shape, bd, total * bd, MAX_ELEMS))
    d.bd = bd
    return d


cdef inline int _dim_problem(const Dim* d, int* bad) noexcept nogil:
    """0 when d is a valid Dim of at most MAX_ELEMS elements (counted in 64 bits, so a product that
    overflowed a C int in a shape rule is caught here); else 1 (rank or batch out of range), 2 (dim
    bad[0] is not positive: it overflowed) or 3 (too many elements)."""
    cdef long long total = d.bd
    cdef int i
    if d.nd < 1 or d.nd > MAXD or d.bd < 1:
        return 1
    for i in range(d.nd):
        if d.d[i] < 1:
            bad[0] = i
            return 2
        total *= d.d[i]
        if total > MAX_ELEMS:
            return 3
    return 0


cdef int _dim_fail(const Dim* d, int problem, int bad, str what) except -1:
    if problem == 1:
        raise ValueError("%s: invalid result shape (%d dimensions, batch %d)" % (what, d.nd, d.bd))
    if problem == 2:
        raise ValueError("%s: result dimension %d is %d, out of range (it overflowed: a tensor "
                         "holds at most %d elements)" % (what, bad, d.d[bad], MAX_ELEMS))
    raise ValueError("%s: the result %s would have more than %d elements, the most a "
                     "tensor may hold" % (what, dim_str(d), MAX_ELEMS))

cdef object dim_to_py(const Dim* d):
    return (tuple([d.d[i] for i in range(d.nd)]), d.bd)

# ---------------------------------------------------------------- arenas

cdef size_t round_up(size_t n) noexcept nogil:
    return (n + ALIGN - 1) & ~(<size_t>ALIGN - 1)

# No single request may be larger than this (a size computed from a wrapped count is caught here
# rather than passed to malloc).
cdef size_t MAX_BLOCK = (<size_t>1) << 46

cdef str _arena_name(Arena* a):
    return "forward (values)" if a == &G.fx else "backward (gradients)" if a == &G.dx else "graph"


cdef int _arena_oom(size_t nbytes, Arena* a) except -1:
    raise MemoryError("dyn: cannot allocate %d bytes for the %s arena on %s (the graph is as it was: "
                      "a smaller graph, or renew_cg(), can go on)"
                      % (nbytes, _arena_name(a), (<bytes>G.dev.name).decode()))


cdef void* _aligned_block(size_t nbytes, Arena* a=NULL) except NULL:
    """A block of the graph's device memory (64-byte aligned), or MemoryError naming the arena (a)
    and the device."""
    cdef void* p = NULL
    if nbytes <= MAX_BLOCK:
        p = G.dev.alloc(nbytes)
    if p == NULL:
        _arena_oom(nbytes, a)
    return p

cdef void _free_block(void* p) noexcept:
    if p != NULL:
        G.dev.release(p)

cdef void* arena_alloc(Arena* a, size_t nbytes) except NULL:
    """nbytes from the arena. When the block is full a new, larger one is chained (live values in the
    old blocks stay where they are until the next reset merges them). On MemoryError the arena is
    unchanged, so the graph can go on or be renewed."""
    cdef size_t n, newcap
    cdef void* p
    cdef void** old
    if nbytes > MAX_BLOCK:
        _arena_oom(nbytes, a)
    n = round_up(nbytes if nbytes > 0 else 1)
    if a.used + n > a.cap:
        newcap = a.cap * 2
        if newcap < n:
            newcap = _with_headroom(n)  # (not 2n: a huge request must not ask for twice its size)
        if newcap > MAX_BLOCK:
            newcap = n
        if a.base != NULL and a.nold == a.cold:
            old = <void**>realloc(a.old, (a.cold * 2 + 4) * sizeof(void*))
            if old == NULL:
                raise MemoryError("dyn: arena bookkeeping")
            a.old = old
            a.cold = a.cold * 2 + 4
        try:
            p = _aligned_block(newcap, a)   # (raises with the arena as it was)
        except MemoryError:
            if newcap <= n:
                raise
            p = _aligned_block(n, a)        # the doubled block is too much: what this value needs
            newcap = n
        if a.base != NULL:
            a.old[a.nold] = a.base
            a.nold += 1
        a.base = <char*>p
        a.cap = newcap
        a.used = 0
    p = a.base + a.used
    a.used += n
    a.high += n
    return p

cdef inline size_t _with_headroom(size_t n) noexcept nogil:
    """A new arena block's size for n bytes: +25%, as graphs vary in size
    from one to the next."""
    return n + n // 4


cdef void* _roomy_block(size_t n, Arena* a, size_t* cap) except NULL:
    """A block for the next graphs, which needed n bytes, with room to grow: 4n where memory is
    committed only when first touched (the CPU's; a block that must be replaced is touched again
    from scratch, page fault by page fault: 1.3 GB of faults in the first 30 minibatches of the
    RNN LM at minibatch 64, against 0.6 GB of arena), else n + n/4; n + n/4, then n, when more
    cannot be had. Sets cap to the size taken."""
    cdef void* p
    cdef size_t want = _with_headroom(n)
    if G.dev.lazy and n <= MAX_BLOCK // 4:
        want = 4 * n
    while True:
        try:
            p = _aligned_block(want, a)
            cap[0] = want
            return p
        except MemoryError:
            if want <= n:
                raise
            want = _with_headroom(n) if want > _with_headroom(n) else n


cdef void _drop_blocks(Arena* a) noexcept:
    """Free every block: the arena is empty, with no memory (the next alloc makes a block)."""
    cdef int i
    for i in range(a.nold):
        _free_block(a.old[i])
    a.nold = 0
    _free_block(a.base)
    a.base = NULL
    a.cap = 0
    a.used = 0
    a.high = 0


cdef int arena_reset(Arena* a) except -1:
    """Start over; if blocks were chained, replace them by one block of the
    high-water size so the next graph needs no chaining. If that block cannot be had
    (MemoryError: the last graph filled the device), the arena is left empty and valid, and the
    next graph's allocations make their blocks: renewing the graph never raises."""
    cdef size_t need
    if a.nold > 0:
        need = a.high
        _drop_blocks(a)
        try:
            a.base = <char*>_roomy_block(need, a, &a.cap)
        except MemoryError:
            pass
    a.used = 0
    a.high = 0
    return 0

cdef int arena_reserve(Arena* a, size_t nbytes) except -1:
    """Make the (empty) arena hold nbytes in one block."""
    if a.cap < nbytes or a.nold > 0:
        if a.cap < nbytes:
            _drop_blocks(a)
            a.base = <char*>_roomy_block(nbytes, a, &a.cap)
        else:
            arena_reset(a)
    a.used = 0
    a.high = 0
    return 0

# ---------------------------------------------------------------- kernels

cdef Graph* cg() noexcept nogil:
    return &G

cdef OpKernel* kernel(int op) noexcept nogil:
    return &KT[op]

cdef int declare_op(str name, shape_fn shape, int aux=0) except -1:
    """A new operation: its name, its shape rule (shared by every device) and its scratch per output
    element (in items). Devices then add their kernels with set_kernels. Returns the op code."""
    global NK
    if name in OPCODES:
        raise RuntimeError("dyn: two kernels are registered as %r" % name)
    if NK >= 256:
        raise RuntimeError("dyn: too many operations")
    memset(&KT[NK], 0, sizeof(OpKernel))
    KT[NK].shape = shape
    KT[NK].aux_bytes_per_elem = aux
    ABT[NK].flags = 0
    ABT[NK].share = 0
    ABT[NK].iamask = 0x3f
    ABT[NK].argfn = NULL
    ABT[NK].fix = NULL
    ABT[NK].ptrargs = 0
    b = name.encode()
    strncpy(KT[NK].name, b, 31)
    OPCODES[name] = NK
    NK += 1
    return NK - 1


cdef int set_kernels(int op, int device, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32=NULL, kbwd_fn b64=NULL) except -1:
    """Device `device`'s float32 and float64 forward and backward kernels of op (backward NULL: the op
    passes no gradient, as random leaves)."""
    if op < 0 or op >= NK or device < 0 or device >= NDEV:
        raise ValueError("set_kernels: no operation %d or device %d" % (op, device))
    KT[op].kfwd[device][0] = f32
    KT[op].kfwd[device][1] = f64
    KT[op].kbwd[device][0] = b32
    KT[op].kbwd[device][1] = b64
    return 0


cdef unsigned char BWD_OW[256][2]     # [op][device]: its backward can write a fresh argument gradient


cdef int set_bwd_overwrites(int op, int device) except -1:
    """Device `device`'s backward kernels of op (one argument) honour F_GFRESH: when their argument
    carries the flag they write its gradient instead of adding to it (or zero it first), and clear
    the flag. mark_fresh then leaves such a gradient out of the arena's zeroing."""
    if op < 0 or op >= NK or device < 0 or device >= NDEV:
        raise ValueError("set_bwd_overwrites: no operation %d or device %d" % (op, device))
    BWD_OW[op][device] = 1
    return 0


cdef long FRESH_MIN = 262144    # elements (1 MB in float32): smaller gradients are zeroed with the rest
cdef int LAST_FRESH = 0         # how many gradients the last backward pass left unzeroed (tests)


def _last_fresh():
    """Tests: how many gradients the last backward pass left out of the arena's zeroing."""
    return LAST_FRESH


def _set_fresh_min(long n):
    """Tests: the smallest gradient (elements) mark_fresh leaves unzeroed (default 262144); returns
    the previous value."""
    global FRESH_MIN
    old = FRESH_MIN
    FRESH_MIN = n if n > 0 else 1
    return old


cdef inline bint _fresh_candidate(int i, const unsigned char* live, const int* inb) noexcept:
    """Node i's gradient is large (FRESH_MIN) and the arena's own: live, not the pool's, not a
    batch's (inb[i] < 0 where inb is given)."""
    cdef Node* n = &G.nodes[i]
    return (live[i] and not (n.flags & F_PGRAD) and (inb == NULL or inb[i] < 0)
            and dim_total(&n.dim) >= FRESH_MIN)


cdef int mark_fresh(int nid, const unsigned char* live, const int* inb) except -1:
    """Flag F_GFRESH the nodes below nid whose gradient is large and the arena's own
    (_fresh_candidate) and added to by exactly one backward call: a single live consumer, taking
    the node as its only argument, run alone, whose kernel writes a fresh gradient
    (set_bwd_overwrites); and give them their gradient memory, first in the (reserved, empty)
    arena. The caller zeroes the arena from there on and allocates the other gradients: a softmax
    over 10k words at minibatch 64 has a 56 MB score gradient, zeroed and then read back only to be
    added to once. Clears the flag everywhere else; returns how many nodes carry it."""
    cdef int i, j, a, c, cnt = 0
    cdef int* cons
    cdef Node* n
    cdef bint any = False
    global LAST_FRESH
    LAST_FRESH = 0
    for i in range(nid + 1):
        G.nodes[i].flags &= ~(F_GFRESH | F_BIASG)
        if i != nid and _fresh_candidate(i, live, inb):
            any = True
    if not any:
        return 0
    cons = <int*>malloc((nid + 1) * sizeof(int))   # each node's one live consumer, -1 none, -2 several
    if cons == NULL:
        raise MemoryError()
    try:
        for i in range(nid + 1):
            cons[i] = -1
        for c in range(nid + 1):
            if not live[c]:
                continue
            n = &G.nodes[c]
            for j in range(n.nargs):
                a = G.ipool[n.arg_off + j]
                cons[a] = c if cons[a] == -1 else -2
        for i in range(nid):
            c = cons[i]
            if (c < 0 or not _fresh_candidate(i, live, inb) or (inb != NULL and inb[c] >= 0)
                    or G.nodes[c].nargs != 1 or not BWD_OW[G.nodes[c].op][G.device]):
                continue
            n = &G.nodes[i]
            n.flags |= F_GFRESH
            n.g = arena_alloc(&G.dx, <size_t>dim_total(&n.dim) * G.itemsize)
            cnt += 1
    finally:
        free(cons)
    LAST_FRESH = cnt
    return cnt


cdef bint _has_kernel(int op) noexcept nogil:
    return KT[op].kfwd[G.device][G.dtype] != NULL


# ---------------------------------------------------------------- autobatching specs

cdef ABSpec* ab_spec(int op) noexcept nogil:
    return &ABT[op]

cdef int set_autobatch(int op, int flags, unsigned int share=0, int iamask=0x3f, ab_arg_fn argfn=NULL,
                       ab_fix_fn fix=NULL, unsigned int ptrargs=0) except -1:
    """Declare how nodes of `op` run as one batched node (see _graph.pxd, AB_*)."""
    if op < 0 or op >= NK:
        raise ValueError("set_autobatch: no operation %d" % op)
    ABT[op].flags = flags
    ABT[op].share = share
    ABT[op].iamask = iamask
    ABT[op].argfn = argfn
    ABT[op].fix = fix
    ABT[op].ptrargs = ptrargs
    return 0

cdef int set_autobatch_engine(ab_fwd_hook f, ab_bwd_hook b, ab_reset_hook r) except -1:
    global AB_FWD, AB_BWD, AB_RESET
    AB_FWD, AB_BWD, AB_RESET = f, b, r
    return 0

cdef int set_forward_prelude(fwd_prelude_fn f) except -1:
    global FWD_PRELUDE
    FWD_PRELUDE = f
    return 0

cdef bint autobatch_active() noexcept nogil:
    return AB_ENABLED != 0 and AB_FWD != NULL

def set_autobatching(bint on):
    """Run the current graph through the autobatching engine (until renew)."""
    global AB_ENABLED
    if on and AB_FWD == NULL:
        raise RuntimeError("dyn: the autobatching engine is not loaded")
    if bool(on) != bool(AB_ENABLED) and G.computed > 0:
        # values computed one way stay; the engine only ever schedules new nodes,
        # but backward must see one kind of record: recompute from scratch
        invalidate()
    AB_ENABLED = 1 if on else 0

def autobatching():
    return AB_ENABLED != 0

cdef str op_name(int op):
    return (<bytes>KT[op].name).decode()

cdef dict LABELS = {}    # op code -> (k, names): a node of the op is names[ia[k]] to the user


def set_labels(str op, int k, tuple names):
    """Kernel `op` computes several public operations, told apart by ia[k]: graph dumps name a
    node names[ia[k]] (kernel modules call this when they register the kernel)."""
    if not 0 <= k < NIA:
        raise ValueError("set_labels: ia index %d out of range" % k)
    LABELS[OPCODES[op]] = (k, names)


cdef str _label(Node* n):
    cdef tuple t = LABELS.get(n.op)
    cdef int j
    if t is not None:
        j = n.ia[<int>t[0]]
        if 0 <= j < len(t[1]):
            return t[1][j]
    return op_name(n.op)


cdef str node_desc(int nid):
    return "node %d (%s, dim %s)" % (nid, _label(&G.nodes[nid]), dim_str(&G.nodes[nid].dim))

def op_code(str name):
    """Integer code of a compiled operation (KeyError if none)."""
    return OPCODES[name]


def op_name_of(int op):
    """The kernel-table name of op code `op`."""
    return op_name(op)


def op_names():
    """Every operation of the kernel table, by name."""
    return sorted(OPCODES)


cdef int pyref_add(object o) except -1:
    PYREFS.append(o)
    return len(PYREFS) - 1

cdef object pyref_get(int i):
    return PYREFS[i]

# ---------------------------------------------------------------- nodes

cdef int new_node(int op, int nargs, const int* args) except -1:
    """Append a node (its Dim is set by finish_node)."""
    cdef int i, a
    cdef Node* n
    cdef Node* nodes
    cdef int cap
    if G.n == G.cap:
        if G.cap >= 1 << 30:
            raise MemoryError("dyn: a graph holds at most %d nodes" % G.cap)
        cap = G.cap * 2 if G.cap else 1024
        nodes = <Node*>realloc(G.nodes, <size_t>cap * sizeof(Node))
        if nodes == NULL:
            raise MemoryError("dyn: cannot grow the node table to %d nodes" % cap)
        G.nodes = nodes
        G.cap = cap
    if <long>G.ni + nargs > G.icap:
        _grow_ipool(nargs)
    n = &G.nodes[G.n]
    n.op = op
    n.nargs = nargs
    n.arg_off = G.ni
    n.flags = 0
    for i in range(nargs):
        a = args[i]
        G.ipool[G.ni + i] = a
        n.flags |= G.nodes[a].flags & F_NG
    G.ni += nargs
    n.v = NULL
    n.g = NULL
    n.aux = NULL
    n.naux = 0
    n.ptr = NULL
    n.gptr = NULL
    n.idx_off = 0
    n.nidx = 0
    n.pyref = -1
    n.serial = G.serial
    G.serial += 1
    memset(n.ia, 0, sizeof(n.ia))      # a batch signature reads them: no stale values
    n.fa[0] = 0
    n.fa[1] = 0
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = 1
    G.n += 1
    return G.n - 1

cdef int _grow_ipool(long extra) except -1:
    cdef long cap = G.icap * 2 if G.icap else 4096
    cdef int* pool
    if G.ni + extra > MAX_ELEMS:
        raise MemoryError("dyn: a graph holds at most %d arguments and indices" % MAX_ELEMS)
    while cap < G.ni + extra:
        cap *= 2
    if cap > MAX_ELEMS:
        cap = MAX_ELEMS
    pool = <int*>realloc(G.ipool, <size_t>cap * sizeof(int))
    if pool == NULL:
        raise MemoryError("dyn: cannot grow the index pool to %d entries" % cap)
    G.ipool = pool
    G.icap = <int>cap
    return 0

cdef int _index_slots(int nid, long m) except -1:
    """m entries of the index pool as node nid's index list (filled by the caller): their offset."""
    if <long>G.ni + m > G.icap:
        _grow_ipool(m)
    G.nodes[nid].idx_off = G.ni
    G.nodes[nid].nidx = m
    G.ni += m
    return G.ni - m


cdef int set_indices(int nid, object indices) except -1:
    """Store a list of non-negative ints as the node's index list."""
    cdef long m = len(indices)
    cdef int k, off = _index_slots(nid, m)
    for k in range(m):
        G.ipool[off + k] = indices[k]
    return 0


cdef int set_indices_c(int nid, const int* v, int m) except -1:
    """set_indices from a C array (checked non-negative ints)."""
    cdef int off = _index_slots(nid, m)    # (before reading G.ipool: it may move)
    memcpy(&G.ipool[off], v, m * sizeof(int))
    return 0


cdef int set_index_range(int nid, int start, int m) except -1:
    """The index list start, start + 1, .. start + m - 1 (a range: pick_range), written in place."""
    cdef int k, off = _index_slots(nid, m)
    for k in range(m):
        G.ipool[off + k] = start + k
    return 0


cdef int finish_node(int nid) except -1:
    """Infer the Dim (raising on bad shapes, leaving the graph as it was)."""
    cdef Node* n = &G.nodes[nid]
    cdef int ni0 = n.arg_off, problem, bad = 0
    try:
        if not _has_kernel(n.op):
            raise NotImplementedError("%s has no %s kernel on the %s device"
                                      % (_label(n), "float64" if G.dtype else "float32",
                                         "GPU" if G.device == DEV_GPU else "CPU"))
        KT[n.op].shape(&G, n)
        problem = _dim_problem(&n.dim, &bad)
        if problem:                       # (the label is a Python string: made only on failure)
            _dim_fail(&n.dim, problem, bad, _label(n))
        if n.naux == 0 and KT[n.op].aux_bytes_per_elem:
            n.naux = <long>KT[n.op].aux_bytes_per_elem * dim_total(&n.dim)
        if n.naux < 0 or n.naux > MAX_ELEMS:
            raise ValueError("%s: the result %s needs more than %d scratch items, the most a node "
                             "may have" % (_label(n), dim_str(&n.dim), MAX_ELEMS))
    except BaseException:
        G.n = nid
        G.ni = ni0
        raise
    if G.immediate:
        forward_to(nid)
    return nid

# ---------------------------------------------------------------- forward

cdef int forward_to(int nid) except -1:
    cdef int i
    if nid >= G.n or nid < 0:
        raise RuntimeError("dyn: node %d is not in the current graph" % nid)
    if nid < G.computed:
        return 0
    if FWD_PRELUDE != NULL:
        FWD_PRELUDE()
    if AB_ENABLED and AB_FWD != NULL:
        return AB_FWD(nid)
    for i in range(G.computed, nid + 1):
        exec_node(i)
        G.computed = i + 1
    return 0

cdef int exec_node(int i) except -1:
    """Compute node i alone: its memory from the forward arena, then its kernel."""
    cdef Node* n = &G.nodes[i]
    if not (n.flags & F_FIXED):
        n.v = arena_alloc(&G.fx, <size_t>dim_total(&n.dim) * G.itemsize)
    if n.naux:
        n.aux = arena_alloc(&G.fx, <size_t>n.naux * G.itemsize)
    run_fwd(&G, n)
    if G.kerr:
        raise_kernel_error()
    n.flags |= F_DONE
    if G.check:
        _check_finite(i)
    return 0

cdef int check_finite(int i) except -1:
    return _check_finite(i)


cdef object KERR_EXC = None


def kernel_error(exc):
    """A kernel that runs Python (a device's, through its trampoline: kernels cannot raise) hands
    its exception here; the graph raises it where the kernel was run."""
    global KERR_EXC
    KERR_EXC = exc
    G.kerr = 1


cdef int raise_kernel_error() except -1:
    global KERR_EXC
    exc = KERR_EXC
    KERR_EXC = None
    G.kerr = 0
    if exc is None:
        exc = RuntimeError("dyn: a kernel failed")
    raise exc

cdef int _check_finite(int i) except -1:
    cdef Node* n = &G.nodes[i]
    if G.dev.find_nonfinite(n.v, dim_total(&n.dim), G.dtype) < 0:
        return 0
    raise RuntimeError("NaN or Inf detected: first in %s" % node_desc(i))

cdef list INVALIDATE_HOOKS = []


def on_invalidate(fn):
    """Call fn() whenever the graph is invalidated (it is about to be
    recomputed: the parameters it reads must be current)."""
    INVALIDATE_HOOKS.append(fn)


def invalidate():
    """Forget computed values: the next value request recomputes all nodes."""
    cdef int i
    lr_flush()
    for i in range(G.n):
        G.nodes[i].flags &= ~F_DONE
        if not (G.nodes[i].flags & F_FIXED):
            G.nodes[i].v = NULL
    G.computed = 0
    arena_reset(&G.fx)
    if AB_RESET != NULL:
        AB_RESET(0)
    for fn in INVALIDATE_HOOKS:
        fn()

# ---------------------------------------------------------------- low-rank gradients
# A softmax's weight gradient over one sentence is one product, G H^T: 10,000 x 256 floats from a
# 10,000 x 22 G and a 256 x 22 H. Written out, it is 10 MB the product writes and the trainer's
# Adam step reads back and zeroes, next to the weights and two moments Adam reads and writes
# anyway. So where a float32 parameter's gradient is known to be zero when the backward pass
# starts and nothing but that one product writes it in the pass, the product is held back as
# (A, B) = (G, H): G lies in the gradient arena, H in the forward arena, both untouched until
# the graph is renewed or the next backward pass starts. The trainer's Adam step then computes
# the gradient block by block in registers and applies the step to the weights directly
# (dyn/_core/cpu/_lowrankadam.h); any other reader first computes it into the gradient's memory
# (lr_flush).
#
# The gradients tracked (at most LR_MAX) are those the trainer's Adam step just consumed
# (lr_mark_zero: the CPU's float32 parameters of LR_MIN elements and more). lr_prepare runs as
# a backward pass starts: it computes what the last pass held back (its G is about to be
# overwritten) and stops tracking every gradient that some live node would write in this pass
# other than as the weight of a matrix product (set_bwd_lowrank), or as one run of an automatic
# batch that does not share it. The product's own backward (dyn/_core/cpu/arith.pyx, mm_bwd)
# then holds the first product back and reports every other write (lr_written). Kernels add
# only into the argument they are called for (the kernel table's contract), so that is every
# write a backward pass makes; code outside it that may write a gradient (the pool's arrays
# handed out, the pool moved) calls lr_forget.

cdef unsigned char BWD_LR[256]        # [op]: set_bwd_lowrank's kind
cdef lr_gemm_fn LR_GEMM = NULL


cdef int set_bwd_lowrank(int op, int kind) except -1:
    if op < 0 or op >= NK or kind < 0 or kind > 2:
        raise ValueError("set_bwd_lowrank: no operation %d or kind %d" % (op, kind))
    BWD_LR[op] = kind
    return 0


cdef int set_lr_gemm(lr_gemm_fn f) except -1:
    global LR_GEMM
    LR_GEMM = f
    return 0


cdef int lr_find(Graph* g, const void* p) noexcept nogil:
    cdef int r
    cdef const char* q = <const char*>p
    for r in range(g.nlr):
        if q >= g.lr[r].C and q < g.lr[r].C + g.lr[r].size * 4:
            return r
    return -1


cdef inline void _lr_drop(Graph* g, int r) noexcept nogil:
    """Stop tracking entry r (the others keep their order: the order of tracking)."""
    g.nlr -= 1
    for r in range(r, g.nlr):
        g.lr[r] = g.lr[r + 1]


cdef int lr_mark_zero(char* C, long size) noexcept nogil:
    """Track the gradient at C (size float32 elements) as zero, in place of the longest-tracked
    gradient known zero when the table is full; 0 when it is tracked, -1 when C overlaps a tracked
    gradient that is not it or every entry holds a product back."""
    cdef int r = lr_find(&G, C)
    if r >= 0:
        if G.lr[r].C != C or G.lr[r].size != size:
            return -1
    else:
        if G.nlr == LR_MAX:
            for r in range(LR_MAX):
                if G.lr[r].state == LR_ZERO:
                    break
            else:
                return -1
            _lr_drop(&G, r)
        r = G.nlr
        G.nlr += 1
        G.lr[r].C = C
        G.lr[r].size = size
    G.lr[r].state = LR_ZERO
    return 0


cdef void lr_written(Graph* g, int r) noexcept nogil:
    if g.lr[r].state == LR_ZERO:
        _lr_drop(g, r)
    else:
        g.lr[r].state = LR_MIXED


cdef int lr_materialize(Graph* g, int r) except -1:
    if g.lr[r].state != LR_ZERO:
        if LR_GEMM == NULL:
            raise RuntimeError("dyn: a held-back gradient but no product to compute it")
        LR_GEMM(&g.lr[r])
    _lr_drop(g, r)
    return 0


cdef int lr_flush() except -1:
    cdef int r = 0
    while r < G.nlr:
        if G.lr[r].state == LR_ZERO:
            r += 1
        else:
            lr_materialize(&G, r)     # (drops r: the next entry takes its place)
    return 0


cdef void lr_drop_range(const char* lo, const char* hi) noexcept nogil:
    cdef int r = 0
    while r < G.nlr:
        if G.lr[r].C >= lo and G.lr[r].C < hi:
            _lr_drop(&G, r)
        else:
            r += 1


cdef int lr_forget() except -1:
    lr_flush()
    G.nlr = 0
    return 0


def _lowrank_state():
    """Tests: [(state, elements, address)] of the tracked gradients (state 1 zero, 2 held back, 3
    written and held back), in the order they were tracked."""
    return [(G.lr[r].state, G.lr[r].size, <size_t>G.lr[r].C) for r in range(G.nlr)]


cdef int lr_prepare(int nid, const unsigned char* live, lr_shared_fn shared) except -1:
    cdef int i, j, r, kind
    cdef Node* n
    cdef Node* a
    if G.nlr == 0:
        return 0
    lr_flush()
    for i in range(nid + 1):
        if G.nlr == 0:
            return 0
        if not live[i]:
            continue
        n = &G.nodes[i]
        kind = BWD_LR[n.op]
        for j in range(n.nargs):
            a = &G.nodes[G.ipool[n.arg_off + j]]
            if not (a.flags & F_PGRAD) or not live[G.ipool[n.arg_off + j]]:
                continue
            r = lr_find(&G, a.gptr)
            if r < 0:
                continue
            if ((kind == 1 and j % 2 == 1) or (kind == 2 and j == 0)) and a.gptr == G.lr[r].C \
                    and a.dim.bd == 1 and (shared == NULL or shared(i, j)):
                continue
            _lr_drop(&G, r)
    return 0

# ---------------------------------------------------------------- backward

cdef bwd_end_fn BWD_END[8]
cdef int NBWD_END = 0


cdef int add_backward_end(bwd_end_fn f) except -1:
    global NBWD_END
    cdef int k
    for k in range(NBWD_END):
        if BWD_END[k] == f:
            return 0
    if NBWD_END == 8:
        raise RuntimeError("add_backward_end: too many end-of-backward hooks")
    BWD_END[NBWD_END] = f
    NBWD_END += 1
    return 0


cdef int backward_from(int nid, bint full) except -1:
    """Backward from scalar node nid, through the automatic batching engine when it is on; the
    end-of-backward hooks run whatever happens (to finish or drop deferred work)."""
    cdef bint ok = False
    cdef int k
    try:
        _backward(nid, full)
        ok = G.kerr == 0
    finally:
        for k in range(NBWD_END):
            BWD_END[k](&G, ok)
    return 0


cdef int _backward(int nid, bint full) except -1:
    cdef int i
    cdef size_t need = 0, zoff
    cdef Node* n
    cdef unsigned char* live
    forward_to(nid)
    n = &G.nodes[nid]
    if dim_total(&n.dim) != 1:
        raise ValueError(
            "backward() can only be called on scalar nodes, but %s has %d elements "
            "(sum a batched loss with sum_batches first)" % (node_desc(nid), dim_total(&n.dim)))
    if AB_ENABLED and AB_BWD != NULL:
        return AB_BWD(nid, full)
    live = <unsigned char*>calloc(nid + 1, 1)
    if live == NULL:
        raise MemoryError()
    try:
        mark_live(nid, full, live)
        lr_prepare(nid, live, NULL)
        for i in range(nid + 1):
            n = &G.nodes[i]
            if live[i] and not (n.flags & F_PGRAD):
                need += round_up(<size_t>dim_total(&n.dim) * G.itemsize)
        arena_reserve(&G.dx, need)
        mark_fresh(nid, live, NULL)     # the fresh gradients first, then what is zeroed
        zoff = G.dx.used
        for i in range(nid + 1):
            n = &G.nodes[i]
            if not live[i]:
                n.g = NULL
            elif n.flags & F_PGRAD:
                n.g = n.gptr
            elif not (n.flags & F_GFRESH):
                n.g = arena_alloc(&G.dx, <size_t>dim_total(&n.dim) * G.itemsize)
        for i in range(nid + 1, G.n):
            G.nodes[i].g = NULL
        if not seed_backward(nid, live, zoff):
            return 0
        backward_nodes(nid, live)
    finally:
        free(live)
    return 0


cdef int backward_nodes(int nid, const unsigned char* live) except -1:
    """The live nodes' backward, node ids from nid downwards (the plain executor's order; the
    automatic batching engine's too where nothing ran batched)."""
    cdef int i
    for i in range(nid, -1, -1):
        if live[i]:
            node_backward(i, live)
            if G.kerr:
                raise_kernel_error()
    return 0


cdef bint seed_backward(int nid, const unsigned char* live, size_t zoff) noexcept:
    """Once gradient memory is assigned: zero the gradient arena from byte zoff on
    (the fresh gradients of mark_fresh lie before it), record the target and seed
    d nid / d nid = 1. False when nid is not live (nothing needs its gradient: the
    backward pass stops here)."""
    cdef Node* n = &G.nodes[nid]
    G.dev.zero(<char*>G.dx.base + zoff, G.dx.used - zoff)
    G.bwd_target = nid
    G.nbwd += 1
    if not live[nid]:
        return False
    G.dev.add_scalar(n.g, 1.0, G.dtype)
    return True


cdef void mark_live(int nid, bint full, unsigned char* live) noexcept:
    """live[i] = 1 for the nodes (up to nid, live zeroed) on a path from nid to
    something that needs a gradient (full=True: to anything)."""
    cdef int i, j
    cdef Node* n
    live[nid] = 1
    for i in range(nid, -1, -1):
        n = &G.nodes[i]
        if live[i] and not full and not (n.flags & F_NG):
            live[i] = 0
        if live[i]:
            for j in range(n.nargs):
                live[G.ipool[n.arg_off + j]] = 1


cdef void node_backward(int i, const unsigned char* live) noexcept:
    """Node i's backward: the leaf hook (lookups mark their rows), or its kernel
    for each live argument."""
    cdef Node* n = &G.nodes[i]
    cdef int j
    if n.nargs == 0:
        run_bwd(&G, n, -1)
        return
    for j in range(n.nargs):
        if live[G.ipool[n.arg_off + j]]:
            run_bwd(&G, n, j)

# ---------------------------------------------------------------- graph API

def renew(immediate_compute=False, check_validity=False, autobatching=False):
    """Empty the graph (pointers back to zero) and start a new version."""
    global AB_ENABLED
    lr_flush()      # (held-back gradients read the arenas)
    AB_ENABLED = 1 if (autobatching and AB_FWD != NULL) else 0
    if AB_RESET != NULL:
        AB_RESET(0)
    G.n = 0
    G.ni = 0
    G.computed = 0
    _new_version()
    G.immediate = 1 if immediate_compute else 0
    G.check = 1 if check_validity else 0
    G.bwd_target = -1
    arena_reset(&G.fx)
    arena_reset(&G.dx)
    del PYREFS[:]
    del CHECKPOINTS[:]
    return G.version

cdef list CHECKPOINTS = []
# Changes whenever nodes may have been dropped (renew, cg_revert): what caches expressions across
# calls (the builders) checks it and, when it changed, whether its expressions are still alive.
cdef long STAMP = 0


cdef void _new_version() noexcept:
    """A new graph version: every node and expression of the old one is dead."""
    global STAMP
    G.version += 1
    G.serial0 = G.serial
    STAMP += 1

def checkpoint():
    """Remember the graph's size; revert() drops the nodes added since."""
    CHECKPOINTS.append((G.version, G.n, G.ni, len(PYREFS)))


def revert():
    global STAMP
    if not CHECKPOINTS:
        return
    lr_flush()
    ver, n, ni, nref = CHECKPOINTS.pop()
    if ver != G.version:
        return
    if n < G.n:
        STAMP += 1
    G.n = n
    G.ni = ni
    if G.computed > n:
        G.computed = n
        if AB_RESET != NULL:
            AB_RESET(n)
    if G.bwd_target >= n:
        G.bwd_target = -1
    del PYREFS[nref:]


def version():
    return G.version


def stamp():
    """A number that changes whenever nodes may have been dropped (renew_cg, cg_revert)."""
    return STAMP

def num_nodes():
    return G.n

def set_dtype(str name):
    """Choose the float type of new graphs: 'float32' (default) or 'float64'."""
    if name == "float32":
        G.dtype, G.itemsize = 0, 4
    elif name == "float64":
        G.dtype, G.itemsize = 1, 8
    else:
        raise ValueError("dtype must be 'float32' or 'float64', got %r" % (name,))
    renew()

def get_dtype():
    return "float64" if G.dtype else "float32"

def set_initial_memory(nbytes):
    """Initial size of each arena (DyNet's --dynet-mem); arenas still grow. Both new blocks are
    allocated before the old ones are freed: on MemoryError nothing has changed."""
    global INITIAL_BYTES
    if isinstance(nbytes, bool) or not hasattr(nbytes, "__index__"):
        raise TypeError("set_initial_memory: bytes must be an integer, got %r" % (nbytes,))
    nbytes = nbytes.__index__()
    if nbytes < 0:
        raise ValueError("set_initial_memory: bytes must not be negative, got %d" % nbytes)
    if nbytes > MAX_BLOCK:
        raise MemoryError("dyn: cannot allocate %d bytes for the graph arena" % nbytes)
    cdef size_t size = max(<size_t>nbytes, 4096)
    lr_flush()
    cdef void* fx = _aligned_block(size, &G.fx)
    cdef void* dx
    try:
        dx = _aligned_block(size, &G.dx)
    except MemoryError:
        _free_block(fx)
        raise
    INITIAL_BYTES = size
    _drop_blocks(&G.fx)
    _drop_blocks(&G.dx)
    G.fx.base, G.fx.cap = <char*>fx, size
    G.dx.base, G.dx.cap = <char*>dx, size
    G.computed = 0
    G.n = 0
    G.ni = 0
    _new_version()
    if AB_RESET != NULL:
        AB_RESET(0)

def use_device(str name):
    """Run the graphs from now on on device `name` ("CPU"): the arenas move to its memory (a new, empty
    graph). Kernels of the kernel table are chosen for it; an op without one raises at creation."""
    cdef Device* d = find_device(name)
    cdef void* fx
    cdef void* dx
    if d == G.dev:
        return
    fx = d.alloc(INITIAL_BYTES)
    dx = d.alloc(INITIAL_BYTES)
    if fx == NULL or dx == NULL:
        d.release(fx)
        d.release(dx)
        raise MemoryError("dyn: cannot allocate the graph arenas on %s" % name)
    _drop_blocks(&G.fx)
    _drop_blocks(&G.dx)
    G.dev = d
    G.device = d.kind
    G.fx.base, G.fx.cap = <char*>fx, INITIAL_BYTES
    G.dx.base, G.dx.cap = <char*>dx, INITIAL_BYTES
    renew()


def device_name():
    """The name of the device graphs run on."""
    return (<bytes>G.dev.name).decode()


def memory_stats():
    """Bytes (capacity, used) of the forward and backward arenas."""
    return {"forward_capacity": G.fx.cap, "forward_used": G.fx.high,
            "backward_capacity": G.dx.cap, "backward_used": G.dx.high,
            "forward_blocks": G.fx.nold + 1, "nodes": G.n}

# ---------------------------------------------------------------- random

cdef inline unsigned long long _rotl(unsigned long long x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))

cdef unsigned long long _next(Graph* g) noexcept nogil:
    cdef unsigned long long s0 = g.rng[0], s1 = g.rng[1]
    cdef unsigned long long r = s0 + s1
    s1 ^= s0
    g.rng[0] = _rotl(s0, 24) ^ s1 ^ (s1 << 16)
    g.rng[1] = _rotl(s1, 37)
    return r

cdef double rand_uniform(Graph* g) noexcept nogil:
    """Uniform in (0, 1)."""
    return ((_next(g) >> 11) + 0.5) * (1.0 / 9007199254740992.0)

cdef double rand_normal(Graph* g) noexcept nogil:
    return sqrt(-2.0 * log(rand_uniform(g))) * cos(2.0 * M_PI * rand_uniform(g))

cdef unsigned long long LAST_SEED = 0x5EED


def last_seed():
    """The seed last given to seed()."""
    return LAST_SEED


def seed(unsigned long long s):
    """Seed the generator used by dropout and noise nodes (and the GPU device's, once it is loaded)."""
    global LAST_SEED
    LAST_SEED = s
    import sys
    gpu = sys.modules.get("dyn._core.gpu")
    if gpu is not None and gpu.current() is not None:
        gpu.current().seed(s)
    cdef unsigned long long z
    cdef int i
    for i in range(2):
        s += 0x9E3779B97F4A7C15ULL
        z = s
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
        G.rng[i] = z ^ (z >> 31)

def _init_graph():
    memset(&G, 0, sizeof(Graph))
    G.dev = cpu_device()
    G.device = G.dev.kind
    G.itemsize = 4
    G.bwd_target = -1
    G.fx.base = <char*>_aligned_block(INITIAL_BYTES)
    G.fx.cap = INITIAL_BYTES
    G.dx.base = <char*>_aligned_block(INITIAL_BYTES)
    G.dx.cap = INITIAL_BYTES
    seed(0x5EED)

_init_graph()


def describe(bint labels=False):
    """The graph as Python data: [(op name, argument ids, (dims, batch))]. The op name is the
    kernel's, or with labels the public operation's where several share a kernel (see
    set_labels): "tanh" rather than "nonlin_unary"."""
    cdef int i, j
    out = []
    for i in range(G.n):
        n = &G.nodes[i]
        out.append((_label(n) if labels else op_name(n.op),
                    tuple([G.ipool[n.arg_off + j] for j in range(n.nargs)]), dim_to_py(&n.dim)))
    return out
