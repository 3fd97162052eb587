"""One command's run: its inputs and options, and everything derived from them, each computed once, on demand.

    run = Run((Path("profile.pkl"), Path("rewrites.pkl")))
    run.timeline        # the full track layout (every trace and the site show it)
    run.kernel_table    # `vizexport top`: built from the device tracks alone, not from the full timeline
    run.launch_table    # every device launch as columns (program, category, estimates, exec link, latency)
    run.report          # reuses run.timeline

A writer (writers.py) names the parts it reads; the command derives them and hands the Run to the writer. The Run
belongs to the command layer: it wires the readers (tinygrad, sqtt) to the model, the analyses and the writers'
inputs, and nothing below it knows it. Options are small frozen dataclasses, one per concern. Its `executor`
(forks: SERIAL unless the command made a ForkExecutor) is handed down to whatever spreads work over processes. A
part imports what derives it when it is first asked for: `top` loads no SQTT decoder, replay, report or diff.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .analysis import KernelTable, kernel_table
from .analysis.stats import ALPHA, MIN_EFFECT
from .errors import InputError
from .forks import SERIAL, Executor
from .gcpause import gc_paused
from .graphs import StepOptions
from .launchtable import LaunchTable
from .records import Listing, Profile, RewriteLog, StepGraphs
from .summary import Summary, summarize
from .timeline import Timeline
from .tinygrad import load_any
from .tinygrad.timeline import ALL_STAGES, CALLSTACKS, GRAPH_FLOWS, HOST_SPANS, MARKERS, build_timeline
from .windows import WINDOW_EVENTS

if TYPE_CHECKING:
    from .analysis.diff import Diff
    from .analysis.report import Report
    from .sqtt import Launch

TOP_STAGES = frozenset()  # the kernel table reads device tracks only (and markers, for --between)
DIFF_STAGES = ALL_STAGES - {CALLSTACKS, GRAPH_FLOWS}  # the diff reads every track's times (a run's span), and markers


@dataclass(frozen=True)
class LoadOptions:
    version: str | None = None  # read the pickles as written by this tinygrad release (None: detected)
    host_spans: bool = True  # False: a profile's host ranges are not read (`top` of device launches)


@dataclass(frozen=True)
class TraceOptions:
    compress: bool = True  # compressed_packets in a plain .pftrace
    window_events: int | None = WINDOW_EVENTS  # a bigger trace is written as an overview and windows (None: never)
    flavor: str | None = None  # a dialect of the format (perfetto.FLAVORS)
    delta_time: bool = False  # a .pftrace's timestamps as deltas: smaller, but the UI shows a Clock Snapshots track


@dataclass(frozen=True)
class AnswerOptions:
    peak_gflops: float | None = None  # the devices' peaks, for achieved vs peak in the report
    peak_gbs: float | None = None
    alpha: float = ALPHA  # the diff's significance level
    min_effect: float = MIN_EFFECT  # a smaller change of the median is never significant (a fraction)
    between: tuple[str, str] | None = None  # `top`: launches starting between the first markers of these names
    device: str | None = None  # `top`: only this device string or root device
    by: str = "program"  # `top`: a row per program key ("program") or per name as tinygrad's viz.cli -t ("name")
    host: bool = False  # `top`: the host's spans (TINY, USER, GC) instead of device launches


@dataclass(frozen=True)
class ViewOptions:
    rows: int | None = None  # `top`: the longest N kernels and one row for the rest (None: the format's default)
    color: bool = False  # ANSI colours in text for a terminal
    wide: bool = False  # `top` as text: every statistic and whole names, however wide


@dataclass(eq=False)
class Run:
    """The inputs of one command and what is derived from them. `inputs` are told apart by content (at most one
    profile and one rewrites trace), unless `named`: then they are (profile, rewrites or None) as the user named them
    (diff's runs, --baseline) and each must be of its kind. `baseline`: the base run a diff compares this one to."""

    inputs: tuple[Path | None, ...] = ()
    named: bool = False
    load: LoadOptions = LoadOptions()
    trace: TraceOptions = TraceOptions()
    steps: StepOptions = field(default_factory=StepOptions)
    answers: AnswerOptions = AnswerOptions()
    view: ViewOptions = ViewOptions()
    baseline: Run | None = None
    executor: Executor = SERIAL  # where parallel work runs (the command stops its workers when it ends)
    started: float = field(default_factory=time.perf_counter, init=False)  # "in N s" counts from here
    _stages: dict[frozenset[str], Timeline] = field(default_factory=dict, init=False, repr=False)
    _summaries: dict[int, Summary] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def of(cls, profile: Profile | None = None, rewrites: RewriteLog | None = None, **options: object) -> Run:
        """A Run of records already loaded (the library's functions); `options`: the Run's option fields."""
        run = cls(**options)  # type: ignore[arg-type]
        run.__dict__["loaded"] = [x for x in (profile, rewrites) if x is not None]
        run.__dict__["_pair"] = (profile, rewrites)
        return run

    def seconds(self) -> float:
        return time.perf_counter() - self.started

    # --- inputs --------------------------------------------------------------------------------------------------
    @cached_property
    def loaded(self) -> list[Profile | RewriteLog]:
        """Every input, read in the order named."""
        if self.named:
            return [x for x in (self.profile, self.rewrites) if x is not None]
        with gc_paused():  # millions of acyclic objects: see gcpause
            return [load_any(p, self.load.version, self.executor, self.load.host_spans) for p in self.inputs
                    if p is not None]

    @cached_property
    def _pair(self) -> tuple[Profile | None, RewriteLog | None]:
        """At most one profile and at most one rewrites trace, told apart by content."""
        if self.named:
            return self._named_profile, self._named_rewrites
        loaded = self.loaded
        profiles = [x for x in loaded if isinstance(x, Profile)]
        logs = [x for x in loaded if isinstance(x, RewriteLog)]
        if len(profiles) > 1 or len(logs) > 1:
            raise self._kinds_error()
        if profiles and not profiles[0].n_events:
            raise InputError(f"{profiles[0].path}: the profile holds no events (nothing to show)")
        return profiles[0] if profiles else None, logs[0] if logs else None

    @property
    def profile(self) -> Profile | None:
        return self._pair[0]

    @property
    def rewrites(self) -> RewriteLog | None:
        return self._pair[1]

    def need_profile(self) -> Profile:
        """The profile, for what cannot be made without one."""
        if self.profile is None:
            raise self._kinds_error()
        return self.profile

    def _kinds_error(self) -> InputError:
        kinds = ", ".join(f"{p} ({'profile' if isinstance(x, Profile) else 'rewrites'})"
                          for p, x in zip([p for p in self.inputs if p is not None], self.loaded, strict=True))
        return InputError(f"need one profile.pkl and at most one rewrites.pkl, got: {kinds}")

    def _named(self, i: int, kind: type, wrong: str) -> Any:
        """Input i, which must be of `kind` (else InputError: `wrong`); None where it was not named."""
        path = self.inputs[i] if len(self.inputs) > i else None
        if path is None:
            return None
        with gc_paused():
            x = load_any(path, self.load.version, self.executor, self.load.host_spans)
        if not isinstance(x, kind):
            raise InputError(f"{path}: {wrong}")
        return x

    @cached_property
    def _named_profile(self) -> Profile | None:
        prof = self._named(0, Profile, "a rewrites trace, not a profile (name the profile.pkl)")
        if prof is not None and not prof.n_events:
            raise InputError(f"{self.inputs[0]}: the profile holds no events (nothing to show)")
        return prof

    @cached_property
    def _named_rewrites(self) -> RewriteLog | None:
        return self._named(1, RewriteLog, "a profile, not a rewrites trace (name the rewrites.pkl)")

    def read(self) -> Run:
        """Read every input now, in the order the command names them, so that a bad one ends the command before any
        work: this run's (a diff: the base run's profile, this one's, then their rewrites traces), then a
        baseline's, which needs this run's profile and its own. Which kinds they are is checked where a profile or
        a rewrites trace is asked for (`info` takes any files)."""
        base = self.baseline
        if base is not None and self.named:
            base._named_profile, self._named_profile, base._named_rewrites, self._named_rewrites  # noqa: B018
            return self
        self.loaded  # noqa: B018
        if base is not None:
            if self.profile is None or base.inputs[0] is None:
                raise InputError(f"{base.inputs[0] or base.inputs[1]}: --baseline needs this run's profile and the "
                                 "base run's profile")
            base.read()
        return self

    def derive(self, parts: Iterable[str]) -> None:
        """Compute the named parts (attributes) now, in order."""
        for name in parts:
            getattr(self, name)

    # --- derived -------------------------------------------------------------------------------------------------
    @cached_property
    def launches(self) -> list[Launch]:
        """The profile's AMD SQTT/PMC captures grouped per kernel launch and decoded (once: the timeline, the summary
        and the listings share them)."""
        from .sqtt import load_launches
        prof = self.profile
        return load_launches(prof) if prof is not None and prof.captures else []

    @cached_property
    def timeline(self) -> Timeline:
        """The full track layout (every stage): what traces and the site show."""
        with gc_paused():
            return build_timeline(self.need_profile(), self.rewrites, self.launches, executor=self.executor)

    def stage(self, stages: frozenset[str]) -> Timeline:
        """A timeline of the device tracks and `stages` only (tinygrad.timeline), for an analysis that reads no more;
        the full timeline where it is built already."""
        if stages == ALL_STAGES or "timeline" in self.__dict__:
            return self.timeline
        if stages not in self._stages:
            with gc_paused():
                self._stages[stages] = build_timeline(self.need_profile(), self.rewrites, None, stages, self.executor)
        return self._stages[stages]

    @property
    def summary(self) -> Summary | None:
        """The profile's figures (info, the site), None without a profile."""
        return self.summary_of(self.profile) if self.profile is not None else None

    @cached_property
    def summaries(self) -> list[Summary]:
        """Each input's figures, in the order named (`vizexport info`)."""
        return [self.summary_of(x) for x in self.loaded]

    def summary_of(self, x: Profile | RewriteLog) -> Summary:
        """The figures of a profile (SQTT/PMC launches decoded unless this run decoded them already) or of a
        rewrites trace, made once each."""
        from .sqtt import launch_counters, launch_figures, load_launches
        if id(x) not in self._summaries:
            if isinstance(x, RewriteLog) or not x.captures:
                self._summaries[id(x)] = summarize(x)
            else:
                mine = "launches" in self.__dict__ and x is self.profile
                launches = self.launches if mine else load_launches(x, disasm=False)  # no listing: no disassembly
                self._summaries[id(x)] = summarize(x, launch_counters(x, launches), launch_figures(launches))
        return self._summaries[id(x)]

    @cached_property
    def step_graphs(self) -> StepGraphs | None:
        """The rewrites trace's step graphs, replayed on demand; None without one."""
        from .tinygrad.replay import step_graphs
        return step_graphs(self.rewrites) if self.rewrites is not None else None

    @cached_property
    def listings(self) -> list[Listing]:
        """The profile's AMD programs' machine code, with the decoded launches' cycles."""
        from .sqtt.listings import program_listings
        return program_listings(self.profile, self.launches) if self.profile is not None else []

    @cached_property
    def report(self) -> Report:
        """Where the time went (analysis.report)."""
        from .analysis.report import build_report
        a = self.answers
        return build_report(self.timeline, self.need_profile(), a.peak_gflops, a.peak_gbs)

    @cached_property
    def diff(self) -> Diff | None:
        """What changed from the baseline run to this one (analysis.diff), None without a baseline."""
        from .analysis.diff import Verdicts, diff_runs
        base = self.baseline
        if base is None:
            return None
        a, releases = self.answers, (base.need_profile().release.name, self.need_profile().release.name)
        return diff_runs(base.stage(DIFF_STAGES), self.stage(DIFF_STAGES), Verdicts(a.alpha, a.min_effect), releases)

    @property
    def launch_table(self) -> LaunchTable:
        """Every device launch as columns (launchtable): the one the report reads if its timeline is built, else
        the device tracks' alone (what `top` and the diff read), made once."""
        return self.timeline.launches if "timeline" in self.__dict__ else self.stage(TOP_STAGES).launches

    @cached_property
    def kernel_table(self) -> KernelTable:
        """`vizexport top`'s table, from the device tracks' launch table (and markers for `between`, the host's
        spans for `host`) only."""
        a = self.answers
        tl = self.stage(TOP_STAGES | ({MARKERS} if a.between else set()) | ({HOST_SPANS} if a.host else set()))
        return kernel_table(tl, a.between, a.device, a.by, a.host)

