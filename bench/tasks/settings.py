"""The settings of the DyNet paper's tasks, in one place for every program that runs them.

The dyn programs (bench/tasks), their PyTorch peers (bench/peers) and the benches built on the
same models (bench/autobatch.py, bench/autobatch_ceiling.py, bench/tagger_phases.py,
bench/rnnlm_check.py, bench/roofline.py) read the sizes, the trainer and the data slices from
here, so that the two sides of a comparison cannot drift apart. The data preparation that goes
with them (vocabularies, ids, minibatches) is in common.py. Imports neither dyn nor torch.

Sizes are those of the paper's Table 1 (neulab/dynet-benchmark). Each task's ``FLAGS`` are the
sizes its programs take on the command line (``add_flags``), with these values as defaults.
"""

# ---------------------------------------------------------------- trainer (every task, both sides)

ADAM_LR = 0.001  # Adam, learning rate 0.001
NO_CLIP = -1.0  # DyNet's clip threshold meaning "no gradient clipping" (the peers do not clip)


class Tagger:
    """BiLSTM tagger (bilstm_tagger.py, tagger_handbatched.py): wikiner-10k ``word|tag`` data."""

    wembed = 128  # word embedding
    hidden = 50  # LSTM, each way (one layer)
    mlp = 32  # tanh layer before the tag scores
    FLAGS = ("wembed", "hidden", "mlp")
    rare = 5  # words seen at most this often in train: _UNK_ (or spelled, with characters)
    quick_train, quick_dev = 300, 100  # sentences read with --quick


class CharTagger(Tagger):
    """BiLSTM tagger with character features for rare words (bilstm_tagger_char.py)."""

    cembed = 20  # character embedding; the character BiLSTM is wembed // 2 each way
    FLAGS = ("cembed",) + Tagger.FLAGS


class TreeLSTM:
    """Binary Tree-LSTM sentiment classifier (treelstm.py): Stanford Sentiment Treebank trees."""

    wembed = 128
    hidden = 128
    FLAGS = ("wembed", "hidden")
    labels = 5  # sentiment classes, a softmax at the root
    quick_train, quick_dev = 200, 100


class RNNLM:
    """Minibatched LSTM language model (rnnlm.py): PTB text, ``<s>`` ends every sentence."""

    minibatch = 16  # sentences per minibatch (run.py times 1, 4, 16 and 64)
    wembed = 128
    hidden = 256  # one LSTM layer
    FLAGS = ("minibatch", "wembed", "hidden")
    dev_minibatch = 64  # dev perplexity is computed in batches of 64 whatever --minibatch
    vocab = 10000  # PTB's vocabulary (``<unk>`` included), ``<s>`` aside
    quick_train, quick_dev = 200, 50


def add_flags(p, task):
    """Add ``--<size>`` for each of ``task.FLAGS`` to the parser p, defaulting to the task's values."""
    for name in task.FLAGS:
        p.add_argument("--" + name, type=int, default=getattr(task, name))
