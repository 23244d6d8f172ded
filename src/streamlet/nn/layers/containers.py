"""Sequential: call modules (or any callables) one after another."""
from .base import Module


class Sequential(Module):
    """Calls the given modules or plain callables in order, each on the previous one's output.

    Callables with parameters should be modules, so that :meth:`Module.parameters` sees them.

    >>> model = nn.Sequential(nn.Linear(3, 4), nn.relu, nn.Linear(4, 1))
    >>> model(mx.zeros((2, 3))).shape
    (2, 1)
    """

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
