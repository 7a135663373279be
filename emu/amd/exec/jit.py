"""Execution tiers, and the LLVM tier's compiled regions.

`HWEMU_TIER` selects how a program's instructions run (read when a program is created, e.g. at `GPU.load`):
- `ref`: the reference engine, one plan closure per instruction (emu.amd.exec.plan);
- `interp`: the lean interpreter, one fused generated function per instruction (emu.amd.exec.interp), never native;
- `jit`: regions compiled to native code (emu.amd.exec.translate) from the first execution of each region entry;
- `auto` (default): the reference engine until a region entry is hot (HWEMU_HOT executions, default 64), then
  native, so code that runs once never waits for LLVM.
Whatever a region cannot take runs on the reference engine, so every tier runs every program.

Compiled regions are cached in the process and on disk (emu.pcode.llvmjit: $HWEMU_CACHE/llvm), keyed by the
region's code bytes, processor, wave size and MODE, and by the source of the translator and the pcode compiler
(a change to either compiles anew).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from pathlib import Path

import numpy as np

from emu.amd.exec import TIERS, translate
from emu.amd.exec.translate import Exit, Region
from emu.pcode.llvmjit import engine

BUDGET = 1 << 20  # instructions per native call before the host gets control back
NO_MAPPINGS = np.zeros(1, np.uint64)  # the VM table of a wave without a VM
_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_void_p] * 4)
_cache: dict[tuple, object] = {}
_lock = threading.Lock()


def _sources_digest() -> str:
    """What the compiled code depends on besides the region: the translator, the pcode compiler and its fixups."""
    h = hashlib.sha256()
    for f in sorted([Path(translate.__file__), *Path(engine.__code__.co_filename).parent.glob("*.py")]):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


_SOURCES = _sources_digest()


def tier() -> str:
    t = os.environ.get("HWEMU_TIER", "auto") or "auto"
    if t not in TIERS:
        raise ValueError(f"HWEMU_TIER={t!r}: expected one of {', '.join(TIERS)}")
    return t


def hot_threshold(t: str) -> int | None:
    """Executions of a region entry before it is compiled (None: never)."""
    if t == "ref":
        return None
    return 1 if t == "jit" else int(os.environ.get("HWEMU_HOT", "64"))


def native(prog, pc: int, mode: int):
    """The compiled region at `pc` for `mode` (a ctypes function), or None when the tier takes no instruction
    there."""
    exits: set[int] = set()
    for _ in range(64):  # each failed attempt turns one more instruction into an exit
        region = Region(prog, pc, mode)
        try:
            insts = region.discover(exits)
        except Exit:
            return None
        key = (prog.planner.target, prog.lanes, mode, tuple((p, i.raw) for p, i in insts.items()))
        with _lock:
            fn = _cache.get(key)
            if fn is not None:
                return fn
            disk_key = f"region {_SOURCES} {key!r}"
            addr = engine().load(disk_key)
            if addr is None:
                try:
                    mod = region.module("region", insts)
                except Exit as e:
                    bad = e.args[0] if e.args and isinstance(e.args[0], int) else pc
                    if bad == pc:
                        return None
                    exits.add(bad)
                    continue
                addr = engine().compile(mod, "region", disk_key)
            fn = _cache[key] = _SIG(addr)
            return fn
    return None

