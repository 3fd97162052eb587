"""`vizexport history`: a store of runs (SQLite file or PostgreSQL URL, one schema with migrations) and what a CI asks
of it: is this run slower than the last N runs of its branch (check), how did each kernel go over the commits (site).

records: what is kept of a run (per kernel and device its launches' durations, device totals, metadata); schema and
store: where it is kept; check: the verdicts of a run against earlier ones (analysis.history), sections: as the
report writers show them; site: the static trend pages; command: the subcommands cli.py registers."""
