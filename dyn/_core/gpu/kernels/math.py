"""GPU kernels of elementwise math (the CPU's: dyn/_core/cpu/math.pyx): the math_unary node's
functions and their derivatives, bmin/bmax and emax/emin over a list.

numpy has no erf, lgamma or digamma (cupy has them only in cupyx.scipy.special), so those are
written here in array code that both run the same way (and the stand-in tests): erf by its
positive series below 3 and the continued fraction of erfc above; lgamma by Lanczos' approximation
(g = 7, 9 terms) with the reflection formula below 1/2; digamma as the CPU's (recurrence up to 10,
the asymptotic series, reflection below 0). They work in float64 (as the CPU's digamma), cast
back to the node's type. Rounding is half away from zero, as C's round (numpy's is half to even).
"""
import math as _m

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import quiet as _quiet

(SQRT, ABS, SQUARE, CUBE, ERF, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH,
 LOG_SIGMOID, LGAMMA, SOFTSIGN, ELU, SELU, SILU, ROUND, CEIL, FLOOR) = range(25)

SELU_LAMBDA = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717
TWO_OVER_SQRT_PI = 1.1283791670955125738961589031215



# ---------------------------------------------------------------- special functions (float64)


def _erf(xp, x):
    ax = xp.abs(x)
    small = ax < 3
    # |x| < 3: erf x = 2/sqrt(pi) e^(-x^2) sum_n (2x^2)^n x / (1 3 ... (2n+1)), all terms positive
    xs = xp.where(small, x, 0)
    t2 = 2 * xs * xs
    term = xs
    acc = xs
    for n in range(1, 64):             # a fixed number of terms (enough for |x| < 3)
        term = term * t2 / (2 * n + 1)
        acc = acc + term
    ser = TWO_OVER_SQRT_PI * xp.exp(-xs * xs) * acc
    # |x| >= 3: erfc x = e^(-x^2) / sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
    xc = xp.where(small, 3, ax)
    t = xc
    for k in range(60, 0, -1):         # the fraction from its tail (fixed depth)
        t = xc + (k / 2) / t
    erfc = xp.exp(-xc * xc) / (_m.sqrt(_m.pi) * t)
    return xp.where(small, ser, xp.sign(x) * (1 - erfc))


_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)


def _lgamma_pos(xp, x):
    """lgamma for x >= 1/2 (Lanczos)."""
    z = x - 1
    a = _LANCZOS[0]
    for i in range(1, 9):
        a = a + _LANCZOS[i] / (z + i)
    t = z + 7.5
    return 0.5 * _m.log(2 * _m.pi) + (z + 0.5) * xp.log(t) - t + xp.log(a)


def _lgamma(xp, x):
    refl = x < 0.5
    xr = xp.where(refl, 1 - x, x)
    lg = _lgamma_pos(xp, xr)
    s = xp.abs(xp.sin(_m.pi * x))
    lr = _m.log(_m.pi) - xp.log(s) - lg           # lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)
    y = xp.where(refl, lr, lg)
    pole = (x <= 0) & (xp.floor(x) == x)          # poles and -inf: +inf, as libm
    return xp.where(pole | (xp.abs(x) == xp.inf), xp.inf, y)


def _digamma(xp, x):
    neg = x < 0
    z = xp.where(neg, 1 - x, x)
    r = xp.zeros_like(z)
    for _ in range(10):                # the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10
        low = z < 10
        r = r - xp.where(low, 1 / z, 0)
        z = xp.where(low, z + 1, z)
    f = 1 / (z * z)
    psi = r + xp.log(z) - 0.5 / z - f * (1 / 12.0 - f * (1 / 120.0 - f * (1 / 252.0 - f * (
        1 / 240.0 - f * (1 / 132.0)))))
    psi = xp.where(neg, psi - _m.pi / xp.tan(_m.pi * x), psi)
    return xp.where((x <= 0) & (xp.floor(x) == x), xp.nan, psi)


def _round(xp, x):
    """Half away from zero (C's round)."""
    t = xp.trunc(x)
    return xp.where(xp.abs(x - t) >= 0.5, t + xp.copysign(1, x), t)

# ---------------------------------------------------------------- elementwise unary


def _unary(v):
    xp, x, y = v.xp, v.x(0), v.y
    k = v.ia[0]
    dt = v.dtype
    with _quiet(xp):
        if k == SQRT:
            xp.sqrt(x, out=y)
        elif k == ABS:
            y[...] = xp.where(x >= 0, x, -x)
        elif k == SQUARE:
            xp.multiply(x, x, out=y)
        elif k == CUBE:
            y[...] = x * x * x
        elif k == ERF:
            y[...] = _erf(xp, x.astype(xp.float64))
        elif k == SIN:
            xp.sin(x, out=y)
        elif k == COS:
            xp.cos(x, out=y)
        elif k == TAN:
            xp.tan(x, out=y)
        elif k == ASIN:
            xp.arcsin(x, out=y)
        elif k == ACOS:
            xp.arccos(x, out=y)
        elif k == ATAN:
            xp.arctan(x, out=y)
        elif k == SINH:
            xp.sinh(x, out=y)
        elif k == COSH:
            xp.cosh(x, out=y)
        elif k == ASINH:
            xp.arcsinh(x, out=y)
        elif k == ACOSH:
            xp.arccosh(x, out=y)
        elif k == ATANH:
            xp.arctanh(x, out=y)
        elif k == LOG_SIGMOID:
            # min(x, 0) - log(1 + exp(-|x|)): exp never overflows
            y[...] = xp.where(x < 0, x, 0) - xp.log1p(xp.exp(xp.where(x < 0, x, -x)))
        elif k == LGAMMA:
            y[...] = _lgamma(xp, x.astype(xp.float64))
        elif k == SOFTSIGN:
            y[...] = x / (1 + xp.where(x >= 0, x, -x))
        elif k == ELU or k == SELU:
            al = dt(SELU_ALPHA if k == SELU else v.fa[0])
            y[...] = xp.where(x > 0, x, al * xp.expm1(x))      # expm1: exact near 0
            if k == SELU:
                y *= dt(SELU_LAMBDA)
        elif k == SILU:
            al = dt(v.fa[0])
            y[...] = x / (1 + xp.exp(-al * x))
        elif k == ROUND:
            y[...] = _round(xp, x)
        elif k == CEIL:
            xp.ceil(x, out=y)
        else:
            xp.floor(x, out=y)


def _unary_bwd(v, i):
    k = v.ia[0]
    if k >= ROUND and not v.ia[1]:
        return          # zero_gradient rounding: reached only by backward(full=True)
    xp, gy, x, y, dt = v.xp, v.gy, v.x(0), v.y, v.dtype
    with _quiet(xp):
        if k == SQRT:
            d = gy * dt(0.5) / y
        elif k == ABS:
            # sign(x): 0 at 0, as DyNet (x - x: NaN for NaN)
            d = xp.where(x > 0, gy, xp.where(x < 0, -gy, x - x))
        elif k == SQUARE:
            d = gy * 2 * x
        elif k == CUBE:
            d = gy * 3 * x * x
        elif k == ERF:
            d = gy * dt(TWO_OVER_SQRT_PI) * xp.exp(-x * x)
        elif k == SIN:
            d = gy * xp.cos(x)
        elif k == COS:
            d = -(gy * xp.sin(x))
        elif k == TAN:
            d = gy * (1 + y * y)
        elif k == ASIN:
            d = gy / xp.sqrt(1 - x * x)
        elif k == ACOS:
            d = -(gy / xp.sqrt(1 - x * x))
        elif k == ATAN:
            d = gy / (1 + x * x)
        elif k == SINH:
            d = gy * xp.cosh(x)
        elif k == COSH:
            d = gy * xp.sinh(x)
        elif k == ASINH:
            d = gy / xp.sqrt(x * x + 1)
        elif k == ACOSH:
            d = gy / xp.sqrt(x * x - 1)
        elif k == ATANH:
            d = gy / (1 - x * x)
        elif k == LOG_SIGMOID:
            # 1 - sigmoid(x) = -expm1(y): no cancellation for x >> 0
            d = -(gy * xp.expm1(y))
        elif k == LGAMMA:
            d = gy * _digamma(xp, x.astype(xp.float64)).astype(dt)
        elif k == SOFTSIGN:
            t = 1 + xp.where(x >= 0, x, -x)
            d = gy / (t * t)
        elif k == ELU or k == SELU:
            # x <= 0: d/dx lambda alpha (e^x - 1) = y + lambda alpha
            s = dt(SELU_LAMBDA) if k == SELU else dt(1)
            t = dt(SELU_LAMBDA * SELU_ALPHA) if k == SELU else dt(v.fa[0])
            d = gy * xp.where(x > 0, s, y + t)
        elif k == SILU:
            al = dt(v.fa[0])
            s = 1 / (1 + xp.exp(-al * x))
            d = gy * (s + al * x * s * (1 - s))
        else:
            d = gy      # straight-through rounding
    v.acc(0, d)


register("math_unary", _unary, _unary_bwd)

# ---------------------------------------------------------------- bmin, bmax


def _xwins(v):
    x, y = v.x(0), v.x(1)
    return ((x > y) if v.ia[0] else (x < y)) | (x != x)       # a NaN wins (either side)


def _bminmax(v):
    v.y[...] = v.xp.where(_xwins(v), v.x(0), v.x(1))


def _bminmax_bwd(v, i):
    # x wins only when strictly better: ties send the gradient to y, as DyNet
    w = _xwins(v)
    gy = v.gy
    v.acc(i, v.xp.where(w, gy, 0) if i == 0 else v.xp.where(w, 0, gy))


register("bminmax", _bminmax, _bminmax_bwd)

# ---------------------------------------------------------------- emax, emin over a list


def _elist(v):
    # aux: the argument that supplies each y (the last of equal ones, as DyNet's chain of bmax
    # sends ties to its second operand), as a float
    xp, y, mx = v.xp, v.y, v.ia[0]
    win = v.aux(v.shape)
    y[...] = v.x(0)
    win.fill(0)
    for j in range(1, v.nargs):        # one pass per argument
        x = v.x(j)
        # a NaN wins: once y is NaN it stays
        take = (y == y) & ~((x < y) if mx else (x > y))
        y[...] = xp.where(take, x, y)
        win[...] = xp.where(take, v.dtype(j), win)


def _elist_bwd(v, i):
    v.acc(i, v.xp.where(v.aux(v.shape) == i, v.gy, 0))


register("emax_emin", _elist, _elist_bwd)
