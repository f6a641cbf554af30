# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the conv family (declared in dyn/_core/ops/conv.pyx): conv2d / conv2d_bias,
maxpooling2d, filter1d_narrow.

conv2d is im2col + ONE gemm for the whole batch: the patch matrix Col has a
row per (output pixel, batch element) and a column per filter tap (fh, fw, ci),
so Y = Col * F with F the K x Co view of the filter. Backward: dF = Col^T dY
and dCol = dY F^T, scattered back by col2im. A batched filter (each batch
element its own filter; DyNet silently uses the first) costs a gemm per element.

Scratch (n.aux): Col, then (batch > 1 only) the gemm's output before it is
permuted into the (pixel, channel, batch) order of the value. x's backward
reuses Col for dCol (after taking dF from it when the filter needs a
gradient too); ia[5] records the state of Col (see _conv_bwd).
"""
from libc.string cimport memset, memcpy
from dyn._core.core.graph cimport Graph, Node, Dim, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, arg
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.conv cimport OP_CONV, OP_CONVB, OP_POOL, OP_F1D, _out, _dim

ctypedef struct Geo:
    int H, W, C         # one batch element of x
    int FH, FW, Co      # filter (or pooling window: Co = C)
    int OH, OW
    int sh, sw
    int pt, pl          # padding before the first row / column
    int xb, fb, bb, B   # batch sizes: x, filter, bias, output
    int Bc              # batch of the convolution before the bias: max(xb, fb)

# ---------------------------------------------------------------- geometry

cdef inline int _pad(int X, int F, int s, int out, bint valid) noexcept nogil:
    cdef int total
    if valid:
        return 0
    total = (out - 1) * s + F - X
    return total // 2 if total > 0 else 0


# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations, so no kernel asks which float type it runs in (the
# gemm calls take real_dtype, a compile-time constant).


cdef void _geo(Graph* g, Node* n, Geo* q) noexcept:
    """Geometry of a conv2d / maxpooling2d node from its (checked) dims."""
    cdef Node* x = arg(g, n, 0)
    cdef Node* f
    cdef bint valid = n.ia[2]
    q.H = x.dim.d[0]
    q.W = x.dim.d[1]
    q.C = _dim(&x.dim, 2)
    q.sh = n.ia[0]
    q.sw = n.ia[1]
    q.xb = x.dim.bd
    q.B = n.dim.bd
    q.fb = 1
    q.bb = 1
    if n.nargs >= 2:                # conv2d
        f = arg(g, n, 1)
        q.FH = f.dim.d[0]
        q.FW = f.dim.d[1]
        q.Co = f.dim.d[3]
        q.fb = f.dim.bd
        if n.nargs == 3:
            q.bb = arg(g, n, 2).dim.bd
    else:                           # pooling: window in ia[3], ia[4]
        q.FH = n.ia[3]
        q.FW = n.ia[4]
        q.Co = q.C
    q.Bc = q.xb if q.xb > q.fb else q.fb
    q.OH = _out(q.H, q.FH, q.sh, valid)
    q.OW = _out(q.W, q.FW, q.sw, valid)
    q.pt = _pad(q.H, q.FH, q.sh, q.OH, valid)
    q.pl = _pad(q.W, q.FW, q.sw, q.OW, valid)

# ---------------------------------------------------------------- im2col

cdef inline void _span(int n_out, int s, int off, int X, int* lo, int* hi) noexcept nogil:
    """Outputs o in [lo, hi) read inside the input: 0 <= o * s + off < X."""
    cdef int a = 0, b = n_out
    if off < 0:
        a = (-off + s - 1) // s
    if (n_out - 1) * s + off >= X:
        b = (X - 1 - off) // s + 1 if X - 1 - off >= 0 else 0
    if b < a:
        b = a
    lo[0] = a if a < n_out else n_out
    hi[0] = b if b < n_out else n_out


cdef void _im2col(real* col, real* x, Geo* q) noexcept nogil:
    """col[p + P*b, k] = x_b[oh*sh + fh - pt, ow*sw + fw - pl, ci] (0 outside),
    p = oh + OH*ow, k = fh + FH*(fw + FW*ci); leading dimension P * xb.
    Per (tap, batch element, output column) the rows inside the image are one
    strided run (contiguous at stride 1), so the copy has no per-pixel test."""
    cdef int P = q.OH * q.OW, ci, fh, fw, b, oh, ow, iw, k, lo, hi, wlo, whi
    cdef long PX = <long>P * q.xb, sx = <long>q.H * q.W * q.C
    cdef real* xp
    cdef real* cp
    cdef real* src
    cdef real* dst
    for ci in range(q.C):
        for fw in range(q.FW):
            _span(q.OW, q.sw, fw - q.pl, q.W, &wlo, &whi)
            for fh in range(q.FH):
                k = fh + q.FH * (fw + q.FW * ci)
                _span(q.OH, q.sh, fh - q.pt, q.H, &lo, &hi)
                for b in range(q.xb):
                    xp = x + b * sx + <long>ci * q.H * q.W
                    cp = col + k * PX + <long>b * P
                    if wlo > 0:
                        memset(cp, 0, <long>wlo * q.OH * sizeof(real))
                    if whi < q.OW:
                        memset(cp + <long>whi * q.OH, 0, <long>(q.OW - whi) * q.OH * sizeof(real))
                    for ow in range(wlo, whi):
                        iw = ow * q.sw + fw - q.pl
                        dst = cp + <long>q.OH * ow
                        src = xp + <long>q.H * iw + fh - q.pt
                        for oh in range(lo):
                            dst[oh] = 0
                        if q.sh == 1:
                            memcpy(dst + lo, src + lo, (hi - lo) * sizeof(real))
                        else:
                            for oh in range(lo, hi):
                                dst[oh] = src[oh * q.sh]
                        for oh in range(hi, q.OH):
                            dst[oh] = 0


cdef void _col2im(real* gx, real* col, Geo* q) noexcept nogil:
    """The transpose of _im2col, accumulated: gx += col2im(col)."""
    cdef int P = q.OH * q.OW, ci, fh, fw, b, oh, ow, iw, k, lo, hi, wlo, whi
    cdef long PX = <long>P * q.xb, sx = <long>q.H * q.W * q.C
    cdef real* src
    cdef real* dst
    for ci in range(q.C):
        for fw in range(q.FW):
            _span(q.OW, q.sw, fw - q.pl, q.W, &wlo, &whi)
            for fh in range(q.FH):
                k = fh + q.FH * (fw + q.FW * ci)
                _span(q.OH, q.sh, fh - q.pt, q.H, &lo, &hi)
                for b in range(q.xb):
                    for ow in range(wlo, whi):
                        iw = ow * q.sw + fw - q.pl
                        src = col + k * PX + <long>b * P + <long>q.OH * ow
                        dst = gx + b * sx + <long>ci * q.H * q.W + <long>q.H * iw + fh - q.pt
                        if q.sh == 1:
                            for oh in range(lo, hi):
                                dst[oh] += src[oh]
                        else:
                            for oh in range(lo, hi):
                                dst[oh * q.sh] += src[oh]

# ---------------------------------------------------------------- conv2d

cdef void _conv_fwd(Graph* g, Node* n, real* y, real* x, real* f, real* bias) noexcept:
    cdef Geo q
    _geo(g, n, &q)
    cdef int P = q.OH * q.OW, K = q.FH * q.FW * q.C, b, co, p, xi
    cdef int PX = P * q.xb, PC = P * q.Bc
    cdef real* col = <real*>n.aux
    cdef real* out = y if q.B == 1 else col + <long>PX * K   # batch 1: the gemm's order is y's
    cdef real* src
    cdef real* dst
    cdef real bv
    _im2col(col, x, &q)
    n.ia[5] = 0
    if q.fb == 1:       # the common case: one gemm for the whole batch
        _blas.gemm(real_dtype(y), b'N', b'N', PC, q.Co, K, 1.0, col, PX, f, K, 0.0, out, PC)
    else:
        for b in range(q.fb):
            xi = b if q.xb > 1 else 0
            _blas.gemm(real_dtype(y), b'N', b'N', P, q.Co, K, 1.0, col + <long>P * xi, PX,
                       f + <long>b * K * q.Co, K, 0.0, out + <long>P * b, PC)
    for b in range(q.B):
        for co in range(q.Co):
            bv = bias[co + q.Co * (b if q.bb > 1 else 0)] if bias != NULL else 0
            dst = y + (<long>b * q.Co + co) * P
            if q.B == 1:
                if bias != NULL:
                    for p in range(P):
                        dst[p] += bv
                continue
            src = out + <long>co * PC + <long>(b if q.Bc > 1 else 0) * P
            for p in range(P):
                dst[p] = src[p] + bv


cdef real* _conv_dy(Node* n, real* gy, Geo* q) noexcept nogil:
    """dY in the gemm's order (pixel + P * batch, channel): n.g itself at batch 1."""
    cdef int P = q.OH * q.OW, K = q.FH * q.FW * q.C, b, co, p
    cdef long PC = <long>P * q.Bc
    cdef real* t
    cdef real* src
    cdef real* dst
    if q.B == 1:
        return gy
    t = <real*>n.aux + <long>P * q.xb * K
    memset(t, 0, PC * q.Co * sizeof(real))
    for b in range(q.B):
        for co in range(q.Co):
            src = gy + (<long>b * q.Co + co) * P
            dst = t + co * PC + <long>(b if q.Bc > 1 else 0) * P
            for p in range(P):
                dst[p] += src[p]
    return t


cdef void _conv_df(Graph* g, Node* n, Geo* q, real* x, real* dy, real* gf) noexcept:
    """dF += Col^T dY (rebuilding Col first if it holds dCol)."""
    cdef int P = q.OH * q.OW, K = q.FH * q.FW * q.C, b, xi
    cdef int PX = P * q.xb, PC = P * q.Bc
    cdef real* col = <real*>n.aux
    if n.ia[5]:
        _im2col(col, x, q)
        n.ia[5] = 0
    if q.fb == 1:
        _blas.gemm(real_dtype(dy), b'T', b'N', K, q.Co, PC, 1.0, col, PX, dy, PC, 1.0, gf, K)
    else:
        for b in range(q.fb):
            xi = b if q.xb > 1 else 0
            _blas.gemm(real_dtype(dy), b'T', b'N', K, q.Co, P, 1.0, col + <long>P * xi, PX,
                       dy + <long>P * b, PC, 1.0, gf + <long>b * K * q.Co, K)


cdef void _conv_bwd(Graph* g, Node* n, int i, real* gy, real* x, real* gx, real* f,
                    real* gf, real* gbias) noexcept:
    # ia[5]: 0 Col is the forward's patch matrix; 1 Col holds dCol; 2 as 1, and
    # x's backward has already added the filter's gradient of this pass.
    # Arguments are back-propagated in order (x, f, b), and an argument gets a
    # gradient in this pass exactly when its .g is set, so x's backward knows
    # whether f's will follow and can use Col for dF before overwriting it.
    cdef Geo q
    _geo(g, n, &q)
    cdef int P = q.OH * q.OW, K = q.FH * q.FW * q.C, b, co, p, xi
    cdef int PX = P * q.xb, PC = P * q.Bc
    cdef real* col = <real*>n.aux
    cdef real* dy
    cdef double s
    if i == 2:
        for b in range(q.B):
            for co in range(q.Co):
                s = 0
                for p in range(P):
                    s += gy[(<long>b * q.Co + co) * P + p]
                gbias[co + q.Co * (b if q.bb > 1 else 0)] += <real>s
        return
    if i == 1 and n.ia[5] == 2:
        n.ia[5] = 1
        return
    dy = _conv_dy(n, gy, &q)
    if i == 1 or gf != NULL:
        _conv_df(g, n, &q, x, dy, gf)
    if i == 1:
        return
    # dCol = dY F^T into Col's memory, then col2im
    if q.fb == 1:
        _blas.gemm(real_dtype(gy), b'N', b'T', PX, K, q.Co, 1.0, dy, PC, f, K, 0.0, col, PX)
    else:
        for b in range(q.fb):
            xi = b if q.xb > 1 else 0
            _blas.gemm(real_dtype(gy), b'N', b'T', P, K, q.Co, 1.0, dy + <long>P * b, PC,
                       f + <long>b * K * q.Co, K, 0.0 if (q.xb > 1 or b == 0) else 1.0,
                       col + <long>P * xi, PX)
    _col2im(gx, col, &q)
    n.ia[5] = 2 if gf != NULL else 1


cdef inline void* _argv(Graph* g, Node* n, int i) noexcept:
    return arg(g, n, i).v if i < n.nargs else NULL


cdef inline void* _argg(Graph* g, Node* n, int i) noexcept:
    return arg(g, n, i).g if i < n.nargs else NULL


cdef void fwd_conv(Graph* g, Node* n, real* y) noexcept:
    _conv_fwd(g, n, y, <real*>_argv(g, n, 0), <real*>_argv(g, n, 1), <real*>_argv(g, n, 2))


cdef void bwd_conv(Graph* g, Node* n, int i, real* gy) noexcept:
    _conv_bwd(g, n, i, gy, <real*>_argv(g, n, 0), <real*>_argg(g, n, 0),
              <real*>_argv(g, n, 1), <real*>_argg(g, n, 1), <real*>_argg(g, n, 2))


set_kernels(OP_CONV, DEV_CPU, <kfwd_fn>fwd_conv[float], <kfwd_fn>fwd_conv[double],
            <kbwd_fn>bwd_conv[float], <kbwd_fn>bwd_conv[double])
set_kernels(OP_CONVB, DEV_CPU, <kfwd_fn>fwd_conv[float], <kfwd_fn>fwd_conv[double],   # same kernel, 3 args
            <kbwd_fn>bwd_conv[float], <kbwd_fn>bwd_conv[double])

# ---------------------------------------------------------------- maxpooling2d

cdef void _pool_fwd(Node* n, real* y, real* x, int* where, Geo* q) noexcept nogil:
    # padding is ignored (never the max): every window holds a real pixel
    cdef int b, c, oh, ow, fh, fw, ih, iw, best, at
    cdef long sx = <long>q.H * q.W * q.C, o = 0
    cdef real* xp
    cdef real v
    for b in range(q.xb):
        for c in range(q.C):
            xp = x + b * sx + <long>c * q.H * q.W
            for ow in range(q.OW):
                for oh in range(q.OH):
                    best = -1
                    for fw in range(q.FW):
                        iw = ow * q.sw + fw - q.pl
                        if iw < 0 or iw >= q.W:
                            continue
                        for fh in range(q.FH):
                            ih = oh * q.sh + fh - q.pt
                            if ih < 0 or ih >= q.H:
                                continue
                            at = ih + q.H * iw
                            # a NaN wins (the first one), as in max_dim
                            if best < 0 or (v == v and not (xp[at] <= v)):
                                best = at
                                v = xp[at]
                    where[o] = best + c * q.H * q.W
                    y[o] = v
                    o += 1


cdef void _pool_bwd(real* gx, real* gy, int* where, Geo* q) noexcept nogil:
    cdef long b, o, per = <long>q.OH * q.OW * q.C, sx = <long>q.H * q.W * q.C
    for b in range(q.xb):
        for o in range(per):
            gx[b * sx + where[b * per + o]] += gy[b * per + o]


cdef void fwd_pool(Graph* g, Node* n, real* y) noexcept:
    cdef Geo q
    _geo(g, n, &q)
    _pool_fwd(n, y, <real*>arg(g, n, 0).v, <int*>n.aux, &q)


cdef void bwd_pool(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Geo q
    _geo(g, n, &q)
    _pool_bwd(<real*>arg(g, n, 0).g, gy, <int*>n.aux, &q)


set_kernels(OP_POOL, DEV_CPU, <kfwd_fn>fwd_pool[float], <kfwd_fn>fwd_pool[double],
            <kbwd_fn>bwd_pool[float], <kbwd_fn>bwd_pool[double])

# ---------------------------------------------------------------- filter1d_narrow
# x: n x s, f: n x d x fids; y[fid, j] = sum_{i,k} f[i, k, fid] x[i, j + k].
# Column j of the patch matrix is the contiguous run x[:, j : j + d] (K = n d
# items), so Col is K x (ofl * xb) and Y = F^T Col is one gemm whose output is
# already fids x ofl per batch element, batches side by side.

cdef void _f1d_col(real* col, real* x, int K, int rows, int s, int ofl, int xb) noexcept nogil:
    cdef int b, j
    for b in range(xb):
        for j in range(ofl):
            memcpy(col + (<long>b * ofl + j) * K, x + <long>b * rows * s + <long>rows * j, K * sizeof(real))


cdef void _f1d(Graph* g, Node* n, int i, real* y, real* gy, real* x, real* gx, real* f, real* gf) noexcept:
    """Forward (i < 0) or the backward of argument i."""
    cdef Node* xn = arg(g, n, 0)
    cdef Node* fn = arg(g, n, 1)
    cdef int rows = xn.dim.d[0], s = _dim(&xn.dim, 1), d = _dim(&fn.dim, 1)
    cdef int fids = n.dim.d[0], ofl = n.dim.d[1], K = rows * d, xb = xn.dim.bd, fb = fn.dim.bd
    cdef int b, j, t, xi
    cdef long per_y = <long>fids * ofl, per_f = <long>K * fids, per_c = <long>K * ofl
    cdef real* col = <real*>n.aux
    cdef real* gp
    cdef real* cp
    if i < 0 or (i == 1 and n.ia[5]):
        _f1d_col(col, x, K, rows, s, ofl, xb)
        n.ia[5] = 0
    if i < 0:
        if fb == 1:
            _blas.gemm(real_dtype(col), b'T', b'N', fids, ofl * xb, K, 1.0, f, K, col, K, 0.0, y, fids)
        else:
            for b in range(fb):
                xi = b if xb > 1 else 0
                _blas.gemm(real_dtype(col), b'T', b'N', fids, ofl, K, 1.0, f + b * per_f, K,
                           col + xi * per_c, K, 0.0, y + b * per_y, fids)
    elif i == 1:        # dF += Col dY^T
        if fb == 1:
            _blas.gemm(real_dtype(col), b'N', b'T', K, fids, ofl * xb, 1.0, col, K, gy, fids, 1.0, gf, K)
        else:
            for b in range(fb):
                xi = b if xb > 1 else 0
                _blas.gemm(real_dtype(col), b'N', b'T', K, fids, ofl, 1.0, col + xi * per_c, K,
                           gy + b * per_y, fids, 1.0, gf + b * per_f, K)
    else:               # dCol = F dY, then scatter the overlapping runs back
        if fb == 1:
            _blas.gemm(real_dtype(col), b'N', b'N', K, ofl * xb, fids, 1.0, f, K, gy, fids, 0.0, col, K)
        else:
            for b in range(fb):
                xi = b if xb > 1 else 0
                _blas.gemm(real_dtype(col), b'N', b'N', K, ofl, fids, 1.0, f + b * per_f, K, gy + b * per_y, fids,
                           0.0 if (xb > 1 or b == 0) else 1.0, col + xi * per_c, K)
        for b in range(xb):
            for j in range(ofl):
                gp = gx + <long>b * rows * s + <long>rows * j
                cp = col + (<long>b * ofl + j) * K
                for t in range(K):
                    gp[t] += cp[t]
        n.ia[5] = 1


cdef void fwd_f1d(Graph* g, Node* n, real* y) noexcept:
    _f1d(g, n, -1, y, NULL, <real*>arg(g, n, 0).v, NULL, <real*>arg(g, n, 1).v, NULL)


cdef void bwd_f1d(Graph* g, Node* n, int i, real* gy) noexcept:
    _f1d(g, n, i, <real*>n.v, gy, <real*>arg(g, n, 0).v, <real*>arg(g, n, 0).g,
         <real*>arg(g, n, 1).v, <real*>arg(g, n, 1).g)


set_kernels(OP_F1D, DEV_CPU, <kfwd_fn>fwd_f1d[float], <kfwd_fn>fwd_f1d[double],
            <kbwd_fn>bwd_f1d[float], <kbwd_fn>bwd_f1d[double])
