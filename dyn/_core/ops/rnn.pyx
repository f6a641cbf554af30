# cython: language_level=3, boundscheck=False, wraparound=False
"""lstm_step: one whole step of a standard LSTM as one node (the builders' fast
path, dyn/builders/lstm.py).

The input projection is NOT done here: the builder computes it for a whole
sequence in one matrix-matrix product P = b + Wx [x_1 ... x_T] and each step
reads its column. So a step is: gates from column `col` of P plus Wh h_{t-1},
the nonlinearities, the cell and the output, all in one pass.

Two kinds of node, one kernel:
- dy.lstm_step (public): the value is the stacked state [h_t; c_t] (2H per
  batch element); prev is such a [h; c] vector.
- the builders' steps (lstm_sequence, flag HVAL): the value is h_t alone, so
  it is the layer's output with no extra node; c_t stays in the node's scratch,
  where the next step reads it (flag PSTEP: prev is such a node) and adds its
  gradient back (DCIN, zeroed in forward, read and cleared by the node's own
  backward, which runs after every reader's). lstm_state_c copies c_t out when
  a user asks for it.

Gate rows are DyNet's order [i; f; o; g]. args: p, [prev], [Wh], [mask_h], [mask_g]
ia: 0 col, 1 flags (PREV, MASK_H, MASK_G, HVAL, PSTEP), 2 T (columns of p), 3 H, 4 h used in place
fa: 0 forget bias
aux: a per-element head (HVAL), then regions of B columns each (see Step)
"""
from libc.math cimport tanh
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport Graph, Node, Dim, cg, declare_op, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, dim_size, dim_total, dim_cols, dim_str, arg, F_FIXED
from dyn._core.core.graph cimport new_node, finish_node
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_ALIAS, AB_AUXHEAD, ABA_NO, ABA_CAT, ABA_SHARE, ABA_CATAUX
from dyn._core.core.graph cimport F_AB, F_PTRS
from dyn._core.core.graph cimport elem_v, elem_g
from dyn._core.core.expr cimport noden, finish, wrap, arg_id, Expression
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport arg_dims, expr_arg, g_node, looks_like_vector, index_arg, number_arg, lstm_gate_act

cdef extern from "_fastmath.h" nogil:
    void dyn_tanh_f32(float* y, const float* x, long n)

cdef extern from "_smallblas.h" nogil:
    void dyn_gemv_n_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_gemv_t_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_ger_f32(int m, int n, float alpha, const float* x, const float* y, float* A, int lda)

cdef enum:
    # Wh of a step is 4H x H: up to H = 128 the compiled small-matrix loops beat
    # OpenBLAS's per-call overhead (its ger is one axpy per column)
    SMALL = 4 * 128 * 128


cdef void _gemv(char ta, int m, int n, real* A, real* x, double beta, real* y) noexcept:
    """y = op(A) x + beta y for A m x n (lda m)."""
    if real is float and <long>m * n <= SMALL:
        if ta == b'N':
            dyn_gemv_n_f32(m, n, 1.0, A, m, x, beta, y)
        else:
            dyn_gemv_t_f32(m, n, 1.0, A, m, x, beta, y)
    else:
        _blas.gemv(real_dtype(y), ta, m, n, 1.0, A, m, x, beta, y)


cdef void _ger(int m, int n, real* x, real* y, real* A) noexcept:
    if real is float and <long>m * n <= SMALL:
        dyn_ger_f32(m, n, 1.0, x, y, A, m)
    else:
        _blas.ger(real_dtype(A), m, n, 1.0, x, y, A, m)

cdef enum:
    PREV = 1
    MASK_H = 2
    MASK_G = 4
    HVAL = 8        # the value is h alone; c_t (and the gradient of c_t from the next step) lives in aux
    PSTEP = 16      # prev is such an h-valued lstm_step node: h_{t-1} its value, c_{t-1} in its aux

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


cdef str _name(int flags):
    return "lstm_step_dropout" if flags & (MASK_H | MASK_G) else "lstm_step"


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


cdef int _shape_step(Graph* g, Node* n) except -1:
    cdef int flags = n.ia[1], H, T, B, k = 1
    cdef str name = _name(flags)
    cdef Node* p = arg(g, n, 0)
    cdef Node* a
    if p.dim.nd > 2 or p.dim.d[0] % 4 != 0:
        raise ValueError("%s: p must be a {4H} vector or a {4H,T} matrix of input projections, got %s"
                         % (name, dim_str(&p.dim)))
    H = p.dim.d[0] // 4
    T = dim_cols(&p.dim)
    if n.ia[0] >= T:
        raise IndexError("%s: column %d is out of range for p of %d columns (dim %s)"
                         % (name, n.ia[0], T, dim_str(&p.dim)))
    B = p.dim.bd
    if flags & PREV:
        a = arg(g, n, 1)
        if flags & PSTEP:
            if a.op != OP_STEP or not (a.ia[1] & HVAL) or a.ia[3] != H:
                raise ValueError("%s: prev must be an LSTM state of hidden size %d, got %s"
                                 % (name, H, arg_dims(g, n)))
        elif not looks_like_vector(&a.dim) or a.dim.d[0] != 2 * H:
            raise ValueError("%s: prev must be the stacked state [h; c] {%d} for hidden size %d, got %s"
                             % (name, 2 * H, H, arg_dims(g, n)))
        if a.dim.bd > 1 and B > 1 and a.dim.bd != B:
            raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
        B = a.dim.bd if a.dim.bd > B else B
        a = arg(g, n, 2)
        if a.dim.nd != 2 or a.dim.d[0] != 4 * H or a.dim.d[1] != H or a.dim.bd != 1:
            raise ValueError("%s: Wh must be an unbatched {%d,%d} matrix, got %s" % (name, 4 * H, H, arg_dims(g, n)))
        k = 3
    for what, bit in (("mask_h", MASK_H), ("mask_g", MASK_G)):
        if flags & bit:
            a = arg(g, n, k)
            k += 1
            if not looks_like_vector(&a.dim) or a.dim.d[0] != H:
                raise ValueError("%s: %s must be a vector {%d}, got %s" % (name, what, H, dim_str(&a.dim)))
            if a.dim.bd != 1 and B != 1 and a.dim.bd != B:
                raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
            B = a.dim.bd if a.dim.bd > B else B
    n.dim.nd = 1
    n.dim.d[0] = H if flags & HVAL else 2 * H
    n.dim.bd = B
    n.ia[2] = T
    n.ia[3] = H
    n.ia[4] = (flags & PREV) != 0 and not (flags & MASK_H) and arg(g, n, 1).dim.bd == B
    n.ia[5] = 2 * H if flags & HVAL else 0
    n.naux = <long>B * 12 * H + <long>B * n.ia[5]
    return 0


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


cdef void _wh_t_d(Step* L, real* D) noexcept:
    """TMP = Wh^T D (D: the region L.D)."""
    if L.B == 1:
        _gemv(c'T', 4 * L.H, L.H, <real*>L.Wh.v, D, 0.0, <real*>L.TMP)
    else:
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
            _wh_t_d(&L, <real*>L.D)
        for b in range(L.B):
            if which == 1:
                q = elem_g(a, b, H if L.flags & PSTEP else 2 * H, isz)
                _bwd_prev1(<real*>q, <real*>_prev_gc(&L, b), <real*>_col1(&L, L.TMP, b),
                           <real*>_mask(L.mh, b, H, isz), <real*>_col1(&L, L.DC, b),
                           <real*>(_col4(&L, L.G, b) + <size_t>H * isz), H)
            else:
                q = <char*>a.g + (<size_t>b * H * isz if a.dim.bd > 1 else 0)
                _mul_add(<real*>q, <real*>_col1(&L, L.TMP, b), <real*>_prev_h(&L, b), NULL, H)


cdef int OP_STEP = declare_op("lstm_step", _shape_step)
set_kernels(OP_STEP, DEV_CPU, <kfwd_fn>fwd_step[float], <kfwd_fn>fwd_step[double],
            <kbwd_fn>bwd_step[float], <kbwd_fn>bwd_step[double])

# ---------------------------------------------------------------- lstm_step_weight
# The recurrent matrix as seen by a sequence's lstm_step nodes. Forward: the
# same memory as its argument (no copy). Backward runs after every step's
# (it was created before them): dWh = sum_t d_t h_{t-1}^T as ONE matrix
# product over the gathered d_t and h_{t-1} of the live steps that read it,
# instead of a rank-1 update of the whole matrix per step.


cdef int _shape_weight(Graph* g, Node* n) except -1:
    cdef Node* w = arg(g, n, 0)
    if w.dim.nd != 2 or w.dim.d[0] != 4 * w.dim.d[1] or w.dim.bd != 1:
        raise ValueError("lstm_step_weight: Wh must be an unbatched {4H,H} matrix, got %s" % dim_str(&w.dim))
    n.dim = w.dim
    n.flags |= F_FIXED
    return 0


cdef void fwd_weight(Graph* g, Node* n, real* y) noexcept:
    n.v = arg(g, n, 0).v


cdef void bwd_weight(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* w = arg(g, n, 0)
    cdef Node* s
    cdef Step L
    cdef int me = <int>(n - g.nodes), j, b, cols = 0, k = 0, H = w.dim.d[1], isz = sizeof(real)
    cdef char* D
    cdef char* X
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, w.g)
    for j in range(me + 1, g.bwd_target + 1):
        s = &g.nodes[j]
        if s.op == OP_STEP and s.g != NULL and not (s.flags & F_AB) and (s.ia[1] & PREV) and g.ipool[s.arg_off + 2] == me:
            cols += s.dim.bd
    if cols == 0:
        return
    D = <char*>malloc(<size_t>cols * 5 * H * isz)
    if D == NULL:
        return
    X = D + <size_t>cols * 4 * H * isz
    for j in range(me + 1, g.bwd_target + 1):
        s = &g.nodes[j]
        if s.op == OP_STEP and s.g != NULL and not (s.flags & F_AB) and (s.ia[1] & PREV) and g.ipool[s.arg_off + 2] == me:
            _layout(g, s, &L, isz)
            for b in range(L.B):
                memcpy(D + <size_t>(k + b) * 4 * H * isz, _col4(&L, L.D, b), <size_t>4 * H * isz)
                memcpy(X + <size_t>(k + b) * H * isz, L.X + <size_t>b * L.ldx * isz, <size_t>H * isz)
            k += L.B
    _blas.gemm(real_dtype(gy), b'N', b'T', 4 * H, H, cols, 1.0, D, 4 * H, X, H, 1.0, w.g, 4 * H)
    free(D)


cdef int OP_WEIGHT = declare_op("lstm_step_weight", _shape_weight)
set_kernels(OP_WEIGHT, DEV_CPU, <kfwd_fn>fwd_weight[float], <kfwd_fn>fwd_weight[double],
            <kbwd_fn>bwd_weight[float], <kbwd_fn>bwd_weight[double])


def lstm_step_weight(Wh):
    expr_arg(Wh, "lstm_step_weight")
    return finish(noden(OP_WEIGHT, [Wh], "lstm_step_weight"))


def lstm_sequence(P, prev, Wh, mask_h, mask_g, int T, double forget_bias):
    """The builders' loop: h-valued lstm_step nodes for columns 0..T-1 of P, created here in C.
    A node's value is h_t; its c_t stays in its scratch, where the next step (and lstm_state_c)
    reads it. prev: None (start without a previous state; Wh and mask_h are then used from the
    second step on), such a node, or a stacked state [h; c]. Returns the list of h nodes."""
    cdef int t, k, flags, nid, s_id = -1, P_id, Wh_id, mh_id = -1, mg_id = -1, pstep = 0
    cdef int ids[5]
    cdef list hs = []
    cdef Node* n
    for e in (P, Wh):
        expr_arg(e, "lstm_step")
    for e in (prev, mask_h, mask_g):
        if e is not None:
            expr_arg(e, "lstm_step")
    # the arguments' node ids once (what noden would look up at every step)
    P_id, Wh_id = arg_id(P, OP_STEP), arg_id(Wh, OP_STEP)
    if prev is not None:
        s_id = arg_id(prev, OP_STEP)
        n = g_node(s_id)
        pstep = n.op == OP_STEP and (n.ia[1] & HVAL) != 0
    if mask_h is not None:
        mh_id = arg_id(mask_h, OP_STEP)
    if mask_g is not None:
        mg_id = arg_id(mask_g, OP_STEP)
    for t in range(T):
        ids[0] = P_id
        k = 1
        flags = HVAL
        if s_id >= 0:
            flags |= PREV | (PSTEP if pstep else 0)
            ids[1] = s_id
            ids[2] = Wh_id
            k = 3
            if mh_id >= 0:
                flags |= MASK_H
                ids[k] = mh_id
                k += 1
        if mg_id >= 0:
            flags |= MASK_G
            ids[k] = mg_id
            k += 1
        nid = new_node(OP_STEP, k, ids)
        n = g_node(nid)
        n.ia[0] = t
        n.ia[1] = flags
        n.fa[0] = forget_bias
        finish_node(nid)
        hs.append(wrap(nid))
        s_id = nid
        pstep = 1
    return hs


def lstm_step(p, prev, Wh, mask_h, mask_g, col, forget_bias, str name):
    """Python-level builder: prev and Wh both given or both None; masks None or expressions."""
    cdef int flags = 0
    args = [p]
    if (prev is None) != (Wh is None):
        raise ValueError("%s: prev and Wh are given together (both None on a first step)" % name)
    if prev is not None:
        flags |= PREV
        args += [prev, Wh]
    if mask_h is not None:
        if prev is None:
            raise ValueError("%s: mask_h needs a previous state" % name)
        flags |= MASK_H
        args.append(mask_h)
    if mask_g is not None:
        flags |= MASK_G
        args.append(mask_g)
    for e in args:
        expr_arg(e, name)
    fb = number_arg(forget_bias, name, "forget_bias")
    cdef int c = index_arg(col, name)
    cdef int nid = noden(OP_STEP, args, name)
    g_node(nid).ia[0] = c
    g_node(nid).ia[1] = flags
    g_node(nid).fa[0] = fb
    return finish(nid)


# ---------------------------------------------------------------- lstm_state_c
# c_t of an h-valued lstm_step node (the builders' states, when c() or s() is asked for):
# a copy out of its scratch; backward adds into the node's DCIN. It runs alone (not batched).

cdef int _shape_cell(Graph* g, Node* n) except -1:
    cdef Node* s = arg(g, n, 0)
    if s.op != OP_STEP or not (s.ia[1] & HVAL):
        raise ValueError("lstm_state_c: expected an LSTM builder's h_t (an h-valued lstm_step), got %s"
                         % dim_str(&s.dim))
    n.dim = s.dim
    return 0


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


cdef int OP_CELL = declare_op("lstm_state_c", _shape_cell)
set_kernels(OP_CELL, DEV_CPU, <kfwd_fn>fwd_cell[float], <kfwd_fn>fwd_cell[double],
            <kbwd_fn>bwd_cell[float], <kbwd_fn>bwd_cell[double])


def lstm_state_c(h):
    """c_t of an LSTM builder state whose h_t is an h-valued lstm_step node (lstm_sequence)."""
    expr_arg(h, "lstm_state_c")
    return finish(noden(OP_CELL, [h], "lstm_state_c"))


# ---------------------------------------------------------------- lstm_step_h, lstm_step_c
# y = rows [off, off + H) of each batch element of s ({2H}); ia[0] = off (0: h, H: c)

cdef int _shape_part(Graph* g, Node* n) except -1:
    cdef Node* s = arg(g, n, 0)
    if not looks_like_vector(&s.dim) or s.dim.d[0] % 2 != 0:
        raise ValueError("%s: expected an lstm_step value [h; c] {2H}, got %s"
                         % ("lstm_step_c" if n.ia[1] else "lstm_step_h", dim_str(&s.dim)))
    n.dim.nd = 1
    n.dim.d[0] = s.dim.d[0] // 2
    n.dim.bd = s.dim.bd
    n.ia[0] = n.dim.d[0] if n.ia[1] else 0
    return 0


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


cdef int OP_PART = declare_op("lstm_step_part", _shape_part)
set_kernels(OP_PART, DEV_CPU, <kfwd_fn>fwd_part[float], <kfwd_fn>fwd_part[double],
            <kbwd_fn>bwd_part[float], <kbwd_fn>bwd_part[double])
set_labels("lstm_step_part", 1, ("lstm_step_h", "lstm_step_c"))


def lstm_step_part(s, int which, str name):
    """h (which 0) or c (which 1) of an lstm_step value."""
    expr_arg(s, name)
    cdef int nid = noden(OP_PART, [s], name)
    g_node(nid).ia[1] = which
    return finish(nid)

# ---------------------------------------------------------------- automatic batching (src/_autobatch.pyx)
# Steps of different sequences run as one step: each member reads its own
# column of its own projection P (a window of 4H items: adjacent when the
# projections are), the previous states are concatenated, Wh (through its
# lstm_step_weight alias) and the dropout masks are shared.

cdef int _ab_arg_step(Graph* g, Node* n, int k, int* off, Dim* wd) noexcept:
    cdef Node* a = arg(g, n, k)
    cdef int flags = n.ia[1]
    if k == 0:
        if a.dim.bd != 1 or n.dim.bd != 1:
            return ABA_NO          # a batched P: a member's column is not one block
        off[0] = n.ia[0] * 4 * n.ia[3]
        wd.nd = 1
        wd.d[0] = 4 * n.ia[3]
        wd.bd = 1
        return ABA_CAT
    if (flags & PREV) and k == 1:
        if a.dim.bd != n.dim.bd:
            return ABA_NO
        return ABA_CATAUX if flags & PSTEP else ABA_CAT
    if (flags & PREV) and k == 2:
        return ABA_SHARE
    if a.dim.bd == 1:              # masks: one per builder and graph
        return ABA_SHARE
    return ABA_CAT if a.dim.bd == n.dim.bd else ABA_NO


cdef void _ab_fix_step(Graph* g, Node* n) noexcept:
    n.ia[0] = 0                    # the gathered columns form a {4H} x members projection
    n.ia[2] = 1


# P and the parts' states may come per member (no gathered copy): the kernels read them by element
# (an h-valued prev comes per member with its head [c; DCIN]: ABA_CATAUX, AB_AUXHEAD)
set_autobatch(OP_STEP, AB_ON | AB_AUXHEAD, 0, 0x1a, _ab_arg_step, _ab_fix_step, 1)   # ia: flags, H, h in place
set_autobatch(OP_PART, AB_ON, 0, 0x3f, NULL, NULL, 1)
set_autobatch(OP_WEIGHT, AB_ALIAS)
