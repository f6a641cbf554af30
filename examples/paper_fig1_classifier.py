"""Figure 1 of the DyNet paper: a two-word classifier trained one example at a time.

Neubig et al. (2017), "DyNet: The Dynamic Neural Network Toolkit", Figure 1 shows
the basic DyNet loop: declare parameters once in a ParameterCollection, then for
every training example build a fresh graph (``renew_cg``), compute
``W * concatenate([E[w1], E[w2]]) + b``, take ``pickneglogsoftmax`` of the gold
label, run forward and backward, and let the trainer update the parameters.

The data are generated here: every word has a hidden affinity to each class, and a
two-word phrase belongs to the class with the largest total affinity. This rule is
exactly what the model's shape can express (a score that adds one term per word),
so held-out pairs of known words are classified well after a few epochs.

    python examples/paper_fig1_classifier.py --epochs 5 --dynet-seed 1
"""

import argparse

import numpy as np

import dyn as dy


def make_data(rng, vocab, classes, count):
    """Draws ``count`` two-word phrases and their labels.

    Args:
        rng: numpy RandomState.
        vocab: Number of distinct words.
        classes: Number of labels.
        count: Number of (phrase, label) pairs.

    Returns:
        A list of ``((w1, w2), label)`` and the word-by-class affinity table.
    """
    affinity = rng.normal(size=(vocab, classes))
    words = rng.randint(vocab, size=(count, 2))
    labels = np.argmax(affinity[words[:, 0]] + affinity[words[:, 1]], axis=1)
    return [((int(w1), int(w2)), int(y)) for (w1, w2), y in zip(words, labels)]


def main(argv=None):
    """Trains the Figure 1 classifier and reports its accuracy.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``); ``--dynet-*``
            flags are accepted and left to dyn.

    Returns:
        Dict with ``train_acc``, ``test_acc``, ``chance`` and ``final_loss``.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=60)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--emb", type=int, default=16)
    parser.add_argument("--train", type=int, default=1500)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=1)
    args, _ = parser.parse_known_args(argv)
    rng = np.random.RandomState(args.seed)
    dy.reset_random_seed(args.seed)
    data = make_data(rng, args.vocab, args.classes, args.train + args.test)
    train, test = data[: args.train], data[args.train :]

    # Figure 1: the parameters are declared once, outside the training loop.
    model = dy.ParameterCollection()
    W_p = model.add_parameters((args.classes, 2 * args.emb))
    b_p = model.add_parameters(args.classes)
    E = model.add_lookup_parameters((args.vocab, args.emb))
    trainer = dy.SimpleSGDTrainer(model, args.lr)

    def score(words):
        # As the paper writes it; since DyNet 2.0 dy.parameter() is a no-op kept for old code.
        W = dy.parameter(W_p)
        b = dy.parameter(b_p)
        return W * dy.concatenate([E[words[0]], E[words[1]]]) + b

    def accuracy(examples):
        correct = 0
        for words, label in examples:
            dy.renew_cg()
            correct += int(np.argmax(score(words).npvalue()) == label)
        return correct / len(examples)

    mean_loss = test_acc = float("nan")
    for epoch in range(args.epochs):
        rng.shuffle(train)
        total_loss = 0.0
        for words, label in train:
            dy.renew_cg()  # a new graph for every example
            loss = dy.pickneglogsoftmax(score(words), label)
            loss.forward()
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
