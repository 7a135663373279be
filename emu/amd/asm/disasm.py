"""Disassemble HSA code objects or raw bytes in LLVM's syntax.

    python -m emu.amd.asm.disasm --arch gfx1100 kernel.hsaco
    python -m emu.amd.asm.disasm --arch gfx1100 --hex "01 05 00 06"

Bad input (not an ELF, a malformed one, unknown arch, an unreadable file or one over the 256 MiB limit of a code
object, bad hex) and output that cannot be written print one line on stderr and exit with 2.
"""
from __future__ import annotations

import argparse
import os
import sys

from emu.amd import isa
from emu.amd.decode import Inst, decode
from objfile.codeobj import EM_AMDGPU, read_file
from objfile.elf import SHT_SYMTAB, STT_FUNC, Elf, ElfError


class DisasmError(ValueError):
    pass


def code_object_instructions(data: bytes, arch: str) -> list[tuple[str, list[Inst]]]:
    """(symbol, instructions) for every function symbol (kernels included) in the .text of a code object."""
    try:
        elf = Elf(data)
    except ElfError as e:
        raise DisasmError(f"not a valid ELF code object: {e}") from None
    if elf.header.e_machine != EM_AMDGPU:
        raise DisasmError(f"ELF machine is {elf.header.e_machine}, not EM_AMDGPU ({EM_AMDGPU})")
    text = next((s for s in elf.sections if s.name == ".text"), None)
    if text is None:
        raise DisasmError("no .text section")
    base, body = text.addr, elf.data(text)
    try:
        symbols = [y for s in elf.sections if s.type == SHT_SYMTAB for y in elf.symbols(s)]
    except ElfError as e:
        raise DisasmError(f"malformed ELF code object: {e}") from None
    syms = sorted({(y.value, y.name) for y in symbols
                   if y.info & 0xF == STT_FUNC and base <= y.value < base + len(body)})
    out = []
    for i, (addr, name) in enumerate(syms):
        end = syms[i + 1][0] if i + 1 < len(syms) else base + len(body)  # as llvm-objdump: up to the next symbol
        out.append((name, decode(body[addr - base:end - base], arch, pc=addr)))
    return out


def format_insts(insts: list[Inst]) -> str:
    return "".join(f"  {i.pc:08x}: {i.raw.hex(' '):<36} {i}\n" for i in insts)


def parse_hex(s: str) -> bytes:
    try:
        return bytes(int(t, 16) for t in s.replace(",", " ").split())
    except ValueError:
        raise DisasmError(f"--hex: not a list of hex bytes: {s!r}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emu.amd.asm.disasm", description="AMD GPU disassembler (LLVM syntax)")
    ap.add_argument("--arch", required=True, help="gfx name or family (rdna3, rdna4, cdna)")
    ap.add_argument("--hex", help="raw little-endian bytes, e.g. '01 05 00 06'")
    ap.add_argument("file", nargs="?", help="HSA code object (ELF)")
    a = ap.parse_args(argv)
    try:
        isa.family(a.arch)
        if a.hex is not None:
            sys.stdout.write(format_insts(decode(parse_hex(a.hex), a.arch)))
            return 0
        if a.file is None:
            raise DisasmError("give a code object FILE or --hex BYTES")
        try:
            data = read_file(a.file)
        except OSError as e:
            raise DisasmError(f"cannot read {a.file}: {e.strerror or e}") from None
        if data[:4] != b"\x7fELF":
            raise DisasmError(f"{a.file}: not an ELF file")
        for name, insts in code_object_instructions(data, a.arch):
            sys.stdout.write(f"{insts[0].pc if insts else 0:016x} <{name}>:\n{format_insts(insts)}\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # the output cannot be written (a full disk, a file size limit)
        print(f"error: cannot write the disassembly: {e.strerror or e}", file=sys.stderr)
        return 2
    except ValueError as e:  # DisasmError, UnknownArch, CodeObjectLimitError
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
