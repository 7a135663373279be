"""Source lines of code addresses, from a code object's DWARF line table (clang `-g`), read with pyelftools."""
from __future__ import annotations

import bisect
import io
import threading
from os import path

_cache: dict[int, tuple[bytes, list]] = {}  # id of the code object bytes -> (them, sequences)
_lock = threading.Lock()


def line(code_object: bytes, vaddr: int) -> tuple[str, int] | None:
    """(file, line) of the instruction at `vaddr` (an address of the code object's image), or None when the code
    object has no line table or the table does not cover it."""
    for lo, hi, addrs, rows in _sequences(code_object):
        if lo <= vaddr < hi:
            i = bisect.bisect_right(addrs, vaddr) - 1
            while i > 0 and rows[i][1] == 0:  # line 0: code the compiler made; the line it belongs to is before it
                i -= 1
            if i >= 0 and rows[i][1]:
                return rows[i]
    return None


def _sequences(data: bytes) -> list:
    with _lock:
        got = _cache.get(id(data))
        if got is not None and got[0] is data:
            return got[1]
    try:
        seqs = _read(data)
    except Exception:  # no DWARF, or DWARF pyelftools cannot read: no line information
        seqs = []
    with _lock:
        _cache[id(data)] = (data, seqs)
    return seqs


def _read(data: bytes) -> list:
    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(data))
    if not elf.has_dwarf_info():
        return []
    dw = elf.get_dwarf_info()
    out = []
    for cu in dw.iter_CUs():
        lp = dw.line_program_for_CU(cu)
        if lp is None:
            continue
        names = _file_names(lp.header)
        addrs, rows = [], []
        for e in lp.get_entries():
            s = e.state
            if s is None:
                continue
            if s.end_sequence:
                if addrs:
                    out.append((addrs[0], s.address, addrs, rows))
                addrs, rows = [], []
                continue
            addrs.append(s.address)
            rows.append((names.get(s.file, f"file {s.file}"), s.line))
    return out


def _file_names(header) -> dict[int, str]:
    """The line table's file names by index (DWARF 5 counts from 0, earlier versions from 1), with directories."""
    v5 = header.version >= 5
    dirs = [d.decode(errors="replace") for d in header.include_directory]
    out = {}
    for k, f in enumerate(header.file_entry):
        n = f.name.decode(errors="replace")
        di = f.dir_index if v5 else f.dir_index - 1
        d = dirs[di] if 0 <= di < len(dirs) and (v5 or f.dir_index) else ""
        out[k if v5 else k + 1] = path.join(d, n) if d and not path.isabs(n) else n
    return out
