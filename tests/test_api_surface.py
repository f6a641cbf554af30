"""DyNet's module-level Python API: every name exists in dyn with DyNet's
parameter names and defaults. The table below was extracted from DyNet's Python
API reference (the module-level functions and classes of ``dynet``); names dyn
leaves out on purpose are listed in docs/README.md with the reason (and here, in
LEFT_OUT)."""

import ast
import inspect

import pytest

import dyn as dy

DYNET_SIGNATURES = {
    "scalarInput": 's, device=""',
    "vecInput": 'dim, device=""',
    "inputVector": 'v, device=""',
    "inputTensor": 'arr, batched=False, device="", reusable_expr=False',
    "sparse_inputTensor": 'idxs, values, shape, batched=False, defval=0, device=""',
    "inputTensorTranspose": 'val, dim=None, batch_size=1, device=""',
    "one_hot": 'd, idx, device=""',
    "matInput": "d1, d2",
    "inputMatrix": "v, d",
    "lookup": "p, index=0, update=True",
    "lookup_batch": "p, indices, update=True",
    "parameter": "*args",
    "const_parameter": "*args",
    "zeros": "dim, batch_size=1",
    "ones": "dim, batch_size=1",
    "constant": "dim, val, batch_size=1",
    "random_normal": "dim, mean=0., stddev=1., batch_size=1",
    "random_bernoulli": "dim, p, scale=1.0, batch_size=1",
    "random_uniform": "dim, left, right, batch_size=1",
    "random_gumbel": "dim, mu=0.0, beta=1.0, batch_size=1",
    "noise": "x, stddev",
    "dropout": "x, p",
    "dropout_batch": "x, p",
    "dropout_dim": "x, d, p",
    "block_dropout": "x, p",
    "cmult": "x, y",
    "cdiv": "x, y",
    "colwise_add": "x, y",
    "dot_product": "x, y",
    "transpose": "x, dims=[1, 0]",
    "inverse": "x",
    "logdet": "x",
    "trace_of_product": "x, y",
    "affine_transform": "exprs",
    "esum": "xs",
    "average": "xs",
    "emax": "xs",
    "bmax": "x, y",
    "bmin": "x, y",
    "pow": "x, y",
    "contract3d_1d": "x, y",
    "contract3d_1d_bias": "x, y, b",
    "contract3d_1d_1d": "x, y, z",
    "contract3d_1d_1d_bias": "x, y, z, b",
    "tanh": "x",
    "logistic": "x",
    "rectify": "x",
    "elu": "x, alpha=1.0",
    "selu": "x",
    "silu": "x, beta=1.0",
    "softsign": "x",
    "exp": "x",
    "log": "x",
    "log_sigmoid": "x",
    "lgamma": "x",
    "erf": "x",
    "sqrt": "x",
    "square": "x",
    "cube": "x",
    "abs": "x",
    "sin": "x",
    "cos": "x",
    "tan": "x",
    "asin": "x",
    "acos": "x",
    "atan": "x",
    "sinh": "x",
    "cosh": "x",
    "asinh": "x",
    "acosh": "x",
    "atanh": "x",
    "round": "x, gradient_mode",
    "ceil": "x, gradient_mode",
    "floor": "x, gradient_mode",
    "softmax": "x, d=0",
    "log_softmax": "x, restrict=None",
    "logsumexp": "xs",
    "logsumexp_dim": "x, d=0",
    "sparsemax": "x",
    "constrained_softmax": "x, y",
    "pickneglogsoftmax": "x, v",
    "pickneglogsoftmax_batch": "x, vs",
    "hinge": "x, v, m=1.0",
    "hinge_batch": "x, vs, m=1.0",
    "hinge_dim": "x, v, d=0, m=1.0",
    "binary_log_loss": "x, y",
    "pairwise_rank_loss": "x, y, m=1.0",
    "poisson_loss": "log_lambda, x",
    "huber_distance": "x, y, c=1.345",
    "squared_distance": "x, y",
    "l1_distance": "x, y",
    "squared_norm": "x",
    "l2_norm": "x",
    "sum_elems": "x",
    "sum_dim": "x, d, b=False, n=0",
    "sum_batches": "x",
    "cumsum": "x, d=0",
    "mean_elems": "x",
    "mean_dim": "x, d, b, n=0",
    "mean_batches": "x",
    "std_elems": "x",
    "std_dim": "x, d, b, n=0",
    "std_batches": "x",
    "moment_elems": "x, r",
    "moment_dim": "x, d, r, b, n=0",
    "moment_batches": "x, r",
    "max_dim": "x, d=0",
    "min_dim": "x, d=0",
    "fold_rows": "x, nrows=2",
    "kmax_pooling": "x, k, d=1",
    "reshape": "x, d, batch_size=1",
    "concatenate": "xs, d=0",
    "concatenate_cols": "xs",
    "concatenate_to_batch": "xs",
    "pick": "e, index=0, dim=0",
    "pick_batch": "e, indices, dim=0",
    "pick_range": "x, s, e, d=0",
    "pickrange": "x, s, e",
    "pick_batch_elem": "x, v",
    "pick_batch_elems": "x, vs",
    "strided_select": "x, strides, range_from, range_to",
    "select_rows": "x, rs",
    "select_cols": "x, cs",
    "conv2d": "x, f, stride, is_valid=True",
    "conv2d_bias": "x, f, b, stride, is_valid=True",
    "maxpooling2d": "x, ksize, stride, is_valid=True",
    "filter1d_narrow": "x, f",
    "kmh_ngram": "x, n",
    "circ_conv": "u, v",
    "circ_corr": "u, v",
    "layer_norm": "x, g, b",
    "weight_norm": "w, g",
    "nobackprop": "x",
    "flip_gradient": "x",
    "scale_gradient": "x, lambd=1.0",
    "argmax": "x, gradient_mode",
    "to_device": "e, device_str",
    "vanilla_lstm_gates": "x_t, h_tm1, Wx, Wh, b, weightnoise_std=0.0",
    "vanilla_lstm_gates_concat": "x_t_list, h_tm1, Wx, Wh, b, weightnoise_std=0.0",
    "vanilla_lstm_gates_dropout": (
        "x_t, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std=0.0"
    ),
    "vanilla_lstm_gates_dropout_concat": (
        "x_t_list, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std=0.0"
    ),
    "vanilla_lstm_c": "c_tm1, gates_t",
    "vanilla_lstm_h": "c_t, gates_t",
    "renew_cg": "immediate_compute=False, check_validity=False, autobatching=None",
    "cg_version": "",
    "cg": "",
    "cg_checkpoint": "",
    "cg_revert": "",
    "print_text_graphviz": "",
    "dump_cg": 'filename="", show_values=True, show_gradients=True, nan_check_only=False',
    "print_graphviz": "**kw",
    "forward": "exps, recalculate=False",
    "npvalues": "exps, recalculate=False",
    "values": "exps, recalculate=False",
    "save": "basename, objects",
    "load": "basename, params",
    "load_generator": "basename, params",
    "init": "shared_parameters=None",
    "init_from_params": "params",
    "reset_random_seed": "seed",
    "available_devices": "",
    "get_device_info": "name",
    "DeviceInfo": "name, id, dtype",
}

EXTRA_NAMES = ["zeroes", "pickrange", "Model", "DeviceInfo", "cg"]

# name -> why dyn does not provide it (keep docs/README.md in step)
LEFT_OUT = {}


def _params(sig):
    out = []
    fn = ast.parse("def f(%s): pass" % sig).body[0].args
    positional = fn.posonlyargs + fn.args
    defaults = [None] * (len(positional) - len(fn.defaults)) + list(fn.defaults)
    for a, d in zip(positional, defaults):
        out.append((a.arg, None if d is None else ast.literal_eval(d)))
    if fn.vararg:
        out.append(("*" + fn.vararg.arg, None))
    for a, d in zip(fn.kwonlyargs, fn.kw_defaults):
        out.append((a.arg, None if d is None else ast.literal_eval(d)))
    if fn.kwarg:
        out.append(("**" + fn.kwarg.arg, None))
    return out


def _dyn_params(obj):
    out = []
    for p in inspect.signature(obj).parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            out.append(("*" + p.name, None))
        elif p.kind == p.VAR_KEYWORD:
            out.append(("**" + p.name, None))
        else:
            out.append((p.name, None if p.default is p.empty else p.default))
    return out


@pytest.mark.parametrize("name", sorted(set(DYNET_SIGNATURES) | set(EXTRA_NAMES)))
def test_name_exists(name):
    if name in LEFT_OUT:
        pytest.skip(LEFT_OUT[name])
    assert hasattr(dy, name), "dyn has no %s (a name of DyNet's module-level API)" % name


@pytest.mark.parametrize("name", sorted(DYNET_SIGNATURES))
def test_signature_matches_dynet(name):
    if name in LEFT_OUT or not hasattr(dy, name):
        pytest.skip("missing: reported by test_name_exists")
    want = _params(DYNET_SIGNATURES[name])
    got = _dyn_params(getattr(dy, name))
    # dyn may add keyword-only options (with defaults) after DyNet's parameters
    sig = inspect.signature(getattr(dy, name)).parameters
    got = [
        g
        for g in got
        if g[0].lstrip("*") not in sig or sig[g[0].lstrip("*")].kind != inspect.Parameter.KEYWORD_ONLY
    ]
    assert got == want, "%s: dyn %r, DyNet %r" % (name, got, want)
