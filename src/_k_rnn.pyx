# cython: language_level=3, boundscheck=False, wraparound=False
"""lstm_step: one whole step of a standard LSTM as one node (the builders' fast
path, dyn/builders/lstm.py).

The input projection is NOT done here: the builder computes it for a whole
sequence in one matrix-matrix product P = b + Wx [x_1 ... x_T] and each step
reads its column. So a step is: gates from column `col` of P plus Wh h_{t-1},
the nonlinearities, the cell and the output, all in one pass, and the node's
value is the stacked state [h_t; c_t] (2H per batch element).

Gate rows are DyNet's order [i; f; o; g]. args: p, [prev], [Wh], [mask_h], [mask_g]
ia: 0 col, 1 flags (PREV, MASK_H, MASK_G), 2 T (columns of p), 3 H, 4 h used in place
fa: 0 forget bias
aux (items, B columns each): gates 4H | tanh(c) H | d 4H | dc H | masked h H | tmp H
"""
from libc.math cimport exp, tanh
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from dyn._core._graph cimport Graph, Node, Dim, cg, register_op, dim_size, dim_total, dim_cols, dim_str, arg, F_FIXED
from dyn._core._graph cimport new_node, finish_node
from dyn._core._graph cimport set_autobatch, AB_ON, AB_ALIAS, ABA_NO, ABA_CAT, ABA_SHARE, F_AB, elem_v, elem_g
from dyn._core._expr cimport noden, finish, wrap, arg_id, Expression
from dyn._core._bcast cimport real
from dyn._core cimport _blas
from dyn._core._kutil cimport arg_dims, expr_arg, g_node, looks_like_vector, index_arg, number_arg

cdef extern from "_fastmath.h" nogil:
    void dyn_tanh_f32(float* y, const float* x, long n)
    void dyn_logistic_f32(float* y, const float* x, long n)

cdef extern from "_smallblas.h" nogil:
    void dyn_gemv_n_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_gemv_t_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_ger_f32(int m, int n, float alpha, const float* x, const float* y, float* A, int lda)

cdef enum:
    # Wh of a step is 4H x H: up to H = 128 the compiled small-matrix loops beat
    # OpenBLAS's per-call overhead (its ger is one axpy per column)
    SMALL = 4 * 128 * 128


cdef void _gemv(Graph* g, char ta, int m, int n, void* A, void* x, double beta, void* y) noexcept:
    """y = op(A) x + beta y for A m x n (lda m)."""
    if g.dtype == 0 and <long>m * n <= SMALL:
        if ta == b'N':
            dyn_gemv_n_f32(m, n, 1.0, <float*>A, m, <float*>x, beta, <float*>y)
        else:
            dyn_gemv_t_f32(m, n, 1.0, <float*>A, m, <float*>x, beta, <float*>y)
    else:
        _blas.gemv(g.dtype, ta, m, n, 1.0, A, m, x, beta, y)


cdef void _ger(Graph* g, int m, int n, void* x, void* y, void* A) noexcept:
    if g.dtype == 0 and <long>m * n <= SMALL:
        dyn_ger_f32(m, n, 1.0, <float*>x, <float*>y, <float*>A, m)
    else:
        _blas.ger(g.dtype, m, n, 1.0, x, y, A, m)

cdef enum:
    PREV = 1
    MASK_H = 2
    MASK_G = 4


ctypedef struct Step:
    int H, B, T, col, isz, flags
    Node* p
    Node* prev
    Node* Wh
    Node* mh
    Node* mg
    char* G         # gates after the nonlinearities, 4H x B
    char* TC        # tanh(c_t), H x B
    char* D         # gradient of the gate pre-activations, 4H x B
    char* DC        # gradient of c_t, H x B
    char* HM        # (masked) h_{t-1} when it is not read in place, H x B
    char* TMP       # H x B
    char* X         # the h_{t-1} the product reads
    int ldx


cdef str _name(int flags):
    return "lstm_step_dropout" if flags & (MASK_H | MASK_G) else "lstm_step"


cdef void _layout(Graph* g, Node* n, Step* L) noexcept:
    cdef int k = 1, H = n.ia[3], B = n.dim.bd, isz = g.itemsize
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
    L.G = <char*>n.aux
    L.TC = L.G + <size_t>4 * H * B * isz
    L.D = L.TC + <size_t>H * B * isz
    L.DC = L.D + <size_t>4 * H * B * isz
    L.HM = L.DC + <size_t>H * B * isz
    L.TMP = L.HM + <size_t>H * B * isz
    if n.ia[4]:      # h_{t-1} is the first H rows of each 2H column of prev
        L.X = <char*>L.prev.v if L.prev != NULL else NULL
        L.ldx = 2 * H
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
        if not looks_like_vector(&a.dim) or a.dim.d[0] != 2 * H:
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
    n.dim.d[0] = 2 * H
    n.dim.bd = B
    n.ia[2] = T
    n.ia[3] = H
    n.ia[4] = (flags & PREV) != 0 and not (flags & MASK_H) and arg(g, n, 1).dim.bd == B
    n.naux = <long>B * 12 * H
    return 0


cdef void _gather_h(real* hm, real* prev, int bprev, real* mask, int bmask, int H, int B) noexcept nogil:
    cdef Py_ssize_t b, j
    cdef real* ph
    cdef real* pm
    for b in range(B):
        ph = prev + (b * 2 * H if bprev > 1 else 0)
        if mask == NULL:
            for j in range(H):
                hm[b * H + j] = ph[j]
        else:
            pm = mask + (b * H if bmask > 1 else 0)
            for j in range(H):
                hm[b * H + j] = ph[j] * pm[j]


cdef void _cell(real* y, real* G, real* TC, real* prev, int bprev, real* mg, int bmg, double fb,
                int H, int B) noexcept nogil:
    """Nonlinearities in place on G, then c, tanh(c) and h; y = [h; c] per batch element."""
    cdef Py_ssize_t b, j
    cdef real* a
    cdef real* c
    cdef real* pc
    cdef real gj
    for b in range(B):
        a = G + b * 4 * H
        if fb != 0:
            for j in range(H, 2 * H):
                a[j] += <real>fb
        if real is float:
            dyn_logistic_f32(a, a, 3 * H)
            dyn_tanh_f32(a + 3 * H, a + 3 * H, H)
        else:
            for j in range(3 * H):
                a[j] = 1 / (1 + exp(-a[j]))
            for j in range(3 * H, 4 * H):
                a[j] = tanh(a[j])
        c = y + b * 2 * H + H
        pc = prev + (b * 2 * H if bprev > 1 else 0) + H if prev != NULL else NULL
        for j in range(H):
            gj = a[3 * H + j]
            if mg != NULL:
                gj = gj * mg[(b * H if bmg > 1 else 0) + j]
            c[j] = a[j] * gj + (a[H + j] * pc[j] if pc != NULL else 0)
        if real is float:
            dyn_tanh_f32(TC + b * H, c, H)
        else:
            for j in range(H):
                TC[b * H + j] = tanh(c[j])
        for j in range(H):
            y[b * 2 * H + j] = a[2 * H + j] * TC[b * H + j]


cdef void fwd_step(Graph* g, Node* n) noexcept:
    cdef Step L
    cdef int b, H4
    _layout(g, n, &L)
    H4 = 4 * L.H
    for b in range(L.B):
        memcpy(L.G + <size_t>b * H4 * L.isz, elem_v(L.p, b, <long>H4 * L.T, L.isz) + <size_t>L.col * H4 * L.isz,
               <size_t>H4 * L.isz)
    if L.prev != NULL:
        if not n.ia[4]:
            if g.dtype == 0:
                _gather_h(<float*>L.HM, <float*>L.prev.v, L.prev.dim.bd,
                          <float*>L.mh.v if L.mh != NULL else NULL, L.mh.dim.bd if L.mh != NULL else 1, L.H, L.B)
            else:
                _gather_h(<double*>L.HM, <double*>L.prev.v, L.prev.dim.bd,
                          <double*>L.mh.v if L.mh != NULL else NULL, L.mh.dim.bd if L.mh != NULL else 1, L.H, L.B)
        if L.B == 1:
            _gemv(g, b'N', H4, L.H, L.Wh.v, L.X, 1.0, L.G)
        else:
            _blas.gemm(g.dtype, b'N', b'N', H4, L.B, L.H, 1.0, L.Wh.v, H4, L.X, L.ldx, 1.0, L.G, H4)
    if g.dtype == 0:
        _cell(<float*>n.v, <float*>L.G, <float*>L.TC, <float*>L.prev.v if L.prev != NULL else NULL,
              L.prev.dim.bd if L.prev != NULL else 1, <float*>L.mg.v if L.mg != NULL else NULL,
              L.mg.dim.bd if L.mg != NULL else 1, n.fa[0], L.H, L.B)
    else:
        _cell(<double*>n.v, <double*>L.G, <double*>L.TC, <double*>L.prev.v if L.prev != NULL else NULL,
              L.prev.dim.bd if L.prev != NULL else 1, <double*>L.mg.v if L.mg != NULL else NULL,
              L.mg.dim.bd if L.mg != NULL else 1, n.fa[0], L.H, L.B)


cdef void _dgates(real* D, real* DC, real* gy, real* G, real* TC, real* prev, int bprev, real* mg, int bmg,
                  int H, int B) noexcept nogil:
    """D = gradient of the pre-activations, DC = gradient of c_t (from h_t and c_t).
    Separate branch-free loops so that they vectorise."""
    cdef Py_ssize_t b, j
    cdef real* a
    cdef real* d
    cdef real* dh
    cdef real* dc
    cdef real* t
    cdef real* pc
    cdef real* m
    cdef real one = 1     # a typed 1: a literal would promote the loops to double
    for b in range(B):
        a = G + b * 4 * H
        d = D + b * 4 * H
        dh = gy + b * 2 * H
        dc = DC + b * H
        t = TC + b * H
        for j in range(H):
            dc[j] = dh[H + j] + dh[j] * a[2 * H + j] * (one - t[j] * t[j])
        for j in range(H):
            d[2 * H + j] = dh[j] * t[j] * a[2 * H + j] * (one - a[2 * H + j])
        if mg == NULL:
            for j in range(H):
                d[j] = dc[j] * a[3 * H + j] * a[j] * (one - a[j])
                d[3 * H + j] = dc[j] * a[j] * (one - a[3 * H + j] * a[3 * H + j])
        else:
            m = mg + (b * H if bmg > 1 else 0)
            for j in range(H):
                d[j] = dc[j] * a[3 * H + j] * m[j] * a[j] * (one - a[j])
                d[3 * H + j] = dc[j] * a[j] * m[j] * (one - a[3 * H + j] * a[3 * H + j])
        if prev == NULL:
            for j in range(H):
                d[H + j] = 0
        else:
            pc = prev + (b * 2 * H if bprev > 1 else 0) + H
            for j in range(H):
                d[H + j] = dc[j] * pc[j] * a[H + j] * (one - a[H + j])


cdef void _bwd_prev(real* gprev, int bprev, real* TMP, real* mh, int bmh, real* DC, real* G, int H,
                    int B) noexcept nogil:
    """d prev = [(Wh^T d) * mask_h; dc * f] (TMP holds Wh^T d)."""
    cdef Py_ssize_t b, j
    cdef real* q
    cdef real* m
    cdef real* t
    cdef real* dc
    cdef real* f
    for b in range(B):
        q = gprev + (b * 2 * H if bprev > 1 else 0)
        t = TMP + b * H
        dc = DC + b * H
        f = G + b * 4 * H + H
        if mh == NULL:
            for j in range(H):
                q[j] += t[j]
        else:
            m = mh + (b * H if bmh > 1 else 0)
            for j in range(H):
                q[j] += t[j] * m[j]
        for j in range(H):
            q[H + j] += dc[j] * f[j]


cdef void _bwd_mask_h(real* gm, int bm, real* TMP, real* prev, int bprev, int H, int B) noexcept nogil:
    cdef Py_ssize_t b, j
    cdef real* q
    cdef real* ph
    for b in range(B):
        q = gm + (b * H if bm > 1 else 0)
        ph = prev + (b * 2 * H if bprev > 1 else 0)
        for j in range(H):
            q[j] += TMP[b * H + j] * ph[j]


cdef void _bwd_mask_g(real* gm, int bm, real* DC, real* G, int H, int B) noexcept nogil:
    cdef Py_ssize_t b, j
    cdef real* q
    for b in range(B):
        q = gm + (b * H if bm > 1 else 0)
        for j in range(H):
            q[j] += DC[b * H + j] * G[b * 4 * H + j] * G[b * 4 * H + 3 * H + j]


cdef void _wh_t_d(Graph* g, Step* L) noexcept:
    if L.B == 1:
        _gemv(g, b'T', 4 * L.H, L.H, L.Wh.v, L.D, 0.0, L.TMP)
    else:
        _blas.gemm(g.dtype, b'T', b'N', L.H, L.B, 4 * L.H, 1.0, L.Wh.v, 4 * L.H, L.D, 4 * L.H, 0.0, L.TMP, L.H)


cdef void bwd_step(Graph* g, Node* n, int i) noexcept:
    cdef Step L
    cdef int H4, which, first, b
    cdef Node* a = arg(g, n, i)
    _layout(g, n, &L)
    H4 = 4 * L.H
    # D and DC once per backward pass: at the first argument that takes a
    # gradient (backward visits the arguments in order; the others have g NULL)
    first = 0
    while arg(g, n, first).g == NULL:
        first += 1
    if i == first:
        if g.dtype == 0:
            _dgates(<float*>L.D, <float*>L.DC, <float*>n.g, <float*>L.G, <float*>L.TC,
                    <float*>L.prev.v if L.prev != NULL else NULL, L.prev.dim.bd if L.prev != NULL else 1,
                    <float*>L.mg.v if L.mg != NULL else NULL, L.mg.dim.bd if L.mg != NULL else 1, L.H, L.B)
        else:
            _dgates(<double*>L.D, <double*>L.DC, <double*>n.g, <double*>L.G, <double*>L.TC,
                    <double*>L.prev.v if L.prev != NULL else NULL, L.prev.dim.bd if L.prev != NULL else 1,
                    <double*>L.mg.v if L.mg != NULL else NULL, L.mg.dim.bd if L.mg != NULL else 1, L.H, L.B)
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
            _blas.vadd(g.dtype, H4, L.D + <size_t>b * H4 * L.isz,
                       elem_g(a, b, <long>H4 * L.T, L.isz) + <size_t>L.col * H4 * L.isz)
    elif which == 2:           # dWh += d h_{t-1}^T, summed over the batch
        if a.op == OP_WEIGHT:
            pass               # lstm_step_weight does it for every step in one product
        elif L.B == 1:
            _ger(g, H4, L.H, L.D, L.X, a.g)
        else:
            _blas.gemm(g.dtype, b'N', b'T', H4, L.H, L.B, 1.0, L.D, H4, L.X, L.ldx, 1.0, a.g, H4)
    elif which == 4:           # mask_g
        if g.dtype == 0:
            _bwd_mask_g(<float*>a.g, a.dim.bd, <float*>L.DC, <float*>L.G, L.H, L.B)
        else:
            _bwd_mask_g(<double*>a.g, a.dim.bd, <double*>L.DC, <double*>L.G, L.H, L.B)
    else:                      # prev or mask_h: both need Wh^T d (computed once, for the first)
        if which == 1 or L.prev.g == NULL:
            _wh_t_d(g, &L)
        if which == 1:
            if g.dtype == 0:
                _bwd_prev(<float*>a.g, a.dim.bd, <float*>L.TMP, <float*>L.mh.v if L.mh != NULL else NULL,
                          L.mh.dim.bd if L.mh != NULL else 1, <float*>L.DC, <float*>L.G, L.H, L.B)
            else:
                _bwd_prev(<double*>a.g, a.dim.bd, <double*>L.TMP, <double*>L.mh.v if L.mh != NULL else NULL,
                          L.mh.dim.bd if L.mh != NULL else 1, <double*>L.DC, <double*>L.G, L.H, L.B)
        elif g.dtype == 0:
            _bwd_mask_h(<float*>a.g, a.dim.bd, <float*>L.TMP, <float*>L.prev.v, L.prev.dim.bd, L.H, L.B)
        else:
            _bwd_mask_h(<double*>a.g, a.dim.bd, <double*>L.TMP, <double*>L.prev.v, L.prev.dim.bd, L.H, L.B)


cdef int OP_STEP = register_op("lstm_step", _shape_step, fwd_step, bwd_step)

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


cdef void fwd_weight(Graph* g, Node* n) noexcept:
    n.v = arg(g, n, 0).v


cdef void bwd_weight(Graph* g, Node* n, int i) noexcept:
    cdef Node* w = arg(g, n, 0)
    cdef Node* s
    cdef Step L
    cdef int me = <int>(n - g.nodes), j, b, cols = 0, k = 0, H = w.dim.d[1], isz = g.itemsize
    cdef char* D
    cdef char* X
    _blas.axpy(g.dtype, dim_total(&n.dim), 1.0, n.g, w.g)
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
            _layout(g, s, &L)
            memcpy(D + <size_t>k * 4 * H * isz, L.D, <size_t>L.B * 4 * H * isz)
            for b in range(L.B):
                memcpy(X + <size_t>(k + b) * H * isz, L.X + <size_t>b * L.ldx * isz, <size_t>H * isz)
            k += L.B
    _blas.gemm(g.dtype, b'N', b'T', 4 * H, H, cols, 1.0, D, 4 * H, X, H, 1.0, w.g, 4 * H)
    free(D)


cdef int OP_WEIGHT = register_op("lstm_step_weight", _shape_weight, fwd_weight, bwd_weight)


def lstm_step_weight(Wh):
    expr_arg(Wh, "lstm_step_weight")
    return finish(noden(OP_WEIGHT, [Wh], "lstm_step_weight"))


def lstm_sequence(P, prev, Wh, mask_h, mask_g, int T, double forget_bias):
    """The builders' loop: lstm_step nodes for columns 0..T-1 of P, each
    followed by its lstm_step_h node, created here in C. prev None starts
    without a previous state (Wh and mask_h are then used from the second
    step on). Returns (states, hs)."""
    cdef int t, k, flags, nid, s_id = -1, P_id, Wh_id, mh_id = -1, mg_id = -1
    cdef int ids[5]
    cdef list states = [], hs = []
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
    if mask_h is not None:
        mh_id = arg_id(mask_h, OP_STEP)
    if mask_g is not None:
        mg_id = arg_id(mask_g, OP_STEP)
    for t in range(T):
        ids[0] = P_id
        k = 1
        flags = 0
        if s_id >= 0:
            flags = PREV
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
        states.append(wrap(nid))
        s_id = nid
        nid = new_node(OP_PART, 1, &s_id)      # its h (lstm_step_part, which 0)
        g_node(nid).ia[1] = 0
        finish_node(nid)
        hs.append(wrap(nid))
    return states, hs


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


cdef void fwd_part(Graph* g, Node* n) noexcept:
    cdef int b, H = n.dim.d[0], isz = g.itemsize
    cdef Node* s = arg(g, n, 0)
    for b in range(n.dim.bd):
        memcpy(<char*>n.v + <size_t>b * H * isz, elem_v(s, b, 2 * H, isz) + <size_t>n.ia[0] * isz, <size_t>H * isz)


cdef void bwd_part(Graph* g, Node* n, int i) noexcept:
    cdef int b, H = n.dim.d[0], isz = g.itemsize
    cdef Node* s = arg(g, n, 0)
    for b in range(n.dim.bd):
        _blas.vadd(g.dtype, H, <char*>n.g + <size_t>b * H * isz, elem_g(s, b, 2 * H, isz) + <size_t>n.ia[0] * isz)


cdef int OP_PART = register_op("lstm_step_part", _shape_part, fwd_part, bwd_part)


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
        return ABA_CAT if a.dim.bd == n.dim.bd else ABA_NO
    if (flags & PREV) and k == 2:
        return ABA_SHARE
    if a.dim.bd == 1:              # masks: one per builder and graph
        return ABA_SHARE
    return ABA_CAT if a.dim.bd == n.dim.bd else ABA_NO


cdef void _ab_fix_step(Graph* g, Node* n) noexcept:
    n.ia[0] = 0                    # the gathered columns form a {4H} x members projection
    n.ia[2] = 1


# P and the parts' states may come per member (no gathered copy): the kernels read them by element
set_autobatch(OP_STEP, AB_ON, 0, 0x1a, _ab_arg_step, _ab_fix_step, 1)   # ia: flags, H, h in place
set_autobatch(OP_PART, AB_ON, 0, 0x3f, NULL, NULL, 1)
set_autobatch(OP_WEIGHT, AB_ALIAS)
