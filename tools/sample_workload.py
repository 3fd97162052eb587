"""NULL-device tinygrad workload behind the bundled sample pickles (run by tools/make_sample.py, never by the package).

It covers: JIT batches (ProfileGraphEvent), copies NULL <-> NULL:1, markers, buffer alloc/free, a small matmul and a
kernel with a symbolic shape (Variable).
"""
from tinygrad import Tensor, TinyJit, Variable
from tinygrad.helpers import profile_marker


@TinyJit
def step(a: Tensor, b: Tensor, c: Tensor):
    out = (a + b).contiguous().mul(3)
    c2 = c.add(1).contiguous().assign(a.to(c.device))
    return out, c2, b.assign(c.to(b.device))


a = Tensor.empty(16, device="NULL")
b = Tensor.empty(16, device="NULL")
c = Tensor.empty(16, device="NULL:1")
for i in range(4):
    Tensor.realize(*step(a, b, c))
    profile_marker(f"jit step {i}", color="blue")

x = Tensor.empty(32, 32, device="NULL")
y = (x @ x.T).relu().sum(axis=1).realize()
profile_marker("matmul done", color="green")

# symbolic shape: the same kernel runs with different bound values of `n`
t = Tensor.empty(64, device="NULL").realize()
for val in (8, 24):
    n = Variable("n", 1, 64).bind(val)
    t[:n].mul(2).sum().realize()
profile_marker("symbolic done", color="red")

# explicit frees of buffers created above
del x, y, t
tmp = Tensor.empty(256, device="NULL:1").add(1).realize()
del tmp
