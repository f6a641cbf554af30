# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU kernels of the reduce family (declared in dyn/_core/ops/reduce.pyx): reductions and
moments, cumulative sums, fold_rows and k-max pooling.

One kernel serves every reduction. The input is seen as 8 axes (7 dims and
the batch, column-major); axes of size 1 are dropped and neighbouring axes
that are both reduced or both kept are merged, which leaves at most 8
alternating runs. The input is then streamed once, in storage order: the
innermost run is either reduced (a contiguous loop into one double) or kept
(a contiguous loop adding into as many doubles; when it is short, each of
its elements is reduced as a strided run instead), and the outer runs only
move an output offset. Accumulation is in double for float32 and float64.
"""

from libc.math cimport sqrt, exp, expf, log, INFINITY
from libc.string cimport memset
from dyn._core.core.graph cimport Graph, Node, Dim, DEV_CPU, set_kernels, kfwd_fn, kbwd_fn, arg
from dyn._core.core.types cimport real
from dyn._core.cpu.bcast cimport _ext
from dyn._core.ops.reduce cimport (
    K_SUM, K_POW, K_STD, K_MAX, K_MIN, K_LSE, OP_SUM_DIM, OP_MEAN_DIM, OP_STD_DIM, OP_MOMENT_DIM,
    OP_MEAN_ELEMS, OP_STD_ELEMS, OP_MOMENT_ELEMS, OP_MEAN_BATCHES, OP_STD_BATCHES, OP_MOMENT_BATCHES,
    OP_MAX_DIM, OP_MIN_DIM, OP_LSE_DIM, OP_FOLD, OP_CUMSUM, OP_KMAX)

# The node attributes a reduction reads are listed in dyn/_core/ops/reduce.pxd. Scratch (n.aux) per
# output: acc (double), cen (double), arg index (int): AUX_BYTES, which the shape rule reserves.
cdef enum:
    SMALL = 8          # kept runs shorter than this are reduced as strided runs
    BLOCK = 256


cdef struct Plan:
    int n              # merged runs (>= 2, padded with a run of 1); run 0 is the innermost
    long ext[9]
    long ys[9]         # output stride of each run (0 where reduced)
    bint red[9]
    long nout          # outputs
    long nred          # inputs per output
    long outer         # product of ext[1:n]

# ---------------------------------------------------------------- the plan

cdef void plan_init(Plan* p, const long* ext, int nax, unsigned mask) noexcept nogil:
    cdef int k
    cdef long e, s = 1
    cdef bint r
    p.n = 0
    p.nout = 1
    p.nred = 1
    for k in range(nax):
        e = ext[k]
        if e == 1:
            continue
        r = (mask >> k) & 1
        if r:
            p.nred *= e
        else:
            p.nout *= e
        if p.n > 0 and p.red[p.n - 1] == r:
            p.ext[p.n - 1] *= e
        else:
            p.ext[p.n] = e
            p.red[p.n] = r
            p.n += 1
    if p.n == 0:
        p.ext[0] = 1
        p.red[0] = False
        p.n = 1
    if p.n == 1:
        # a run of 1 (never stepped) keeps the two-run loops uniform
        p.ext[1] = 1
        p.red[1] = not p.red[0]
        p.n = 2
    p.outer = 1
    for k in range(p.n):
        p.ys[k] = 0 if p.red[k] else s
        if not p.red[k]:
            s *= p.ext[k]
        if k > 0:
            p.outer *= p.ext[k]


cdef inline void _step(const Plan* p, long* cnt, long* oy) noexcept nogil:
    """Advance the runs outside the two innermost by one; keep the output
    offset in step."""
    cdef int k = 2
    while k < p.n:
        cnt[k] += 1
        oy[0] += p.ys[k]
        if cnt[k] < p.ext[k]:
            return
        oy[0] -= p.ys[k] * p.ext[k]
        cnt[k] = 0
        k += 1


cdef void _plan_of(Graph* g, Node* n, Plan* p) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef long ext[9]
    cdef int k
    if n.op == OP_FOLD:
        # rows split as (nrows, rows / nrows): fold_rows reduces the inner part
        ext[0] = n.ia[4]
        ext[1] = x.dim.d[0] // n.ia[4]
        for k in range(1, 7):
            ext[k + 1] = _ext(&x.dim, k)
        ext[8] = x.dim.bd
        plan_init(p, ext, 9, 1)
        return
    for k in range(7):
        ext[k] = _ext(&x.dim, k)
    ext[7] = x.dim.bd
    plan_init(p, ext, 8, n.ia[1])

# ---------------------------------------------------------------- kernels
# The two innermost runs are looped over directly (run 1 is a reduced run
# when run 0 is kept, and the other way round), so the per-step cost of the
# outer runs is paid once per E0 * E1 inputs, not per E0.

cdef inline double _ipow(double x, int r) noexcept nogil:
    cdef double y = 1
    while r > 0:
        if r & 1:
            y *= x
        x *= x
        r >>= 1
    return y


cdef inline double _ex(real v, double c) noexcept nogil:
    # exp(v - c) with v - c <= 0 (c the max): float32 results need only expf
    if real is float:
        return expf(<float>(v - c))
    else:
        return exp(v - c)


cdef inline double _rsum(int kind, const real* x, long E, long st, double c, int r) noexcept nogil:
    """sum_i f(x_{i st}) over one reduced run; four partial sums so the adds
    do not wait on each other."""
    cdef long i = 0
    cdef double s0 = 0, s1 = 0, s2 = 0, s3 = 0, v0, v1, v2, v3
    if kind == K_SUM:
        while i + 4 <= E:
            s0 += x[i * st]
            s1 += x[(i + 1) * st]
            s2 += x[(i + 2) * st]
            s3 += x[(i + 3) * st]
            i += 4
        while i < E:
            s0 += x[i * st]
            i += 1
    elif kind == K_STD:
        while i + 4 <= E:
            v0 = x[i * st] - c
            v1 = x[(i + 1) * st] - c
            v2 = x[(i + 2) * st] - c
            v3 = x[(i + 3) * st] - c
            s0 += v0 * v0
            s1 += v1 * v1
            s2 += v2 * v2
            s3 += v3 * v3
            i += 4
        while i < E:
            v0 = x[i * st] - c
            s0 += v0 * v0
            i += 1
    elif kind == K_POW:
        for i in range(E):
            s0 += _ipow(x[i * st], r)
    else:
        for i in range(E):
            s0 += _ex(x[i * st], c)
    return (s0 + s1) + (s2 + s3)


cdef inline void _kadd(int kind, double* a, const real* x, long E, const double* ce, int r) noexcept nogil:
    """a_i += f(x_i) over one contiguous kept run."""
    cdef long i
    cdef double v
    if kind == K_SUM:
        for i in range(E):
            a[i] += x[i]
    elif kind == K_STD:
        for i in range(E):
            v = x[i] - ce[i]
            a[i] += v * v
    elif kind == K_POW:
        for i in range(E):
            a[i] += _ipow(x[i], r)
    else:
        for i in range(E):
            a[i] += _ex(x[i], ce[i])


cdef void _acc(int kind, real* x, double* acc, const double* cen, int r, const Plan* p) noexcept nogil:
    """acc[o] = sum over the inputs of output o of f(x): x, x^r, (x - cen)^2, exp(x - cen)."""
    cdef long cnt[9]
    cdef long o, j, q, oy = 0, E = p.ext[0], E1 = p.ext[1], ys1 = p.ys[1]
    cdef real* xo
    memset(cnt, 0, sizeof(cnt))
    memset(acc, 0, p.nout * sizeof(double))
    for o in range(p.outer // E1):
        xo = x + o * E * E1
        if not p.red[0] and E < SMALL:
            # a short kept run: reduce each of its E strided runs instead
            for j in range(E):
                acc[oy + j] += _rsum(kind, xo + j, E1, E, cen[oy + j], r)
        else:
            for j in range(E1):
                if p.red[0]:
                    q = oy + j * ys1
                    acc[q] += _rsum(kind, xo + j * E, E, 1, cen[q], r)
                else:
                    _kadd(kind, acc + oy, xo + j * E, E, cen + oy, r)
        _step(p, cnt, &oy)


cdef inline void _rgrad(int kind, real* gx, const real* x, long E, long st, double c, double m,
                        int r) noexcept nogil:
    """gx_{i st} += c f'(x_{i st}) over a reduced run (c = gy scale; m the centre)."""
    cdef long i
    if kind == K_SUM:
        for i in range(E):
            gx[i * st] += c
    elif kind == K_STD:
        for i in range(E):
            gx[i * st] += c * (x[i * st] - m)
    elif kind == K_POW:
        for i in range(E):
            gx[i * st] += c * r * _ipow(x[i * st], r - 1)
    else:
        for i in range(E):
            gx[i * st] += c * _ex(x[i * st], m)


cdef inline void _kgrad(int kind, real* gx, const real* x, long E, const real* gy, const real* y,
                        const double* ce, double scale, int r) noexcept nogil:
    """gx_i += gy_i scale f'(x_i) over a kept run."""
    cdef long i
    if kind == K_SUM:
        for i in range(E):
            gx[i] += gy[i] * scale
    elif kind == K_STD:
        # dy/dx = (x - mean) / (N y); a zero deviation has no slope (a NaN
        # one gives NaN gradients)
        for i in range(E):
            if y[i] != 0:
                gx[i] += gy[i] * scale * (x[i] - ce[i]) / y[i]
    elif kind == K_POW:
        for i in range(E):
            gx[i] += gy[i] * scale * r * _ipow(x[i], r - 1)
    else:
        for i in range(E):
            gx[i] += gy[i] * _ex(x[i], y[i])


cdef inline double _coef(int kind, const real* gy, const real* y, long q, double scale) noexcept nogil:
    # std: dy/dx = (x - mean) / (N y); a zero deviation has no slope
    if kind == K_STD:
        return gy[q] * scale / y[q] if y[q] != 0 else 0
    return gy[q] * scale


cdef void _acc_bwd(int kind, real* gx, real* x, real* gy, real* y, const double* cen, double scale,
                   int r, const Plan* p) noexcept nogil:
    """gx += gy[o] * df/dx for every input of output o (as _acc, backwards)."""
    cdef long cnt[9]
    cdef long o, j, q, b, oy = 0, E = p.ext[0], E1 = p.ext[1], ys1 = p.ys[1]
    memset(cnt, 0, sizeof(cnt))
    for o in range(p.outer // E1):
        if not p.red[0] and E < SMALL:
            for j in range(E):
                q = oy + j
                _rgrad(kind, gx + o * E * E1 + j, x + o * E * E1 + j, E1, E, _coef(kind, gy, y, q, scale),
                       y[q] if kind == K_LSE else cen[q], r)
            _step(p, cnt, &oy)
            continue
        for j in range(E1):
            b = (o * E1 + j) * E
            if p.red[0]:
                q = oy + j * ys1
                _rgrad(kind, gx + b, x + b, E, 1, _coef(kind, gy, y, q, scale),
                       y[q] if kind == K_LSE else cen[q], r)
            else:
                _kgrad(kind, gx + b, x + b, E, gy + oy, y + oy, cen + oy, scale, r)
        _step(p, cnt, &oy)


cdef inline bint _wins(bint mn, real v, real best) noexcept nogil:
    """v replaces best: strictly smaller (larger), or NaN where best is not
    (a NaN is the extreme: the first NaN wins, as numpy's max and argmax)."""
    return best == best and not ((v >= best) if mn else (v <= best))


cdef void _argext(bint mn, real* x, real* y, int* ai, const Plan* p) noexcept nogil:
    """y = max (min) per output and ai = the input offset it came from: inputs
    are visited in storage order and only a strictly better value wins, so a
    tie goes to the first (lowest index along the reduced dims)."""
    cdef long cnt[9]
    cdef long o, i, j, q, b, bi, oy = 0, E = p.ext[0], E1 = p.ext[1], ys1 = p.ys[1]
    cdef real* xo
    cdef real best, v
    memset(cnt, 0, sizeof(cnt))
    for o in range(p.nout):
        ai[o] = -1
    for o in range(p.outer // E1):
        for j in range(E1):
            b = (o * E1 + j) * E
            xo = x + b
            if p.red[0]:
                best = xo[0]
                bi = 0
                for i in range(1, E):
                    if _wins(mn, xo[i], best):
                        best = xo[i]
                        bi = i
                q = oy + j * ys1
                if ai[q] < 0 or _wins(mn, best, y[q]):
                    y[q] = best
                    ai[q] = <int>(b + bi)
            else:
                for i in range(E):
                    q = oy + i
                    v = xo[i]
                    if ai[q] < 0 or _wins(mn, v, y[q]):
                        y[q] = v
                        ai[q] = <int>(b + i)
        _step(p, cnt, &oy)


cdef void _red_fwd(real* y, real* x, Node* n, const Plan* p) noexcept nogil:
    cdef int kind = n.ia[0]
    cdef long o, N = p.nred
    cdef double* acc = <double*>n.aux
    cdef double* cen = acc + p.nout
    cdef int* ai = <int*>(cen + p.nout)
    cdef double scale = 1.0
    if kind == K_MAX or kind == K_MIN or kind == K_LSE:
        _argext(kind == K_MIN, x, y, ai, p)
        if kind != K_LSE:
            return
        # log sum exp(x) = m + log sum exp(x - m), m the max (0 if all -inf)
        for o in range(p.nout):
            cen[o] = y[o] if y[o] != -INFINITY else 0
        _acc(K_LSE, x, acc, cen, 0, p)
        for o in range(p.nout):
            y[o] = cen[o] + log(acc[o])
        return
    # two passes for std: the mean first, then squared deviations from it
    _acc(K_SUM if kind == K_STD else kind, x, acc, cen, n.ia[4], p)
    if kind == K_STD:
        for o in range(p.nout):
            cen[o] = acc[o] / N
        _acc(K_STD, x, acc, cen, 0, p)
        for o in range(p.nout):
            y[o] = sqrt(acc[o] / N)
        return
    if n.ia[5]:
        scale = 1.0 / (n.fa[0] if n.fa[0] > 0 else N)
    for o in range(p.nout):
        y[o] = acc[o] * scale


cdef void _red_bwd(real* gx, real* x, real* gy, real* y, Node* n, const Plan* p) noexcept nogil:
    cdef int kind = n.ia[0]
    cdef long o
    cdef double* cen = <double*>n.aux + p.nout
    cdef int* ai = <int*>(cen + p.nout)
    cdef double scale = 1.0
    if kind == K_MAX or kind == K_MIN:
        for o in range(p.nout):
            gx[ai[o]] += gy[o]
        return
    if kind == K_STD:
        scale = 1.0 / p.nred
    elif n.ia[5]:
        scale = 1.0 / (n.fa[0] if n.fa[0] > 0 else p.nred)
    _acc_bwd(kind, gx, x, gy, y, cen, scale, n.ia[4], p)


# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations, so no kernel asks which float type it runs in.

cdef void fwd_red(Graph* g, Node* n, real* y) noexcept:
    cdef Plan p
    _plan_of(g, n, &p)
    _red_fwd(y, <real*>arg(g, n, 0).v, n, &p)


cdef void bwd_red(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Plan p
    cdef Node* x = arg(g, n, 0)
    _plan_of(g, n, &p)
    _red_bwd(<real*>x.g, <real*>x.v, gy, <real*>n.v, n, &p)


cdef int _red(int op) except -1:
    # every reduction runs the one kernel pair
    return set_kernels(op, DEV_CPU, <kfwd_fn>fwd_red[float], <kfwd_fn>fwd_red[double],
                       <kbwd_fn>bwd_red[float], <kbwd_fn>bwd_red[double])


for _op in (OP_SUM_DIM, OP_MEAN_DIM, OP_STD_DIM, OP_MOMENT_DIM, OP_MEAN_ELEMS, OP_STD_ELEMS,
            OP_MOMENT_ELEMS, OP_MEAN_BATCHES, OP_STD_BATCHES, OP_MOMENT_BATCHES, OP_MAX_DIM, OP_MIN_DIM,
            OP_LSE_DIM, OP_FOLD):
    _red(_op)

# ---------------------------------------------------------------- along one dim: cumsum, kmax_pooling
# Per batch element the input is inner x L x outer (L the size of dim d; the
# batch is folded into outer). ia[0] = d, ia[1] = k (kmax_pooling).

cdef inline void _split(const Dim* x, int d, long* inner, long* L, long* outer) noexcept nogil:
    cdef int k
    inner[0] = 1
    outer[0] = x.bd
    for k in range(d):
        inner[0] *= _ext(x, k)
    for k in range(d + 1, 7):
        outer[0] *= _ext(x, k)
    L[0] = _ext(x, d)


cdef void _cumsum(real* y, real* x, const Dim* dx, int d, bint back) noexcept nogil:
    """y = running sum of x along d (back: y += running sum from the end).
    Sums run in doubles, BLOCK columns of the inner run at a time."""
    cdef long inner, L, outer, o, l, i, i0, m, q
    cdef double buf[BLOCK]
    cdef double s
    _split(dx, d, &inner, &L, &outer)
    if inner == 1:
        # along the contiguous dim: one running sum per slice
        for o in range(outer):
            s = 0
            q = o * L
            if back:
                for l in range(L - 1, -1, -1):
                    s += x[q + l]
                    y[q + l] += s
            else:
                for l in range(L):
                    s += x[q + l]
                    y[q + l] = s
        return
    for o in range(outer):
        i0 = 0
        while i0 < inner:
            m = inner - i0 if inner - i0 < BLOCK else BLOCK
            for i in range(m):
                buf[i] = 0
            if back:
                for l in range(L - 1, -1, -1):
                    q = (o * L + l) * inner + i0
                    for i in range(m):
                        buf[i] += x[q + i]
                        y[q + i] += buf[i]
            else:
                for l in range(L):
                    q = (o * L + l) * inner + i0
                    for i in range(m):
                        buf[i] += x[q + i]
                        y[q + i] = buf[i]
            i0 += m


cdef void fwd_cumsum(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _cumsum(y, <real*>x.v, &x.dim, n.ia[0], False)


cdef void bwd_cumsum(Graph* g, Node* n, int i, real* gy) noexcept:
    # gx_l = sum_{l' >= l} gy_l': the cumulative sum of gy from the end
    cdef Node* x = arg(g, n, 0)
    _cumsum(<real*>x.g, gy, &x.dim, n.ia[0], True)


set_kernels(OP_CUMSUM, DEV_CPU, <kfwd_fn>fwd_cumsum[float], <kfwd_fn>fwd_cumsum[double],
            <kbwd_fn>bwd_cumsum[float], <kbwd_fn>bwd_cumsum[double])


cdef void _kmax_fwd(real* y, real* x, int* ai, const Dim* dx, int d, int k) noexcept nogil:
    """Per slice along d: the k largest values, kept in their original order.
    Selection keeps a list sorted by (value desc, index asc), O(L k)."""
    cdef long inner, L, outer, o, i, l
    cdef int j, c, t
    cdef real v
    cdef real* xs
    cdef int* sel
    _split(dx, d, &inner, &L, &outer)
    for o in range(outer):
        for i in range(inner):
            xs = x + o * L * inner + i
            sel = ai + (o * inner + i) * k
            c = 0
            for l in range(L):
                v = xs[l * inner]
                if c < k:
                    j = c
                    c += 1
                elif _wins(False, v, xs[sel[k - 1] * inner]):    # NaN is the largest
                    j = k - 1
                else:
                    continue
                # a later index loses ties, so it goes after equal values
                while j > 0 and _wins(False, v, xs[sel[j - 1] * inner]):
                    sel[j] = sel[j - 1]
                    j -= 1
                sel[j] = <int>l
            for j in range(1, k):
                t = sel[j]
                c = j
                while c > 0 and sel[c - 1] > t:
                    sel[c] = sel[c - 1]
                    c -= 1
                sel[c] = t
            for j in range(k):
                y[(o * k + j) * inner + i] = xs[sel[j] * inner]


cdef void _kmax_bwd(real* gx, real* gy, int* ai, const Dim* dx, int d, int k) noexcept nogil:
    cdef long inner, L, outer, o, i
    cdef int j
    cdef int* sel
    _split(dx, d, &inner, &L, &outer)
    for o in range(outer):
        for i in range(inner):
            sel = ai + (o * inner + i) * k
            for j in range(k):
                gx[(o * L + sel[j]) * inner + i] += gy[(o * k + j) * inner + i]


cdef void fwd_kmax(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _kmax_fwd(y, <real*>x.v, <int*>n.aux, &x.dim, n.ia[0], n.ia[1])


cdef void bwd_kmax(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    _kmax_bwd(<real*>x.g, gy, <int*>n.aux, &x.dim, n.ia[0], n.ia[1])


set_kernels(OP_KMAX, DEV_CPU, <kfwd_fn>fwd_kmax[float], <kfwd_fn>fwd_kmax[double],
            <kbwd_fn>bwd_kmax[float], <kbwd_fn>bwd_kmax[double])
