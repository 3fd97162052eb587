"""Disassembly of the AMD programs a profile holds (their code objects), with llvm-objdump when one knows the target,
each program's control-flow graph (cfg.py) with the cycles its SQTT-traced launches spent per block, and the
per-instruction table of every wave those launches traced (insts.py)."""
from __future__ import annotations

from ..records import Listing, Profile
from .cfg import control_flow, pc_cycles
from .code import CodeObject, disassemble, disassembler, read_code_object, target_name
from .insts import launch_tables
from .launches import Launch


def program_listings(prof: Profile, launches: list[Launch] | None = None) -> list[Listing]:
    """One listing per program with code on an AMD device: its disassembly, or (no lines) why there is none here.
    `launches`: the profile's decoded SQTT launches, whose traced waves give the cycles per block and the tables."""
    targets = {d.device: (d.props or {}).get("gfx_target_version") for d in prof.devices}
    out = []
    for p in prof.programs:
        version = targets.get(p.device)
        if not p.lib or not isinstance(version, int) or version <= 0:
            continue
        co, target = read_code_object(p.lib), target_name(version)
        insts = None if co.error else disassemble(co, target)
        if not insts:
            out.append(Listing(p.device, p.name, p.profile_key, [], missing=_missing(co, target)))
        else:
            lines = [f"{addr:#014x}  {i.text}" for addr, i in sorted(insts.items())]
            mine = [la for la in launches or () if la.program is p and la.blobs]
            cfg = control_flow(insts, pc_cycles(mine) if mine else None)
            waves = [t for la in mine for t in launch_tables(la)]
            out.append(Listing(p.device, p.name, p.profile_key, lines, cfg, waves))
    return out


def _missing(co: CodeObject, target: str) -> str:
    """Why a program has no disassembly: its code object, no llvm-objdump that knows the target, or the tool failed."""
    if co.error:
        return f"its code object could not be read ({co.error})"
    found = disassembler(target)
    if found.tool is None:
        return found.missing
    return f"{found.tool} printed no instructions for it" if co.text else "its code object has no .text"
