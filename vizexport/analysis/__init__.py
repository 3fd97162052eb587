"""Timeline → answers: which kernels took the time (launches.kernel_runs, the one grouping of the launch table's rows
per kernel, for kernels.top_kernels and top.kernel_table with launch statistics, rendered by tables), where a run's
time went (report.build_report) and what changed between two runs (diff.diff_runs, with the verdicts of
stats.compare). What kind of work a launch is and which program it ran are the launch table's columns
(launchtable), filled by the reader."""
from ..launchtable import CATEGORIES
from ..programs import ProgramIndex
from .kernels import Kernel, top_kernels
from .top import KernelStats, KernelTable, kernel_table, marker_window

__all__ = ["CATEGORIES", "Kernel", "KernelStats", "KernelTable", "ProgramIndex", "kernel_table", "marker_window",
           "top_kernels"]
