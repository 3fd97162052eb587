"""One training step of a small CNN (conv, two linear layers, Adam) on tinygrad's NULL device.

Run by tools/make_training_trace.py with tinygrad 0.14.0 and VIZ=-1, never by the package: its rewrites.pkl (about
49,000 matches in 67 contexts) is the training-step trace benchmarks/bench_rewrites.py renders.
"""
from tinygrad import Tensor, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam
from tinygrad.nn.state import get_parameters


class Net:
    def __init__(self):
        self.c1 = nn.Conv2d(1, 8, 3)
        self.l1 = nn.Linear(8 * 13 * 13, 32)
        self.l2 = nn.Linear(32, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(self.c1(x).relu().max_pool2d().flatten(1)).relu())


Tensor.manual_seed(0)
net = Net()
opt = Adam(get_parameters(net), lr=1e-3)
X = Tensor.empty(32, 1, 28, 28)
Y = Tensor.empty(32, dtype="int32")
with Context(TRAINING=1):
    opt.zero_grad()
    loss = net(X).sparse_categorical_crossentropy(Y).backward()
    opt.step()
    loss.realize()
