"""LLVM IR -> HSA code object through llvmlite (LLVM 22) + ld.lld-19, read back with objfile.codeobj."""
import re
import shutil
import subprocess

import pytest

from objfile.codeobj import CodeObject
from stack.codegen import llvm as irc
from stack.codegen.opencl import CompileError

pytestmark = [pytest.mark.llvm,
              pytest.mark.skipif(not irc.available(), reason="needs llvmlite with AMDGPU and ld.lld-19")]
OBJDUMP = shutil.which("llvm-objdump-19")

# out[gid] = in[gid] * 3 + gid, gid = workgroup.id.x * 64 + workitem.id.x; skipped past n
SCALE = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()

define amdgpu_kernel void @scale(ptr addrspace(1) noalias %out, ptr addrspace(1) noalias %in, i32 %n) {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %wg = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = shl i32 %wg, 6
  %gid = add i32 %base, %tid
  %ok = icmp ult i32 %gid, %n
  br i1 %ok, label %body, label %done
body:
  %src = getelementptr i32, ptr addrspace(1) %in, i32 %gid
  %v = load i32, ptr addrspace(1) %src
  %m = mul i32 %v, 3
  %r = add i32 %m, %gid
  %dst = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %r, ptr addrspace(1) %dst
  br label %done
done:
  ret void
}
"""


def _disasm(data: bytes, arch: str, tmp_path) -> str:
    path = tmp_path / "k.hsaco"
    path.write_bytes(data)
    return subprocess.run([OBJDUMP, "-d", f"--mcpu={arch}", str(path)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_ir_kernel_compiles_to_a_code_object(arch, tmp_path):
    data = irc.compile_ir(SCALE, arch)
    co = CodeObject.parse(data)
    assert co.arch == arch and co.version == 5
    k = co.kernels["scale"]
    assert [(a.offset, a.size, a.value_kind) for a in k.explicit_args] == [
        (0, 8, "global_buffer"), (8, 8, "global_buffer"), (16, 4, "by_value")]
    assert k.wavefront_size == (64 if arch == "gfx942" else 32) and k.descriptor.wave32 == (arch != "gfx942")
    d = k.descriptor
    assert d.rsrc2.enable_sgpr_workgroup_id_x and d.code_properties.enable_sgpr_kernarg_segment_ptr
    if OBJDUMP:
        text = _disasm(data, arch, tmp_path)
        body = text[text.index("<scale>:"):]
        assert re.search(r"global_load_(b32|dword)", body) and re.search(r"global_store_(b32|dword)", body)
        assert "s_endpgm" in body


def test_code_object_version_and_wave64(tmp_path):
    assert CodeObject.parse(irc.compile_ir(SCALE, "gfx1100", code_object_version=None)).version == 6  # LLVM 22
    assert CodeObject.parse(irc.compile_ir(SCALE, "gfx1100", code_object_version=4)).version == 4
    k = CodeObject.parse(irc.compile_ir(SCALE, "gfx1100", opt=0, features="+wavefrontsize64")).kernels["scale"]
    assert k.wavefront_size == 64 and not k.descriptor.wave32


def test_existing_module_flags_are_kept():
    ir = SCALE + '\n!llvm.module.flags = !{!0}\n!0 = !{i32 7, !"uwtable", i32 2}\n'
    assert CodeObject.parse(irc.compile_ir(ir, "gfx942")).version == 5
    own = SCALE + '\n!llvm.module.flags = !{!0}\n!0 = !{i32 1, !"amdhsa_code_object_version", i32 400}\n'
    assert CodeObject.parse(irc.compile_ir(own, "gfx942")).version == 4


@pytest.mark.parametrize("ir, arch, msg", [
    (SCALE, "gfx9999", "does not know processor"),
    (SCALE, "sm_90", "not a gfx processor"),
    ("define amdgpu_kernel void @k() { ret vid }", "gfx1100", "IR is invalid"),
])
def test_errors_are_named(ir, arch, msg):
    with pytest.raises(CompileError, match=msg):
        irc.compile_ir(ir, arch)
