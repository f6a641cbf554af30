# cython: language_level=3, boundscheck=False, wraparound=False
"""lstm_step's CPU kernels: one whole step of a standard LSTM as one node (the
builders' fast path, dyn/builders/lstm.py), the recurrent weight's deferred
gradient (lstm_step_weight), lstm_state_c and lstm_step_h/_c (their
definitions: dyn/_core/ops/rnn.pyx, which also tells the two kinds of step
apart: the public [h; c]-valued one and the builders' h-valued ones, HVAL).

A step is: gates from column `col` of the input projections P plus
Wh h_{t-1}, the nonlinearities, the cell and the output, all in one pass.
Gate rows are DyNet's order [i; f; o; g]. args: p, [prev], [Wh], [mask_h], [mask_g]
ia: 0 col, 1 flags (PREV, MASK_H, MASK_G, HVAL, PSTEP), 2 T (columns of p), 3 H, 4 h used in place
fa: 0 forget bias
aux: a per-element head (HVAL), then regions of B columns each (see Step)
"""
from libc.math cimport tanh
from libc.string cimport memcpy, memset
from dyn._core.core.graph cimport Graph, Node, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, dim_total, arg
from dyn._core.core.graph cimport F_AB, F_PTRS, F_VIA_ALIAS
from dyn._core.core.graph cimport elem_v, elem_g
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.cpu.outerq cimport outer_now, outer_queue, outer_flush
from dyn._core.ops.util cimport lstm_gate_act
from dyn._core.ops.rnn cimport PREV, MASK_H, MASK_G, HVAL, PSTEP, OP_STEP, OP_WEIGHT, OP_CELL, OP_PART

cdef extern from "_fastmath.h" nogil:
    void dyn_tanh_f32(float* y, const float* x, long n)

cdef extern from "_smallblas.h" nogil:
    void dyn_ger_f32(int m, int n, float alpha, const float* x, const float* y, float* A, int lda)

cdef extern from "_skinnygemm.h" nogil:
    void dyn_add_transposed(int m, int n, const float* T, int ldt, float beta, float* C, int ldc)

cdef enum:
    WT_MIN_B = 8    # the minibatch from which a step's backward multiplies by Wh's transpose
    # Wh of a step is 4H x H: up to H = 128 the compiled rank-1 update beats OpenBLAS's
    # per-call overhead (its ger is one axpy per column)
    SMALL = 4 * 128 * 128


cdef void _gemv(char ta, int m, int n, real* A, real* x, double beta, real* y) noexcept:
    """y = op(A) x + beta y for A m x n (lda m): blas.gemv, which takes float32 up to 4H x H at
    H = 128 through the compiled loops."""
    _blas.gemv(real_dtype(y), ta, m, n, 1.0, A, m, x, beta, y)


cdef void _ger(int m, int n, real* x, real* y, real* A) noexcept:
    if real is float and <long>m * n <= SMALL:
        dyn_ger_f32(m, n, 1.0, x, y, A, m)
    else:
        _blas.ger(real_dtype(A), m, n, 1.0, x, y, A, m)

# aux (items): with HVAL first a head of 2H per batch element, [c_t; d c_t from the next step]
# (DCIN: zeroed in forward, read and cleared by this step's backward; batch members get their
# elements' part of the head: AB_AUXHEAD, ia[5] = 2H), then regions of B columns each:
# gates after the nonlinearities 4H | d of the pre-activations 4H | tanh(c_t) H | d c_t H |
# (masked) h_{t-1} when not read in place H | Wh^T d H

ctypedef struct Step:
    int H, B, T, col, isz, flags
    Node* p
    Node* prev
    Node* Wh
    Node* mh
    Node* mg
    char* CS        # the head (HVAL)
    char* G
    char* D
    char* TC
    char* DC
    char* HM
    char* TMP
    char* X         # the h_{t-1} the product reads: prev's value in place, or HM
    int ldx


cdef inline char* _col4(Step* L, char* region, int b) noexcept nogil:
    """Batch element b (4H items) of the region G or D."""
    return region + <size_t>b * 4 * L.H * L.isz


cdef inline char* _col1(Step* L, char* region, int b) noexcept nogil:
    """Batch element b (H items) of the region TC, DC, HM or TMP."""
    return region + <size_t>b * L.H * L.isz


cdef inline char* _head(Step* L, int b) noexcept nogil:
    """Batch element b's [c_t; DCIN] (HVAL)."""
    return L.CS + <size_t>b * 2 * L.H * L.isz


cdef inline char* _prev_h(Step* L, int b) noexcept nogil:
    return elem_v(L.prev, b, L.H if L.flags & PSTEP else 2 * L.H, L.isz)


cdef inline char* _prev_aux(Node* a, int b, int H, int isz) noexcept nogil:
    """Batch element b's head [c; DCIN] of an h-valued step a, per member when a batch passes it."""
    if a.flags & F_PTRS:
        return (<char**>a.v)[a.dim.bd + b]
    return <char*>a.aux + (<size_t>b * 2 * H * isz if a.dim.bd > 1 else 0)


cdef inline char* _prev_c(Step* L, int b) noexcept nogil:
    if L.prev == NULL:
        return NULL
    if L.flags & PSTEP:
        return _prev_aux(L.prev, b, L.H, L.isz)
    return _prev_h(L, b) + <size_t>L.H * L.isz


cdef inline char* _prev_gc(Step* L, int b) noexcept nogil:
    """Where the gradient of c_{t-1} goes: prev's gradient [.; c], or an h-valued prev's DCIN."""
    cdef Node* a = L.prev
    if not (L.flags & PSTEP):
        return elem_g(a, b, 2 * L.H, L.isz) + <size_t>L.H * L.isz
    if a.flags & F_PTRS:
        return (<char**>a.g)[a.dim.bd + b] + <size_t>L.H * L.isz
    return _prev_aux(a, b, L.H, L.isz) + <size_t>L.H * L.isz


cdef inline char* _mask(Node* m, int b, int H, int isz) noexcept nogil:
    return NULL if m == NULL else <char*>m.v + (<size_t>b * H * isz if m.dim.bd > 1 else 0)


cdef void _layout(Graph* g, Node* n, Step* L, int isz) noexcept:
    """The node's buffers for items of isz bytes (the kernel's sizeof(real))."""
    cdef int k = 1, H = n.ia[3], B = n.dim.bd
    L.H = H
    L.B = B
    L.T = n.ia[2]
    L.col = n.ia[0]
    L.isz = isz
    L.flags = n.ia[1]
    L.p = arg(g, n, 0)
    L.prev = L.Wh = L.mh = L.mg = NULL
    if L.flags & PREV:
        L.prev = arg(g, n, 1)
        L.Wh = arg(g, n, 2)
        k = 3
    if L.flags & MASK_H:
        L.mh = arg(g, n, k)
        k += 1
    if L.flags & MASK_G:
        L.mg = arg(g, n, k)
    L.CS = <char*>n.aux
    L.G = L.CS + (<size_t>2 * H * B * isz if L.flags & HVAL else 0)
    L.D = L.G + <size_t>4 * H * B * isz
    L.TC = L.D + <size_t>4 * H * B * isz
    L.DC = L.TC + <size_t>H * B * isz
    L.HM = L.DC + <size_t>H * B * isz
    L.TMP = L.HM + <size_t>H * B * isz
    if n.ia[4] and not (L.prev.flags & F_PTRS):     # h_{t-1} read where prev lies
        L.X = <char*>L.prev.v
        L.ldx = H if L.flags & PSTEP else 2 * H
    else:
        L.X = L.HM
        L.ldx = H


cdef void _gather1(real* hm, real* ph, real* m, int H) noexcept nogil:
    cdef Py_ssize_t j
    if m == NULL:
        for j in range(H):
            hm[j] = ph[j]
    else:
        for j in range(H):
            hm[j] = ph[j] * m[j]


cdef void _cell1(real* h, real* c, real* a, real* tc, real* pc, real* mg, double fb, int H) noexcept nogil:
    """One batch element: the nonlinearities in place on the gates a, then c, tanh(c) and h."""
    cdef Py_ssize_t j
    cdef real gj
    lstm_gate_act(a, H, fb)
    for j in range(H):
        gj = a[3 * H + j]
        if mg != NULL:
            gj = gj * mg[j]
        c[j] = a[j] * gj + (a[H + j] * pc[j] if pc != NULL else 0)
    if real is float:
        dyn_tanh_f32(tc, c, H)
    else:
        for j in range(H):
            tc[j] = tanh(c[j])
    for j in range(H):
        h[j] = a[2 * H + j] * tc[j]


# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.

cdef void fwd_step(Graph* g, Node* n, real* y) noexcept:
    cdef Step L
    cdef int b, H4, H, isz
    cdef char* h
    cdef char* c
    _layout(g, n, &L, sizeof(real))
    H, H4, isz = L.H, 4 * L.H, L.isz
    for b in range(L.B):
        memcpy(_col4(&L, L.G, b), elem_v(L.p, b, <long>H4 * L.T, isz) + <size_t>L.col * H4 * isz, <size_t>H4 * isz)
        if L.prev != NULL and L.X != <char*>L.prev.v:
            _gather1(<real*>_col1(&L, L.HM, b), <real*>_prev_h(&L, b), <real*>_mask(L.mh, b, H, isz), H)
    if L.prev != NULL:
        if L.B == 1:
            _gemv(c'N', H4, H, <real*>L.Wh.v, <real*>L.X, 1.0, <real*>L.G)
        else:
            _blas.gemm(real_dtype(y), b'N', b'N', H4, L.B, H, 1.0, L.Wh.v, H4, L.X, L.ldx, 1.0, L.G, H4)
    for b in range(L.B):
        if L.flags & HVAL:
            h = <char*>y + <size_t>b * H * isz
            c = _head(&L, b)
            memset(c + <size_t>H * isz, 0, <size_t>H * isz)   # DCIN
        else:
            h = <char*>y + <size_t>b * 2 * H * isz
            c = h + <size_t>H * isz
        _cell1(<real*>h, <real*>c, <real*>_col4(&L, L.G, b), <real*>_col1(&L, L.TC, b), <real*>_prev_c(&L, b),
               <real*>_mask(L.mg, b, H, isz), n.fa[0], H)


cdef void _dgates1(real* d, real* dc, real* dh, real* dcx, real* a, real* t, real* pc, real* m,
                   int H) noexcept nogil:
    """One batch element: d = gradient of the pre-activations, dc = gradient of c_t (from h_t and
    dcx, the gradient that reached c_t directly). Separate branch-free loops so that they vectorise."""
    cdef Py_ssize_t j
    cdef real one = 1     # a typed 1: a literal would promote the loops to double
    for j in range(H):
        dc[j] = dcx[j] + dh[j] * a[2 * H + j] * (one - t[j] * t[j])
    for j in range(H):
        d[2 * H + j] = dh[j] * t[j] * a[2 * H + j] * (one - a[2 * H + j])
    if m == NULL:
        for j in range(H):
            d[j] = dc[j] * a[3 * H + j] * a[j] * (one - a[j])
            d[3 * H + j] = dc[j] * a[j] * (one - a[3 * H + j] * a[3 * H + j])
    else:
        for j in range(H):
            d[j] = dc[j] * a[3 * H + j] * m[j] * a[j] * (one - a[j])
            d[3 * H + j] = dc[j] * a[j] * m[j] * (one - a[3 * H + j] * a[3 * H + j])
    if pc == NULL:
        for j in range(H):
            d[H + j] = 0
    else:
        for j in range(H):
            d[H + j] = dc[j] * pc[j] * a[H + j] * (one - a[H + j])


cdef void _bwd_prev1(real* qh, real* qc, real* t, real* m, real* dc, real* f, int H) noexcept nogil:
    """d h_{t-1} += (Wh^T d) * mask_h (t holds Wh^T d); d c_{t-1} += dc * f."""
    cdef Py_ssize_t j
    if m == NULL:
        for j in range(H):
            qh[j] += t[j]
    else:
        for j in range(H):
            qh[j] += t[j] * m[j]
    for j in range(H):
        qc[j] += dc[j] * f[j]


cdef void _mul_add(real* q, real* x, real* y, real* z, int H) noexcept nogil:
    """q += x * y (* z when z is not NULL)."""
    cdef Py_ssize_t j
    if z == NULL:
        for j in range(H):
            q[j] += x[j] * y[j]
    else:
        for j in range(H):
            q[j] += x[j] * y[j] * z[j]


cdef bint _wt_on = True     # off only to measure the product with Wh itself (_set_wh_transposed)
cdef long _wt_made = 0      # transposes made (tests: that the path ran)


def _set_wh_transposed(bint on):
    """Let the steps' backward use Wh's transpose where it may (on, the default) or always the
    product with Wh itself (off: for measurements and tests); returns the previous setting."""
    global _wt_on
    cdef bint old = _wt_on
    _wt_on = on
    return old


def _wh_transposes():
    """How many times a step's backward has made Wh's transpose (in this process)."""
    return _wt_made


cdef float* _wh_transposed(Graph* g, Step* L) noexcept:
    """Wh^T (H x 4H), made once per backward pass in the lstm_step_weight alias's scratch, for a
    float32 step over a minibatch of WT_MIN_B or more; NULL where the product with Wh itself is
    as fast (narrower minibatches, H < WT_MIN_H: no scratch; a machine without AVX-512, where
    OpenBLAS takes both products) or the step reads Wh directly.
    Wh^T D with A^T's copy is an A B product, which runs at 1.3-2x the speed of A^T B on an
    LSTM's shapes (bench/gemm_shapes.py: 256 x n x 1024, n = 8-128); making the copy costs about
    as much as one step's product, and a sequence has one per step."""
    global _wt_made
    cdef Node* w = L.Wh
    cdef int key
    if not _wt_on or not _blas.skinny_on() or L.B < WT_MIN_B or w.op != OP_WEIGHT or w.naux == 0 or w.aux == NULL:
        return NULL
    key = <int>(g.nbwd & 0x3fffffff) + 1
    if w.ia[0] != key:
        dyn_add_transposed(L.H, 4 * L.H, <float*>w.v, 4 * L.H, 0.0, <float*>w.aux, L.H)
        w.ia[0] = key
        _wt_made += 1
    return <float*>w.aux


cdef void _wh_t_d(Graph* g, Step* L, real* D) noexcept:
    """TMP = Wh^T D (D: the region L.D)."""
    cdef float* wt
    if L.B == 1:
        _gemv(c'T', 4 * L.H, L.H, <real*>L.Wh.v, D, 0.0, <real*>L.TMP)
        return
    if real is float:
        wt = _wh_transposed(g, L)
        if wt != NULL:
            _blas.gemm(real_dtype(D), b'N', b'N', L.H, L.B, 4 * L.H, 1.0, wt, L.H, D, 4 * L.H, 0.0, L.TMP, L.H)
            return
    _blas.gemm(real_dtype(D), b'T', b'N', L.H, L.B, 4 * L.H, 1.0, L.Wh.v, 4 * L.H, D, 4 * L.H, 0.0, L.TMP, L.H)


cdef void _dgates(Node* n, Step* L, real* gy) noexcept:
    """The gradients of the pre-activations and of c_t, per batch element, once per backward pass
    (gy: the node's gradient). An h-valued step's DCIN (what the next step gave c_t) is read here
    and cleared."""
    cdef int b, H = L.H, isz = L.isz
    cdef char* dh
    cdef char* dcx
    for b in range(L.B):
        if L.flags & HVAL:
            dh = <char*>gy + <size_t>b * H * isz
            dcx = _head(L, b) + <size_t>H * isz
        else:
            dh = <char*>gy + <size_t>b * 2 * H * isz
            dcx = dh + <size_t>H * isz
        _dgates1(<real*>_col4(L, L.D, b), <real*>_col1(L, L.DC, b), <real*>dh, <real*>dcx,
                 <real*>_col4(L, L.G, b), <real*>_col1(L, L.TC, b), <real*>_prev_c(L, b),
                 <real*>_mask(L.mg, b, H, isz), H)
        if L.flags & HVAL:
            memset(dcx, 0, <size_t>H * isz)


# A batch of steps (dyn/_core/core/autobatch.pyx) reads Wh itself, not its alias; when its members
# read it through an alias (F_VIA_ALIAS), that alias's backward runs after the batch's, so the
# batch queues its product (d of the pre-activations and h_{t-1}, where they lie in its scratch) in
# dyn/_core/cpu/outerq.pyx, and bwd_weight queues the single steps' and flushes Wh's gradient: one
# product over all the columns. A sentence's character LSTMs, batched across words, then make one
# dWh product per graph, not one per batch (on an AMD EPYC, OpenBLAS takes 4.8 us for
# 256 x 64 x 4, about 1.2 us a column, against 0.55 a column at 126).

cdef long _def_taken = 0     # columns batches queued for their alias (tests)
cdef bint _def_on = True     # off only to measure a batch's own product (_set_defer)


def _set_defer(bint on):
    """Let batches of steps leave their dWh columns to the alias (on, the default) or make their
    own product (off: for measurements); returns the previous setting."""
    global _def_on
    cdef bint old = _def_on
    _def_on = on
    return old


def _deferred_columns(bint reset=False):
    """Test hook: how many batch columns were queued for lstm_step_weight nodes' dWh product since
    the last reset."""
    global _def_taken
    out = _def_taken
    if reset:
        _def_taken = 0
    return out


cdef bint _defer(void* wg, Step* L) noexcept:
    """Queue batch L's dWh columns for the alias's backward; False (do it now) when out of memory."""
    global _def_taken
    cdef int H = L.H
    if not outer_queue(<char*>wg, L.D, 4 * H, L.X, L.ldx, 4 * H, H, L.B, 4 * H, L.isz):
        return False
    _def_taken += L.B
    return True


cdef void bwd_step(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Step L
    cdef int H4, H, which, first, b, isz
    cdef Node* a = arg(g, n, i)
    cdef char* q
    _layout(g, n, &L, sizeof(real))
    H, H4, isz = L.H, 4 * L.H, L.isz
    # D and DC once per backward pass: at the first argument that takes a
    # gradient (backward visits the arguments in order; the others have g NULL)
    first = 0
    while arg(g, n, first).g == NULL:
        first += 1
    if i == first:
        _dgates(n, &L, gy)
    if i == 0:
        which = 0
    elif L.prev != NULL and i <= 2:
        which = i
    elif L.mh != NULL and i == (3 if L.prev != NULL else 1):
        which = 3
    else:
        which = 4
    if which == 0:             # column col of each batch element of P (as fwd_step reads it)
        for b in range(L.B):
            _blas.vadd(real_dtype(gy), H4, _col4(&L, L.D, b), elem_g(a, b, <long>H4 * L.T, isz) + <size_t>L.col * H4 * isz)
    elif which == 2:           # dWh += d h_{t-1}^T, summed over the batch
        if a.op == OP_WEIGHT:
            pass               # lstm_step_weight does it for every step in one product
        elif _def_on and (a.flags & F_VIA_ALIAS) and _defer(a.g, &L):
            pass               # a batch's columns: the same product (bwd_weight), queued
        elif L.B == 1:
            _ger(H4, H, <real*>L.D, <real*>L.X, <real*>a.g)
        else:
            _blas.gemm(real_dtype(gy), b'N', b'T', H4, H, L.B, 1.0, L.D, H4, L.X, L.ldx, 1.0, a.g, H4)
    elif which == 4:           # mask_g
        for b in range(L.B):
            q = <char*>a.g + (<size_t>b * H * isz if a.dim.bd > 1 else 0)
            _mul_add(<real*>q, <real*>_col1(&L, L.DC, b), <real*>_col4(&L, L.G, b),
                     <real*>(_col4(&L, L.G, b) + <size_t>3 * H * isz), H)
    else:                      # prev or mask_h: both need Wh^T d (computed once, for the first)
        if which == 1 or L.prev.g == NULL:
            _wh_t_d(g, &L, <real*>L.D)
        for b in range(L.B):
            if which == 1:
                q = elem_g(a, b, H if L.flags & PSTEP else 2 * H, isz)
                _bwd_prev1(<real*>q, <real*>_prev_gc(&L, b), <real*>_col1(&L, L.TMP, b),
                           <real*>_mask(L.mh, b, H, isz), <real*>_col1(&L, L.DC, b),
                           <real*>(_col4(&L, L.G, b) + <size_t>H * isz), H)
            else:
                q = <char*>a.g + (<size_t>b * H * isz if a.dim.bd > 1 else 0)
                _mul_add(<real*>q, <real*>_col1(&L, L.TMP, b), <real*>_prev_h(&L, b), NULL, H)

set_kernels(OP_STEP, DEV_CPU, <kfwd_fn>fwd_step[float], <kfwd_fn>fwd_step[double],
            <kbwd_fn>bwd_step[float], <kbwd_fn>bwd_step[double])

# ---------------------------------------------------------------- lstm_step_weight
# The recurrent matrix as seen by a sequence's lstm_step nodes. Forward: the
# same memory as its argument (no copy); the alias of a parameter has the
# parameter's gradient memory too (dyn/_core/ops/rnn.pyx), so that other
# readers of the alias add straight into it and nothing is zeroed or added
# back. Backward runs after every step's (it was created before them):
# dWh = sum_t d_t h_{t-1}^T as ONE matrix product over the gathered d_t and
# h_{t-1} of the live steps that read it, instead of a rank-1 update of the
# whole matrix per step.


cdef void fwd_weight(Graph* g, Node* n, real* y) noexcept:
    n.v = arg(g, n, 0).v


cdef void bwd_weight(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* w = arg(g, n, 0)
    cdef Node* s
    cdef Step L
    cdef int me = <int>(n - g.nodes), j, H = w.dim.d[1], isz = sizeof(real)
    if <void*>gy != w.g:    # (a parameter's alias has the parameter's gradient: nothing to add)
        _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, w.g)
    for j in range(me + 1, g.bwd_target + 1):
        s = &g.nodes[j]
        if s.op == OP_STEP and s.g != NULL and not (s.flags & F_AB) and (s.ia[1] & PREV) and g.ipool[s.arg_off + 2] == me:
            _layout(g, s, &L, isz)
            if not outer_queue(<char*>w.g, L.D, 4 * H, L.X, L.ldx, 4 * H, H, L.B, 4 * H, isz):
                outer_now(4 * H, H, L.B, <real*>L.D, 4 * H, <real*>L.X, L.ldx, <real*>w.g, 4 * H)
    outer_flush(<char*>w.g, <char*>w.g + <size_t>4 * H * H * isz)

set_kernels(OP_WEIGHT, DEV_CPU, <kfwd_fn>fwd_weight[float], <kfwd_fn>fwd_weight[double],
            <kbwd_fn>bwd_weight[float], <kbwd_fn>bwd_weight[double])


# ---------------------------------------------------------------- lstm_state_c
# c_t of an h-valued lstm_step node (the builders' states, when c() or s() is asked for):
# a copy out of its scratch; backward adds into the node's DCIN. It runs alone (not batched).

cdef void fwd_cell(Graph* g, Node* n, real* y) noexcept:
    cdef int b, H = n.dim.d[0], isz = sizeof(real)
    cdef Node* s = arg(g, n, 0)
    for b in range(n.dim.bd):
        memcpy(y + <size_t>b * H, _prev_aux(s, b, H, isz), <size_t>H * isz)


cdef void bwd_cell(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int b, H = n.dim.d[0], isz = sizeof(real)
    cdef Node* s = arg(g, n, 0)
    for b in range(n.dim.bd):
        _blas.vadd(real_dtype(gy), H, gy + <size_t>b * H, _prev_aux(s, b, H, isz) + <size_t>H * isz)


set_kernels(OP_CELL, DEV_CPU, <kfwd_fn>fwd_cell[float], <kfwd_fn>fwd_cell[double],
            <kbwd_fn>bwd_cell[float], <kbwd_fn>bwd_cell[double])


# ---------------------------------------------------------------- lstm_step_h, lstm_step_c
# y = rows [off, off + H) of each batch element of s ({2H}); ia[0] = off (0: h, H: c)

cdef void fwd_part(Graph* g, Node* n, real* y) noexcept:
    cdef int b, H = n.dim.d[0], isz = sizeof(real)
    cdef Node* s = arg(g, n, 0)
    for b in range(n.dim.bd):
        memcpy(y + <size_t>b * H, elem_v(s, b, 2 * H, isz) + <size_t>n.ia[0] * isz, <size_t>H * isz)


cdef void bwd_part(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int b, H = n.dim.d[0], isz = sizeof(real)
    cdef Node* s = arg(g, n, 0)
    for b in range(n.dim.bd):
        _blas.vadd(real_dtype(gy), H, gy + <size_t>b * H, elem_g(s, b, 2 * H, isz) + <size_t>n.ia[0] * isz)


set_kernels(OP_PART, DEV_CPU, <kfwd_fn>fwd_part[float], <kfwd_fn>fwd_part[double],
            <kbwd_fn>bwd_part[float], <kbwd_fn>bwd_part[double])
