# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Automatic operation batching: the engine that runs a graph of many small
per-example computations as few batched kernel calls (DyNet's
BatchedExecutionEngine; Neubig, Goldberg and Dyer 2017).

Switched on per graph (``renew_cg(autobatching=True)``, ``--dynet-autobatch 1``,
``dyn.init(autobatch=True)``); the graph module then hands every forward and
backward here (dyn/_core/core/graph.pyx: forward_to, backward_from).

Forward, over the nodes not yet computed up to the requested one:

1. Signatures. A node whose op declares how it batches (``set_autobatch`` in
   its kernel family; flags in _graph.pxd) gets a signature: the op, its
   attributes, its output Dim and, per argument, either "concatenated along
   the batch" with the argument's Dim, or "shared" with the argument's node id
   (weights: the same matrix for every member). Nodes with equal signatures
   can run as ONE node whose batch is the concatenation of theirs. The key is
   stored whole and compared whole: a hash collision cannot merge nodes.
2. Agenda (DyNet's strategy 1). A node is ready when its arguments are
   computed. Ready nodes that cannot batch run first, one at a time; otherwise
   the signature with ready members and the lowest average depth runs, all its
   ready members as one batch (ascending node ids, grouped by the signature of
   each member's first consumer when those differ: _order). A batch of one is
   a plain single node.
3. A batch: the members' outputs are allocated as one contiguous block (each
   member's value is its slice, so later readers see ordinary nodes); each
   concatenated argument is used in place when the members' arguments already
   lie adjacent and in order in memory (typically: they are the outputs of one
   earlier batch); else, when the op's kernel reads that argument element by
   element (ABSpec.ptrargs: lstm_step's projection column, the state parts,
   concatenate, the tree nodes' x and children), it is passed per member as an
   array of element pointers (F_PTRS) and nothing is copied; else it is
   gathered into one buffer. An ABA_CATAUX argument (the previous state of the
   builders' LSTM steps, whose c_t lives in the producer's scratch) always
   comes per member, its pointers followed by pointers to each member's
   scratch. A pseudo-node (a copy of the first member with batch = the sum of
   the members') is built in a side table and the op's ordinary kernel runs on
   it.

Backward walks the executed units in reverse (where nothing ran batched: the node ids
downwards, the plain executor's order, so the gradients are its bit for bit). A batch's
gradient block has the
same layout as its value block, so the batch's output gradient is read in
place; a concatenated argument's gradient is written in place when the
members' gradients are adjacent; an argument passed per member gets an array of
the members' gradient pointers, into which the kernel adds directly; else its
gradient goes into a zeroed buffer that is then added into each member's
gradient (scatter-add). Shared arguments accumulate into
their own gradient directly. Weight "alias" nodes (lstm_step_weight,
tree_weights), through which single nodes defer their weight products, are
replaced inside batches by the weight itself; the alias still gathers for the single nodes
(members of batches carry F_AB and are skipped there). Its backward runs after every batch whose
members read it, so a batch's copy of the weight is flagged F_VIA_ALIAS, and a kernel may leave
its part of the weight's gradient to the alias (the LSTM steps do: one product per weight).
"""
from libc.stdlib cimport malloc, realloc, free, calloc, qsort
from libc.string cimport memcpy, memset, memcmp
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from dyn._core.core.graph cimport (
    Graph, Node, Dim, ABSpec, cg, arg, dim_total, run_fwd, run_bwd, arena_alloc, arena_reserve, mark_live, node_backward,
    backward_nodes, raise_kernel_error, exec_node, check_finite, round_up, seed_backward, mark_fresh, ab_spec,
    lr_prepare,
    set_autobatch_engine, node_desc,
    AB_ON, AB_BCAST, AB_IDX, AB_ALIAS, AB_PARAM, AB_AUXSLICE, AB_AUXHEAD, AB_SHARE_ODD, AB_PTR_ALL, ABA_NO, ABA_CAT,
    ABA_SHARE, ABA_CATAUX,
    F_DONE, F_NG, F_PGRAD, F_FIXED, F_AB, F_PTRS, F_GFRESH, F_VIA_ALIAS, MAX_ELEMS, DEV_CPU)
import numpy as np


cdef enum:
    ABA_PTR = 3     # a concatenated argument passed per member (F_PTRS): an array of element pointers


ctypedef struct Batch:
    int pn          # the pseudo-node's index in BN; its arguments follow at pn + 1 ..
    int nargs
    int m           # members
    int mem         # BI offset of the member ids (a member is -1 after cg_revert dropped it)
    int amap        # BI offset of the argument map: per argument 1 + 3m ints
                    # [mode (ABA_SHARE, ABA_CAT or ABA_PTR), m argument node ids, m offsets (items),
                    #  m lengths (items)]
    long total      # output items of the whole batch


# ---------------------------------------------------------------- state of the current graph

cdef Node* BN = NULL        # pseudo-nodes and their arguments
cdef int nbn = 0, cbn = 0
cdef int* BI = NULL         # their argument/index lists, member lists, argument maps
cdef long nbi = 0, cbi = 0
cdef Batch* BT = NULL       # the batches executed in this graph
cdef int nbt = 0
cdef long cbt = 0
cdef int* LOG = NULL        # executed units in order: node id >= 0 (single), -1 - batch index
cdef long nlog = 0, clog = 0

# per forward call (grown, reused)
cdef int* SIG = NULL
cdef int* DEPTH = NULL
cdef int* LEFT = NULL
cdef int* SSTART = NULL
cdef int* SLIST = NULL
cdef int* NXT = NULL
cdef int* QUEUE = NULL
cdef int* MEMB = NULL
cdef int* NARG = NULL       # each node's argument count and ipool offset, read once from the nodes
cdef int* AOFF = NULL
cdef long cap_n = 0, cap_e = 0
cdef long* OKEY = NULL        # member sort keys (_order)
cdef long cap_k = 0
cdef char** PIECE = NULL      # a gather's or scatter-add's pieces (pointers, lengths) for the device
cdef long* PLEN = NULL
cdef long cap_p = 0, cap_pl = 0

# signature table (rebuilt per forward call)
cdef long* KEYS = NULL
cdef long nkeys = 0, ckeys = 0
cdef long* KOFF = NULL       # per sig id: key offset, key length
cdef int* KLEN = NULL
cdef unsigned long* KHASH = NULL
cdef int nsig = 0, csig = 0
cdef int* HT = NULL          # open addressing: sig id or 0
cdef int LASTSIG[256]        # per op code (at most 256, dyn/_core/core/graph.pyx): its last signature, or 0
cdef int htcap = 0
cdef double* SDSUM = NULL
cdef int* SCNT = NULL
cdef int* SHEAD = NULL       # ready members (linked through NXT)
cdef int* SREADY = NULL
cdef double* SAVG = NULL     # per sig id: its members' average depth (fixed once signatures are done)
cdef int* ACT = NULL         # the sig ids with ready members (unordered), nact of them
cdef int nact = 0

# statistics
cdef long st_nodes = 0, st_batches = 0, st_batched = 0, st_singles = 0, st_calls = 0
cdef long st_inplace = 0, st_permember = 0, st_gathered = 0, st_gbytes = 0
cdef double st_sched = 0, st_fwd = 0, st_bwd = 0, st_bwd_sched = 0
cdef long st_plan_hits = 0


cdef extern from "_ticks.h" nogil:
    unsigned long long dyn_ticks()


cdef bint _timing = False   # kernel time counted (stats' scheduling seconds): from the first stats() on


cdef inline unsigned long long _ticks() noexcept nogil:
    """The tick counter where kernel time is being counted, else 0: reading it costs about 10 ns,
    and a graph of one-node units reads it twice per unit."""
    return dyn_ticks() if _timing else 0


cdef inline double _now() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec + 1e-9 * t.tv_nsec


cdef int _grow(void** p, long* cap, long need, size_t item) except -1:
    cdef long c = cap[0]
    cdef void* q
    if need <= c:
        return 0
    if c < 64:
        c = 64
    while c < need:
        c *= 2
    q = realloc(p[0], <size_t>c * item)
    if q == NULL:
        raise MemoryError("dyn autobatching: bookkeeping")
    p[0] = q
    cap[0] = c
    return 0


cdef int _bn_take(int k) except -1:
    global nbn, cbn
    cdef long c = cbn
    _grow(<void**>&BN, &c, nbn + k, sizeof(Node))
    cbn = <int>c
    nbn += k
    return nbn - k


cdef long _bi_take(long k) except -1:
    global nbi
    _grow(<void**>&BI, &cbi, nbi + k, sizeof(int))
    nbi += k
    return nbi - k


cdef int _log(int u) except -1:
    global nlog
    _grow(<void**>&LOG, &clog, nlog + 1, sizeof(int))
    LOG[nlog] = u
    nlog += 1
    return 0


cdef list _HOST_PTRS = []     # pointer arrays of a device whose memory is not the host's (this graph's)


cdef void _reset(int n) noexcept:
    """The graph was emptied (n == 0) or cut back to its first n nodes."""
    global nbn, nbi, nbt, nlog
    cdef long i, j, k
    cdef Batch* b
    if n <= 0:
        nbn = 0
        nbi = 0
        nbt = 0
        nlog = 0
        if _HOST_PTRS:
            del _HOST_PTRS[:]
        return
    # cg_revert: forget the units of dropped nodes; batches keep their layout,
    # dropped members become -1 (their slots hold zeros in backward)
    k = 0
    for i in range(nlog):
        if LOG[i] >= 0 and LOG[i] >= n:
            continue
        LOG[k] = LOG[i]
        k += 1
    nlog = k
    for i in range(nbt):
        b = &BT[i]
        for j in range(b.m):
            if BI[b.mem + j] >= n:
                BI[b.mem + j] = -1


# ---------------------------------------------------------------- signatures

cdef inline int _resolve(Graph* g, int a) noexcept:
    """A weight alias stands for its argument inside batches."""
    cdef Node* x = &g.nodes[a]
    if ab_spec(x.op).flags & AB_ALIAS:
        return g.ipool[x.arg_off]
    return a


cdef inline int _argmode(Graph* g, Node* n, ABSpec* S, int k, int* off, Dim* wd) noexcept:
    cdef Node* a = arg(g, n, k)
    cdef int af
    off[0] = 0
    wd[0] = a.dim
    if S.argfn != NULL:
        return S.argfn(g, n, k, off, wd)
    af = ab_spec(a.op).flags
    if a.dim.bd == 1:
        if (k < 32 and (S.share >> k) & 1) or ((S.flags & AB_SHARE_ODD) and (k == 0 or k % 2 == 1)):
            return ABA_SHARE
        if (af & (AB_PARAM | AB_ALIAS)) and (S.flags & AB_BCAST):
            return ABA_SHARE
    if a.dim.bd == n.dim.bd:
        return ABA_CAT
    if a.dim.bd == 1 and (S.flags & AB_BCAST):
        return ABA_SHARE
    return ABA_NO


cdef long _kbuf[512]
cdef unsigned long _HMUL[16]
_HMUL[:] = [0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0xd6e8feb86659fd93,
            0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3, 0x589965cc75374cc3,
            0x1d8e4e27c47d124f, 0xc2b2ae3d27d4eb4f, 0x165667b19e3779f9, 0x85ebca77c2b2ae63,
            0x27d4eb2f165667c5, 0xff51afd7ed558ccd, 0xc4ceb9fe1a85ec53, 0x2545f4914f6cdd1d]


cdef inline bint _keys_equal(long* key, int kn) noexcept:
    """key[0..kn) equals _kbuf's: a key is a few dozen words, shorter than memcmp's call pays for
    (most keys compared are equal, so every word is read)."""
    cdef int j
    for j in range(kn):
        if key[j] != _kbuf[j]:
            return False
    return True


cdef int _signature(Graph* g, int i) except -1:
    """0: runs alone; else the id of the node's signature in this forward call."""
    global nkeys, nsig
    cdef Node* n = &g.nodes[i]
    cdef ABSpec* S = ab_spec(n.op)
    cdef int k, j, mode, off, kn = 0, nd
    cdef Dim wd
    cdef unsigned long h
    cdef int s, slot
    cdef long a
    if not (S.flags & AB_ON) or n.nargs == 0 or n.pyref >= 0 or (n.flags & F_FIXED):
        return 0
    if 12 + 2 * 6 + 10 + n.nargs * 10 + (0 if S.flags & AB_IDX else n.nidx) > 512:
        return 0
    _kbuf[kn] = n.op; kn += 1
    _kbuf[kn] = n.nargs; kn += 1
    if S.flags & AB_IDX:
        if n.nidx != n.dim.bd:
            return 0
    else:
        _kbuf[kn] = n.nidx; kn += 1
        for j in range(n.nidx):
            _kbuf[kn] = g.ipool[n.idx_off + j]; kn += 1
    for j in range(6):
        if (S.iamask >> j) & 1:
            _kbuf[kn] = n.ia[j]; kn += 1
    memcpy(&_kbuf[kn], &n.fa[0], 2 * sizeof(double)); kn += 2
    _kbuf[kn] = <long>n.ptr; kn += 1
    _kbuf[kn] = <long>n.gptr; kn += 1
    _kbuf[kn] = n.dim.nd; kn += 1
    for j in range(n.dim.nd):
        _kbuf[kn] = n.dim.d[j]; kn += 1
    _kbuf[kn] = n.dim.bd; kn += 1
    for k in range(n.nargs):
        mode = _argmode(g, n, S, k, &off, &wd)
        if mode == ABA_NO:
            return 0
        _kbuf[kn] = mode; kn += 1
        if mode == ABA_SHARE:
            _kbuf[kn] = _resolve(g, g.ipool[n.arg_off + k]); kn += 1
        else:
            _kbuf[kn] = wd.nd; kn += 1
            for j in range(wd.nd):
                _kbuf[kn] = wd.d[j]; kn += 1
            _kbuf[kn] = wd.bd; kn += 1
    # the op's last signature first: alike nodes of one op usually come in runs (no hashing)
    s = LASTSIG[n.op]
    if s and KLEN[s] == kn and _keys_equal(&KEYS[KOFF[s]], kn):
        return s
    # every word times its own odd constant: independent products, not a serial chain (the key is
    # compared whole on a hit, so the hash only has to spread)
    h = <unsigned long>kn
    for j in range(kn):
        h += <unsigned long>_kbuf[j] * _HMUL[j & 15]
    h ^= h >> 31
    h *= 0x9e3779b97f4a7c15UL
    h ^= h >> 29
    slot = <int>(h & (htcap - 1))
    while HT[slot] != 0:
        s = HT[slot]
        if KHASH[s] == h and KLEN[s] == kn and _keys_equal(&KEYS[KOFF[s]], kn):
            LASTSIG[n.op] = s
            return s
        slot = (slot + 1) & (htcap - 1)
    # a new signature
    if nsig + 2 > csig or 2 * (nsig + 2) > htcap:
        _grow_sigs()
        return _signature(g, i)
    nsig += 1
    s = nsig
    _grow(<void**>&KEYS, &ckeys, nkeys + kn, sizeof(long))
    memcpy(&KEYS[nkeys], _kbuf, kn * sizeof(long))
    KOFF[s] = nkeys
    KLEN[s] = kn
    KHASH[s] = h
    nkeys += kn
    HT[slot] = s
    LASTSIG[n.op] = s
    SDSUM[s] = 0
    SCNT[s] = 0
    SHEAD[s] = -1
    SREADY[s] = 0
    return s


cdef int _grow_sigs() except -1:
    """Double the signature arrays and rehash."""
    global csig, htcap, HT, KOFF, KLEN, KHASH, SDSUM, SCNT, SHEAD, SREADY, SAVG, ACT
    cdef long c = csig
    cdef int s, slot
    c = c * 2 if c else 256
    KOFF = <long*>realloc(KOFF, c * sizeof(long))
    KLEN = <int*>realloc(KLEN, c * sizeof(int))
    KHASH = <unsigned long*>realloc(KHASH, c * sizeof(unsigned long))
    SDSUM = <double*>realloc(SDSUM, c * sizeof(double))
    SCNT = <int*>realloc(SCNT, c * sizeof(int))
    SHEAD = <int*>realloc(SHEAD, c * sizeof(int))
    SREADY = <int*>realloc(SREADY, c * sizeof(int))
    SAVG = <double*>realloc(SAVG, c * sizeof(double))
    ACT = <int*>realloc(ACT, c * sizeof(int))
    if (KOFF == NULL or KLEN == NULL or KHASH == NULL or SDSUM == NULL or SCNT == NULL or SHEAD == NULL
            or SREADY == NULL or SAVG == NULL or ACT == NULL):
        raise MemoryError("dyn autobatching: signature table")
    csig = <int>c
    free(HT)
    htcap = 2 * csig
    HT = <int*>calloc(htcap, sizeof(int))
    if HT == NULL:
        raise MemoryError("dyn autobatching: signature table")
    for s in range(1, nsig + 1):
        slot = <int>(KHASH[s] & (htcap - 1))
        while HT[slot] != 0:
            slot = (slot + 1) & (htcap - 1)
        HT[slot] = s
    return 0


cdef int _clear_sigs() except -1:
    global nsig, nkeys
    if htcap == 0:
        _grow_sigs()
    elif nsig > 0:
        memset(HT, 0, htcap * sizeof(int))
    memset(LASTSIG, 0, sizeof(LASTSIG))
    nsig = 0
    nkeys = 0
    return 0


# ---------------------------------------------------------------- plans of repeated graphs
# A training loop builds graphs of a few shapes over and over (a tagger: one per sentence length).
# What the agenda decides (which nodes run together, in which order) depends only on what the
# signatures read, so a forward over a whole graph first writes those fields of every node into a
# record (REC): op, argument count and ids, Dim, and for non-leaves the attributes, scratch size,
# per-op pointers and index lists (a leaf's value, index list and pointers cannot change the
# plan: leaves run alone, and their consumers' signatures read only their op and Dim). A graph
# whose record equals a stored plan's, compared whole, replays the plan's units: the same kernel
# calls in the same order, on the same batches, so values and gradients are those of the agenda
# bit for bit, without its signatures, dependency lists and selection. Plans are found by a quick
# hash of the nodes' ops, argument ids and Dims (_shape_hash): a shape seen for the first time
# costs no record, the second time its record and units are stored, and from then on a graph of
# that hash whose record equals the plan's replays it. Graphs computed in several forward calls
# (nodes already computed below the first) are not recorded.
#
# A whole graph on the CPU that ran no batch and drew no random number (the generator's state
# unchanged) makes its hash plain (_PLAN_PLAIN): from then on a graph of that hash runs in node
# order, as the plain executor does, with neither record nor agenda. Node order is right for any
# graph, so this needs no record: a graph the hash mistakes for a plain one (one that differs
# from it only in what the hash does not read, such as pick_range's range) loses only its
# batches, never a value.
#
# Past PLAN_MAX plans (or PLAN_BYTES of them) all are dropped. Where graphs repeat, but each only
# after more than PLAN_MAX others (a Tree-LSTM or a tagger with character features over a corpus
# of a few hundred to a few thousand sentences, from the second epoch on), every graph is stored
# and dropped before its next sighting: the record and store buy nothing. On a character tagger's
# graphs (about 350 nodes) a store added about 13 us to the forward's scheduling and a replay took
# about 40 us off it, so plans pay where one in three replays. When the plans are dropped and
# fewer than one in PLAN_MIN_HIT of those stored since the last drop has replayed, the engine
# rests: it neither hashes nor records the next plan_rest_len whole graphs (4 PLAN_MAX at first,
# doubled each time a rest follows a rest, up to 256 PLAN_MAX; back to 4 PLAN_MAX after plans
# that replayed), then starts over. Results do not depend on it: a replay runs the agenda's batches.

cdef struct Plan:
    long nrec
    long nunits
    long* rec
    int* units         # per unit: m, then m node ids (m == 1: a single node, run as the agenda does)

cdef bint plan_on = True
cdef long* REC = NULL
cdef long nrec = 0, crec = 0
cdef Plan* PLANS = NULL
cdef int nplans = 0
cdef long plan_bytes = 0
cdef int PLAN_CAP = 256
cdef int PLAN_MAX = PLAN_CAP                # plans kept; past it (or PLAN_BYTES) all are dropped
cdef long PLAN_BYTES = 64 << 20
cdef bint plan_hash_real = True             # test hook: False gives every graph one shape hash
cdef dict _PLAN_IX = {}                     # shape hash -> index in PLANS
cdef set _PLAN_SEEN = set()                 # shape hashes seen once (no plan stored yet)
cdef set _PLAN_PLAIN = set()                # shape hashes whose graph ran no batch: run in node order
cdef long st_plain_runs = 0                 # forwards run in node order by _PLAN_PLAIN (statistics)
cdef int PLAN_MIN_HIT = 3                   # below one replay per 3 plans stored: rest
cdef long gen_stored = 0, gen_hits = 0      # plans stored and replayed since plans were last dropped
cdef long plan_rest = 0                     # whole graphs left to run without hash or record
cdef long plan_rest_len = 4 * PLAN_CAP      # the next rest's length
cdef long st_plan_rests = 0                 # rests begun (statistics)


def _set_plan_cache(bint on):
    """Test hook: replay the plans of repeated graphs (default) or always run the agenda."""
    global plan_on
    plan_on = on
    _plans_reset()


def _plan_rest():
    """Whole graphs left to run before the engine hashes and records graphs again (tests)."""
    return plan_rest


def _plans():
    """Plans stored (tests)."""
    return nplans


def _plain_shapes():
    """Shape hashes known to run no batch (tests)."""
    return len(_PLAN_PLAIN)


def _set_plan_limits(int max_plans=256, long max_bytes=64 << 20):
    """Test hook: at most max_plans (<= 256) plans and max_bytes of them are kept."""
    global PLAN_MAX, PLAN_BYTES
    PLAN_MAX = max(1, min(max_plans, PLAN_CAP))
    PLAN_BYTES = max_bytes
    _plans_reset()


def _set_plan_hash(bint real):
    """Test hook: real=False gives every graph the same shape hash, so only the whole-record
    comparison tells graphs apart."""
    global plan_hash_real
    plan_hash_real = real
    _plans_reset()


cdef void _plans_clear() noexcept:
    global nplans, plan_bytes, gen_stored, gen_hits
    cdef int i
    for i in range(nplans):
        free(PLANS[i].rec)
        free(PLANS[i].units)
    nplans = 0
    plan_bytes = 0
    gen_stored = gen_hits = 0
    _PLAN_IX.clear()
    _PLAN_SEEN.clear()
    _PLAN_PLAIN.clear()


cdef void _plans_reset() noexcept:
    """No plans, no rest: as at the start (the test hooks)."""
    global plan_rest, plan_rest_len
    _plans_clear()
    plan_rest = 0
    plan_rest_len = 4 * PLAN_MAX


cdef bint _plans_full() noexcept:
    """Drop the plans to make room; True if the engine rests instead of storing (too few of the
    dropped plans replayed)."""
    global plan_rest, plan_rest_len, st_plan_rests
    cdef bint rest = gen_hits * PLAN_MIN_HIT < gen_stored
    _plans_clear()
    if not rest:
        plan_rest_len = 4 * PLAN_MAX
        return False
    plan_rest = plan_rest_len
    plan_rest_len = min(2 * plan_rest_len, 256 * PLAN_MAX)
    st_plan_rests += 1
    return True


cdef unsigned long _shape_hash(Graph* g, int N) noexcept:
    """A quick hash of nodes [0, N)'s ops, argument ids and Dims (never 0): plans are looked up by
    it, and a graph whose hash was never seen before costs no record."""
    cdef int i, j
    cdef Node* n
    cdef int* a
    cdef unsigned long h = <unsigned long>N * 0x9e3779b97f4a7c15UL + <unsigned long>PART_LIMIT
    cdef unsigned long x
    h += <unsigned long>(g.dtype * 4 + g.device) * 0xbf58476d1ce4e5b9UL
    for i in range(N):
        n = &g.nodes[i]
        x = <unsigned long>(n.op | (n.nargs << 8)) * _HMUL[i & 15]
        x += (<unsigned long>n.dim.nd + (<unsigned long>n.dim.bd << 8)
              + (<unsigned long>(n.dim.d[0] if n.dim.nd else 0) << 32)) * _HMUL[(i + 5) & 15]
        a = &g.ipool[n.arg_off]
        for j in range(n.nargs):
            x += <unsigned long>a[j] * _HMUL[(i + j + 9) & 15]
        h += x ^ (x >> 29)
    h ^= h >> 31
    h *= 0x9e3779b97f4a7c15UL
    h ^= h >> 29
    if not plan_hash_real:
        return 1
    return h if h else 1


cdef int _record(Graph* g, int N) except -1:
    """Write the record of nodes [0, N) into REC (nrec words)."""
    global nrec
    cdef int i
    cdef long k = 0, w, nw
    cdef Node* n
    for i in range(N):
        n = &g.nodes[i]
        nw = 15 + (n.nargs + 1) // 2 + ((n.nidx + 1) // 2 if n.nargs else 0)
        if k + nw > crec:
            _grow(<void**>&REC, &crec, k + nw, sizeof(long))
        REC[k] = n.op | (<long>(n.pyref >= 0) << 8) | (<long>((n.flags & F_FIXED) != 0) << 9) | (<long>n.nargs << 10)
        REC[k + 1] = <long>n.dim.nd | (<long>n.dim.bd << 32)
        REC[k + 2] = 0                                  # the Dim's sizes: its nd entries only (the
        REC[k + 3] = 0                                  # rest of d[7] may hold anything), in 4 words
        REC[k + 4] = 0
        REC[k + 5] = 0
        memcpy(&REC[k + 2], &n.dim.d[0], n.dim.nd * sizeof(int))
        k += 6
        if n.nargs == 0:
            continue
        REC[k] = n.nidx
        REC[k + 1] = n.naux
        REC[k + 2] = <long>n.ptr
        REC[k + 3] = <long>n.gptr
        memcpy(&REC[k + 4], &n.ia[0], 6 * sizeof(int))     # words 4..6
        memcpy(&REC[k + 7], &n.fa[0], 2 * sizeof(double))  # words 7..8
        k += 9
        w = (n.nargs + 1) // 2
        REC[k + w - 1] = 0
        memcpy(&REC[k], &g.ipool[n.arg_off], n.nargs * sizeof(int))
        k += w
        if n.nidx and not (ab_spec(n.op).flags & AB_IDX):
            w = (n.nidx + 1) // 2
            REC[k + w - 1] = 0
            memcpy(&REC[k], &g.ipool[n.idx_off], n.nidx * sizeof(int))
            k += w
    nrec = k
    return 0


cdef int _plan_find(unsigned long h) except -2:
    """The stored plan of shape hash h if its record equals REC (compared whole), or -1."""
    cdef object ix = _PLAN_IX.get(h)
    cdef int p
    if ix is None:
        return -1
    p = <int>ix
    if PLANS[p].nrec != nrec or memcmp(PLANS[p].rec, REC, nrec * sizeof(long)) != 0:
        return -1
    return p


cdef int _plan_store(unsigned long h, long nlog0) noexcept:
    """Keep the units this forward ran (LOG[nlog0:]) as the plan of the record in REC, under shape
    hash h (a plan of the same hash but another record is replaced). The forward has run: nothing
    here may fail it, so without memory no plan is kept."""
    global nplans, plan_bytes, PLANS, gen_stored
    cdef long r, nu = 0, k
    cdef int u, j, p
    cdef Batch* B
    cdef size_t bytes_
    for r in range(nlog0, nlog):
        u = LOG[r]
        nu += 2 if u >= 0 else 1 + BT[-1 - u].m
    bytes_ = nrec * sizeof(long) + nu * sizeof(int)
    if bytes_ > <size_t>(PLAN_BYTES // 4):
        return 0
    ix = _PLAN_IX.get(h)
    if ix is not None:              # a record with the same hash (rare): the newer one replaces it
        p = <int>ix
        if PLANS[p].nrec >= 0:
            plan_bytes -= PLANS[p].nrec * sizeof(long) + PLANS[p].nunits * sizeof(int)
        free(PLANS[p].rec)
        free(PLANS[p].units)
    else:
        if nplans >= PLAN_MAX or plan_bytes + <long>bytes_ > PLAN_BYTES:
            if _plans_full():
                return 0
        if PLANS == NULL:
            PLANS = <Plan*>malloc(PLAN_CAP * sizeof(Plan))
            if PLANS == NULL:
                return 0
        p = nplans
        nplans += 1
    PLANS[p].rec = <long*>malloc(nrec * sizeof(long) if nrec else 1)
    PLANS[p].units = <int*>malloc(nu * sizeof(int) if nu else 1)
    if PLANS[p].rec == NULL or PLANS[p].units == NULL:
        free(PLANS[p].rec)
        free(PLANS[p].units)
        PLANS[p].rec = NULL
        PLANS[p].units = NULL
        PLANS[p].nrec = -1          # never matches
        PLANS[p].nunits = 0
        return 0
    memcpy(PLANS[p].rec, REC, nrec * sizeof(long))
    PLANS[p].nrec = nrec
    k = 0
    for r in range(nlog0, nlog):
        u = LOG[r]
        if u >= 0:
            PLANS[p].units[k] = 1
            PLANS[p].units[k + 1] = u
            k += 2
        else:
            B = &BT[-1 - u]
            PLANS[p].units[k] = B.m
            for j in range(B.m):
                PLANS[p].units[k + 1 + j] = BI[B.mem + j]
            k += 1 + B.m
    PLANS[p].nunits = nu
    plan_bytes += bytes_
    gen_stored += 1
    _PLAN_IX[h] = p
    _PLAN_SEEN.discard(h)
    return 0


cdef double _run_unit(Graph* g, int* mem, int m) except -1:
    """Run one unit the agenda picked (or a plan recorded): a single node when m == 1, else the
    batch mem[0..m); returns the kernels' time in ticks."""
    global st_singles, st_batches, st_batched
    cdef unsigned long long c1
    if m == 1:
        c1 = _ticks()
        exec_node(mem[0])
        c1 = _ticks() - c1
        _log(mem[0])
        st_singles += 1
        return c1
    st_batches += 1
    st_batched += m
    return _run_batch(g, mem, m)


cdef double _replay(Graph* g, int p) except -1:
    """Run plan p's units (as the agenda ran them); returns the kernels' time in ticks."""
    cdef int* U = PLANS[p].units
    cdef long i = 0, nu = PLANS[p].nunits
    cdef double tk = 0
    while i < nu:
        tk += _run_unit(g, U + i + 1, U[i])
        i += 1 + U[i]
    return tk


# ---------------------------------------------------------------- forward

cdef int _cmp_int(const void* a, const void* b) noexcept nogil:
    cdef int x = (<int*>a)[0], y = (<int*>b)[0]
    return (x > y) - (x < y)


cdef int _cmp_long(const void* a, const void* b) noexcept nogil:
    cdef long x = (<long*>a)[0], y = (<long*>b)[0]
    return (x > y) - (x < y)


cdef inline long _consumer_sig(int i) noexcept:
    """1 + the signature of node i's first consumer in this forward call (0: none)."""
    return 1 + SIG[SLIST[SSTART[i]]] if SSTART[i] < SSTART[i + 1] else 0


cdef int _order(int* mem, int m, int c0) except -1:
    """A batch's member order: ascending ids, grouped by the signature of each member's first
    consumer when those differ. The members' outputs lie in this order, so a later batch of
    those consumers finds its arguments adjacent (e.g. the forward and backward LSTMs' stacked
    inputs of a tagger, made by one batch of concatenations, are read in place by each
    direction's input projection instead of gathered)."""
    global OKEY, cap_k
    cdef int j
    cdef long s0 = _consumer_sig(mem[0] - c0)
    cdef bint mixed = False, ascending = True
    for j in range(1, m):
        if mem[j] < mem[j - 1]:
            ascending = False
        if _consumer_sig(mem[j] - c0) != s0:
            mixed = True
    if not mixed:
        if not ascending:
            qsort(mem, m, sizeof(int), _cmp_int)
        return 0
    _grow(<void**>&OKEY, &cap_k, m, sizeof(long))
    for j in range(m):
        OKEY[j] = (_consumer_sig(mem[j] - c0) << 32) | mem[j]
    qsort(OKEY, m, sizeof(long), _cmp_long)
    for j in range(m):
        mem[j] = <int>(OKEY[j] & 0xffffffff)
    return 0


cdef int _ab_forward(int nid) except -1:
    global st_batches, st_batched, st_singles, st_plan_hits, nact, gen_hits, plan_rest, st_plain_runs
    cdef Graph* g = cg()
    cdef int ka = -1
    cdef int c0 = g.computed, N = nid - g.computed + 1
    cdef int i, j, k, a, s, d, best, m, q0 = 0, q1 = 0, done = 0, u
    cdef long e = 0
    cdef double t0 = _now(), tk = 0, t1, bestd, avg
    cdef unsigned long long c0t = _ticks(), c1   # kernel time in ticks (tk), seconds at the end
    cdef Node* n
    cdef unsigned long h = 0, hp = 0
    cdef long nlog0 = nlog, nb0 = st_batches
    cdef unsigned long long r0 = g.rng[0], r1 = g.rng[1]
    cdef int pl
    if N <= 0:
        return 0
    if plan_on and c0 == 0 and plan_rest > 0:
        plan_rest -= 1
    elif plan_on and c0 == 0:
        h = _shape_hash(g, N)
        if plan_hash_real and g.device == DEV_CPU:    # (a device's random draws are not g.rng's)
            if h in _PLAN_PLAIN:
                tk = _run_plain(g, N)
                st_plain_runs += 1
                _forward_done(g, nid, N, t0, tk, c0t)
                return 0
            hp = h
        if h in _PLAN_IX or h in _PLAN_SEEN:   # a shape seen before: its record (before any kernel
            _record(g, N)                      # runs: they may set fields it reads)
            pl = _plan_find(h)
            if pl >= 0:
                tk = _replay(g, pl)
                st_plan_hits += 1
                gen_hits += 1
                _forward_done(g, nid, N, t0, tk, c0t)
                return 0
        else:
            if len(_PLAN_SEEN) >= 8 * PLAN_MAX:
                _PLAN_SEEN.clear()
            _PLAN_SEEN.add(h)
            h = 0                               # first sighting: no plan kept
    _grow_nodes(N + 2)
    _clear_sigs()
    # 1. pending argument counts, depths, successor counts, signatures
    memset(SSTART, 0, (N + 2) * sizeof(int))
    for i in range(N):
        n = &g.nodes[c0 + i]
        k = 0
        d = 0
        NARG[i] = n.nargs
        AOFF[i] = n.arg_off
        for j in range(n.nargs):
            a = g.ipool[n.arg_off + j] - c0
            if a >= 0:
                k += 1
                if DEPTH[a] + 1 > d:
                    d = DEPTH[a] + 1
                SSTART[a + 1] += 1
        LEFT[i] = k
        DEPTH[i] = d
        s = _signature(g, c0 + i)
        SIG[i] = s
        if s:
            SDSUM[s] += d
            SCNT[s] += 1
    for i in range(N):
        SSTART[i + 1] += SSTART[i]
    e = SSTART[N]
    _grow(<void**>&SLIST, &cap_e, e + 1, sizeof(int))
    for i in range(N):            # fill: SSTART[a] advances, then shifts back
        for j in range(NARG[i]):
            a = g.ipool[AOFF[i] + j] - c0
            if a >= 0:
                SLIST[SSTART[a]] = i
                SSTART[a] += 1
    for i in range(N, 0, -1):
        SSTART[i] = SSTART[i - 1]
    SSTART[0] = 0
    nact = 0
    for s in range(1, nsig + 1):
        SAVG[s] = SDSUM[s] / SCNT[s]
    for i in range(N):
        if LEFT[i] == 0:
            _ready(i, &q1)
    # 2. the agenda
    while done < N:
        if q0 < q1:
            c1 = _ticks()
            while q0 < q1:         # every ready node that cannot batch, in order
                i = QUEUE[q0]
                q0 += 1
                exec_node(c0 + i)
                _log(c0 + i)
                st_singles += 1
                done += 1
                _release(i, &q1)
            tk += _ticks() - c1
            continue
        best = 0
        bestd = 1e300
        for j in range(nact):          # the lowest average depth; on a tie, the lowest sig id
            s = ACT[j]
            avg = SAVG[s]
            if avg < bestd or (avg == bestd and s < best):
                bestd = avg
                best = s
                ka = j
        if best == 0:
            raise RuntimeError("dyn autobatching: no node is ready (a cycle?); %d of %d scheduled" % (done, N))
        m = SREADY[best]
        k = m
        u = SHEAD[best]
        while u >= 0:              # the list is in reverse order of readiness
            k -= 1
            MEMB[k] = c0 + u
            u = NXT[u]
        SHEAD[best] = -1
        SREADY[best] = 0
        nact -= 1
        ACT[ka] = ACT[nact]
        if m > 1:
            _order(MEMB, m, c0)
        j = 0
        while j < m:                  # in parts whose tensors each stay within MAX_ELEMS
            k = _part_end(g, MEMB, j, m)
            tk += _run_unit(g, MEMB + j, k - j)
            j = k
        done += m
        for j in range(m):
            _release(MEMB[j] - c0, &q1)
    if hp and st_batches == nb0 and g.rng[0] == r0 and g.rng[1] == r1 and hp not in _PLAN_IX:
        _plain_store(hp)
    elif h:
        _plan_store(h, nlog0)
    _forward_done(g, nid, N, t0, tk, c0t)
    return 0


cdef void _plain_store(unsigned long h) noexcept:
    """The graph of shape hash h ran no batch and drew no random number: graphs of that hash run
    in node order from now on, with neither record nor agenda."""
    if len(_PLAN_PLAIN) >= 8 * PLAN_MAX:
        _PLAN_PLAIN.clear()
    _PLAN_PLAIN.add(h)
    _PLAN_SEEN.discard(h)


cdef double _run_plain(Graph* g, int N) except -1:
    """Run nodes [0, N) one by one in node order, as the plain executor does; returns the kernels'
    time in ticks."""
    global st_singles
    cdef int i
    cdef unsigned long long c1 = _ticks()
    for i in range(N):
        exec_node(i)
        _log(i)
    st_singles += N
    return _ticks() - c1


cdef inline void _forward_done(Graph* g, int nid, int N, double t0, double tk, unsigned long long c0t) noexcept:
    global st_calls, st_nodes, st_fwd, st_sched
    cdef double t1
    g.computed = nid + 1
    st_calls += 1
    st_nodes += N
    t1 = _now() - t0
    st_fwd += t1
    if _timing:
        st_sched += t1 - _seconds(tk, t1, _ticks() - c0t)


cdef inline double _seconds(double ticks, double wall, unsigned long long span) noexcept:
    """Ticks in seconds, by the clock's reading of the span they were counted in."""
    return wall * ticks / span if span > 0 else 0.0


cdef long PART_LIMIT = MAX_ELEMS


def _set_part_limit(long n):
    """Test hook: the most elements a batch's output, scratch or arguments may hold (default and
    upper bound MAX_ELEMS), so the splitting of large batches can be tested on small tensors."""
    global PART_LIMIT
    PART_LIMIT = n if 0 < n < MAX_ELEMS else MAX_ELEMS
    _plans_reset()


cdef int _part_end(Graph* g, int* mem, int j0, int m) noexcept:
    """The end of the longest run mem[j0:end] (at least one node) whose batched output, scratch and
    gathered arguments each stay within PART_LIMIT elements (kernels count in C ints)."""
    cdef long out = 0, aux = 0, args = 0, w
    cdef int j, k
    cdef Node* n
    if m - j0 <= 1:                 # one node: nothing to split (most agenda picks in a chain)
        return m
    for j in range(j0, m):
        n = &g.nodes[mem[j]]
        out += dim_total(&n.dim)
        aux += n.naux
        w = 0
        for k in range(n.nargs):
            w += dim_total(&g.nodes[g.ipool[n.arg_off + k]].dim)
        args += w
        if j > j0 and (out > PART_LIMIT or aux > PART_LIMIT or args > PART_LIMIT):
            return j
    return m


cdef int _pieces(long m) except -1:
    """PIECE and PLEN hold at least m entries."""
    _grow(<void**>&PIECE, &cap_p, m, sizeof(char*))
    _grow(<void**>&PLEN, &cap_pl, m, sizeof(long))
    return 0


cdef int _grow_nodes(long need) except -1:
    """The per-node arrays (one capacity for all) hold at least need entries."""
    global cap_n, SIG, DEPTH, LEFT, SSTART, NXT, QUEUE, MEMB, NARG, AOFF
    cdef long c
    cdef void** arrays[9]
    cdef int k
    if need <= cap_n:
        return 0
    if need < 1024:
        need = 1024
    arrays[0], arrays[1], arrays[2], arrays[3] = <void**>&SIG, <void**>&DEPTH, <void**>&LEFT, <void**>&SSTART
    arrays[4], arrays[5], arrays[6] = <void**>&NXT, <void**>&QUEUE, <void**>&MEMB
    arrays[7], arrays[8] = <void**>&NARG, <void**>&AOFF
    for k in range(9):
        c = cap_n
        _grow(arrays[k], &c, need, sizeof(int))
    cap_n = c
    return 0


cdef inline void _ready(int i, int* q1) noexcept:
    global nact
    cdef int s = SIG[i]
    if s == 0:
        QUEUE[q1[0]] = i
        q1[0] += 1
    else:
        NXT[i] = SHEAD[s]
        SHEAD[s] = i
        if SREADY[s] == 0:
            ACT[nact] = s
            nact += 1
        SREADY[s] += 1


cdef inline void _release(int i, int* q1) noexcept:
    cdef int k, v
    for k in range(SSTART[i], SSTART[i + 1]):
        v = SLIST[k]
        LEFT[v] -= 1
        if LEFT[v] == 0:
            _ready(v, q1)


cdef inline bint _ptr_ok(ABSpec* S, int k) noexcept:
    return (S.ptrargs & AB_PTR_ALL) != 0 or (k < 31 and (S.ptrargs >> k) & 1)


cdef inline char* _member_grad(Graph* g, Batch* B, long base, int j, int nid) noexcept:
    """Where member j of batch B adds its argument's gradient (base: that argument's map in BI):
    NULL when cg_revert dropped the member, the argument lies beyond nid or takes no gradient."""
    cdef int u = BI[base + 1 + j]
    if BI[B.mem + j] < 0 or u > nid or g.nodes[u].g == NULL:
        return NULL
    return <char*>g.nodes[u].g + <size_t>BI[base + 1 + B.m + j] * g.itemsize


cdef inline long _aux_esz(Graph* g, int u) noexcept:
    """Scratch items per batch element of node u that an ABA_CATAUX pointer reaches: its
    AB_AUXHEAD part, or all of it."""
    cdef Node* n = &g.nodes[u]
    if ab_spec(n.op).flags & AB_AUXHEAD:
        return n.ia[5]
    return n.naux // n.dim.bd


cdef long _sink_items(Graph* g, Batch* B, long base, int m, long esz, bint withaux) noexcept:
    """Items of the sink that takes the element gradients (and, withaux, the aux) of a per-member
    argument's members without a gradient (base: its argument map in BI): an element's gradient,
    or its aux where that is larger. The aux size is read from the members cg_revert did not drop:
    a dropped member's argument id may name a node made after the revert, of another size."""
    cdef long out = esz, a
    cdef int j, u
    if not withaux:
        return out
    for j in range(m):
        u = BI[base + 1 + j]
        if (B != NULL and BI[B.mem + j] < 0) or u >= g.n:
            continue
        a = _aux_esz(g, u)
        out = a if a > out else out
    return out


cdef void** _ptr_array(Graph* g, bint fwd, size_t n) except NULL:
    """Room for n element pointers, which the kernels of the graph's device read: in its arena on
    the CPU; in host memory on another device (its kernels' launcher reads them on the host)."""
    if g.device == DEV_CPU:
        return <void**>arena_alloc(&g.fx if fwd else &g.dx, n * sizeof(void*))
    a = np.zeros(n if n else 1, np.uintp)
    _HOST_PTRS.append(a)
    return <void**><size_t>a.ctypes.data


cdef void** _elem_ptrs(Graph* g, long base, int m, int nel, Batch* B, int nid, bint withaux) except NULL:
    """The batch elements (nel per member) of an argument passed per member (ABA_PTR; base: its
    argument map in BI: m node ids, m offsets, m lengths in items). B NULL: the values; else the
    gradients of batch B's backward up to node nid, where the kernel adds directly: a member
    whose argument takes no gradient (or that cg_revert dropped) points at a scratch sink.
    withaux (ABA_CATAUX): the m * nel pointers are followed by as many pointers to the elements'
    aux; in backward the same, or the sink for a member without a gradient."""
    cdef int j, e, isz = g.itemsize, u
    cdef int* ids = &BI[base + 1]
    cdef long esz = ids[2 * m] // nel, asz = 0, n = <long>m * nel, ssz
    cdef void** pp = _ptr_array(g, B == NULL, <size_t>n * (2 if withaux else 1))
    cdef char* p
    cdef char* sink = NULL
    for j in range(m):
        u = ids[j]
        if withaux:
            asz = _aux_esz(g, u)
        if B == NULL:
            p = <char*>g.nodes[u].v + <size_t>ids[m + j] * isz
        else:
            p = _member_grad(g, B, base, j, nid)
        if p == NULL:
            if sink == NULL:
                # as large as any element the kernel reaches through it, gradient or aux, and zeroed
                # like all gradient memory (kernels add into it); see _sink_items
                ssz = _sink_items(g, B, base, m, esz, withaux)
                sink = <char*>arena_alloc(&g.dx, <size_t>ssz * isz)
                g.dev.zero(sink, <size_t>ssz * isz)
            for e in range(nel):
                pp[j * nel + e] = sink
                if withaux:
                    pp[n + j * nel + e] = sink
            continue
        for e in range(nel):
            pp[j * nel + e] = p + <size_t>e * esz * isz
            if withaux:
                pp[n + j * nel + e] = <char*>g.nodes[u].aux + <size_t>e * asz * isz
    return pp


cdef double _run_batch(Graph* g, int* mem, int m) except -1:
    """Run nodes mem[0..m) (same signature, in _order's order) as one node; returns the kernel's
    time in ticks (dyn_ticks)."""
    global nbt, st_inplace, st_permember, st_gathered, st_gbytes
    cdef Node* n0 = &g.nodes[mem[0]]
    cdef Node* n
    cdef Node* a
    cdef Node* P
    cdef ABSpec* S = ab_spec(n0.op)
    cdef int nargs = n0.nargs, isz = g.itemsize, j, k, mode, off, pn, stride = 1 + 3 * m
    cdef long total = 0, naux = 0, nidx = 0, argoff, idxoff, memoff, amap, o, tot, bd = 0, L
    cdef Dim wd, wd0
    cdef char* v
    cdef char* aux
    cdef char* p
    cdef char* buf
    cdef bint contiguous, slice_aux, head_aux, ptrs
    cdef int* ids
    cdef int u
    cdef char* q
    cdef Batch* B
    cdef Node* saved_nodes
    cdef int* saved_ipool
    cdef double tk
    cdef unsigned long long c1
    for j in range(m):
        n = &g.nodes[mem[j]]
        total += dim_total(&n.dim)
        naux += n.naux
        nidx += n.nidx
        bd += n.dim.bd
    pn = _bn_take(1 + nargs)
    argoff = _bi_take(nargs + nidx + m + <long>nargs * stride)
    idxoff = argoff + nargs
    memoff = idxoff + nidx
    amap = memoff + m
    n0 = &g.nodes[mem[0]]
    # outputs (and scratch) as one block; members get their slices
    v = <char*>arena_alloc(&g.fx, <size_t>total * isz)
    aux = <char*>arena_alloc(&g.fx, <size_t>naux * isz) if naux else NULL
    slice_aux = (S.flags & AB_AUXSLICE) != 0
    head_aux = (S.flags & AB_AUXHEAD) != 0
    o = 0
    L = 0
    k = 0
    for j in range(m):
        n = &g.nodes[mem[j]]
        n.v = v + <size_t>o * isz
        n.aux = (aux + <size_t>L * isz) if (aux != NULL and (slice_aux or head_aux)) else NULL
        n.flags |= F_DONE | F_AB
        o += dim_total(&n.dim)
        L += <long>n.ia[5] * n.dim.bd if head_aux else n.naux
        BI[memoff + j] = mem[j]
        if nidx:
            memcpy(&BI[idxoff + k], &g.ipool[n.idx_off], n.nidx * sizeof(int))
            k += n.nidx
    # arguments
    for k in range(nargs):
        BI[argoff + k] = pn + 1 + k
        mode = _argmode(g, n0, S, k, &off, &wd0)
        BI[amap + <long>k * stride] = mode
        if mode == ABA_SHARE:
            BN[pn + 1 + k] = g.nodes[_resolve(g, g.ipool[n0.arg_off + k])]
            continue
        contiguous = True
        L = dim_total(&wd0)             # the same for every member: the signature holds the Dim
        tot = L * m
        ids = &BI[amap + <long>k * stride + 1]
        p = NULL
        for j in range(m):
            n = &g.nodes[mem[j]]
            u = g.ipool[n.arg_off + k]
            off = 0
            if S.argfn != NULL:         # a window: the rule sets off (and wd)
                S.argfn(g, n, k, &off, &wd)
            ids[j] = u
            ids[m + j] = off
            ids[2 * m + j] = <int>L
            q = <char*>g.nodes[u].v + <size_t>off * isz
            if j > 0 and q != p:
                contiguous = False
            p = q + <size_t>L * isz
        a = arg(g, n0, k)
        ptrs = mode == ABA_CATAUX or (not contiguous and _ptr_ok(S, k))
        if ptrs:                        # the kernel reads each batch element where it lies
            st_permember += 1
            if mode != ABA_CATAUX:
                BI[amap + <long>k * stride] = ABA_PTR
            buf = <char*>_elem_ptrs(g, amap + <long>k * stride, m, wd0.bd, NULL, 0, mode == ABA_CATAUX)
        elif contiguous:
            buf = <char*>a.v + <size_t>BI[amap + <long>k * stride + 1 + m] * isz
            st_inplace += 1
        else:
            st_gathered += 1
            st_gbytes += tot * isz
            buf = <char*>arena_alloc(&g.fx, <size_t>tot * isz)
            _pieces(m)
            for j in range(m):
                n = &g.nodes[BI[amap + <long>k * stride + 1 + j]]
                PLEN[j] = BI[amap + <long>k * stride + 1 + 2 * m + j]
                PIECE[j] = <char*>n.v + <size_t>BI[amap + <long>k * stride + 1 + m + j] * isz
            g.dev.gather(buf, PIECE, PLEN, m, isz)
        P = &BN[pn + 1 + k]
        P[0] = a[0]
        P.v = buf
        P.g = NULL
        P.aux = NULL
        P.nargs = 0
        P.flags &= ~F_PGRAD
        if ptrs:
            P.flags |= F_PTRS
        P.dim = wd0
        P.dim.bd = wd0.bd * m
    # the batched node
    P = &BN[pn]
    P[0] = n0[0]
    P.arg_off = <int>argoff
    P.idx_off = <int>idxoff
    P.nidx = <int>nidx
    P.dim.bd = <int>bd
    P.v = v
    P.aux = aux
    P.naux = naux
    P.g = NULL
    # record it
    _grow(<void**>&BT, &cbt, nbt + 1, sizeof(Batch))
    B = &BT[nbt]
    B.pn = pn
    B.nargs = nargs
    B.m = m
    B.mem = <int>memoff
    B.amap = <int>amap
    B.total = total
    _log(-1 - nbt)
    nbt += 1
    # run the op's kernel on it, with the side tables in place of the graph's
    saved_nodes, saved_ipool = g.nodes, g.ipool
    g.nodes, g.ipool = BN, BI
    if S.fix != NULL:
        S.fix(g, &BN[pn])
    c1 = _ticks()
    run_fwd(g, &BN[pn])
    tk = _ticks() - c1
    g.nodes, g.ipool = saved_nodes, saved_ipool
    if g.kerr:
        raise_kernel_error()
    if g.check:
        for j in range(m):
            check_finite(mem[j])
    return tk



# ---------------------------------------------------------------- backward

cdef int* _lr_inb = NULL     # _ab_backward's batch of each node, for _lr_shared


cdef bint _lr_shared(int u, int j) noexcept:
    """Whether argument j of live node u is one argument of one kernel call in this pass: u runs
    alone, or in a batch that shares the argument (lr_prepare)."""
    cdef int bi = _lr_inb[u]
    if bi < 0:
        return True
    return BI[BT[bi].amap + <long>j * (1 + 3 * BT[bi].m)] == ABA_SHARE


cdef int _ab_backward(int nid, bint full) except -1:
    global st_bwd, st_bwd_sched, _lr_inb
    cdef Graph* g = cg()
    cdef int i, j, u, bi, isz = g.itemsize, r
    cdef long need = 0, o
    cdef size_t zoff
    cdef Node* n
    cdef Node* P
    cdef Batch* B
    cdef unsigned char* live = NULL
    cdef unsigned char* blive = NULL
    cdef int* inb = NULL
    cdef char* blk
    cdef double t0 = _now(), tk = 0, t1
    cdef unsigned long long c0t = _ticks(), c1 = 0   # kernel time in ticks (tk)
    cdef bint run = False                               # in a run of single nodes (timed as one)
    live = <unsigned char*>calloc(nid + 1, 1)
    blive = <unsigned char*>calloc(nbt + 1, 1)
    inb = <int*>malloc((g.n + 1) * sizeof(int))
    if live == NULL or blive == NULL or inb == NULL:
        free(live)
        free(blive)
        free(inb)
        raise MemoryError()
    try:
        for i in range(g.n):
            inb[i] = -1
        for bi in range(nbt):
            B = &BT[bi]
            for j in range(B.m):
                u = BI[B.mem + j]
                if u >= 0:
                    inb[u] = bi
        mark_live(nid, full, live)
        _lr_inb = inb
        lr_prepare(nid, live, _lr_shared)
        for i in range(nid + 1):
            n = &g.nodes[i]
            if live[i]:
                if inb[i] >= 0:
                    blive[inb[i]] = 1
                elif not (n.flags & F_PGRAD):
                    need += round_up(<size_t>dim_total(&n.dim) * isz)
        for bi in range(nbt):
            if blive[bi]:
                need += round_up(<size_t>BT[bi].total * isz) + _temp_bytes(&BT[bi], isz)
        arena_reserve(&g.dx, need)
        mark_fresh(nid, live, inb)      # the fresh gradients first, then what is zeroed
        zoff = g.dx.used
        for i in range(g.n):
            n = &g.nodes[i]
            if i > nid or inb[i] >= 0 or not live[i]:
                n.g = NULL
            elif n.flags & F_PGRAD:
                n.g = n.gptr
            elif not (n.flags & F_GFRESH):
                n.g = arena_alloc(&g.dx, <size_t>dim_total(&n.dim) * isz)
        for bi in range(nbt):
            if not blive[bi]:
                continue
            B = &BT[bi]
            blk = <char*>arena_alloc(&g.dx, <size_t>B.total * isz)
            BN[B.pn].g = blk
            o = 0
            for j in range(B.m):
                u = BI[B.mem + j]
                P = &g.nodes[u] if u >= 0 else NULL
                if P != NULL:
                    P.g = blk + <size_t>o * isz
                    o += dim_total(&P.dim)
                else:                   # a member cg_revert dropped: same Dim as the others
                    o += B.total // B.m
        if not seed_backward(nid, live, zoff):
            return 0
        if nbt == 0:
            # nothing ran batched: the plain executor's order (node ids downwards), so that each
            # gradient sums its terms in the same order as with the engine off, bit for bit, and
            # memory is last touched as it would be there (after the engine's order, the trainer's
            # update that follows an RNN LM step was 31-53 us slower)
            c1 = _ticks()
            backward_nodes(nid, live)
            tk += _ticks() - c1
        else:
            for r in range(nlog - 1, -1, -1):   # the executed units in reverse
                u = LOG[r]
                if u >= 0:
                    if u > nid or not live[u]:
                        continue
                    if not run:
                        c1 = _ticks()
                        run = True
                    node_backward(u, live)
                    if g.kerr:
                        raise_kernel_error()
                    continue
                bi = -1 - u
                if not blive[bi]:
                    continue
                if run:
                    tk += _ticks() - c1
                    run = False
                tk += _batch_backward(g, &BT[bi], live, nid)
            if run:
                tk += _ticks() - c1
    finally:
        free(live)
        free(blive)
        free(inb)
    t1 = _now() - t0
    st_bwd += t1
    if _timing:
        st_bwd_sched += t1 - _seconds(tk, t1, _ticks() - c0t)
    return 0


cdef size_t _temp_bytes(Batch* B, int isz) noexcept:
    """An upper bound of the gather buffers B's backward may take (so the
    gradient arena is reserved in one block and not re-allocated next time)."""
    cdef int k, j, stride = 1 + 3 * B.m
    cdef long base, tot
    cdef size_t out = 0
    for k in range(B.nargs):
        base = B.amap + <long>k * stride
        if BI[base] == ABA_PTR:         # the pointer array and a sink for members without a gradient
            out += round_up(<size_t>BN[B.pn + 1 + k].dim.bd * sizeof(void*)) + round_up(
                <size_t>BI[base + 1 + 2 * B.m] * isz)
            continue
        if BI[base] == ABA_CATAUX:      # the same with the aux pointers (a sink of the larger size)
            tot = _sink_items(cg(), B, base, B.m, BI[base + 1 + 2 * B.m], True)
            out += round_up(<size_t>BN[B.pn + 1 + k].dim.bd * 2 * sizeof(void*)) + round_up(<size_t>tot * isz)
            continue
        if BI[base] != ABA_CAT:
            continue
        tot = 0
        for j in range(B.m):
            tot += BI[base + 1 + 2 * B.m + j]
        out += round_up(<size_t>tot * isz)
    return out


cdef double _batch_backward(Graph* g, Batch* B, unsigned char* live, int nid) except -1:
    cdef Node* P = &BN[B.pn]
    cdef Node* A
    cdef Node* x
    cdef int k, j, u, m = B.m, stride = 1 + 3 * B.m, isz = g.itemsize, mode, need
    cdef long base, tot, o, L, off
    cdef char* q
    cdef char* buf
    cdef bint direct, via
    cdef Node* saved_nodes
    cdef int* saved_ipool
    cdef double tk = 0
    cdef unsigned long long c1
    cdef char* temps[64]
    cdef char** tp = temps
    if B.nargs > 64:
        tp = <char**>malloc(B.nargs * sizeof(char*))
        if tp == NULL:
            raise MemoryError()
    try:
        for k in range(B.nargs):
            tp[k] = NULL
            base = B.amap + <long>k * stride
            mode = BI[base]
            A = &BN[B.pn + 1 + k]
            if mode == ABA_SHARE:
                u = _resolve_bn(g, B, k, &via)
                A[0] = g.nodes[u]
                if via:
                    A.flags |= F_VIA_ALIAS
                if u > nid or not live[u]:
                    A.g = NULL
                continue
            if mode == ABA_PTR or mode == ABA_CATAUX:   # the members' element gradients, added to in place
                A.g = NULL
                for j in range(m):
                    if _member_grad(g, B, base, j, nid) != NULL:
                        A.g = _elem_ptrs(g, base, m, A.dim.bd // m, B, nid, mode == ABA_CATAUX)
                        break
                continue
            need = 0
            direct = True
            q = NULL
            tot = 0
            for j in range(m):
                u = BI[base + 1 + j]
                off = BI[base + 1 + m + j]
                L = BI[base + 1 + 2 * m + j]
                tot += L
                if BI[B.mem + j] < 0 or u > nid:
                    direct = False
                    continue
                x = &g.nodes[u]
                if live[u]:
                    need = 1
                if x.g == NULL:
                    direct = False
                    continue
                if j > 0 and <char*>x.g + <size_t>off * isz != q:
                    direct = False
                q = <char*>x.g + <size_t>(off + L) * isz
            if not need:
                A.g = NULL
                continue
            if direct:
                A.g = <char*>g.nodes[BI[base + 1]].g + <size_t>BI[base + 1 + m] * isz
            else:
                buf = <char*>arena_alloc(&g.dx, <size_t>tot * isz)
                g.dev.zero(buf, <size_t>tot * isz)
                A.g = buf
                tp[k] = buf
        saved_nodes, saved_ipool = g.nodes, g.ipool
        g.nodes, g.ipool = BN, BI
        c1 = _ticks()
        for k in range(B.nargs):
            if BN[B.pn + 1 + k].g != NULL:
                run_bwd(g, &BN[B.pn], k)
        tk = _ticks() - c1
        g.nodes, g.ipool = saved_nodes, saved_ipool
        if g.kerr:
            raise_kernel_error()
        # scatter-add the gathered argument gradients
        for k in range(B.nargs):
            if tp[k] == NULL:
                continue
            base = B.amap + <long>k * stride
            _pieces(m)
            for j in range(m):
                PLEN[j] = BI[base + 1 + 2 * m + j]
                PIECE[j] = _member_grad(g, B, base, j, nid)
            g.dev.scatter_add(PIECE, tp[k], PLEN, m, g.dtype)
    finally:
        if tp != temps:
            free(tp)
    return tk


cdef int _resolve_bn(Graph* g, Batch* B, int k, bint* via) noexcept:
    """The node a shared argument k of batch B stands for (its first live member's); via: whether
    that member reads it through a weight alias."""
    cdef int j, u, a
    via[0] = False
    for j in range(B.m):
        u = BI[B.mem + j]
        if u >= 0:
            a = g.ipool[g.nodes[u].arg_off + k]
            u = _resolve(g, a)
            via[0] = u != a
            return u
    return 0


# ---------------------------------------------------------------- Python API

def stats(bint reset=False):
    """Counters of the engine since the last reset (see dyn.graph.autobatch_stats). The first call
    starts the counting of kernel time, from which the scheduling seconds come (until then the
    engine does not read the tick counter around its kernels)."""
    global st_nodes, st_batches, st_batched, st_singles, st_calls, st_sched, st_fwd, st_bwd, st_bwd_sched
    global st_inplace, st_permember, st_gathered, st_gbytes, _timing, st_plan_hits, st_plan_rests
    global st_plain_runs
    _timing = True
    out = {"forward_calls": st_calls, "nodes": st_nodes, "batches": st_batches, "batched_nodes": st_batched,
           "singles": st_singles, "args_in_place": st_inplace, "args_per_member": st_permember,
           "args_gathered": st_gathered, "gathered_bytes": st_gbytes,
           "schedule_s": st_sched + st_bwd_sched, "forward_schedule_s": st_sched,
           "backward_schedule_s": st_bwd_sched, "forward_s": st_fwd, "backward_s": st_bwd,
           "plan_replays": st_plan_hits, "plans_stored": nplans, "plan_rests": st_plan_rests,
           "plain_runs": st_plain_runs, "plain_shapes": len(_PLAN_PLAIN)}
    if reset:
        st_nodes = st_batches = st_batched = st_singles = st_calls = 0
        st_inplace = st_permember = st_gathered = st_gbytes = 0
        st_sched = st_fwd = st_bwd = st_bwd_sched = 0
        st_plan_hits = st_plan_rests = st_plain_runs = 0
    return out


def batches():
    """The batches of the current graph: a list of member-id lists (for tests and profiling)."""
    return [[BI[BT[b].mem + j] for j in range(BT[b].m)] for b in range(nbt)]


set_autobatch_engine(_ab_forward, _ab_backward, _reset)


def _debug_signatures():
    """Signature ids of every node of the current graph (tests and debugging)."""
    cdef Graph* g = cg()
    _clear_sigs()
    return [_signature(g, i) for i in range(g.n)]


def kernel_batchable(str name):
    """Whether the compiled kernel `name` declares how its nodes batch."""
    from dyn._core.core.graph import op_code
    return bool(ab_spec(op_code(name)).flags & AB_ON)


def _value_address(int nid):
    """Address of a node's value (tests: batch members are adjacent)."""
    return <size_t>cg().nodes[nid].v
