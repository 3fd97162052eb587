"""Disassembly of the AMD programs a profile holds (their code objects), with llvm-objdump when one knows the target."""
from __future__ import annotations

from ..records import Listing, Profile
from .code import disassemble, read_code_object, target_name


def program_listings(prof: Profile) -> list[Listing]:
    """One listing per program on an AMD device that can be disassembled here ([] without llvm-objdump)."""
    targets = {d.device: (d.props or {}).get("gfx_target_version") for d in prof.devices}
    out = []
    for p in prof.programs:
        version = targets.get(p.device)
        if not p.lib or not isinstance(version, int) or version <= 0:
            continue
        co = read_code_object(p.lib)
        insts = None if co.error else disassemble(co, target_name(version))
        if insts:
            lines = [f"{addr:#014x}  {i.text}" for addr, i in sorted(insts.items())]
            out.append(Listing(p.device, p.name, p.profile_key, lines))
    return out
