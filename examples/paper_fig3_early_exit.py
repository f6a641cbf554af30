"""Figure 3 of the DyNet paper: dynamic flow control that depends on computed values.

Neubig et al. (2017), Figure 3, shows a graph whose *shape* is decided by values
computed while it is being built: the program asks for a value in the middle of
the graph (``npvalue()``), looks at it in Python, and then decides whether to
add more nodes. Here that is an early-exit classifier: hidden layers are applied
one at a time, each followed by its own softmax head; as soon as a head is
confident (max probability >= ``--threshold``) no further layer is built.
Easy inputs get shallow graphs, hard ones deep graphs, during training (the
loss sums the heads that were built) as well as at test time.

The data are generated here: points in ``--dim`` dimensions, labelled by whether
they lie inside a sphere; points near the sphere's surface are the hard ones.

    python examples/paper_fig3_early_exit.py --epochs 8 --threshold 0.9
"""

import argparse

import numpy as np

import dyn as dy


def make_data(rng, dim, count):
    """Draws Gaussian points labelled 1 inside the sphere of median radius."""
    points = rng.normal(size=(count, dim))
    radius = np.median(np.linalg.norm(points, axis=1))  # balances the classes
    labels = (np.linalg.norm(points, axis=1) < radius).astype(int)
    return list(zip(points, labels.tolist()))


def main(argv=None):
    """Trains the early-exit classifier and reports accuracy and mean depth.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``); ``--dynet-*``
            flags are accepted and left to dyn.

    Returns:
        Dict with ``train_acc``, ``test_acc``, ``chance``, ``final_loss`` and
        ``test_depth`` (mean number of layers built per test example).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--train", type=int, default=1500)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.005, help="Adam learning rate")
    parser.add_argument("--seed", type=int, default=1)
    args, _ = parser.parse_known_args(argv)
    rng = np.random.RandomState(args.seed)
    dy.reset_random_seed(args.seed)
    data = make_data(rng, args.dim, args.train + args.test)
    train, test = data[: args.train], data[args.train :]

    model = dy.ParameterCollection()
    layers = [
        (
            model.add_parameters((args.hidden, args.hidden if i else args.dim)),
            model.add_parameters(args.hidden),
        )
        for i in range(args.layers)
    ]
    heads = [(model.add_parameters((2, args.hidden)), model.add_parameters(2)) for _ in layers]
    trainer = dy.AdamTrainer(model, args.lr)

    def run(x):
        """Builds layers until a head is confident; returns the head scores built."""
        h = dy.inputTensor(x)
        scores = []
        for (W, b), (V, c) in zip(layers, heads):
            h = dy.tanh(W * h + b)
            scores.append(V * h + c)
            # The value is computed now, mid-graph, and decides the graph's shape.
            if dy.softmax(scores[-1]).npvalue().max() >= args.threshold:
                break
        return scores

    def evaluate(examples):
        correct = depth = 0
        for x, label in examples:
            dy.renew_cg()
            scores = run(x)
            correct += int(np.argmax(scores[-1].npvalue()) == label)
            depth += len(scores)
        return correct / len(examples), depth / len(examples)

    mean_loss = test_acc = test_depth = float("nan")
    for epoch in range(args.epochs):
        rng.shuffle(train)
        total_loss = 0.0
        for x, label in train:
            dy.renew_cg()
            # Every head that was built learns; the graph after the exit does not exist.
            loss = dy.esum([dy.pickneglogsoftmax(s, label) for s in run(x)])
            total_loss += loss.value()
            loss.backward()
            trainer.update()
        mean_loss = total_loss / len(train)
        test_acc, test_depth = evaluate(test)
        print(
            f"epoch {epoch + 1}: loss={mean_loss:.4f} test_acc={test_acc:.3f} "
            f"mean_depth={test_depth:.2f}/{args.layers}"
        )

    majority = np.bincount([y for _, y in test]).max() / len(test)
    result = {
        "train_acc": evaluate(train)[0],
        "test_acc": test_acc,
        "chance": float(majority),
        "final_loss": mean_loss,
        "test_depth": test_depth,
    }
    print(" ".join(f"{key}={value:.4f}" for key, value in result.items()))
    return result


if __name__ == "__main__":
    main()
