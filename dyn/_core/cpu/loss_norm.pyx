# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the sparse probability maps (sparsemax, sparsemax_loss, constrained_softmax),
normalisation (layer_norm, weight_norm) and the gradient-flow ops (flip_gradient, scale_gradient,
argmax), declared in dyn/_core/ops/loss.pyx; the other losses' kernels are in loss.pyx. Forward
writes, backward accumulates.

Where DyNet rejects a batch (sparsemax, constrained_softmax, weight_norm)
these kernels treat each batch element separately, and an argument of batch
1 is shared by every batch element (its gradient is summed over the batch).

Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the kernel
table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.
"""
from libc.math cimport exp, sqrt
from libc.stdlib cimport qsort
from libc.string cimport memcpy
from dyn._core.core.graph cimport (
    Graph, Node, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, dim_size, dim_total, arg, idx)
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport batch_off
from dyn._core.ops.loss cimport (
    OP_SPARSEMAX, OP_SPMLOSS, OP_CSM, OP_LN, OP_WN, OP_GRADSCALE, OP_ARGMAX)

cdef double LN_EPS = 1e-8        # layer_norm: g (x - mean) / (std + LN_EPS) + b

# ---------------------------------------------------------------- sparsemax, sparsemax_loss

cdef int _desc_f(const void* a, const void* b) noexcept nogil:
    cdef float x = (<const float*>a)[0], y = (<const float*>b)[0]
    return (x < y) - (x > y)


cdef int _desc_d(const void* a, const void* b) noexcept nogil:
    cdef double x = (<const double*>a)[0], y = (<const double*>b)[0]
    return (x < y) - (x > y)


cdef double _tau(real* z, real* x, int m) noexcept nogil:
    """Threshold of sparsemax(x) (Martins & Astudillo 2016): z is m scratch items."""
    cdef int k, kk = 1
    cdef double acc = 0, keep = 0
    for k in range(m):
        if x[k] != x[k]:
            return x[k]     # NaN: every output depends on tau (and qsort wants an order)
    memcpy(z, x, m * sizeof(real))
    if real is float:
        qsort(z, m, sizeof(float), _desc_f)
    else:
        qsort(z, m, sizeof(double), _desc_d)
    # the support is the longest prefix of the sorted values with 1 + k z_k > sum_{j<=k} z_j
    for k in range(m):
        acc += z[k]
        if 1 + (k + 1) * <double>z[k] > acc:
            kk = k + 1
            keep = acc
        else:
            break
    return (keep - 1) / kk


cdef void _sparsemax_fwd(real* y, real* x, real* z, int m, int B) noexcept nogil:
    cdef int b, i
    cdef real tau, t
    for b in range(B):
        tau = <real>_tau(z, x + b * m, m)
        for i in range(m):
            t = x[b * m + i] - tau
            y[b * m + i] = t if not (t <= 0) else 0      # tau NaN: y NaN


cdef void _sparsemax_bwd(real* gx, real* gy, real* y, int m, int B) noexcept nogil:
    # on the support S (y > 0): gx = gy - mean_S(gy); elsewhere 0
    cdef int b, i, cnt
    cdef double acc
    cdef real mean
    for b in range(B):
        acc = 0
        cnt = 0
        for i in range(m):
            if y[b * m + i] > 0:
                acc += gy[b * m + i]
                cnt += 1
        mean = <real>(acc / cnt) if cnt else 0
        for i in range(m):
            if y[b * m + i] > 0:
                gx[b * m + i] += gy[b * m + i] - mean
            elif y[b * m + i] != y[b * m + i]:
                gx[b * m + i] += y[b * m + i]       # NaN input: NaN gradient


cdef void fwd_sparsemax(Graph* g, Node* n, real* y) noexcept:
    _sparsemax_fwd(y, <real*>arg(g, n, 0).v, <real*>n.aux, n.dim.d[0], n.dim.bd)


cdef void bwd_sparsemax(Graph* g, Node* n, int i, real* gy) noexcept:
    _sparsemax_bwd(<real*>arg(g, n, 0).g, gy, <real*>n.v, n.dim.d[0], n.dim.bd)


set_kernels(OP_SPARSEMAX, DEV_CPU, <kfwd_fn>fwd_sparsemax[float], <kfwd_fn>fwd_sparsemax[double],
            <kbwd_fn>bwd_sparsemax[float], <kbwd_fn>bwd_sparsemax[double])


cdef void _spmloss_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    # L = -q.z + 1/2 sum_{j in S} (z_j^2 - tau^2) + 1/2 |q|^2, q uniform on the targets
    cdef Node* x = arg(g, n, 0)
    cdef int b, i, m = x.dim.d[0], nt = n.nidx
    cdef int* v = idx(g, n)
    cdef real* z
    cdef real* p
    cdef real* px
    cdef double tau, t, loss
    for b in range(n.dim.bd):
        px = <real*>x.v + b * m
        z = <real*>n.aux + b * m
        p = <real*>n.aux + (<long>m * n.dim.bd) + b * m
        tau = _tau(z, px, m)
        loss = 0
        for i in range(m):
            t = px[i] - tau
            if not (t <= 0):        # t NaN (NaN input): p, the loss and the gradient are NaN
                p[i] = <real>t
                loss += t * (px[i] + tau)
            else:
                p[i] = 0
        loss = 0.5 * loss + 0.5 * n.fa[0]
        for i in range(nt):
            loss -= px[v[i]] / <double>nt
        # the loss is >= 0; a negative value is rounding (DyNet clips it too)
        y[b] = <real>(loss if not (loss <= 0) else 0)


cdef void _spmloss_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    # dL/dz = sparsemax(z) - q
    cdef Node* x = arg(g, n, 0)
    cdef int b, i, m = x.dim.d[0], nt = n.nidx
    cdef int* v = idx(g, n)
    cdef real* p
    cdef real* pg
    cdef real c
    for b in range(n.dim.bd):
        p = <real*>n.aux + (<long>m * n.dim.bd) + b * m
        pg = <real*>x.g + b * m
        c = gy[b]
        for i in range(m):
            pg[i] += c * p[i]
        for i in range(nt):
            pg[v[i]] -= c / nt


set_kernels(OP_SPMLOSS, DEV_CPU, <kfwd_fn>_spmloss_fwd[float], <kfwd_fn>_spmloss_fwd[double],
            <kbwd_fn>_spmloss_bwd[float], <kbwd_fn>_spmloss_bwd[double])

# ---------------------------------------------------------------- constrained_softmax

cdef void _csm_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    # p = argmin KL(p || softmax(x)) s.t. p <= u, sum p = 1 (Martins & Kreutzer 2017):
    # p_i = u_i on the clipped set A, e_i (1 - U_A) / E_notA elsewhere. Every
    # entry that violates its bound for the current A is clipped in the
    # optimum too, so A only grows: at most m rounds.
    cdef Node* x = arg(g, n, 0)
    cdef Node* u = arg(g, n, 1)
    cdef int b, i, m = n.dim.d[0], changed
    cdef real* px
    cdef real* pu
    cdef real* py
    cdef real* mk
    cdef real mx
    cdef double U, E, s
    for b in range(n.dim.bd):
        px = <real*>x.v + batch_off(x, b, m)
        pu = <real*>u.v + batch_off(u, b, m)
        py = y + b * m
        mk = <real*>n.aux + b * m
        mx = px[0]
        for i in range(1, m):
            if px[i] > mx:
                mx = px[i]
        for i in range(m):
            py[i] = <real>exp(<double>px[i] - mx)
            mk[i] = 0
        s = 0
        while True:
            U = 0
            E = 0
            for i in range(m):
                if mk[i] != 0:
                    U += pu[i]
                else:
                    E += py[i]
            if E <= 0:
                break           # everything clipped
            s = (1 - U) / E
            changed = 0
            for i in range(m):
                if mk[i] == 0 and py[i] * s > pu[i]:
                    mk[i] = 1
                    changed = 1
            if not changed:
                break
        for i in range(m):
            py[i] = pu[i] if mk[i] != 0 else <real>(py[i] * s)


cdef void _csm_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    # r = sum_{notA} gy_i p_i / sum_{notA} p_i;
    # gx_j = p_j (gy_j - r) off A, gu_j = gy_j - r on A
    cdef Node* w = arg(g, n, which)
    cdef int b, i, m = n.dim.d[0]
    cdef real* py
    cdef real* pg
    cdef real* mk
    cdef real* gb
    cdef double S, R
    cdef real r
    for b in range(n.dim.bd):
        py = <real*>n.v + b * m
        gb = gy + b * m
        mk = <real*>n.aux + b * m
        pg = <real*>w.g + batch_off(w, b, m)
        S = 0
        R = 0
        for i in range(m):
            if mk[i] == 0:
                S += py[i]
                R += gb[i] * <double>py[i]
        r = <real>(R / S) if S > 0 else 0
        if S != S and which == 1:
            # a NaN in x: which bounds are active depends on it
            for i in range(m):
                pg[i] += <real>S
            continue
        for i in range(m):
            if which == 0 and mk[i] == 0:
                pg[i] += py[i] * (gb[i] - r)
            elif which == 1 and mk[i] != 0:
                pg[i] += gb[i] - r


set_kernels(OP_CSM, DEV_CPU, <kfwd_fn>_csm_fwd[float], <kfwd_fn>_csm_fwd[double],
            <kbwd_fn>_csm_bwd[float], <kbwd_fn>_csm_bwd[double])

# ---------------------------------------------------------------- layer_norm

cdef void _moments(real* x, int s, double* mu, double* sd) noexcept nogil:
    """Mean and population standard deviation, two passes in double."""
    cdef int i
    cdef double acc = 0, d
    for i in range(s):
        acc += x[i]
    mu[0] = acc / s
    acc = 0
    for i in range(s):
        d = x[i] - mu[0]
        acc += d * d
    sd[0] = sqrt(acc / s)


cdef void _ln_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    cdef Node* x = arg(g, n, 0)
    cdef Node* ga = arg(g, n, 1)
    cdef Node* be = arg(g, n, 2)
    cdef int k, i, s = dim_size(&n.dim)
    cdef real* px
    cdef real* pg
    cdef real* pb
    cdef double mu, sd, inv
    for k in range(n.dim.bd):
        px = <real*>x.v + batch_off(x, k, s)
        pg = <real*>ga.v + batch_off(ga, k, s)
        pb = <real*>be.v + batch_off(be, k, s)
        _moments(px, s, &mu, &sd)
        inv = 1.0 / (sd + LN_EPS)
        for i in range(s):
            y[k * s + i] = <real>(pg[i] * ((px[i] - mu) * inv) + pb[i])


cdef void _ln_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    # x: gx_j = (h_j - mean h) inv - (x_j - mu) inv^2 sum_i h_i (x_i - mu) / (N sd), h = g gy
    cdef Node* x = arg(g, n, 0)
    cdef Node* ga = arg(g, n, 1)
    cdef Node* w = arg(g, n, which)
    cdef int k, i, s = dim_size(&n.dim)
    cdef real* px
    cdef real* pg
    cdef real* pw
    cdef real* gk
    cdef double mu, sd, inv, sh, c, t
    for k in range(n.dim.bd):
        px = <real*>x.v + batch_off(x, k, s)
        pg = <real*>ga.v + batch_off(ga, k, s)
        pw = <real*>w.g + batch_off(w, k, s)
        gk = gy + k * s
        if which == 2:
            for i in range(s):
                pw[i] += gk[i]
            continue
        _moments(px, s, &mu, &sd)
        inv = 1.0 / (sd + LN_EPS)
        if which == 1:
            for i in range(s):
                pw[i] += <real>(gk[i] * (px[i] - mu) * inv)
            continue
        sh = 0
        c = 0
        for i in range(s):
            t = <double>pg[i] * gk[i]
            sh += t
            c += t * (px[i] - mu)
        sh /= s
        # sd = 0 (all equal): x - mu is 0 too, so the second term vanishes
        c = c * inv * inv / (s * sd) if sd > 0 else 0
        for i in range(s):
            pw[i] += <real>((<double>pg[i] * gk[i] - sh) * inv - (px[i] - mu) * c)


set_kernels(OP_LN, DEV_CPU, <kfwd_fn>_ln_fwd[float], <kfwd_fn>_ln_fwd[double],
            <kbwd_fn>_ln_bwd[float], <kbwd_fn>_ln_bwd[double])

# ---------------------------------------------------------------- weight_norm

cdef double _nrm(real* w, int s) noexcept nogil:
    cdef int i
    cdef double acc = 0
    for i in range(s):
        acc += w[i] * <double>w[i]
    return sqrt(acc)


cdef void _wn_fwd(Graph* g, Node* n, real* y) noexcept nogil:
    cdef Node* w = arg(g, n, 0)
    cdef Node* gn = arg(g, n, 1)
    cdef int k, i, s = dim_size(&n.dim)
    cdef real* pw
    cdef double nrm, sc
    for k in range(n.dim.bd):
        pw = <real*>w.v + batch_off(w, k, s)
        nrm = _nrm(pw, s)
        # w = 0 has no direction: the output is 0 rather than NaN (a NaN in w
        # makes |w|, so every output, NaN)
        sc = (<real*>gn.v)[batch_off(gn, k, 1)] / nrm if nrm != 0 else 0
        for i in range(s):
            y[k * s + i] = <real>(sc * pw[i])


cdef void _wn_bwd(Graph* g, Node* n, int which, real* gy) noexcept nogil:
    # gw = (g / |w|) (gy - w (gy.w) / |w|^2); gg = gy.w / |w|
    cdef Node* w = arg(g, n, 0)
    cdef Node* gn = arg(g, n, 1)
    cdef int k, i, s = dim_size(&n.dim)
    cdef real* pw
    cdef real* pg
    cdef double nrm, d, gv
    for k in range(n.dim.bd):
        pw = <real*>w.v + batch_off(w, k, s)
        nrm = _nrm(pw, s)
        if nrm == 0:
            continue
        d = 0
        for i in range(s):
            d += gy[k * s + i] * <double>pw[i]
        if which == 1:
            (<real*>gn.g)[batch_off(gn, k, 1)] += <real>(d / nrm)
            continue
        gv = (<real*>gn.v)[batch_off(gn, k, 1)] / nrm
        pg = <real*>w.g + batch_off(w, k, s)
        d /= nrm * nrm
        for i in range(s):
            pg[i] += <real>(gv * (gy[k * s + i] - pw[i] * d))


set_kernels(OP_WN, DEV_CPU, <kfwd_fn>_wn_fwd[float], <kfwd_fn>_wn_fwd[double],
            <kbwd_fn>_wn_bwd[float], <kbwd_fn>_wn_bwd[double])

# ---------------------------------------------------------------- flip_gradient, scale_gradient

cdef void fwd_copy(Graph* g, Node* n, real* y) noexcept:
    memcpy(y, arg(g, n, 0).v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_scaled(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), n.fa[0], gy, arg(g, n, 0).g)


set_kernels(OP_GRADSCALE, DEV_CPU, <kfwd_fn>fwd_copy[float], <kfwd_fn>fwd_copy[double],
            <kbwd_fn>bwd_scaled[float], <kbwd_fn>bwd_scaled[double])

# ---------------------------------------------------------------- argmax

cdef void _argmax_fwd(real* y, real* x, int m, int B) noexcept nogil:
    # ties go to the first maximum, and a NaN is the maximum (the first NaN
    # wins), as numpy.argmax
    cdef int b, i, k
    for b in range(B):
        k = 0
        for i in range(m):
            y[b * m + i] = 0
            if x[b * m + k] == x[b * m + k] and not (x[b * m + i] <= x[b * m + k]):
                k = i
        y[b * m + k] = 1


cdef void fwd_argmax(Graph* g, Node* n, real* y) noexcept:
    _argmax_fwd(y, <real*>arg(g, n, 0).v, n.dim.d[0], n.dim.bd)


cdef void bwd_argmax(Graph* g, Node* n, int i, real* gy) noexcept:
    # zero_gradient: nothing (reached only by backward(full=True));
    # straight_through_gradient: the gradient passes as through the identity
    if n.ia[0]:
        _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, arg(g, n, 0).g)


set_kernels(OP_ARGMAX, DEV_CPU, <kfwd_fn>fwd_argmax[float], <kfwd_fn>fwd_argmax[double],
            <kbwd_fn>bwd_argmax[float], <kbwd_fn>bwd_argmax[double])
