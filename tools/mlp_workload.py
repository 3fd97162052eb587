"""A 2-layer MLP: 5 Adam steps, then a JIT'd inference run 4 times (tinygrad 0.14.0).

Run by tools/make_training_trace.py (`--workload mlp`), never by the package: its pickles are the "MLP-sized run"
benchmarks/bench_site.py builds a site from.
"""
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam
from tinygrad.nn.state import get_parameters


class MLP:
    def __init__(self):
        self.l1 = nn.Linear(784, 128)
        self.l2 = nn.Linear(128, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


Tensor.manual_seed(0)
net = MLP()
opt = Adam(get_parameters(net), lr=1e-3)
X, Y = Tensor.rand(64, 784).realize(), Tensor.randint(64, high=10).realize()
with Context(TRAINING=1):
    for _ in range(5):
        opt.zero_grad()
        loss = net(X).sparse_categorical_crossentropy(Y).backward()
        opt.step()
        loss.realize()


@TinyJit
def infer(x: Tensor) -> Tensor:
    return net(x).argmax(-1).realize()


for _ in range(4):
    infer(Tensor.rand(64, 784).realize())
