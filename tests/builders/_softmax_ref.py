"""float64 numpy references of the softmax builders' equations, reading the
weights through the builders' parameters (as_array)."""

import numpy as np
import scipy.stats


def log_softmax(z):
    z = np.asarray(z, dtype=np.float64)
    m = z.max()
    return z - m - np.log(np.exp(z - m).sum())


def log_sigmoid(z):
    return -np.logaddexp(0.0, -z)


def standard(sm, x):
    """log p(. | x) = log_softmax(W x + b)."""
    z = sm.W.as_array() @ x
    if sm.b is not None:
        z = z + sm.b.as_array()
    return log_softmax(z)


def class_factored(cf, x):
    """log p(w | x) = log p(c | x) + log p(w | c, x); -inf without a class."""
    zc = cf.r2c.as_array() @ x
    if cf.cbias is not None:
        zc = zc + cf.cbias.as_array()
    lc = log_softmax(zc)
    out = np.full(cf.num_words, -np.inf)
    for c, words in enumerate(cf.class_words):
        if len(words) == 1:
            out[words[0]] = lc[c]
            continue
        zw = cf.rc2w[c].as_array() @ x
        if cf.rc2wbias[c] is not None:
            zw = zw + cf.rc2wbias[c].as_array()
        out[words] = lc[c] + log_softmax(zw)
    return out


def hierarchical(hs, x):
    """Walk the tree from the root: binary node n: log sigmoid(+-(W[n].x + b[n]))
    (branch 0: +), k-ary node: log_softmax(W_n x + b_n); -inf for absent words."""
    W = hs.W.as_array() if hs.W is not None else None
    b = hs.b.as_array()[:, 0] if hs.b is not None else None
    out = np.full(hs.num_words, -np.inf)
    stack = [(0, 0.0)]
    while stack:
        node, lp = stack.pop()
        outs = hs.nodes[node]
        if len(outs) == 1:
            steps = [0.0]
        elif len(outs) == 2:
            r = hs.node_row[node]
            z = W[r] @ x + (b[r] if b is not None else 0.0)
            steps = [log_sigmoid(z), log_sigmoid(-z)]
        else:
            z = hs.node_W[node].as_array() @ x
            if hs.node_b[node] is not None:
                z = z + hs.node_b[node].as_array()
            steps = log_softmax(z)
        for o, s in zip(outs, steps):
            if o >= 0:
                out[o] = lp + s
            else:
                stack.append((~o, lp + s))
    return out


def reference(builder, x):
    name = type(builder).__name__
    return {"StandardSoftmaxBuilder": standard, "ClassFactoredSoftmaxBuilder": class_factored,
            "HierarchicalSoftmaxBuilder": hierarchical}[name](builder, x)  # fmt: skip


def randomize(builder, rng):
    """Random values for every parameter (biases start at 0: the tests must see them)."""
    pc = builder.param_collection()
    for p in pc.parameters_list() + pc.lookup_parameters_list():
        p.set_value(rng.uniform(-1, 1, p.as_array().shape))


def chi_square_p(counts, probs):
    """p-value of Pearson's chi-square test of counts against probs (words of
    probability 0 must never be drawn)."""
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(probs)
    keep = expected > 0
    assert counts[~keep].sum() == 0, "drew a word of probability 0"
    stat = float((((counts - expected) ** 2)[keep] / expected[keep]).sum())
    return float(scipy.stats.chi2.sf(stat, int(keep.sum() - 1)))
