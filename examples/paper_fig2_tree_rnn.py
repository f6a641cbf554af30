"""Figure 2 of the DyNet paper: a recursive neural network over binary trees.

Neubig et al. (2017), Figure 2, shows why dynamic declaration matters: the graph
follows the shape of each input tree, built by an ordinary recursive Python
function. A leaf is its word embedding ``E[word]``; an inner node is
``tanh(W * concatenate([left, right]) + b)``. Every tree gets its own graph, with
no padding, bucketing or static unrolling.

The trees are generated here: random binary bracketings over a small vocabulary
in which a third of the words are "positive", a third "negative" and a third
neutral. A tree's label is whether positive words outnumber negative ones
(ties are never drawn), so the model must carry a count up the tree.

    python examples/paper_fig2_tree_rnn.py --epochs 6 --dynet-mem 512
"""

import argparse

import numpy as np

import dyn as dy


class Tree:
    """A binary tree: a leaf holds ``word``, an inner node ``left`` and ``right``."""

    def __init__(self, word=None, left=None, right=None):
        self.word, self.left, self.right = word, left, right

    def is_leaf(self):
        return self.word is not None


def random_tree(rng, words):
    """Brackets ``words`` into a binary tree with uniformly drawn split points."""
    if len(words) == 1:
        return Tree(word=int(words[0]))
    split = rng.randint(1, len(words))
    return Tree(left=random_tree(rng, words[:split]), right=random_tree(rng, words[split:]))


def make_data(rng, vocab, max_leaves, count):
    """Draws ``count`` labelled trees of 2..max_leaves leaves.

    Words ``0 .. vocab/3`` are positive, the next third negative, the rest neutral.
    """
    polarity = np.zeros(vocab, dtype=int)
    polarity[: vocab // 3] = 1
    polarity[vocab // 3 : 2 * vocab // 3] = -1
    data = []
    while len(data) < count:
        words = rng.randint(vocab, size=rng.randint(2, max_leaves + 1))
        total = polarity[words].sum()
        if total != 0:  # ties have no right answer
            data.append((random_tree(rng, words), int(total > 0)))
    return data


def main(argv=None):
    """Trains the tree RNN classifier and reports its accuracy.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``); ``--dynet-*``
            flags are accepted and left to dyn.

    Returns:
        Dict with ``train_acc``, ``test_acc``, ``chance`` and ``final_loss``.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--max-leaves", type=int, default=10)
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--test", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=1)
    args, _ = parser.parse_known_args(argv)
    rng = np.random.RandomState(args.seed)
    dy.reset_random_seed(args.seed)
    data = make_data(rng, args.vocab, args.max_leaves, args.train + args.test)
    train, test = data[: args.train], data[args.train :]

    model = dy.ParameterCollection()
    E = model.add_lookup_parameters((args.vocab, args.hidden))
    W = model.add_parameters((args.hidden, 2 * args.hidden))
    b = model.add_parameters(args.hidden)
    V = model.add_parameters((2, args.hidden))  # softmax classifier on the root
    c = model.add_parameters(2)
    trainer = dy.SimpleSGDTrainer(model, args.lr)

    # Figure 2: the recursion in Python *is* the graph construction.
    def tree_rnn(tree):
        if tree.is_leaf():
            return E[tree.word]
        return dy.tanh(W * dy.concatenate([tree_rnn(tree.left), tree_rnn(tree.right)]) + b)

    def accuracy(examples):
        correct = 0
        for tree, label in examples:
            dy.renew_cg()
            correct += int(np.argmax((V * tree_rnn(tree) + c).npvalue()) == label)
        return correct / len(examples)

    mean_loss = test_acc = float("nan")
    for epoch in range(args.epochs):
        rng.shuffle(train)
        total_loss = 0.0
        for tree, label in train:
            dy.renew_cg()
            loss = dy.pickneglogsoftmax(V * tree_rnn(tree) + c, label)
            total_loss += loss.value()
            loss.backward()
            trainer.update()
        mean_loss = total_loss / len(train)
        test_acc = accuracy(test)
        print(f"epoch {epoch + 1}: loss={mean_loss:.4f} test_acc={test_acc:.3f}")

    majority = np.bincount([y for _, y in test]).max() / len(test)
    result = {
        "train_acc": accuracy(train),
        "test_acc": test_acc,
        "chance": float(majority),
        "final_loss": mean_loss,
    }
    print(" ".join(f"{key}={value:.4f}" for key, value in result.items()))
    return result


if __name__ == "__main__":
    main()
