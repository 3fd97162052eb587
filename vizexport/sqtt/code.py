"""AMDGPU code objects (`Program.lib`): .text, symbols, AMDHSA kernel metadata, and instruction names.

The ELF is read with pyelftools. tinygrad's hand-written kernels come in a minimal ELF whose header pyelftools refuses
(EI_DATA 0, e_shentsize 0); the header is repaired in a copy first. Kernel metadata (VGPRs, SGPRs, LDS, scratch) comes
from the NT_AMDGPU_METADATA note (MessagePack, decoded here: no extra dependency) or, where there is none, from the
64-byte kernel descriptor.

Instruction names need an AMDGPU disassembler: LLVM's `llvm-objdump` (Debian: `apt-get install llvm-19` or newer;
gfx950 needs LLVM 20+, Debian's llvm-22). `disassembler()` finds the newest `llvm-objdump-N` on PATH that knows the
target, by disassembling one known instruction with it, or says why none does; `disassemble()` returns None then, and
callers name instructions by SQTT category only.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

NT_AMDGPU_METADATA = 32
EM_AMDGPU = 224


@dataclass
class KernelInfo:
    name: str
    symbol: str | None = None
    vgprs: int | None = None
    agprs: int | None = None
    sgprs: int | None = None
    lds_bytes: int | None = None  # group segment
    scratch_bytes: int | None = None  # private segment, per work-item
    kernarg_bytes: int | None = None
    wavefront_size: int | None = None
    max_workgroup_size: int | None = None
    vgpr_spills: int | None = None
    sgpr_spills: int | None = None

    def as_args(self) -> dict[str, int]:
        keys = ("vgprs", "agprs", "sgprs", "lds_bytes", "scratch_bytes", "wavefront_size", "vgpr_spills", "sgpr_spills")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


@dataclass
class CodeObject:
    text: bytes = b""
    text_addr: int = 0  # ELF virtual address of .text
    symbols: dict[str, tuple[int, int]] = field(default_factory=dict)  # name → (address, size)
    kernels: list[KernelInfo] = field(default_factory=list)
    mach: int | None = None  # EF_AMDGPU_MACH from e_flags (0 in minimal ELFs)
    error: str | None = None  # why the ELF could not be read (then everything else is empty)


def _repair(lib: bytes) -> bytes:
    """A minimal ELF64 (tinygrad's hand-written kernels): little-endian ident and 64-byte section headers."""
    b = bytearray(lib)
    b[4], b[5], b[6] = 2, 1, 1
    if struct.unpack_from("<H", b, 58)[0] == 0:
        struct.pack_into("<H", b, 58, 64)
    return bytes(b)


def _elf(lib: bytes) -> ELFFile:
    try:
        return ELFFile(io.BytesIO(lib))
    except ELFError:
        return ELFFile(io.BytesIO(_repair(lib)))


def read_code_object(lib: bytes | None) -> CodeObject:
    """Everything vizexport uses from a code object; never raises (see CodeObject.error)."""
    co = CodeObject()
    if not lib:
        co.error = "no code object"
        return co
    try:
        elf = _elf(bytes(lib))
        co.mach = elf.header.e_flags & 0xFF or None
        _sections(elf, co)
    except (ELFError, ValueError, KeyError, IndexError, struct.error, AssertionError) as e:
        co.error = f"unreadable ELF: {e}"
    return co


def _sections(elf: ELFFile, co: CodeObject) -> None:
    rodata = None
    for s in elf.iter_sections():
        if s.name == ".text":
            co.text, co.text_addr = s.data(), s["sh_addr"]
        elif s.name == ".rodata":
            rodata = s.data()
        elif s["sh_type"] == "SHT_SYMTAB" or (s["sh_type"] == "SHT_DYNSYM" and not co.symbols):
            co.symbols = {y.name: (y["st_value"], y["st_size"]) for y in s.iter_symbols()
                          if y.name and y["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT")}
        elif s["sh_type"] == "SHT_NOTE":
            for note in s.iter_notes():
                if note["n_name"] == "AMDGPU" and note["n_type"] == NT_AMDGPU_METADATA:
                    co.kernels = _kernels_from_metadata(unpackb(_note_bytes(note["n_desc"])))
    if not co.kernels and rodata is not None and len(rodata) >= 64:
        name = next((n for n, (a, _) in co.symbols.items() if a == co.text_addr), "")
        co.kernels = [_kernel_from_descriptor(name, rodata[:64], co.mach)]


def _note_bytes(desc: Any) -> bytes:
    return desc if isinstance(desc, bytes) else desc.encode("latin-1")


def _kernels_from_metadata(md: Any) -> list[KernelInfo]:
    out = []
    for k in (md.get("amdhsa.kernels") or []) if isinstance(md, dict) else []:
        if not isinstance(k, dict):
            continue
        out.append(KernelInfo(
            name=str(k.get(".name", "")), symbol=k.get(".symbol"), vgprs=k.get(".vgpr_count"),
            agprs=k.get(".agpr_count"), sgprs=k.get(".sgpr_count"), lds_bytes=k.get(".group_segment_fixed_size"),
            scratch_bytes=k.get(".private_segment_fixed_size"), kernarg_bytes=k.get(".kernarg_segment_size"),
            wavefront_size=k.get(".wavefront_size"), max_workgroup_size=k.get(".max_flat_workgroup_size"),
            vgpr_spills=k.get(".vgpr_spill_count"), sgpr_spills=k.get(".sgpr_spill_count")))
    return out


def _kernel_from_descriptor(name: str, kd: bytes, mach: int | None) -> KernelInfo:
    """The AMDHSA kernel descriptor: segment sizes exactly, VGPRs from the granulated count of COMPUTE_PGM_RSRC1."""
    lds, scratch, kernarg = struct.unpack_from("<III", kd, 0)
    rsrc1 = struct.unpack_from("<I", kd, 48)[0]
    props = struct.unpack_from("<H", kd, 56)[0]
    wave32 = bool(props & (1 << 10))
    granule = 8 if wave32 or (mach is not None and 0x3F <= mach <= 0x4F) else 4
    return KernelInfo(name or "kernel", lds_bytes=lds, scratch_bytes=scratch, kernarg_bytes=kernarg,
                      vgprs=((rsrc1 & 0x3F) + 1) * granule, wavefront_size=32 if wave32 else 64)


# --- MessagePack (the AMDGPU metadata note) ------------------------------------------------------------------------
class _MsgPackError(ValueError):
    pass


def unpackb(data: bytes) -> Any:
    """Decode one MessagePack value (maps, arrays, strings, binary, ints, floats, bools, nil; no extension types)."""
    value, _ = _unpack(memoryview(data), 0, 0)
    return value


def _unpack(b: memoryview, i: int, depth: int) -> tuple[Any, int]:
    if depth > 64 or i >= len(b):
        raise _MsgPackError("truncated or too deep")
    c = b[i]
    i += 1
    if c <= 0x7F:
        return c, i
    if c >= 0xE0:
        return c - 256, i
    if 0x80 <= c <= 0x8F:
        return _map(b, i, c & 0xF, depth)
    if 0x90 <= c <= 0x9F:
        return _array(b, i, c & 0xF, depth)
    if 0xA0 <= c <= 0xBF:
        return _str(b, i, c & 0x1F)
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if c in simple:
        return simple[c], i
    fixed = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
             0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
    if c in fixed:
        fmt = fixed[c]
        return struct.unpack_from(fmt, b, i)[0], i + struct.calcsize(fmt)
    sized = {0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"), 0xD9: (">B", "str"), 0xDA: (">H", "str"),
             0xDB: (">I", "str"), 0xDC: (">H", "arr"), 0xDD: (">I", "arr"), 0xDE: (">H", "map"), 0xDF: (">I", "map")}
    if c not in sized:
        raise _MsgPackError(f"unsupported type byte 0x{c:02x}")
    fmt, kind = sized[c]
    n, i = struct.unpack_from(fmt, b, i)[0], i + struct.calcsize(fmt)
    if kind == "bin":
        return bytes(b[i:i + n]), i + n
    if kind == "str":
        return _str(b, i, n)
    return (_array if kind == "arr" else _map)(b, i, n, depth)


def _str(b: memoryview, i: int, n: int) -> tuple[str, int]:
    if i + n > len(b):
        raise _MsgPackError("truncated string")
    return bytes(b[i:i + n]).decode("utf-8", "replace"), i + n


def _array(b: memoryview, i: int, n: int, depth: int) -> tuple[list, int]:
    out = []
    for _ in range(n):
        v, i = _unpack(b, i, depth + 1)
        out.append(v)
    return out, i


def _map(b: memoryview, i: int, n: int, depth: int) -> tuple[dict, int]:
    out = {}
    for _ in range(n):
        k, i = _unpack(b, i, depth + 1)
        v, i = _unpack(b, i, depth + 1)
        out[k if isinstance(k, (str, int, bool, type(None))) else repr(k)] = v
    return out, i


# --- targets -------------------------------------------------------------------------------------------------------
def target_name(gfx_target_version: int) -> str:
    """KFD's gfx_target_version → LLVM processor: 110000 → gfx1100, 120001 → gfx1201, 90500 → gfx950, 90010 → gfx90a."""
    major, minor, step = gfx_target_version // 10000, gfx_target_version // 100 % 100, gfx_target_version % 100
    return f"gfx{major}{minor:x}{step:x}"


def arch_of_target(target: str) -> str:
    """sqtt-format.md §3: gfx11 → RDNA3, gfx12 → RDNA4, anything else → CDNA."""
    return "rdna3" if target.startswith("gfx11") else "rdna4" if target.startswith("gfx12") else "cdna"


# --- disassembly ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Instruction:
    addr: int  # ELF virtual address
    size: int  # bytes
    mnemonic: str  # e.g. "v_add_f32_e32"
    text: str  # the whole line, operands included
    word: int  # first 32-bit word (SOPP branches keep simm16 in its low 16 bits)


_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]+):((?:\s+[0-9A-Fa-f]{8})+)\s*(?:<[^>]*>)?\s*$")
_LLVM_VERSION = re.compile(r"LLVM version (\d+)")
# The probe: s_endpgm, which a disassembler that knows the target prints by name (LLVM 14 aborts on gfx11+, and an
# LLVM that knows the family but not the processor prints a `.long`). SOPP opcode 1 before gfx11, 48 from it.
_PROBE_WORD = {"gfx11": 0xBFB00000, "gfx12": 0xBFB00000}
_PROBE_WORD_OLDER = 0xBF810000
_PROBE_TIMEOUT_S = 20
_DISASSEMBLY_TIMEOUT_S = 60
_INSTALL_HINT = "LLVM (Debian: apt-get install llvm-22) or set VIZEXPORT_OBJDUMP"
_OBJDUMPS: list[str] | None = None
_CACHE: dict[tuple[bytes, str], dict[int, Instruction] | None] = {}
_FOUND: dict[str, Disassembler] = {}


@dataclass(frozen=True, slots=True)
class Disassembler:
    """The llvm-objdump that disassembles `target` here (`tool`), or why none does (`missing`, a sentence part)."""

    target: str
    tool: str | None
    missing: str = ""


def objdump_candidates() -> list[str]:
    """llvm-objdump binaries on PATH, newest LLVM first (the env var VIZEXPORT_OBJDUMP names one to use instead)."""
    global _OBJDUMPS
    if _OBJDUMPS is None:
        forced = os.environ.get("VIZEXPORT_OBJDUMP")
        if forced is not None:
            _OBJDUMPS = [forced] if forced and shutil.which(forced) else []
        else:
            versioned = [f"llvm-objdump-{v}" for v in range(40, 12, -1) if shutil.which(f"llvm-objdump-{v}")]
            _OBJDUMPS = versioned + (["llvm-objdump"] if shutil.which("llvm-objdump") else [])
    return _OBJDUMPS


def disassembler(target: str) -> Disassembler:
    """The first candidate that disassembles a known `target` instruction; probed once per process and target."""
    if target not in _FOUND:
        _FOUND[target] = _probe_all(target)
    return _FOUND[target]


def _probe_all(target: str) -> Disassembler:
    tools = objdump_candidates()
    if not tools:
        forced = os.environ.get("VIZEXPORT_OBJDUMP")
        where = f"VIZEXPORT_OBJDUMP names {forced!r}, not found" if forced else "no llvm-objdump on PATH"
        return Disassembler(target, None, f"{where}; install {_INSTALL_HINT}")
    word = _PROBE_WORD.get(target[:5], _PROBE_WORD_OLDER)
    with tempfile.TemporaryDirectory(prefix="vizexport-") as d:
        path = os.path.join(d, "probe.elf")
        with open(path, "wb") as f:
            f.write(_minimal_elf(struct.pack("<I", word), 0))
        for tool in tools:
            out = _run(tool, target, path, _PROBE_TIMEOUT_S)
            if out is not None and any(i.mnemonic == "s_endpgm" for i in parse_objdump(out).values()):
                return Disassembler(target, tool)
    versions = list(dict.fromkeys(_version(t) for t in tools))  # llvm-objdump and llvm-objdump-14: one LLVM
    verb = "does" if len(versions) == 1 else "do"
    known = f"{', '.join(versions)} {verb} not know {target}"
    return Disassembler(target, None, f"{known}; install a newer {_INSTALL_HINT}")


def _version(tool: str) -> str:
    """`llvm-objdump 14` from the tool's --version, else its name."""
    try:
        r = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return tool
    m = _LLVM_VERSION.search(r.stdout)
    return f"llvm-objdump {m.group(1)}" if m else tool


def _minimal_elf(text: bytes, addr: int) -> bytes:
    """An ELF64 holding only .text at its address: what llvm-objdump needs, whatever the original header looked like."""
    shstr = b"\0.text\0.shstrtab\0"
    text_off = 64
    shstr_off = text_off + len(text)
    sh_off = (shstr_off + len(shstr) + 7) & ~7
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + bytes(7)
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 1, EM_AMDGPU, 1, 0, 0, sh_off, 0, 64, 0, 0, 64, 3, 2)
    null = bytes(64)
    sec_text = struct.pack("<IIQQQQIIQQ", 1, 1, 6, addr, text_off, len(text), 0, 0, 256, 0)
    sec_str = struct.pack("<IIQQQQIIQQ", 7, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0)
    body = hdr + text + shstr
    return body + bytes(sh_off - len(body)) + null + sec_text + sec_str


def disassemble(co: CodeObject, target: str) -> dict[int, Instruction] | None:
    """.text instructions by address, or None when no llvm-objdump on PATH knows `target` (`disassembler` says why)."""
    if not co.text or not target:
        return None
    key = (hashlib.sha1(co.text + co.text_addr.to_bytes(8, "little")).digest(), target)
    if key not in _CACHE:
        _CACHE[key] = _disassemble(co, target)
    return _CACHE[key]


def _disassemble(co: CodeObject, target: str) -> dict[int, Instruction] | None:
    tool = disassembler(target).tool
    if tool is None:
        return None
    with tempfile.TemporaryDirectory(prefix="vizexport-") as d:
        path = os.path.join(d, "text.elf")
        with open(path, "wb") as f:
            f.write(_minimal_elf(co.text, co.text_addr))
        out = _run(tool, target, path, _DISASSEMBLY_TIMEOUT_S)
    return parse_objdump(out) if out is not None else None


def _run(tool: str, target: str, path: str, timeout: float) -> str | None:
    cmd = [tool, "-d", "--triple=amdgcn-amd-amdhsa", f"--mcpu={target}", path]  # raw words give the sizes
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or "not a recognized processor" in r.stderr:
        return None
    return r.stdout


def parse_objdump(out: str) -> dict[int, Instruction]:
    insts = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            words = m.group(3).split()
            addr = int(m.group(2), 16)
            text = m.group(1)
            insts[addr] = Instruction(addr, 4 * len(words), text.split()[0], text, int(words[0], 16))
    return insts
