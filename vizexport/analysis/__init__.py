"""Timeline → answers: which kernels took the time (launches.kernel_runs, the one grouping of launches per kernel, for
kernels.top_kernels and top.kernel_table with launch statistics, rendered by tables), what kind of work each is
(categories), which codegen context made a program and its UOps (programs), where a run's time went
(report.build_report) and what changed between two runs (diff.diff_runs, with the verdicts of stats.compare)."""
from .categories import CATEGORIES, category
from .kernels import Kernel, top_kernels
from .programs import ProgramIndex
from .top import KernelStats, KernelTable, kernel_table, marker_window

__all__ = ["CATEGORIES", "Kernel", "KernelStats", "KernelTable", "ProgramIndex", "category", "kernel_table",
           "marker_window", "top_kernels"]
