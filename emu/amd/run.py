"""Run a kernel of an HSA code object on an emulated GPU from the command line.

    python -m emu.amd.run K.hsaco --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] \\
        --arg buf:in:f32:FILE.npy --arg buf:out:f32:N --arg f32:2.5 --arg i32:7 [--arch gfx1100] [--out DIR]

Arguments, in the kernel's order:
  buf:in:TYPE:FILE.npy   a buffer initialised from a .npy file (converted to TYPE)
  buf:out:TYPE:N         a zeroed buffer of N elements, written to DIR/argK.npy after the run
  buf:inout:TYPE:FILE    initialised from FILE and written back to DIR/argK.npy
  TYPE:VALUE             a scalar (TYPE in i8 i16 i32 i64 u8 u16 u32 u64 f16 f32 f64)
`--kernargs FILE` gives the explicit kernel arguments as raw bytes (for kernels whose metadata lists none); --arg
buffers given with it are still made (and written out after the run) but not passed: each one's address is printed
before the launch (`arg K: buffer at 0x...`, the same on every run of the same command) for the raw bytes to hold.
The arch defaults to the code object's. Bad input (unreadable, oversized or malformed files, bad
arguments, sizes beyond the limits of objfile.codeobj, an unusable --out directory) is reported in one line on
stderr with exit status 2; a GPU fault (the watchdog's included: --timeout) with exit status 1; Ctrl-C ends the
run with status 130.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from emu.amd.limits import MAX_BUFFER, MAX_CODE_OBJECT, MAX_KERNARG_SEGMENT, check_limit, read_file
from objfile.codeobj import CodeObject

TYPES = {t: np.dtype(t.replace("i", "int").replace("u", "uint").replace("f", "float"))
         for t in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")}


NPY_MAGIC = b"\x93NUMPY"


class UsageError(ValueError):
    pass


def _dims(text: str, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--{what} {text!r}: expected X[,Y[,Z]] positive integers") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise UsageError(f"--{what} {text!r}: expected 1 to 3 positive integers")
    return dims


def _dtype(t: str, spec: str) -> np.dtype:
    if t not in TYPES:
        raise UsageError(f"--arg {spec!r}: unknown type {t!r} (known: {', '.join(TYPES)})")
    return TYPES[t]


def parse_arg(spec: str):
    """('buf', mode, dtype, array or element count) or ('scalar', numpy scalar); buffers within MAX_BUFFER."""
    parts = spec.split(":")
    if parts[0] == "buf":
        if len(parts) != 4 or parts[1] not in ("in", "out", "inout"):
            raise UsageError(f"--arg {spec!r}: expected buf:in|out|inout:TYPE:FILE.npy or buf:out:TYPE:N")
        dt = _dtype(parts[2], spec)
        if parts[1] == "out":
            try:
                n = int(parts[3])
            except ValueError:
                raise UsageError(f"--arg {spec!r}: element count {parts[3]!r} is not an integer") from None
            if n < 1:
                raise UsageError(f"--arg {spec!r}: element count must be positive")
            check_limit(f"--arg {spec!r}", "buffer bytes", n * dt.itemsize, MAX_BUFFER)
            return ("buf", "out", dt, n)
        data = _load_npy(parts[3], spec)
        check_limit(f"--arg {spec!r}", "buffer bytes", data.size * dt.itemsize, MAX_BUFFER)
        return ("buf", parts[1], dt, np.ascontiguousarray(data, dt).reshape(-1))
    if len(parts) != 2:
        raise UsageError(f"--arg {spec!r}: expected TYPE:VALUE or buf:...")
    dt = _dtype(parts[0], spec)
    try:
        if dt.kind == "f":
            v = float(parts[1])
            with np.errstate(over="ignore"):
                x = np.array(v).astype(dt)[()]
            if math.isfinite(v) and not math.isfinite(x):
                raise OverflowError
            return ("scalar", x)
        return ("scalar", np.array(int(parts[1], 0), dt)[()])
    except (ValueError, OverflowError):
        raise UsageError(f"--arg {spec!r}: {parts[1]!r} is not a valid {parts[0]} (or out of its range)") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emu.amd.run", description=__doc__.split("\n")[0])
    ap.add_argument("code_object", type=Path)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--grid", default="1", help="workgroups per dimension X[,Y,Z]")
    ap.add_argument("--block", default="1", help="work-items per workgroup X[,Y,Z]")
    ap.add_argument("--arg", action="append", default=[], help="kernel argument (see the module help)")
    ap.add_argument("--kernargs", type=Path, help="file holding the raw explicit kernel arguments (instead of --arg)")
    ap.add_argument("--arch", help="GPU to emulate (default: the code object's)")
    ap.add_argument("--out", type=Path, default=Path("."), help="directory for output .npy files (default: .)")
    ap.add_argument("--timeout", type=float, help="seconds of CPU time before the watchdog stops the dispatch "
                    "(default: HWEMU_TIMEOUT or 60; 0: no limit)")
    a = ap.parse_args(argv)
    from emu.amd import GPU, GPUFault
    try:
        grid, block = _dims(a.grid, "grid"), _dims(a.block, "block")
        specs = [parse_arg(s) for s in a.arg]
        data = _read(a.code_object, MAX_CODE_OBJECT, "a code object")
        raw = _read(a.kernargs, MAX_KERNARG_SEGMENT, "a kernarg segment") if a.kernargs is not None else None
        co = CodeObject.parse(data)
        gpu = GPU(a.arch or co.arch)
        prog = gpu.load(data)
        args, outs = [], []
        for i, s in enumerate(specs):
            if s[0] == "scalar":
                if raw is not None:
                    raise UsageError(f"--arg {a.arg[i]!r}: with --kernargs, scalars belong in its bytes")
                args.append(s[1])
                continue
            _, mode, dt, arr = s
            n = arr if mode == "out" else arr.size
            buf = gpu.alloc(max(n * dt.itemsize, 1))  # zeroed
            if mode != "out":
                gpu.write(buf, arr)
            args.append(buf)
            if mode != "in":
                outs.append((i, buf, dt, n))
            if raw is not None:
                print(f"arg {i}: buffer at {buf.addr:#x}")
        if outs:
            _out_dir(a.out)
        stats = gpu.launch(prog, a.kernel, grid=grid, block=block, args=args if raw is None else [], kernargs=raw,
                           timeout=a.timeout)
        for i, buf, dt, n in outs:
            path = a.out / f"arg{i}.npy"
            try:
                np.save(path, np.frombuffer(gpu.read(buf), dt)[:n])
            except OSError as e:
                raise UsageError(f"--out: cannot write {path}: {e.strerror or e}") from None
            print(f"arg {i}: wrote {path}")
    except ValueError as e:  # UsageError, CodeObjectError, LimitError and the runner's argument checks
        print(f"error: {e}", file=sys.stderr)
        return 2
    except GPUFault as e:  # the fault report (emu.amd.debug.fault): its first line is the fault record
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(f"{stats.waves} waves, {stats.wave_instructions} wave-instructions, "
          f"{stats.lane_instructions} lane-instructions")
    return 0


def _load_npy(path: str, spec: str) -> np.ndarray:
    """The array of a .npy file, mapped rather than read (the caller checks its size before copying it)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
        data = np.load(path, mmap_mode="r", allow_pickle=False) if magic == NPY_MAGIC else None
    except (OSError, ValueError, EOFError) as e:
        raise UsageError(f"--arg {spec!r}: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(data, np.ndarray) or data.dtype.kind not in "biuf":
        raise UsageError(f"--arg {spec!r}: {path} is not a .npy file of numbers (bools, ints or floats)")
    return data


def _read(path: Path, limit: int, what: str) -> bytes:
    try:
        return read_file(path, limit, what)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def _out_dir(path: Path) -> None:
    """Create the --out directory now, so that a bad one is reported before the kernel runs."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {str(path)!r}: cannot create the directory: {e.strerror or e}") from None


if __name__ == "__main__":
    sys.exit(main())
