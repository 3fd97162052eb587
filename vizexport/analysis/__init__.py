"""Timeline → answers: which kernels took the time (kernels.top_kernels), what kind of work each is (categories)."""
from .categories import CATEGORIES, category
from .kernels import Kernel, top_kernels

__all__ = ["CATEGORIES", "Kernel", "category", "top_kernels"]
