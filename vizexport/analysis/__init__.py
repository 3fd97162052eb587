"""Timeline → answers: which kernels took the time (kernels.top_kernels), what kind of work each is (categories),
where a run's time went (report.build_report) and what changed between two runs (diff.diff_runs, with the verdicts
of stats.compare)."""
from .categories import CATEGORIES, category
from .kernels import Kernel, top_kernels

__all__ = ["CATEGORIES", "Kernel", "category", "top_kernels"]
