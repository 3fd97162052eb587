"""Timeline → answers: which kernels took the time (kernels.top_kernels)."""
from .kernels import Kernel, top_kernels

__all__ = ["Kernel", "top_kernels"]
