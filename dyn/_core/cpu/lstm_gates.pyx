# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the fused LSTM nodes of DyNet's CompactVanillaLSTMBuilder:
vanilla_lstm_gates (and its concat / dropout variants), vanilla_lstm_c and
vanilla_lstm_h (their definitions: dyn/_core/ops/rnn.pyx). The gates node does
a whole step's affine transform and nonlinearities with one matrix product per
weight matrix (one gemm for a whole batch), and its backward is fused likewise.

Gate rows are in DyNet's order [i; f; o; g]: i, f, o sigmoid (f with a
forget bias of 1 inside), g tanh.
"""
from libc.math cimport tanh
from libc.string cimport memcpy
from dyn._core.core.graph cimport Graph, Node, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, arg, rand_normal
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport batch_ptr, lstm_gate_act
from dyn._core.ops.rnn cimport DROP, CELL, OP_GATES, OP_CH

cdef extern from "_fastmath.h" nogil:
    void dyn_tanh_f32(float* y, const float* x, long n)

# ---------------------------------------------------------------- vanilla_lstm_gates
# args: x_1..x_m, h_tm1, Wx, Wh, b [, mask_x, mask_h]
# ia: 0 m, 1 flags (DROP, CONCAT), 2 input size I, 3 hidden size H,
#     4 x used in place (one x, no mask, full batch), 5 h used in place; fa[0] weight noise std
# aux (items): d (4H x B, backward) | x (I x B) | h (H x B) | scratch (max(I,H) x B) | noisy Wx, Wh, b

ctypedef struct Gates:
    int m, I, H, B, isz, drop
    Node* h
    Node* Wx
    Node* Wh
    Node* b
    Node* mx
    Node* mh
    char* d
    char* xbuf
    char* hbuf
    char* X         # the (concatenated, masked) input, I x B
    char* Hp        # the (masked) previous state, H x B
    char* tmp
    char* Wxn       # the weights used (noisy copies when weightnoise_std > 0)
    char* Whn
    char* bn


cdef void _layout(Graph* g, Node* n, Gates* L, int isz) noexcept:
    """The node's buffers for items of isz bytes (the kernel's sizeof(real))."""
    cdef int m = n.ia[0], I = n.ia[2], H = n.ia[3], B = n.dim.bd
    cdef int mx = I if I > H else H
    L.m = m
    L.I = I
    L.H = H
    L.B = B
    L.isz = isz
    L.drop = n.ia[1] & DROP
    L.h = arg(g, n, m)
    L.Wx = arg(g, n, m + 1)
    L.Wh = arg(g, n, m + 2)
    L.b = arg(g, n, m + 3)
    L.mx = arg(g, n, m + 4) if L.drop else NULL
    L.mh = arg(g, n, m + 5) if L.drop else NULL
    L.d = <char*>n.aux
    L.xbuf = L.d + <size_t>4 * H * B * isz
    L.hbuf = L.xbuf + <size_t>I * B * isz
    L.tmp = L.hbuf + <size_t>H * B * isz
    L.X = <char*>arg(g, n, 0).v if n.ia[4] else L.xbuf
    L.Hp = <char*>L.h.v if n.ia[5] else L.hbuf
    if n.fa[0] > 0:
        L.Wxn = L.tmp + <size_t>mx * B * isz
        L.Whn = L.Wxn + <size_t>4 * H * I * isz
        L.bn = L.Whn + <size_t>4 * H * H * isz
    else:
        L.Wxn = <char*>L.Wx.v
        L.Whn = <char*>L.Wh.v
        L.bn = <char*>L.b.v


cdef void _cmul_in(real* x, real* mask, int m) noexcept nogil:
    cdef int i
    for i in range(m):
        x[i] *= mask[i]


cdef void _noisy(Graph* g, real* y, real* x, long m, double sd) noexcept:
    cdef long i
    for i in range(m):
        y[i] = x[i] + <real>(sd * rand_normal(g))


cdef void _act(real* y, int H, int B) noexcept nogil:
    # i, f, o sigmoid (f with DyNet's forget bias 1), g tanh
    cdef int b
    for b in range(B):
        lstm_gate_act(y + <long>b * 4 * H, H, 1.0)


cdef void _gather(Graph* g, Node* n, Gates* L, real* buf, int first, int last, int size, Node* mask) noexcept:
    """buf (size x B) = concatenation of args first..last-1 (batch broadcast), times mask."""
    cdef int b, k, off, s, isz = sizeof(real)
    cdef Node* a
    for b in range(L.B):
        off = 0
        for k in range(first, last):
            a = arg(g, n, k)
            s = a.dim.d[0]
            memcpy(buf + <size_t>(b * size + off), batch_ptr(a.v, b, a.dim.bd, s, isz), <size_t>s * isz)
            off += s
        if mask != NULL:
            _cmul_in(buf + <size_t>b * size, <real*>batch_ptr(mask.v, b, mask.dim.bd, size, isz), size)


# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.

cdef void fwd_gates(Graph* g, Node* n, real* y) noexcept:
    cdef Gates L
    cdef int b, H4
    _layout(g, n, &L, sizeof(real))
    H4 = 4 * L.H
    if not n.ia[4]:
        _gather(g, n, &L, <real*>L.xbuf, 0, L.m, L.I, L.mx)
    if not n.ia[5]:
        _gather(g, n, &L, <real*>L.hbuf, L.m, L.m + 1, L.H, L.mh)
    if n.fa[0] > 0:
        # fresh N(0, std^2) on every weight for this step (DyNet's weight noise)
        _noisy(g, <real*>L.Wxn, <real*>L.Wx.v, <long>H4 * L.I, n.fa[0])
        _noisy(g, <real*>L.Whn, <real*>L.Wh.v, <long>H4 * L.H, n.fa[0])
        _noisy(g, <real*>L.bn, <real*>L.b.v, H4, n.fa[0])
    for b in range(L.B):
        memcpy(y + <size_t>b * H4, L.bn, <size_t>H4 * sizeof(real))
    _blas.matmul_cols(real_dtype(y), b'N', H4, L.B, L.I, L.Wxn, H4, L.X, 1.0, y)
    _blas.matmul_cols(real_dtype(y), b'N', H4, L.B, L.H, L.Whn, H4, L.Hp, 1.0, y)
    _act(y, L.H, L.B)


cdef void _dgates(real* d, real* gy, real* y, int H, int B) noexcept nogil:
    """Gradient of the pre-activations from the output's: sigma' = y(1-y), tanh' = 1-y^2."""
    cdef long b, i, o
    cdef real one = 1     # typed: a literal 1 would be a double and the loops would run in double
    for b in range(B):
        o = b * 4 * H
        for i in range(o, o + 3 * H):
            d[i] = gy[i] * y[i] * (one - y[i])
        for i in range(o + 3 * H, o + 4 * H):
            d[i] = gy[i] * (one - y[i] * y[i])


cdef void _scatter(real* gx, int bx, real* t, int size, real* mask, int bm, int mstride, int off,
                   int B) noexcept nogil:
    """gx (size, batch bx) += t (size x B) times mask[off:off+size] (mask NULL: none); bx 1 sums."""
    cdef int b, j
    cdef real* px
    cdef real* pt
    cdef real* pm
    for b in range(B):
        px = gx + (b * size if bx > 1 else 0)
        pt = t + b * size
        if mask == NULL:
            for j in range(size):
                px[j] += pt[j]
        else:
            pm = mask + (b * mstride if bm > 1 else 0) + off
            for j in range(size):
                px[j] += pt[j] * pm[j]


cdef void _mask_grad(real* gm, int bm, real* t, int stride, real* x, int bx, int off, int size,
                     int B) noexcept nogil:
    """gm[off:off+size] (stride per batch, batch bm) += t[off:off+size] * x (x: size, batch bx)."""
    cdef int b, j
    cdef real* pg
    cdef real* pt
    cdef real* px
    for b in range(B):
        pg = gm + (b * stride if bm > 1 else 0) + off
        pt = t + b * stride + off
        px = x + (b * size if bx > 1 else 0)
        for j in range(size):
            pg[j] += pt[j] * px[j]


cdef void _to_arg(Node* a, real* t, int size, Node* mask, int mstride, int off, int B) noexcept:
    _scatter(<real*>a.g, a.dim.bd, t, size, <real*>mask.v if mask != NULL else NULL,
             mask.dim.bd if mask != NULL else 1, mstride, off, B)


cdef void _to_mask(Node* mask, real* t, int stride, Node* a, int off, int size, int B) noexcept:
    _mask_grad(<real*>mask.g, mask.dim.bd, t, stride, <real*>a.v, a.dim.bd, off, size, B)


cdef void bwd_gates(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Gates L
    cdef int k, off = 0, s, H4
    cdef int dt = real_dtype(gy)
    cdef Node* a
    _layout(g, n, &L, sizeof(real))
    H4 = 4 * L.H
    # d is recomputed for each argument: 4H x B elementwise, small next to the products
    _dgates(<real*>L.d, gy, <real*>n.v, L.H, L.B)
    if i < L.m:                 # dx_k = (Wx columns of x_k)^T d (times its mask)
        for k in range(i):
            off += arg(g, n, k).dim.d[0]
        a = arg(g, n, i)
        s = a.dim.d[0]
        if n.ia[4]:
            _blas.matmul_cols(dt, b'T', s, L.B, H4, L.Wxn, H4, L.d, 1.0, a.g)
        else:
            _blas.matmul_cols(dt, b'T', s, L.B, H4, L.Wxn + <size_t>off * H4 * L.isz, H4, L.d, 0.0, L.tmp)
            _to_arg(a, <real*>L.tmp, s, L.mx, L.I, off, L.B)
    elif i == L.m:              # dh = Wh^T d (times its mask)
        if n.ia[5]:
            _blas.matmul_cols(dt, b'T', L.H, L.B, H4, L.Whn, H4, L.d, 1.0, L.h.g)
        else:
            _blas.matmul_cols(dt, b'T', L.H, L.B, H4, L.Whn, H4, L.d, 0.0, L.tmp)
            _to_arg(L.h, <real*>L.tmp, L.H, L.mh, L.H, 0, L.B)
    elif i == L.m + 1:          # dWx = d X^T, summed over the batch
        _blas.outer_acc(dt, H4, L.I, L.B, L.d, L.X, L.Wx.g)
    elif i == L.m + 2:
        _blas.outer_acc(dt, H4, L.H, L.B, L.d, L.Hp, L.Wh.g)
    elif i == L.m + 3:
        for k in range(L.B):
            _blas.axpy(dt, H4, 1.0, L.d + <size_t>k * H4 * L.isz, L.b.g)
    elif i == L.m + 4:          # masks (DyNet gives them none): d mask_x = x * (Wx^T d)
        _blas.matmul_cols(dt, b'T', L.I, L.B, H4, L.Wxn, H4, L.d, 0.0, L.tmp)
        for k in range(L.m):
            a = arg(g, n, k)
            _to_mask(L.mx, <real*>L.tmp, L.I, a, off, a.dim.d[0], L.B)
            off += a.dim.d[0]
    else:
        _blas.matmul_cols(dt, b'T', L.H, L.B, H4, L.Whn, H4, L.d, 0.0, L.tmp)
        _to_mask(L.mh, <real*>L.tmp, L.H, L.h, 0, L.H, L.B)

set_kernels(OP_GATES, DEV_CPU, <kfwd_fn>fwd_gates[float], <kfwd_fn>fwd_gates[double],
            <kbwd_fn>bwd_gates[float], <kbwd_fn>bwd_gates[double])

# ---------------------------------------------------------------- vanilla_lstm_c, vanilla_lstm_h
# c_t = i * g + f * c_tm1;  h_t = o * tanh(c_t)  (aux of h: tanh(c_t), kept for backward)

cdef void _cell_fwd(real* y, real* c, real* gt, int H, int B) noexcept nogil:
    cdef int b, j
    cdef real* p
    for b in range(B):
        p = gt + b * 4 * H
        for j in range(H):
            y[b * H + j] = p[j] * p[3 * H + j] + p[H + j] * c[b * H + j]


cdef void _cell_bwd(real* gx, real* gy, real* c, real* gt, int H, int B, int which) noexcept nogil:
    cdef int b, j
    cdef real* p
    cdef real* q
    for b in range(B):
        p = gt + b * 4 * H
        if which == 0:
            for j in range(H):
                gx[b * H + j] += gy[b * H + j] * p[H + j]
        else:
            q = gx + b * 4 * H
            for j in range(H):
                q[j] += gy[b * H + j] * p[3 * H + j]
                q[H + j] += gy[b * H + j] * c[b * H + j]
                q[3 * H + j] += gy[b * H + j] * p[j]


cdef void _hidden_fwd(real* y, real* c, real* gt, real* t, int H, int B) noexcept nogil:
    cdef int b, j
    if real is float:
        dyn_tanh_f32(t, c, <long>H * B)
    else:
        for j in range(H * B):
            t[j] = tanh(c[j])
    for b in range(B):
        for j in range(H):
            y[b * H + j] = gt[b * 4 * H + 2 * H + j] * t[b * H + j]


cdef void _hidden_bwd(real* gx, real* gy, real* gt, real* t, int H, int B, int which) noexcept nogil:
    cdef int b, j
    cdef real one = 1     # typed: a literal 1 would be a double
    for b in range(B):
        for j in range(H):
            if which == 0:
                gx[b * H + j] += gy[b * H + j] * gt[b * 4 * H + 2 * H + j] * (one - t[b * H + j] * t[b * H + j])
            else:
                gx[b * 4 * H + 2 * H + j] += gy[b * H + j] * t[b * H + j]


cdef void fwd_ch(Graph* g, Node* n, real* y) noexcept:
    cdef Node* c = arg(g, n, 0)
    cdef Node* gt = arg(g, n, 1)
    cdef int H = c.dim.d[0], B = n.dim.bd
    if n.ia[0] == CELL:
        _cell_fwd(y, <real*>c.v, <real*>gt.v, H, B)
    else:
        _hidden_fwd(y, <real*>c.v, <real*>gt.v, <real*>n.aux, H, B)


cdef void bwd_ch(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* c = arg(g, n, 0)
    cdef Node* gt = arg(g, n, 1)
    cdef int H = c.dim.d[0], B = n.dim.bd
    cdef real* gx = <real*>arg(g, n, i).g
    if n.ia[0] == CELL:
        _cell_bwd(gx, gy, <real*>c.v, <real*>gt.v, H, B, i)
    else:
        _hidden_bwd(gx, gy, <real*>gt.v, <real*>n.aux, H, B, i)

set_kernels(OP_CH, DEV_CPU, <kfwd_fn>fwd_ch[float], <kfwd_fn>fwd_ch[double],
            <kbwd_fn>bwd_ch[float], <kbwd_fn>bwd_ch[double])
