"""The lean interpreter's generated code made runnable: the names it may use (its namespace and the locals a step
loads from the wave), and its compilation through a disk cache ($HWEMU_CACHE/interp) of marshalled code."""
from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import tempfile
from collections.abc import Callable
from types import CodeType

import numpy as np

from emu.amd.exec.interp_mem import lds_load, lds_load32, lds_store, lds_store32
from emu.pcode import floats, runtime
from emu.pcode.llvmjit import cache_dir
from emu.pcode.npvalues import lane_bits, pack_lanes
from emu.pcode.typed import Unsupported as PcodeUnsupported

# the wave's arrays a step loads into locals (a fragment's `needs`); vf and vi are the VGPRs as f32 and i32
LOADS = (("sg", "sg = w.sgpr"), ("vg", "vg = w.vgpr"), ("vf", "vf = w.vgpr_f32"), ("vi", "vi = w.vgpr_i32"),
         ("mem", "mem = w.lds"))
VIEWS = {"np.float32": "vf", "np.int32": "vi"}  # the VGPR file's typed views by numpy type
NAMESPACE = {"np": np, "L": runtime, "F": floats, "Unsupported": PcodeUnsupported, "U32": np.uint32,
             "U64": np.uint64, "ML": lds_load, "MS": lds_store, "ML32": lds_load32, "MS32": lds_store32,
             "LB": lane_bits, "PK": pack_lanes}


def act_lines(lanes: int) -> list[str]:
    """The locals of the active lanes: act (bools), full (every lane), n_act (how many)."""
    return ["act = w.active", f"full = w.active_mask == {(1 << lanes) - 1}", "n_act = w.active_mask.bit_count()"]


def row_local(arr: str, reg: int) -> str:
    """The local a step loads row `reg` of the wave's array `arr` (vg, vf, vi) into."""
    return f"__{arr}{reg}"


def row_loads(rows) -> list[str]:
    """The lines loading the rows (array, register) into their locals, once each."""
    return [f"{row_local(v, r)} = {v}[{r}]" for v, r in sorted(rows)]


def factory(text: str, name: str, **names) -> Callable:
    """The `make` function of generated source `text` (`names`: more of its globals)."""
    ns = {**NAMESPACE, **names}
    exec(compiled(text, name), ns)
    return ns["make"]


def compiled(text: str, name: str) -> CodeType:
    """`text` compiled, through a disk cache ($HWEMU_CACHE/interp) of marshalled code (after its SHA-256):
    compiling the generated source is most of a kernel's first run, and a test suite's processes run much the same
    code."""
    key = hashlib.sha256(b"%s\0%s\0%s" % (importlib.util.MAGIC_NUMBER, name.encode(), text.encode())).hexdigest()
    path = cache_dir().parent / "interp" / key[:2] / key[2:]
    try:
        data = path.read_bytes()
        if hashlib.sha256(data[32:]).digest() == data[:32]:  # else truncated or damaged: compiled again
            return marshal.loads(data[32:])
    except (OSError, EOFError, ValueError, TypeError):  # not there yet, or a foreign file
        pass
    code = compile(text, name, "exec")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            blob = marshal.dumps(code)
            f.write(hashlib.sha256(blob).digest() + blob)
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache: the code is still run
        pass
    return code
