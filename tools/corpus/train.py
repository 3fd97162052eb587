"""Corpus workload: a small MLP trained for a few steps with Adam (backward, optimizer kernels, buffer churn), then
a JIT'd inference called a few times. Layers have no bias: fewer kernels keep the set's rewrites.pkl small."""
import contextlib

from corpus_steps import collect, device, marker, step
from tinygrad import Tensor, TinyJit, nn

BATCH, IN, HIDDEN, OUT = 8, 16, 32, 4
TRAIN_STEPS, INFER_CALLS = 3, 3

dev = device()
state: dict = {}


class MLP:
    def __init__(self) -> None:
        self.l1, self.l2 = nn.Linear(IN, HIDDEN, bias=False), nn.Linear(HIDDEN, OUT, bias=False)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


def setup() -> None:
    state["model"] = model = MLP()
    state["opt"] = nn.optim.Adam(nn.state.get_parameters(model), lr=1e-3)
    state["x"] = Tensor.randn(BATCH, IN, device=dev).realize()
    state["y"] = Tensor.randn(BATCH, OUT, device=dev).realize()


def training_mode():
    """Tensor.train() (<= 0.13) or Context(TRAINING=1) (0.14+), whichever the release has."""
    if hasattr(Tensor, "train"):
        return Tensor.train()
    from tinygrad import helpers
    return helpers.Context(TRAINING=1) if hasattr(helpers, "TRAINING") else contextlib.nullcontext()


def train_step() -> None:
    with training_mode():
        opt = state["opt"]
        opt.zero_grad()
        loss = ((state["model"](state["x"]) - state["y"]) ** 2).mean()
        loss.backward()
        opt.step()
        loss.realize()


@TinyJit
def infer(x: Tensor) -> Tensor:
    return state["model"](x).argmax(axis=1).realize()


step("setup", setup)
for n in range(TRAIN_STEPS):
    step(f"train step {n}", train_step)
    step(f"marker train {n}", lambda n=n: marker(f"train {n}", color="green"))
for n in range(INFER_CALLS):
    step(f"jit infer {n}", lambda: infer(Tensor.randn(BATCH, IN, device=dev).realize()))
step("gc", collect)
