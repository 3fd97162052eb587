"""AMD SQ thread traces (SQTT) and performance counters (PMC) of tinygrad profiles, without tinygrad.

    decode(blob) → Packets              the packet stream (RDNA3, RDNA4, CDNA), fast, never raising on bad input
    analyze(packets, se, itrace)        → BlobTrace: waves, instruction issues, clock markers
    load_launches(profile)              → [Launch]: blobs grouped per kernel launch, decoded, PCs walked
    add_sqtt_tracks(tl, parent, prof)   → Timeline groups `SQTT <kernel> n<run>` under a device root
    launch_counters(profile)            → per-launch PMC counter sums and derived utilisation
    launch_figures(launches)            → the summary's SQTT rows (blobs, waves, issues per launch)
    pmc_span_args(profile)              → {index into profile.spans: {"pmc": {counter: sum, …}}} for kernel slices

The format is described in sqtt-format.md (the project's shared docs); names of packets and ops are tinygrad's.
"""
from .code import CodeObject, KernelInfo, disassemble, read_code_object, target_name
from .decode import Packets, decode, iter_packets, packet_names
from .launches import Launch, SQTTWarning, decode_launch, find_launches, launch_figures, load_launches
from .pmc import decode_pmc, launch_counters
from .pmc import span_args as pmc_span_args
from .tracks import add_sqtt_tracks
from .waves import BlobTrace, Issue, Wave, analyze

__all__ = [
    "BlobTrace", "CodeObject", "Issue", "KernelInfo", "Launch", "Packets", "SQTTWarning", "Wave", "add_sqtt_tracks",
    "analyze", "decode", "decode_launch", "decode_pmc", "disassemble", "find_launches", "iter_packets",
    "launch_counters", "launch_figures", "load_launches", "packet_names", "pmc_span_args", "read_code_object",
    "target_name",
]
