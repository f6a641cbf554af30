"""The GPU device: choosing it as DyNet users do, what it does per node (no allocation, no copy
back), parameters of both devices in one graph, saving on one device and loading on the other.

Where there is no CUDA GPU these run on the GPU device's numpy stand-in (tests/conftest.py), which
goes through the same code paths; the tests that need a real GPU skip, saying so."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph
from tests.conftest import GPU_SKIP_REASON

pytestmark = pytest.mark.skipif(GPU_SKIP_REASON is not None, reason="no GPU device: %s" % GPU_SKIP_REASON)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _backend():
    import dyn._core.gpu as _gpu
    return _gpu.current()


@pytest.fixture
def on_gpu():
    dy.init(devices="GPU:0")
    try:
        yield _backend()
    finally:
        dy.init(devices="CPU")


def _run(code, env=None, args=()):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code] + list(args), capture_output=True, text=True,
                          env=e, cwd=ROOT, timeout=120)

# ---------------------------------------------------------------- choosing the device


def test_init_chooses_the_device_and_config_says_which():
    assert dy.current_config()["device"] == "CPU"
    dy.init(devices="CPU,GPU:0")          # DyNet's list: graphs run on the GPU listed
    try:
        assert dy.current_config()["device"] == "GPU:0"
        assert dy.available_devices() == ["CPU", "GPU:0"]
        info = dy.get_device_info("GPU:0")
        assert (info.name, info.id, info.type) == ("GPU:0", 0, 1) and info.card
        m = dy.ParameterCollection()
        W = m.add_parameters((2, 2))
        assert W.pool.device == "GPU:0"
    finally:
        dy.init(device="CPU")
    assert dy.current_config()["device"] == "CPU"


@pytest.mark.parametrize("bad, err, match", [
    ("GPU:1", ValueError, "one GPU"),
    ("TPU:0", ValueError, "not a device name"),
    ("", ValueError, "must be a string"),
])
def test_bad_device_names_are_refused_and_change_nothing(bad, err, match):
    with pytest.raises(err, match=match):
        dy.init(devices=bad)
    assert dy.current_config()["device"] == "CPU"


@pytest.mark.parametrize("how", [["--dynet-gpus", "1"], ["--dynet-devices", "GPU:0"], ["--dynet-gpu", "1"]])
def test_command_line_flags_choose_the_gpu(how):
    r = _run("import dyn as dy; print(dy.current_config()['device'])", args=how)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "GPU:0"


def test_environment_variable_chooses_the_gpu():
    r = _run("import dyn as dy; print(dy.current_config()['device'])", env={"DYN_DEVICE": "GPU:0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "GPU:0"


def test_dynetparams_requested_gpus():
    r = _run("import dyn as dy\np = dy.DynetParams()\np.set_requested_gpus(1)\np.init()\n"
             "print(dy.current_config()['device'])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "GPU:0"


def test_without_a_gpu_asking_for_one_says_what_to_install():
    """No stand-in and no usable CUDA GPU (or no cupy): a RuntimeError naming what is missing."""
    if _backend() is not None and _backend().is_gpu:
        pytest.skip("this machine has a GPU")
    r = _run("import dyn as dy\ntry:\n    dy.init(devices='GPU:0')\nexcept RuntimeError as e:\n"
             "    print('RuntimeError:', e)\nprint(dy.current_config()['device'])",
             env={"DYN_GPU_STANDIN": "0"})
    assert r.returncode == 0, r.stderr
    assert "RuntimeError: dyn:" in r.stdout
    assert "pip install" in r.stdout or "no usable CUDA GPU" in r.stdout
    assert r.stdout.split()[-1] == "CPU"


def test_the_cpu_program_never_imports_cupy():
    r = _run("import sys, dyn as dy\ndy.renew_cg()\nx = dy.inputVector([1.0, 2.0])\n"
             "print(dy.tanh(x).npvalue().sum())\n"
             "print('cupy' in sys.modules, 'dyn._core.gpu' in sys.modules)",
             env={"DYN_GPU_STANDIN": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == ["False", "False"]

def test_every_operation_has_gpu_kernels(on_gpu):
    """Every op of the kernel table runs on the GPU (foreign_parameter's kernels are compiled ones
    shared with the CPU)."""
    from dyn._core.gpu import device as gdev
    missing = set(_graph.op_names()) - set(gdev.registered())
    assert missing == {"foreign_parameter"}, sorted(missing)
    for dtype in ("float32", "float64"):
        dy.init(precision=dtype)
        try:
            dy.renew_cg()
            x = dy.inputVector([0.5, -1.0, 2.0])
            assert dy.sum_elems(dy.softmax(x)).value() == pytest.approx(1.0)
        finally:
            dy.init(precision="float32")

# ---------------------------------------------------------------- what a graph costs the device


def _graph_of(W, E, words):
    dy.renew_cg()
    h = dy.zeros(4)
    losses = []
    for w in words:
        h = dy.tanh(W * dy.concatenate([E[w], h]))
        losses.append(dy.pickneglogsoftmax(h, w % 4))
    return dy.esum(losses)


def test_no_device_allocation_per_node_and_no_copy_back_per_op(on_gpu):
    bk = on_gpu
    m = dy.ParameterCollection()
    W = m.add_parameters((4, 7))
    E = m.add_lookup_parameters((10, 3))
    trainer = dy.SimpleSGDTrainer(m, 0.1)
    for _ in range(2):                                # warm: the arenas reach their size
        loss = _graph_of(W, E, [1, 2, 3, 4, 5, 6])
        loss.value()
        loss.backward()
        trainer.update()
    before = bk.counters()
    loss = _graph_of(W, E, [1, 2, 3, 4, 5, 6])
    n = _graph.num_nodes()
    loss.forward()
    loss.backward()
    trainer.update()
    after = bk.counters()
    assert after["allocs"] == before["allocs"], "a graph of the steady state allocated device memory"
    assert after["to_host_copies"] == before["to_host_copies"], "forward/backward/update copied values back"
    launches = after["launches"] - before["launches"]
    assert n <= launches <= 4 * n                     # kernels ran on the device, a few per node
    v = loss.value()                                  # the one copy back: the value asked for
    assert bk.counters()["to_host_copies"] == after["to_host_copies"] + 1
    assert np.isfinite(v)


def test_inputs_are_copied_to_the_device_once_per_graph(on_gpu):
    bk = on_gpu
    dy.renew_cg()
    x = dy.inputTensor(np.arange(6.0).reshape(2, 3))
    y = dy.sum_elems(dy.tanh(x) * 2)
    before = bk.counters()["from_host_copies"]
    y.forward()
    y.forward()
    assert bk.counters()["from_host_copies"] == before + 1
    np.testing.assert_allclose(y.value(), 2 * np.tanh(np.arange(6.0)).sum(), rtol=1e-6)

# ---------------------------------------------------------------- GPU values equal the CPU's


def _train_tagger_like(device, steps=30):
    """A small LSTM tagger-like model trained with Adam: values after `steps` updates."""
    dy.init(devices=device, random_seed=7)
    m = dy.ParameterCollection()
    rs = np.random.RandomState(0)
    E = m.lookup_parameters_from_numpy(rs.uniform(-0.5, 0.5, (20, 5)))
    lstm = dy.LSTMBuilder(1, 5, 6, m)
    W = m.parameters_from_numpy(rs.uniform(-0.5, 0.5, (4, 6)))
    b = m.parameters_from_numpy(np.zeros(4))
    tr = dy.AdamTrainer(m, 0.01)
    losses = []
    for _ in range(steps):
        words = [int(w) for w in rs.randint(0, 20, 6)]
        dy.renew_cg()
        s = lstm.initial_state()
        outs = s.transduce([E[w] for w in words])
        loss = dy.esum([dy.pickneglogsoftmax(W * o + b, w % 4) for o, w in zip(outs, words)])
        losses.append(loss.value())
        loss.backward()
        tr.update()
    return np.array(losses), E.as_array(), W.as_array()


def test_training_on_the_gpu_follows_the_cpu():
    try:
        cpu = _train_tagger_like("CPU")
        gpu = _train_tagger_like("GPU:0")
    finally:
        dy.init(devices="CPU")
    for a, b in zip(cpu, gpu):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert cpu[0][-1] < cpu[0][0]


# ---------------------------------------------------------------- both devices in one graph


def test_parameters_of_both_devices_in_one_graph():
    """DyNet's xor-multidevice: parameters on the CPU and on the GPU, to_device between them; the
    graph runs on the GPU; gradients and updates reach both pools and equal the all-CPU run."""
    def run(devs):
        dy.init(devices="CPU,GPU:0" if "GPU:0" in devs else "CPU", random_seed=3)
        m = dy.ParameterCollection()
        rs = np.random.RandomState(1)
        W1 = m.parameters_from_numpy(rs.uniform(-1, 1, (8, 2)), device=devs[0])
        b1 = m.parameters_from_numpy(np.zeros(8), device=devs[0])
        V = m.parameters_from_numpy(rs.uniform(-1, 1, (1, 8)), device=devs[1])
        a = m.parameters_from_numpy(np.zeros(1), device=devs[1])
        E = m.lookup_parameters_from_numpy(rs.uniform(-1, 1, (4, 2)), device=devs[1])
        tr = dy.SimpleSGDTrainer(m, 0.2)
        out = []
        for _ in range(60):
            for x1 in (0, 1):
                for x2 in (0, 1):
                    dy.renew_cg()
                    x = dy.inputVector([x1, x2]) + 0.1 * E[2 * x1 + x2]
                    h = dy.tanh(W1 * x + b1)
                    h = dy.to_device(h, devs[1])
                    y = dy.logistic(V * h + a)
                    loss = dy.binary_log_loss(y, dy.scalarInput(float(x1 != x2)))
                    out.append(loss.value())
                    loss.backward()
                    tr.update()
        return np.array(out), W1.as_array(), V.as_array(), E.as_array(), W1.pool.device, V.pool.device

    try:
        mixed = run(("GPU:0", "CPU"))
        cpu = run(("CPU", "CPU"))
    finally:
        dy.init(devices="CPU")
    assert mixed[4:] == ("GPU:0", "CPU")
    for a, b in zip(mixed[:4], cpu[:4]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert mixed[0][-4:].mean() < mixed[0][:4].mean()


def test_a_cpu_graph_reads_gpu_parameters():
    dy.init(devices="CPU")
    m = dy.ParameterCollection()
    W = m.parameters_from_numpy(np.arange(6.0).reshape(2, 3), device="GPU:0")
    assert W.pool.device == "GPU:0" and _graph.device_name() == "CPU"
    dy.renew_cg()
    y = dy.sum_elems(W * dy.inputVector([1.0, 1.0, 1.0]))
    assert y.value() == pytest.approx(15.0)
    y.backward()
    np.testing.assert_allclose(W.grad_as_array(), np.ones((2, 3)))

# ---------------------------------------------------------------- saving and loading


def test_save_on_the_gpu_load_on_a_cpu_only_machine(tmp_path, on_gpu):
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4))
    E = m.add_lookup_parameters((5, 4))
    tr = dy.AdamTrainer(m)
    dy.renew_cg()
    loss = dy.sum_elems(dy.tanh(W * E[2]))
    loss.backward()
    tr.update()
    path = str(tmp_path / "model")
    m.save(path)
    want_w, want_e = W.as_array(), E.as_array()
    code = ("import dyn as dy, numpy as np\nm = dy.ParameterCollection()\nW = m.add_parameters((3, 4))\n"
            "E = m.add_lookup_parameters((5, 4))\nm.populate(%r)\n"
            "print(dy.current_config()['device'], W.pool.device)\n"
            "np.save(%r, W.as_array())\nnp.save(%r, E.as_array())\n"
            % (path, str(tmp_path / "w.npy"), str(tmp_path / "e.npy")))
    r = _run(code, env={"DYN_GPU_STANDIN": "0", "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == ["CPU", "CPU"]
    np.testing.assert_array_equal(np.load(str(tmp_path / "w.npy")), want_w)
    np.testing.assert_array_equal(np.load(str(tmp_path / "e.npy")), want_e)
    # and back onto the GPU
    m2 = dy.ParameterCollection()
    W2 = m2.add_parameters((3, 4))
    E2 = m2.add_lookup_parameters((5, 4))
    m2.populate(path)
    assert W2.pool.device == "GPU:0"
    np.testing.assert_array_equal(W2.as_array(), want_w)
    np.testing.assert_array_equal(E2.as_array(), want_e)


def test_parameter_writes_reach_device_memory(on_gpu):
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 3))
    W.set_value(np.arange(6.0).reshape(2, 3))
    W.scale(2.0)
    W.clip_inplace(0.0, 8.0)
    dy.renew_cg()
    np.testing.assert_allclose(dy.parameter(W).npvalue(), np.minimum(2 * np.arange(6.0).reshape(2, 3), 8))
    E = m.add_lookup_parameters((3, 2))
    E.init_row(1, [5.0, 6.0])
    dy.renew_cg()
    np.testing.assert_allclose(E[1].npvalue(), [5.0, 6.0])
    W.zero()
    assert not W.as_array().any()


def test_kernel_errors_are_raised_where_the_user_runs_the_graph(on_gpu):
    from dyn._core.gpu import device as gdev
    fwd, bwd = gdev.kernels_of("nonlin_unary")

    def boom(v):
        raise FloatingPointError("boom in %s" % v.desc())

    gdev.register("nonlin_unary", boom, bwd)
    try:
        dy.renew_cg()
        y = dy.tanh(dy.inputVector([1.0]))
        with pytest.raises(FloatingPointError, match="boom in nonlin_unary"):
            y.value()
    finally:
        gdev.register("nonlin_unary", fwd, bwd)
    dy.renew_cg()                  # the next graph runs
    assert dy.tanh(dy.inputVector([0.0])).value() == 0


def test_real_gpu_memory_is_device_memory():
    bk = _backend()
    if bk is None or not bk.is_gpu:
        pytest.skip("needs a CUDA GPU (this run uses the numpy stand-in)")
    import cupy
    dy.init(devices="GPU:0")
    try:
        m = dy.ParameterCollection()
        W = m.add_parameters((3, 3))
        assert isinstance(W.pool.values, cupy.ndarray)
        dy.renew_cg()
        y = dy.tanh(dy.parameter(W))
        np.testing.assert_allclose(y.npvalue(), np.tanh(W.as_array()), rtol=1e-6)
    finally:
        dy.init(devices="CPU")


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_sparse_adam_with_small_gradients_follows_the_cpu(precision):
    """Sparse Adam on a table whose gradients span every regime of the exact catch-up (sqrt(v)
    far above eps, far below it, and in between, where idle steps are replayed one by one), rows
    idle over many different intervals: the GPU's table equals the CPU's after every step."""
    def run(device):
        dy.init(devices=device, precision=precision, random_seed=5)
        m = dy.ParameterCollection()
        rs = np.random.RandomState(2)
        E = m.lookup_parameters_from_numpy(rs.uniform(-0.1, 0.1, (40, 6)))
        tr = dy.AdamTrainer(m, 0.001)
        tr.set_sparse_updates(True)
        scales = np.array([1e-1, 1e-4, 1e-6, 3e-7, 1e-8, 1e-12])   # sqrt(v) / eps: 3e5 .. 3e-6
        tables = []
        for step in range(25):
            dy.renew_cg()
            rows = sorted(set(int(r) for r in rs.randint(0, 40, 5)))
            loss = dy.esum([dy.dot_product(E[r], dy.inputVector(list(scales * rs.uniform(0.5, 1.5, 6))))
                            for r in rows])
            loss.backward()
            tr.update()
            if step % 6 == 5:
                tables.append(E.as_array())       # reading catches every row up
        return tables

    try:
        cpu = run("CPU")
        gpu = run("GPU:0")
    finally:
        dy.init(devices="CPU", precision="float32")
    tol = 1e-6 if precision == "float32" else 1e-12
    for a, b in zip(cpu, gpu):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol * 1e-3)


EXAMPLE_ARGS = {
    "paper_fig1_classifier": ["--train", "300", "--test", "100", "--epochs", "2"],
    "paper_fig2_tree_rnn": ["--train", "200", "--test", "100", "--epochs", "2"],
    "paper_fig3_early_exit": ["--train", "300", "--test", "100", "--epochs", "2", "--layers", "4"],
    "tagger_tricks": ["--generated", "--train", "100", "--epochs", "2"],
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_ARGS))
def test_examples_run_unchanged_with_dynet_gpus(name):
    """A program moves to the GPU with DyNet's flag and nothing else: the same results as on the
    CPU (printed to 4 digits, or the tagger's full summary)."""
    def last_line(flags):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name + ".py"), *EXAMPLE_ARGS[name],
                            "--seed", "1", *flags], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.strip().splitlines()[-1]

    def figures(line):            # key=value words, or the tagger's dict
        if line.startswith("{"):
            import ast
            return {k: v for k, v in ast.literal_eval(line).items() if isinstance(v, float)}
        return {k: float(v) for k, v in (w.split("=", 1) for w in line.split() if "=" in w)}

    cpu = figures(last_line([]))
    gpu = figures(last_line(["--dynet-gpus", "1"]))
    assert cpu.keys() == gpu.keys() and cpu
    for k in cpu:                 # float32 on both; the GPU sums in another order
        tol = 1e-3 * abs(cpu[k]) if "loss" in k else 0.011
        assert gpu[k] == pytest.approx(cpu[k], abs=tol), (k, cpu, gpu)


class _SmallCard:
    """The backend's allocator limited to `budget` bytes in all, as a card is: the arena's blocks
    count until they are released (what a real out-of-memory needs; tests cannot fill a card)."""

    def __init__(self, bk, budget):
        self.bk, self.budget, self.live, self.sizes = bk, budget, 0, {}
        self.real_alloc, self.real_release = bk.alloc, bk.release

    def alloc(self, nbytes):
        if self.live + nbytes > self.budget:
            raise MemoryError("out of device memory")      # what cupy raises
        p = self.real_alloc(nbytes)
        self.sizes[p] = nbytes
        self.live += nbytes
        return p

    def release(self, p):
        self.live -= self.sizes.pop(p, 0)
        self.real_release(p)

    def __enter__(self):
        dy.renew_cg()                                      # the arenas as small as they go
        self.bk.alloc, self.bk.release = self.alloc, self.release
        return self

    def __exit__(self, *exc):
        self.bk.alloc, self.bk.release = self.real_alloc, self.real_release


def test_out_of_device_memory_is_a_clear_error_and_the_next_graph_runs(on_gpu):
    """A value larger than the card; then a graph that fills the card value by value (the arena's
    blocks chained until none more can be had). Each is a MemoryError naming the arena, the bytes
    and the device; renew_cg() never raises (the merged block the next graph would want does not
    fit either: the arena starts empty), and the next graphs run and are right."""
    with _SmallCard(on_gpu, 38 << 20):
        dy.renew_cg()
        big = dy.random_normal((1024, 12 * 1024))         # 48 MiB of values
        with pytest.raises(MemoryError, match=r"cannot allocate \d+ bytes for the forward \(values\) "
                                              r"arena on GPU:0"):
            dy.sum_elems(big).value()
        dy.renew_cg()
        assert dy.sum_elems(dy.inputVector([1.0, 2.0])).value() == 3.0
        dy.renew_cg()
        xs = [dy.ones((1 << 20,)) for _ in range(12)]      # 12 x 4 MiB: more than the card holds
        with pytest.raises(MemoryError, match=r"forward \(values\) arena on GPU:0"):
            dy.esum([dy.sum_elems(x) for x in xs]).value()
        dy.renew_cg()
        dy.renew_cg()
        xs = [dy.ones((1 << 20,)) * (k + 1) for k in range(3)]   # a graph that fits runs
        assert dy.esum([dy.sum_elems(x) for x in xs]).value() == 6.0 * (1 << 20)


def test_data_parallel_steps_on_the_gpu_equal_one_process_on_the_combined_batch(on_gpu):
    """dyn.parallel's synchronous step with the parameters on the GPU (ranks as threads here):
    gradients summed through the host, then Adam; after 20 steps every rank's parameters equal one
    process trained on the combined batches. broadcast_parameters copies values and trainer state."""
    from dyn.parallel import broadcast_parameters, sync_gradients
    from tests.parallel._helpers import Model, ThreadExchange, make_data, run_ranks

    size, steps = 2, 20
    ref = Model()
    replicas = [Model(seed=1 + r) for r in range(size)]     # different starts: broadcast fixes them
    assert ref.W1.pool.device == "GPU:0"
    ref_tr = dy.AdamTrainer(ref.m, 0.01)
    trs = [dy.AdamTrainer(r.m, 0.01) for r in replicas]
    run_ranks(lambda ex: broadcast_parameters(replicas[ex.rank].m, ex, 0, trs[ex.rank]),
              ThreadExchange.group(size))
    for name, value in replicas[0].params().items():
        np.testing.assert_array_equal(replicas[1].params()[name], value)
        np.testing.assert_array_equal(ref.params()[name], value)
    for step in range(steps):
        data = make_data(4 * size, seed=100 + step)
        dy.renew_cg()
        ref.loss(data).backward()
        ref_tr.update()
        for model, part in zip(replicas, np.array_split(np.arange(len(data)), size)):
            dy.renew_cg()
            model.loss([data[i] for i in part]).backward()
        run_ranks(lambda ex: sync_gradients(replicas[ex.rank].m, ex, average=False),
                  ThreadExchange.group(size))
        for tr in trs:
            tr.update()
    for model in replicas:
        for name, value in ref.params().items():
            np.testing.assert_allclose(model.params()[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


def test_local_workers_with_parameters_on_the_gpu(on_gpu):
    """Forked workers: the synchronous mode equals one process on the combined batch where the
    device survives a fork (the stand-in); on a CUDA GPU, a RuntimeError says to run MPI ranks. The
    asynchronous mode, which shares parameters in host memory, is refused."""
    import dyn.parallel as par
    from tests.parallel._helpers import Model, make_data

    data = make_data(32, seed=3)

    def run(workers):
        model = Model()
        par.train(model.loss, data, dy.SimpleSGDTrainer(model.m, 0.05), workers=workers, mode="sync",
                  batch_size=8 // workers, progress=False, seed=1)
        return model.params()

    with pytest.raises(ValueError, match='mode="async" shares the parameters in host memory'):
        m = Model()
        par.train(m.loss, data, dy.SimpleSGDTrainer(m.m), workers=2, mode="async", progress=False)
    if on_gpu.is_gpu:
        with pytest.raises(RuntimeError, match="does not survive a fork.*MPI"):
            run(2)
        return
    two, one = run(2), run(1)
    for k in one:
        np.testing.assert_allclose(two[k], one[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_constrained_softmax_with_bounds_no_distribution_meets_equals_the_cpu():
    """Negative bounds, bounds summing below 1 (no p meets them): the GPU grows the clipped set
    round by round as the CPU does, so both give the same values and gradients."""
    rs = np.random.RandomState(4)
    x0 = rs.uniform(-1.5, 1.5, (4, 4))
    u0 = np.vstack([x0[:2], rs.uniform(0.01, 0.2, (2, 4))])   # x itself as bounds, and small ones

    def run(device):
        dy.init(devices=device, precision="float64")
        dy.renew_cg()
        x = dy.inputTensor(x0, batched=True)
        u = dy.inputTensor(u0, batched=True)
        y = dy.constrained_softmax(x, u)
        value = y.npvalue()
        weights = dy.inputTensor(np.arange(16.0).reshape(4, 4), batched=True)
        dy.sum_batches(dy.sum_elems(dy.cmult(y, weights))).backward()
        return value, x.gradient(), u.gradient()

    try:
        cpu, gpu = run("CPU"), run("GPU:0")
    finally:
        dy.init(devices="CPU", precision="float32")
    for a, b in zip(cpu, gpu):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_dynet_mem_sizes_the_device_arenas():
    r = _run("import dyn as dy\nfrom dyn._core.core import graph\n"
             "from dyn._core.gpu.device import current_backend\n"
             "s = graph.memory_stats()\nprint(dy.current_config()['device'], s['forward_capacity'], "
             "s['backward_capacity'], current_backend().counters()['allocs'] >= 2)",
             args=["--dynet-gpus", "1", "--dynet-mem", "64"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-4:] == ["GPU:0", str(64 << 20), str(64 << 20), "True"]
