"""BiRNNBuilder, and small sequence tasks that the builders learn (batched
minibatches, with the training tricks switched on)."""

import numpy as np
import pytest

import dyn as dy


def test_birnn_matches_its_definition(float64, tmp_path):
    m = dy.ParameterCollection()
    bi = dy.BiRNNBuilder(2, 3, 4, m, dy.VanillaLSTMBuilder)  # each direction gets hidden 4/2 = 2.0
    assert bi.param_collection().name() == "/birnn/" and len(bi.builder_layers) == 2
    rng = np.random.RandomState(0)
    xs = [dy.inputVector(rng.uniform(-1, 1, 3)) for _ in range(4)]
    outs = bi.transduce(xs)
    assert len(outs) == 4 and outs[0].dim() == ((4,), 1)
    es = xs
    for f, b in bi.builder_layers:
        fs = f.initial_state().transduce(es)
        bs = b.initial_state().transduce(list(reversed(es)))[::-1]
        es = [dy.concatenate([x, y]) for x, y in zip(fs, bs)]
    for a, w in zip(outs, es):
        np.testing.assert_allclose(a.npvalue(), w.npvalue())
    pairs = bi.add_inputs(xs)
    np.testing.assert_allclose(
        dy.concatenate([pairs[1][0].output(), pairs[1][1].output()]).npvalue(), outs[1].npvalue()
    )
    bi.set_dropout(0.2)
    bi.disable_dropout()
    with pytest.raises(ValueError):
        dy.BiRNNBuilder(1, 3, 5, m, dy.LSTMBuilder)
    base = str(tmp_path / "bi")
    dy.save(base, [bi])
    (bi2,) = dy.load(base, dy.ParameterCollection())
    np.testing.assert_array_equal(bi2.transduce(xs)[2].npvalue(), bi.transduce(xs)[2].npvalue())


def _task(rng, n, length=5, vocab=4):
    """Label = the first token of the sequence: the net must remember it."""
    seqs = rng.randint(0, vocab, size=(n, length))
    return seqs, seqs[:, 0].copy()


def _accuracy(builder, E, W, b, seqs, labels):
    dy.renew_cg()
    xs = [dy.lookup_batch(E, seqs[:, t]) for t in range(seqs.shape[1])]
    out = builder.initial_state().transduce(xs)[-1]
    scores = (W * out + b).npvalue()
    return float(np.mean(scores.argmax(axis=0) == labels))


@pytest.mark.parametrize(
    "make",
    [
        lambda m: dy.VanillaLSTMBuilder(1, 8, 16, m),
        lambda m: dy.LSTMBuilder(1, 8, 16, m, forget_bias=1.0),
        lambda m: dy.GRUBuilder(2, 8, 16, m, reset_bias=-1.0, sum_outputs=True),
    ],
)
def test_a_small_sequence_task_learns(make):
    dy.reset_random_seed(3)
    rng = np.random.RandomState(1)
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((4, 8))
    builder = make(m)
    W, b = m.add_parameters((4, 16)), m.add_parameters(4, init=0.0)
    trainer = dy.AdamTrainer(m, 0.02)
    seqs, labels = _task(rng, 256)
    test_seqs, test_labels = _task(rng, 200)
    before = _accuracy(builder, E, W, b, test_seqs, test_labels)
    builder.set_dropouts(0.1, 0.1)
    builder.set_recurrent_dropout(0.1)
    losses = []
    for _epoch in range(6):
        for k in range(0, 256, 32):
            dy.renew_cg()
            xs = [dy.lookup_batch(E, seqs[k : k + 32, t]) for t in range(5)]
            out = builder.initial_state().transduce(xs)[-1]
            loss = dy.sum_batches(dy.pickneglogsoftmax_batch(W * out + b, labels[k : k + 32])) / 32
            losses.append(loss.value())
            loss.backward()
            trainer.update()
    builder.disable_dropout()
    after = _accuracy(builder, E, W, b, test_seqs, test_labels)
    assert np.mean(losses[-8:]) < 0.5 * np.mean(losses[:8])
    assert before < 0.5 and after > 0.9, (before, after)
