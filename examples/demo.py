"""dyn in one minute: a small network learns to separate two interleaved spirals.

A newcomer's first dyn program. It generates its own data (two spirals in the
plane, which no straight line can separate), trains a two-layer perceptron with
Adam on minibatches, and prints the loss falling and the accuracy rising after
every epoch. It runs in a few seconds on one CPU core.

What it shows, in DyNet's API (``import dyn as dy``):
  * parameters live in a ``ParameterCollection`` and are trained by a trainer;
  * every step builds a fresh graph (``renew_cg``) in plain Python;
  * a minibatch is one batched input (``inputTensor(..., batched=True)``) whose
    per-example losses are summed with ``sum_batches``.

    python examples/demo.py --epochs 30 --dynet-seed 1
"""

import argparse
import time

import numpy as np

import dyn as dy


def make_spirals(rng, count, turns, noise=0.1):
    """Draws ``count`` points from two interleaved spirals, label = which spiral.

    Args:
        rng: numpy RandomState.
        count: Number of points.
        turns: How many times each arm winds around the centre (difficulty).
        noise: Standard deviation of the Gaussian noise added to each point.

    Returns:
        Points as a ``(2, count)`` array (one column per point) and ``(count,)`` labels.
    """
    labels = rng.randint(2, size=count)
    turn = np.sqrt(rng.uniform(size=count)) * turns * 2 * np.pi  # sqrt: even density
    angle = turn + np.pi * labels  # the second spiral is the first rotated by 180 deg
    radius = turn / np.pi  # arms of the two spirals lie 1 apart
    points = np.stack([radius * np.cos(angle), radius * np.sin(angle)])
    return points + rng.normal(scale=noise, size=points.shape), labels


def main(argv=None):
    """Trains the spiral classifier, printing progress per epoch.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``); ``--dynet-*``
            flags are accepted and left to dyn.

    Returns:
        Dict with ``train_acc``, ``test_acc``, ``chance``, ``final_loss`` and ``seconds``.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--turns", type=float, default=1.25, help="harder when larger")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    parser.add_argument("--seed", type=int, default=1)
    args, _ = parser.parse_known_args(argv)
    rng = np.random.RandomState(args.seed)
    dy.reset_random_seed(args.seed)
    x_train, y_train = make_spirals(rng, args.train, args.turns)
    x_test, y_test = make_spirals(rng, args.test, args.turns)

    model = dy.ParameterCollection()
    W1 = model.add_parameters((args.hidden, 2))
    b1 = model.add_parameters(args.hidden)
    W2 = model.add_parameters((args.hidden, args.hidden))
    b2 = model.add_parameters(args.hidden)
    V = model.add_parameters((2, args.hidden))
    c = model.add_parameters(2)
    trainer = dy.AdamTrainer(model, args.lr)

    def scores(points):
        # points is (2, batch): the last axis becomes dyn's batch dimension.
        x = dy.inputTensor(points, batched=True)
        h = dy.tanh(W1 * x + b1)
        h = dy.tanh(W2 * h + b2)
        return V * h + c

    def accuracy(points, labels):
        dy.renew_cg()
        predicted = np.argmax(scores(points).npvalue().reshape(2, -1), axis=0)
        return float(np.mean(predicted == labels))

    start = time.perf_counter()
    print(f"two spirals: {args.train} training points, {args.test} test points")
    print("epoch   loss    train_acc  test_acc")
    mean_loss = train_acc = test_acc = float("nan")
    for epoch in range(args.epochs):
        order = rng.permutation(args.train)
        total_loss = 0.0
        for begin in range(0, args.train, args.batch):
            batch = order[begin : begin + args.batch]
            dy.renew_cg()
            losses = dy.pickneglogsoftmax_batch(scores(x_train[:, batch]), y_train[batch])
            loss = dy.sum_batches(losses) / len(batch)
            total_loss += loss.value() * len(batch)
            loss.backward()
            trainer.update()
        mean_loss = total_loss / args.train
        train_acc = accuracy(x_train, y_train)
        test_acc = accuracy(x_test, y_test)
        print(f"{epoch + 1:5d}  {mean_loss:.4f}  {train_acc:9.3f}  {test_acc:8.3f}")

    result = {
        "train_acc": train_acc,
        "test_acc": test_acc,
        "chance": float(max(np.mean(y_test), 1 - np.mean(y_test))),
        "final_loss": mean_loss,
        "seconds": time.perf_counter() - start,
    }
    print(" ".join(f"{key}={value:.4f}" for key, value in result.items()))
    return result


if __name__ == "__main__":
    main()
