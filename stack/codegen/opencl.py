"""OpenCL C -> HSA code object with the system's clang-19 and ld.lld-19."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CLANG, LLD = "clang-19", "ld.lld-19"


class CompileError(RuntimeError):
    pass


def available() -> bool:
    return bool(shutil.which(CLANG) and shutil.which(LLD))


PRELUDE = Path(__file__).with_name("hwemu_cl.h")


def compile_cl(source: str, arch: str, opt: str = "-O3", extra: tuple[str, ...] = ()) -> bytes:
    """Compile OpenCL C for `arch` (gfx name) and link it into a shared HSA code object; returns its bytes.

    The source is compiled with -nogpulib; hwemu_cl.h, included first, supplies the work-item functions
    (get_global_id, ...), barrier, 32-bit atomics, popcount and clz."""
    with tempfile.TemporaryDirectory(prefix="hwemu-cl-") as tmp:
        src, obj, out = Path(tmp, "k.cl"), Path(tmp, "k.o"), Path(tmp, "k.hsaco")
        src.write_text(source)
        _run([CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib",
              "-include", str(PRELUDE), opt, *extra, "-c", str(src), "-o", str(obj)])
        _run([LLD, "-shared", str(obj), "-o", str(out)])
        return out.read_bytes()


def _run(cmd: list[str]) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise CompileError(f"{cmd[0]} not found: install clang-19 lld-19") from e
    if p.returncode:
        raise CompileError(f"{' '.join(cmd)} failed:\n{p.stderr}")
