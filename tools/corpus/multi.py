"""Corpus workload: two instances of one device (NULL and NULL:1, or CPU and CPU:1): copies both ways, work on each,
a JIT'd step that copies across devices, markers, and buffers freed before the end."""
from corpus_steps import collect, device, marker, step
from tinygrad import Tensor, TinyJit

SIZE, JIT_CALLS = 64, 4

dev0, dev1 = device(0), device(1)
state: dict = {}


def setup() -> None:
    state["a"] = Tensor.ones(SIZE, device=dev0).contiguous().realize()
    state["c"] = Tensor.ones(SIZE, device=dev1).contiguous().realize()


def copies() -> None:
    there = (state["a"] + 1).to(dev1).realize()
    back = (there * 2).to(dev0).realize()
    (back.sum() + state["a"].sum()).realize()


@TinyJit
def exchange(a: Tensor, c: Tensor) -> tuple:
    return (a * 3).contiguous(), (c + a.to(c.device)).contiguous()


def free_some() -> None:
    tmp = Tensor.ones(SIZE * 4, device=dev1).contiguous().add(1).realize()
    del tmp
    collect()


step("setup", setup)
step("copies", copies)
step("marker copies", lambda: marker("copies done"))
for n in range(JIT_CALLS):
    step(f"jit exchange {n}", lambda: Tensor.realize(*exchange(state["a"], state["c"])))
step("marker jit", lambda: marker("jit done", color="red"))
step("free", free_some)
