"""Corpus workload: a JIT'd function over two symbolic dims (Variable(...).bind), so kernels inside JIT batches have
estimates that depend on the batch's var_vals; plus one symbolic kernel outside the JIT."""
from corpus_steps import collect, device, marker, step
from tinygrad import Tensor, TinyJit, Variable

N = 32
BINDINGS = [(4, 8), (8, 16), (16, 24), (24, 32)]  # (i, j): the JIT captures on the 2nd call, replays after

dev = device()
state: dict = {}


def setup() -> None:
    state["a"] = Tensor.ones(N, N, device=dev).contiguous().realize()
    state["b"] = Tensor.ones(N, N, device=dev).contiguous().realize()


@TinyJit
def scores(x: Tensor, y: Tensor) -> tuple:
    return (x @ y.T).relu().sum(axis=1), (y * 2 + 1).mean()


def jit_call(iv: int, jv: int) -> None:
    i, j = Variable("i", 1, N).bind(iv), Variable("j", 1, N).bind(jv)
    Tensor.realize(*scores(state["a"][:i], state["b"][:j]))


def plain_symbolic() -> None:
    k = Variable("k", 1, N).bind(5)
    (state["a"][:k] * 3).sum().realize()


step("setup", setup)
for iv, jv in BINDINGS:
    step(f"jit i={iv} j={jv}", lambda iv=iv, jv=jv: jit_call(iv, jv))
    step(f"marker i={iv}", lambda iv=iv: marker(f"sym i={iv}"))
step("symbolic outside jit", plain_symbolic)
step("gc", collect)
