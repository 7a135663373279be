"""LLVM IR -> HSA code object in-process with llvmlite (its bundled LLVM has the AMDGPU backend).

llvmlite emits a relocatable object (ET_REL); HSA loaders take a shared object (ET_DYN), which ld.lld-19
links (`ld.lld -shared`), the same as clang does for OpenCL.

  compile_ir(ir, "gfx1100", opt=3, code_object_version=5, features="") -> bytes

The IR needs no `target triple`/`target datalayout` (they are added for amdgcn-amd-amdhsa). The code object
version is set with the `amdhsa_code_object_version` module flag (5 by default; None keeps LLVM's default,
which is 6 for llvmlite's LLVM 22) unless the IR sets the flag itself.
"""
from __future__ import annotations

import functools
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm

from stack.codegen.opencl import LLD, CompileError

TRIPLE = "amdgcn-amd-amdhsa"


@functools.cache
def _target() -> llvm.Target:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
        return llvm.Target.from_triple(TRIPLE)
    except RuntimeError as e:
        raise CompileError(f"llvmlite's LLVM has no AMDGPU target: {e}") from e


def available() -> bool:
    """True when llvmlite has the AMDGPU backend and ld.lld-19 is installed."""
    try:
        _target()
    except CompileError:
        return False
    return shutil.which(LLD) is not None


@functools.cache
def _machine(arch: str, features: str, opt: int) -> llvm.TargetMachine:
    """A target machine for a processor LLVM knows (it ignores an unknown one and may then abort in codegen, so an
    empty module is compiled first: its e_flags EF_AMDGPU_MACH is 0 when the processor was ignored)."""
    tm = _target().create_target_machine(cpu=arch, features=features, opt=opt, reloc="pic", codemodel="default")
    probe = llvm.parse_assembly(f'target triple = "{TRIPLE}"\n')
    if struct.unpack_from("<I", tm.emit_object(probe), 48)[0] & 0xFF == 0:
        raise CompileError(f"LLVM {'.'.join(map(str, llvm.llvm_version_info))} does not know processor {arch!r}")
    return tm


def compile_ir(ir: str, arch: str, opt: int = 3, code_object_version: int | None = 5, features: str = "") -> bytes:
    """Compile LLVM IR text for `arch` (e.g. 'gfx1100') to an HSA code object; returns its bytes.

    `features` are LLVM target features, e.g. '+wavefrontsize64' for a wave64 build on rdna."""
    if not re.fullmatch(r"gfx[0-9a-f]{3,4}", arch):
        raise CompileError(f"{arch!r} is not a gfx processor name")
    if not 0 <= opt <= 3:
        raise CompileError(f"optimisation level {opt} is not 0..3")
    tm = _machine(arch, features, opt)
    header = ""
    if not re.search(r"^\s*target\s+triple", ir, re.M):
        header += f'target triple = "{TRIPLE}"\n'
    if not re.search(r"^\s*target\s+datalayout", ir, re.M):
        header += f'target datalayout = "{tm.target_data}"\n'
    if code_object_version is not None and "amdhsa_code_object_version" not in ir:
        ir = _with_module_flag(ir, f'!{{i32 1, !"amdhsa_code_object_version", i32 {code_object_version * 100}}}')
    try:
        mod = llvm.parse_assembly(header + ir)
        mod.verify()
    except RuntimeError as e:
        raise CompileError(f"LLVM IR is invalid: {e}") from e
    if opt:
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=opt))
        pb.getModulePassManager().run(mod, pb)
    obj = tm.emit_object(mod)
    with tempfile.TemporaryDirectory(prefix="hwemu-ir-") as tmp:
        o, out = Path(tmp, "k.o"), Path(tmp, "k.hsaco")
        o.write_bytes(obj)
        try:
            p = subprocess.run([LLD, "-shared", str(o), "-o", str(out)], capture_output=True, text=True)
        except FileNotFoundError as e:
            raise CompileError(f"{LLD} not found: install lld-19") from e
        if p.returncode:
            raise CompileError(f"{LLD} -shared failed:\n{p.stderr}")
        return out.read_bytes()


def _with_module_flag(ir: str, node: str) -> str:
    """`ir` with one more !llvm.module.flags entry (a fresh numbered metadata node)."""
    fresh = max((int(n) for n in re.findall(r"^!(\d+)\s*=", ir, re.M)), default=0) + 1
    flags = re.compile(r"^(!llvm\.module\.flags\s*=\s*!\{)(\s*\})?", re.M)
    if flags.search(ir):
        ir = flags.sub(lambda m: f"{m[1]}!{fresh}" + ("}" if m[2] else ", "), ir, count=1)
    else:
        ir += f"\n!llvm.module.flags = !{{!{fresh}}}\n"
    return ir + f"\n!{fresh} = {node}\n"
