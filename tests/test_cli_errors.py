"""The CLIs never print a traceback (issue 12, item 6): `python -m emu.amd.run`, `python -m emu.amd.asm.disasm` and
the `hwemu` subcommands answer bad input with one line naming the problem and exit status 2, a GPU fault with 1."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import numpy as np
import pytest

from emu import cli
from stack.codegen import opencl
from tools import fuzz

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 build the code objects")
SAXPY_ARGS = ["--kernel", "saxpy", "--block", "64", "--arg", "buf:out:f32:64", "--arg", "buf:out:f32:64",
              "--arg", "f32:2", "--arg", "u32:64"]


@functools.cache
def target() -> fuzz.Target:
    return fuzz.Target(opencl.compile_cl(fuzz.SAXPY, "gfx1100"))


@pytest.fixture
def saxpy(tmp_path):
    path = tmp_path / "saxpy.hsaco"
    path.write_bytes(target().blob)
    return str(path)


def hwemu(capsys, *argv: str) -> tuple[int, str]:
    """(exit status, stderr) of `hwemu ARGV` run in this process; an exception escaping it fails the test."""
    status = cli.main(list(argv))
    return status, capsys.readouterr().err


def one_error(capsys, status: int, *argv: str) -> str:
    got, err = hwemu(capsys, *argv)
    assert (got, len(err.splitlines())) == (status, 1), err
    return err.strip()


def test_dev_zero_and_unreadable_inputs(capsys, tmp_path, saxpy):
    big = tmp_path / "big.hsaco"
    with open(big, "wb") as f:
        f.truncate(300 << 20)
    for cmd in (["disasm", "--arch", "gfx1100"], ["kernel", "--kernel", "saxpy"]):
        assert one_error(capsys, 2, *cmd, "/dev/zero") == \
            "error: /dev/zero: larger than the 256 MiB limit of a code object"
        assert one_error(capsys, 2, *cmd, str(big)) == f"error: {big}: larger than the 256 MiB limit of a code object"
        assert one_error(capsys, 2, *cmd, str(tmp_path)) == f"error: cannot read {tmp_path}: Is a directory"
        assert one_error(capsys, 2, *cmd, "/nonexistent") == \
            "error: cannot read /nonexistent: No such file or directory"
    assert one_error(capsys, 2, "kernel", saxpy, "--kernel", "saxpy", "--kernargs", "/dev/zero") == \
        "error: /dev/zero: larger than the 64 KiB limit of a kernarg segment"
    assert one_error(capsys, 2, "kernel", saxpy, *SAXPY_ARGS[:4], "--arg", "buf:in:f32:/dev/zero") == \
        "error: --arg 'buf:in:f32:/dev/zero': /dev/zero is not a .npy file of numbers (bools, ints or floats)"


@pytest.mark.parametrize("where,value,message", [
    ("descriptor", (8, 1 << 30), "kernel 'saxpy': descriptor kernarg_size 1073741824 exceeds the 64 KiB limit"),
    ("metadata", (".kernarg_segment_size", "x"), "kernel 'saxpy': metadata .kernarg_segment_size is 'x', not int"),
    ("metadata", (".name", 5), "kernel: metadata .name is 5, not str"),
    ("header", (60, 0xFFFF), "section header table"),
])
def test_malformed_code_objects(capsys, tmp_path, where, value, message):
    t = target()
    if where == "descriptor":
        blob = bytearray(t.blob)
        at = t.descriptors["saxpy"] + value[0]
        blob[at:at + 4] = value[1].to_bytes(4, "little")
    elif where == "metadata":
        blob = t.with_metadata(*value)
    else:
        blob = bytearray(t.blob)
        blob[value[0]:value[0] + 2] = value[1].to_bytes(2, "little")
    path = tmp_path / "bad.hsaco"
    path.write_bytes(bytes(blob))
    err = one_error(capsys, 2, "kernel", str(path), *SAXPY_ARGS)
    assert err.startswith("error: ") and message in err
    status, _ = hwemu(capsys, "disasm", "--arch", "gfx1100", str(path))
    assert status in (0, 2)


def test_bad_out_directories_and_oversized_outputs(capsys, tmp_path, saxpy):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert one_error(capsys, 2, "kernel", saxpy, *SAXPY_ARGS, "--out", str(afile)) == \
        f"error: --out '{afile}': cannot create the directory: File exists"
    assert one_error(capsys, 2, "kernel", saxpy, *SAXPY_ARGS, "--out", "/dev/null/x") == \
        "error: --out '/dev/null/x': cannot create the directory: Not a directory"
    huge = ["--kernel", "saxpy", "--arg", "buf:out:f64:1000000000000"]
    assert one_error(capsys, 2, "kernel", saxpy, *huge) == \
        "error: --arg 'buf:out:f64:1000000000000': buffer bytes 8000000000000 exceeds the 4 GiB limit"
    assert one_error(capsys, 2, "kernel", saxpy, *SAXPY_ARGS[:8], "--arg", "f32:1e39", "--arg", "u32:64") == \
        "error: --arg 'f32:1e39': '1e39' is not a valid f32 (or out of its range)"
    assert one_error(capsys, 2, "kernel", saxpy, *SAXPY_ARGS, "--grid", "67108864") == \
        "error: kernel 'saxpy': work-items in x (grid 67108864 x block 64) 4294967296 exceeds the 2^32 - 1 limit"
    with open("/dev/full", "w") as full:  # a disassembly that cannot be written
        stdout, sys.stdout = sys.stdout, full
        try:
            assert cli.main(["disasm", "--arch", "gfx1100", saxpy]) == 2
        finally:
            sys.stdout = stdout
    assert capsys.readouterr().err == "error: cannot write the disassembly: No space left on device\n"


def test_a_gpu_fault_exits_1(capsys, tmp_path, saxpy):
    """x is one page with a guard page after it: 2048 work-items read past both. The fault report follows the
    fault's line."""
    got, err = hwemu(capsys, "kernel", saxpy, "--kernel", "saxpy", "--grid", "32", "--block", "64",
                     "--arg", "buf:out:f32:1", "--arg", "buf:out:f32:1", "--arg", "f32:2", "--arg", "u32:2048",
                     "--out", str(tmp_path))
    lines = err.splitlines()
    assert got == 1 and lines[0].startswith("GPU fault: unmapped; read of 32 bits at")
    assert lines[1].startswith("kernel `saxpy`, dispatch 0: grid (32, 1, 1) x block (64, 1, 1)")
    assert "faulting lanes" in err and "bytes past the end of the 4-byte buffer" in err


def test_the_processes_print_no_traceback(tmp_path, saxpy):
    """The same through real processes: `python -m` of both modules and the hwemu entry point."""
    hwemu_bin = os.path.join(os.path.dirname(sys.executable), "hwemu")
    for cmd in ([sys.executable, "-m", "emu.amd.run", "/dev/zero", "--kernel", "k"],
                [sys.executable, "-m", "emu.amd.asm.disasm", "--arch", "gfx1100", "/dev/zero"],
                [hwemu_bin, "kernel", saxpy, *SAXPY_ARGS, "--out", "/dev/null/x"]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert (p.returncode, len(p.stderr.splitlines())) == (2, 1), p.stderr
        assert "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "emu.amd.run", saxpy, *SAXPY_ARGS, "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and np.load(tmp_path / "arg0.npy").shape == (64,)
