"""dyn: dynamic neural networks with DyNet's Python API and a compiled core.

    import dyn as dy

runs DyNet programs unchanged. Operations are exported from the registry in
dyn/ops; see docs/operations.md.
"""

import dyn._core.cpu  # the CPU device and its kernels (registered in the kernel table)
import dyn.ops  # imports (registers) every operation family
from dyn._config import (
    DeviceInfo,
    DynetParams,
    available_devices,
    current_config,
    get_device_info,
    init,
    init_from_params,
    reset_random_seed,
)
from dyn._core.core import graph as _graph
from dyn._core.core.expr import Expression
from dyn.builders import *  # noqa: F403 (every builder module's __all__)
from dyn.errors import StaleExpressionError
from dyn.gradcheck import check_grad
from dyn.graph import (
    ComputationGraph,
    cg,
    cg_checkpoint,
    cg_revert,
    cg_version,
    dump_cg,
    forward,
    npvalues,
    print_graphviz,
    print_text_graphviz,
    renew_cg,
    values,
)
from dyn.io import load, load_generator, save
from dyn.ops import shape as _shape
from dyn.ops._registry import REGISTRY as _REGISTRY
from dyn.ops.inputs import (
    constant,
    inputMatrix,
    inputTensor,
    inputTensorTranspose,
    inputVector,
    matInput,
    one_hot,
    ones,
    scalarInput,
    sparse_inputTensor,
    vecInput,
    zeroes,
    zeros,
)
from dyn.params import (
    ConstInitializer,
    FromFileInitializer,
    GlorotInitializer,
    IdentityInitializer,
    LookupParameters,
    Model,
    NormalInitializer,
    NumpyInitializer,
    ParameterCollection,
    Parameters,
    PyInitializer,
    SaxeInitializer,
    UniformInitializer,
    const_parameter,
    lookup,
    lookup_batch,
    parameter,
)
from dyn.trainers import (  # noqa: E501
    AdadeltaTrainer,
    AdagradTrainer,
    AdamTrainer,
    AmsgradTrainer,
    CyclicalSGDTrainer,
    EGTrainer,
    MomentumSGDTrainer,
    RMSPropTrainer,
    SimpleSGDTrainer,
    SMORMS3Trainer,
    Trainer,
)

__version__ = "2.1"
HAVE_CUDA = False

# every registered operation with an identifier name is dyn.<name>
globals().update({name: spec.fn for name, spec in _REGISTRY.items() if name.isidentifier()})


def set_precision(name):
    """Float type of graphs and of parameters created from now on:
    "float32" (default) or "float64" (gradient checking)."""
    _graph.set_dtype(name)


def get_precision():
    return _graph.get_dtype()


def _bind_operators():
    from dyn._core.core import expr as _expr
    from dyn._core.ops import arith as _k_arith

    _expr.bind_operator("neg", _k_arith.neg)
    _expr.bind_operator("pow", _shape._pow)
    _expr.bind_operator("getitem", _shape._getitem)


_bind_operators()

from dyn import _config as _cfg  # noqa: E402
from dyn import training  # noqa: E402 (the training-tricks toolkit: dyn.training)
from dyn.display import render  # noqa: E402

_cfg.init_from_argv()
