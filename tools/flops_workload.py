"""Small tinygrad 0.11/0.12 workload whose kernels exercise every estimate rule (run by tools/flops_check.py --make).

WORKLOAD=cpu: float4 elementwise, unary/int/compare ops, matmuls, reduces, a padded conv (gated loads), cumsum,
softmax, a backward pass, symbolic shapes (loop bounds over a Variable) and a JIT launched with several values.
WORKLOAD=python-tc: the PYTHON device emulating METAL: tensor-core matmul (WMMA), launch dims (SPECIAL), locals.
"""
import os

os.execv = lambda *a, **k: print("[flops_workload] suppressed os.execv")  # 0.11 would exec its viz server at exit

from tinygrad import Tensor, TinyJit, Variable, dtypes  # noqa: E402


def step(name, fn):
    try:
        fn()
        print(f"[flops_workload] {name}: ok")
    except Exception as e:
        print(f"[flops_workload] {name}: FAILED {type(e).__name__}: {str(e)[:200]}")


def rand(*shape):
    return Tensor.rand(*shape).contiguous().realize()


def cpu():
    a, b, c = rand(256), rand(256), rand(256)
    step("float4 elementwise", lambda: ((a * b + c).exp2().sqrt().reciprocal()).realize())
    step("where/compare", lambda: ((a < b).where(a, c.sin()) + (a == b).float()).realize())
    step("int ops", lambda: (((a * 100).cast(dtypes.uint32) ^ 5) * 2 | ((b * 10).cast(dtypes.uint32) // 3)).realize())
    step("matmul 64", lambda: (rand(64, 64) @ rand(64, 64)).realize())
    step("matmul 17x33", lambda: (rand(17, 33) @ rand(33, 9)).realize())
    x = rand(32, 48)
    step("reduces", lambda: (x.sum(axis=1) + x.max(axis=1) + x.argmax(axis=1)).realize())
    step("conv2d padded", lambda: rand(1, 3, 12, 12).conv2d(rand(4, 3, 3, 3), padding=1).realize())
    step("cumsum", lambda: rand(40).cumsum().realize())
    step("softmax", lambda: rand(8, 30).softmax(axis=1).realize())

    def backward():
        x = Tensor.rand(16, 8, requires_grad=True)
        (x.relu() * x).sum().backward()
        x.grad.realize()
    step("backward", backward)
    t = rand(32, 24)
    n = Variable("n", 1, 32).bind(19)
    step("symbolic elementwise", lambda: (t[:n] * 2 + 1).realize())
    step("symbolic reduce", lambda: t[:n].sum(axis=0).realize())
    step("symbolic 2d sum", lambda: t[:n].sum().realize())

    @TinyJit
    def f(x):
        return (x * 3).sum(axis=0).realize()
    for i in range(1, 6):
        step(f"jit symbolic {i}", lambda i=i: f(t[:Variable("k", 1, 32).bind(2 * i + 1)]))


def python_tc():  # METAL's tensor cores take float (the PYTHON device needs Python 3.12 for half)
    step("tc matmul", lambda: (rand(32, 32) @ rand(32, 32)).realize())
    step("tc matmul 16x48x24", lambda: (rand(16, 48) @ rand(48, 24)).realize())
    step("locals reduce", lambda: rand(64, 64).sum(axis=1).realize())
    step("elementwise", lambda: (rand(300) * 2).exp().realize())
    t = rand(40, 8)
    step("symbolic launch", lambda: (t[:Variable("m", 1, 40).bind(21)] + 1).realize())
    step("symbolic launch reduce", lambda: t[:Variable("m", 1, 40).bind(13)].sum(axis=1).realize())


{"cpu": cpu, "python-tc": python_tc}[os.environ.get("WORKLOAD", "cpu")]()
