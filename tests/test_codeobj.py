"""HSA code objects: our parser against llvm-objdump-19 / llvm-readelf-19 on real clang-19 output."""
import functools
import io
import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from objfile.codeobj import CodeObject, CodeObjectError, KernelDescriptor
from objfile.kernargs import hidden_args, pack_kernargs
from stack.codegen import opencl

TOOLS = opencl.available() and shutil.which("llvm-objdump-19") and shutil.which("llvm-readelf-19")
needs_llvm = pytest.mark.skipif(not TOOLS, reason="needs clang-19, ld.lld-19, llvm-objdump-19, llvm-readelf-19")
pytestmark = [pytest.mark.llvm, needs_llvm]

# LDS (static and a dynamic `local` pointer), a run-time-indexed private array, every scalar argument kind
PROBE = """
kernel void probe(global float *out, float f, half h, long l, char c, uint u, local float *dyn) {
  __local float tile[64];
  float priv[16];
  size_t i = get_global_id(0), j = get_local_id(0);
  for (int k = 0; k < 16; k++) priv[k] = f * k + (float)h;
  tile[j & 63] = priv[(u + j) & 15];
  dyn[j] = (float)l;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[i] = tile[(j + 1) & 63] + dyn[j ^ 1] + c;
}
"""
CONFIGS = [(a, o) for a in ("gfx1100", "gfx1201", "gfx942") for o in ("-O0", "-O3")]


@functools.cache
def _compiled(arch, opt):
    return opencl.compile_cl(PROBE, arch, opt)


@pytest.fixture(params=CONFIGS, ids=["-".join(c) for c in CONFIGS])
def probe(request, tmp_path):
    data = _compiled(*request.param)
    path = tmp_path / "probe.hsaco"
    path.write_bytes(data)
    return request.param[0], data, path


def _tool(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def _objdump_kd(path):
    """The .amdhsa_* directives (and '; FIELD n' comments) llvm-objdump prints for the kernel descriptor."""
    text = _tool("llvm-objdump-19", "-D", "-j", ".rodata", str(path))
    if m := re.search(r"; error decoding probe.kd: (.*)", text):  # objdump shows the bytes instead
        raw = bytes(int(b, 16) for b in re.findall(r"\.byte\s+0x([0-9A-Fa-f]+)", text)[:64])
        return m[1], raw
    kd = text[text.index(".amdhsa_kernel"):text.index(".end_amdhsa_kernel")]
    return {m[0] or m[1]: int(m[2]) for m in re.findall(r"(?:\.amdhsa_(\w+)|; (\w+)) (\d+)", kd)}


def _readelf_metadata(path):
    """Kernel-level scalars and the argument list from llvm-readelf's YAML rendering of the metadata note."""
    text = _tool("llvm-readelf-19", "--notes", str(path))
    scalars, args = {}, []
    for line in text.splitlines():
        if m := re.match(r"^ {2}[- ] \.(\w+):\s+(.+)$", line):
            scalars[m[1]] = m[2].strip("'")
        elif m := re.match(r"^ {6}([- ]) \.(\w+):\s+(.+)$", line):
            if m[1] == "-":
                args.append({})
            args[-1][m[2]] = m[3].strip("'")
        elif m := re.match(r"^(amdhsa\.target):\s+(\S+)", line):
            scalars[m[1]] = m[2]
    return scalars, args


def _ours(d):
    """Our descriptor fields under llvm-objdump's directive names."""
    r1, r2, r3, p, pre = d.rsrc1, d.rsrc2, d.rsrc3, d.code_properties, d.kernarg_preload
    out = {
        "group_segment_fixed_size": d.group_segment_fixed_size, "kernarg_size": d.kernarg_size,
        "private_segment_fixed_size": d.private_segment_fixed_size,
        "next_free_vgpr": d.vgprs, "next_free_sgpr": d.sgprs,
        "float_round_mode_32": r1.float_round_mode_32, "float_round_mode_16_64": r1.float_round_mode_16_64,
        "float_denorm_mode_32": r1.float_denorm_mode_32, "float_denorm_mode_16_64": r1.float_denorm_mode_16_64,
        "dx10_clamp": r1.enable_dx10_clamp, "round_robin_scheduling": r1.enable_dx10_clamp,  # gfx12 reuses bit 21
        "ieee_mode": r1.enable_ieee_mode, "fp16_overflow": r1.fp16_ovfl, "workgroup_processor_mode": r1.wgp_mode,
        "memory_ordered": r1.mem_ordered, "forward_progress": r1.fwd_progress,
        "enable_private_segment": r2.enable_private_segment, "user_sgpr_count": r2.user_sgpr_count,
        "system_sgpr_workgroup_id_x": r2.enable_sgpr_workgroup_id_x,
        "system_sgpr_workgroup_id_y": r2.enable_sgpr_workgroup_id_y,
        "system_sgpr_workgroup_id_z": r2.enable_sgpr_workgroup_id_z,
        "system_sgpr_workgroup_info": r2.enable_sgpr_workgroup_info,
        "system_vgpr_workitem_id": r2.enable_vgpr_workitem_id,
        "exception_fp_ieee_invalid_op": r2.enable_exception_fp_invalid,
        "exception_fp_denorm_src": r2.enable_exception_fp_denormal_source,
        "exception_fp_ieee_div_zero": r2.enable_exception_fp_div_zero,
        "exception_fp_ieee_overflow": r2.enable_exception_fp_overflow,
        "exception_fp_ieee_underflow": r2.enable_exception_fp_underflow,
        "exception_fp_ieee_inexact": r2.enable_exception_fp_inexact,
        "exception_int_div_zero": r2.enable_exception_int_div_zero,
        "user_sgpr_private_segment_buffer": p.enable_sgpr_private_segment_buffer,
        "user_sgpr_dispatch_ptr": p.enable_sgpr_dispatch_ptr, "user_sgpr_queue_ptr": p.enable_sgpr_queue_ptr,
        "user_sgpr_kernarg_segment_ptr": p.enable_sgpr_kernarg_segment_ptr,
        "user_sgpr_dispatch_id": p.enable_sgpr_dispatch_id, "user_sgpr_flat_scratch_init":
            p.enable_sgpr_flat_scratch_init, "user_sgpr_private_segment_size": p.enable_sgpr_private_segment_size,
        "wavefront_size32": p.enable_wavefront_size32, "uses_dynamic_stack": p.uses_dynamic_stack,
        "user_sgpr_kernarg_preload_length": pre.length, "user_sgpr_kernarg_preload_offset": pre.offset,
    }
    if d.accum_offset is not None:
        out |= {"accum_offset": d.accum_offset, "tg_split": r3.tg_split}
    elif r3 is not None:
        out |= {k.upper(): getattr(r3, k) for k in ("shared_vgpr_count", "inst_pref_size", "trap_on_start",
                                                    "trap_on_end", "glg_en", "image_op") if hasattr(r3, k)}
    return out


NOT_ENCODED = {"reserve_vcc", "reserve_xnack_mask"}  # assembler options objdump prints, not descriptor bits


def test_descriptor_matches_llvm_objdump(probe):
    arch, data, path = probe
    co = CodeObject.parse(data)
    k = co.kernels["probe"]
    theirs = _objdump_kd(path)
    if isinstance(theirs, tuple):
        # LLVM 19 at -O0 sets the SGPR granule on gfx10+, which its own disassembler rejects as reserved
        error, raw = theirs
        assert "GRANULATED_WAVEFRONT_SGPR_COUNT reserved bits" in error and k.descriptor.rsrc1.value >> 6 & 15
        assert raw == co.image()[k.descriptor_address:k.descriptor_address + 64]
        return
    ours = _ours(k.descriptor)
    assert set(theirs) - NOT_ENCODED <= set(ours), f"objdump prints fields we do not decode: {set(theirs) - set(ours)}"
    assert {f: ours[f] for f in theirs if f in ours} == {f: v for f, v in theirs.items() if f not in NOT_ENCODED}
    assert co.arch == arch and co.version == 5 and k.descriptor.wave32 == (k.wavefront_size == 32)


def test_metadata_matches_llvm_readelf(probe):
    arch, data, path = probe
    co = CodeObject.parse(data)
    k = co.kernels["probe"]
    scalars, args = _readelf_metadata(path)
    assert co.target == scalars["amdhsa.target"] and co.target.endswith(arch)
    assert k.symbol == scalars["symbol"] == "probe.kd"
    for key in ("kernarg_segment_size", "kernarg_segment_align", "wavefront_size", "sgpr_count", "vgpr_count",
                "group_segment_fixed_size", "private_segment_fixed_size", "max_flat_workgroup_size"):
        assert getattr(k, key) == int(scalars[key]), key
    assert k.agpr_count == int(scalars.get("agpr_count", 0))
    assert [(a.offset, a.size, a.value_kind, a.type_name, a.address_space) for a in k.args] == [
        (int(a["offset"]), int(a["size"]), a["value_kind"], a.get("type_name", ""), a.get("address_space", ""))
        for a in args]
    kinds = [a.value_kind for a in k.explicit_args]
    assert kinds == ["global_buffer", *["by_value"] * 5, "dynamic_shared_pointer"]


def test_entry_code_and_image_match_the_elf(probe):
    arch, data, path = probe
    co = CodeObject.parse(data)
    k = co.kernels["probe"]
    syms = {m[2]: (int(m[0], 16), int(m[1])) for m in
            re.findall(r"^\s*\d+: ([0-9a-f]+)\s+(\d+) \w+\s+\w+\s+\w+\s+\S+ (\S+)$", _tool("llvm-readelf-19", "-s",
                                                                                       str(path)), re.M)}
    assert (k.entry, len(k.code)) == syms["probe"] and k.descriptor_address == syms["probe.kd"][0]
    assert k.entry % 256 == 0 and len(k.code) % 4 == 0
    base = 0x7000_0000
    image = co.image(base)
    assert bytes(image[k.entry:k.entry + len(k.code)]) == k.code
    assert co.text[k.entry - co.text_address:][:len(k.code)] == k.code
    assert struct.unpack_from("<q", image, k.descriptor_address + 16)[0] == k.entry - k.descriptor_address
    first = _tool("llvm-objdump-19", "-d", f"--start-address={k.entry}", f"--stop-address={k.entry + 8}", str(path))
    word = re.search(r"// [0-9A-F]+: ([0-9A-F]{8})", first)[1]
    assert k.code[:4] == int(word, 16).to_bytes(4, "little")


def test_relocations_are_applied_for_the_load_base():
    src = """__constant int tbl[4] = {1, 2, 3, 4};
__constant int *__constant ptr = tbl + 1;
kernel void r(global int *a) { a[get_global_id(0)] = ptr[get_global_id(0) & 1]; }"""
    co = CodeObject.parse(opencl.compile_cl(src, "gfx1100"))
    ((where, typ, value),) = co.relocations
    image = co.image(0x4000_0000)
    target = struct.unpack_from("<Q", image, where)[0] - 0x4000_0000
    assert typ == 13 and target == value
    assert struct.unpack_from("<4i", image, target - 4) == (1, 2, 3, 4)


def test_pack_kernargs():
    k = CodeObject.parse(_compiled("gfx1100", "-O0")).kernels["probe"]

    class Buf:
        addr = 0x1234_5678_9000

    hidden = {"hidden_block_count_x": 7, "hidden_group_size_x": 64, "hidden_grid_dims": 1, "not_in_kernel": 5}
    raw = pack_kernargs(k, [Buf(), 2.5, np.float16(1.5), -3, np.int8(-2), 0xFFFFFFFF, 0], hidden)
    assert len(raw) == k.kernarg_segment_size
    off = [x.offset for x in k.explicit_args]
    assert struct.unpack_from("<Q", raw, off[0])[0] == Buf.addr
    assert struct.unpack_from("<f", raw, off[1])[0] == 2.5
    assert struct.unpack_from("<e", raw, off[2])[0] == 1.5
    assert struct.unpack_from("<q", raw, off[3])[0] == -3
    assert struct.unpack_from("<b", raw, off[4])[0] == -2
    assert struct.unpack_from("<I", raw, off[5])[0] == 0xFFFFFFFF
    by_kind = {x.value_kind: x for x in k.args if x.hidden}
    for kind, v in hidden.items():
        if kind in by_kind:
            x = by_kind[kind]
            assert int.from_bytes(raw[x.offset:x.offset + x.size], "little") == v
    assert int.from_bytes(raw[by_kind["hidden_group_size_y"].offset:][:2], "little") == 0
    with pytest.raises(ValueError, match="takes 7 explicit arguments"):
        pack_kernargs(k, [Buf()], {})
    with pytest.raises(ValueError, match="does not fit 1 bytes"):
        pack_kernargs(k, [Buf(), 2.5, np.float16(1.5), -3, 300, 1, 0], {})
    with pytest.raises(ValueError, match="cannot pack float"):
        pack_kernargs(k, [Buf(), 2.5, np.float16(1.5), 1.0, 1, 1, 0], {})
    with pytest.raises(ValueError, match="is 2 bytes, the value is 4"):
        pack_kernargs(k, [Buf(), 2.5, np.float32(1.5), 1, 1, 1, 0], {})


def test_hidden_args_follow_the_dispatch_shape():
    h = hidden_args((100,), (64,))  # one full workgroup and a partial one of 36 work-items
    assert (h["hidden_block_count_x"], h["hidden_group_size_x"], h["hidden_remainder_x"]) == (2, 64, 36)
    assert (h["hidden_block_count_y"], h["hidden_group_size_y"], h["hidden_remainder_y"]) == (1, 1, 0)
    assert h["hidden_grid_dims"] == 1 and h["hidden_global_offset_z"] == 0
    h = hidden_args((48, 10), (16, 4), dynamic_lds_size=512)
    assert [h[f"hidden_block_count_{a}"] for a in "xyz"] == [3, 3, 1]
    assert [h[f"hidden_remainder_{a}"] for a in "xyz"] == [0, 2, 0]
    assert h["hidden_grid_dims"] == 2 and h["hidden_dynamic_lds_size"] == 512
    k = CodeObject.parse(_compiled("gfx942", "-O0")).kernels["probe"]
    raw = pack_kernargs(k, [0, 0.0, 0.0, 0, 0, 0, 0], h)
    at = {a.value_kind: a for a in k.args}
    for kind in ("hidden_block_count_y", "hidden_group_size_x", "hidden_remainder_y", "hidden_grid_dims"):
        assert int.from_bytes(raw[at[kind].offset:at[kind].offset + at[kind].size], "little") == h[kind]
    with pytest.raises(ValueError, match="bad dispatch shape"):
        hidden_args((0,), (64,))


def _with(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def test_bad_code_objects_are_named():
    data = _compiled("gfx1100", "-O3")
    cases = [
        (b"", "not an ELF"), (b"\x7fELF" + bytes(100), "little-endian ELF of 32 or 64 bits"),
        (_with(data, 4, b"\x01"), "not ELFCLASS64"),
        (_with(data, 7, b"\x03"), "OS/ABI is 3"), (_with(data, 8, b"\x09"), "ABI version 9"),
        (data[:2000], "runs past the end"), (_with(data, 18, b"\x3e\x00"), "not EM_AMDGPU"),
    ]
    cases.append((_with(data, 48, (0x4C).to_bytes(4, "little")), "disagrees with the ELF header's processor gfx942"))
    cases.append((_with(data, 48, (0xFE).to_bytes(4, "little")), "no known processor"))
    note_at = data.index(b"AMDGPU\0\0") + 8
    cases.append((_with(data, note_at, b"\xc1" * 4), "not valid msgpack|not a msgpack map"))
    for bad, msg in cases:
        with pytest.raises(CodeObjectError, match=msg):
            CodeObject.parse(bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_code_objects_raise_only_code_object_error(data):
    good = _compiled(data.draw(st.sampled_from(["gfx1100", "gfx942"])), "-O3")
    blob = bytearray(good)
    if data.draw(st.booleans()):
        blob = blob[:data.draw(st.integers(0, len(blob)))]
    for _ in range(data.draw(st.integers(0, 8))):
        if blob:
            hot = data.draw(st.sampled_from([0, 0x40, 0x200, len(blob) - 0x400]))  # headers, notes, tables
            i = min(len(blob) - 1, max(0, hot + data.draw(st.integers(0, 0x3FF))))
            blob[i] = data.draw(st.integers(0, 255))
    try:
        co = CodeObject.parse(bytes(blob))
    except CodeObjectError as e:
        assert str(e)
    else:
        if co.image_size < 1 << 26:
            image = co.image(0x1000)
            for k in co.kernels.values():
                assert len(k.code) == 0 or k.entry + len(k.code) <= len(image)


CORPUS = sorted((Path(__file__).parent / "kernels" / "run").glob("*.cl"))


@pytest.mark.parametrize("arch, opt", CONFIGS, ids=["-".join(c) for c in CONFIGS])
@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_kernels_compile(path, arch, opt):
    """Every execution-corpus source compiles for every family at -O0 and -O3 into the kernels it declares."""
    src = path.read_text()
    assert src.startswith("//"), f"{path.name} needs a header comment saying what it computes"
    code = "\n".join(line for line in src.splitlines() if not line.endswith("\\"))  # macro bodies aside
    names = re.findall(r"kernel\s+(?:__attribute__\(\(.*?\)\)\s+)?void\s+(\w+)", code)
    names += re.findall(r"^ROUNDING\((\w+),", src, re.M)
    co = CodeObject.parse(opencl.compile_cl(src, arch, opt))
    assert names and sorted(co.kernels) == sorted(names)
    header = "".join(line for line in src.splitlines(keepends=True) if line.startswith("//"))
    for name in names:
        assert re.search(rf"\b{name}\b", header), f"the header comment of {path.name} does not describe {name}"
    if path.stem == "private_scratch":
        k = co.kernels["spill"]
        assert k.metadata[".vgpr_spill_count"] > 0 and k.private_segment_fixed_size > 0
        assert k.descriptor.rsrc2.enable_private_segment
        assert co.kernels["private_index"].private_segment_fixed_size > 0


def _random_directives(arch: str, rng: random.Random) -> dict[str, int]:
    """A random but valid `.amdhsa_kernel` block for `arch` (what llvm-mc accepts there)."""
    b = lambda: rng.randint(0, 1)  # noqa: E731
    d = {"group_segment_fixed_size": rng.randint(0, 65536), "private_segment_fixed_size": rng.randint(0, 1 << 16),
         "kernarg_size": rng.randint(0, 4096), "user_sgpr_dispatch_ptr": b(), "user_sgpr_queue_ptr": b(),
         "user_sgpr_kernarg_segment_ptr": b(), "user_sgpr_dispatch_id": b(), "user_sgpr_private_segment_size": b(),
         "uses_dynamic_stack": b(), "enable_private_segment": b(), "system_sgpr_workgroup_id_x": b(),
         "system_sgpr_workgroup_id_y": b(), "system_sgpr_workgroup_id_z": b(), "system_sgpr_workgroup_info": b(),
         "system_vgpr_workitem_id": rng.randint(0, 2), "next_free_vgpr": rng.randint(1, 256),
         "float_round_mode_32": rng.randint(0, 3), "float_round_mode_16_64": rng.randint(0, 3),
         "float_denorm_mode_32": rng.randint(0, 3), "float_denorm_mode_16_64": rng.randint(0, 3),
         "fp16_overflow": b(), "reserve_vcc": 0, "next_free_sgpr": rng.randint(1, 100),
         **{f"exception_{e}": b() for e in ("fp_ieee_invalid_op", "fp_denorm_src", "fp_ieee_div_zero",
                                            "fp_ieee_overflow", "fp_ieee_underflow", "fp_ieee_inexact",
                                            "int_div_zero")}}
    if arch == "gfx942":
        d["accum_offset"] = 4 * rng.randint(1, d["next_free_vgpr"] // 4 or 1)
        d["next_free_vgpr"] = max(d["next_free_vgpr"], d["accum_offset"])
        if d["user_sgpr_kernarg_segment_ptr"]:
            d["user_sgpr_kernarg_preload_length"] = rng.randint(0, 4)
            d["user_sgpr_kernarg_preload_offset"] = rng.randint(0, 20)
    else:
        d |= {"workgroup_processor_mode": b(), "memory_ordered": b(), "forward_progress": b(),
              "wavefront_size32": b()}
    if arch == "gfx1201":
        d["round_robin_scheduling"] = b()
    else:
        d |= {"dx10_clamp": b(), "ieee_mode": b()}
    implied = 2 * (d["user_sgpr_dispatch_ptr"] + d["user_sgpr_queue_ptr"] + d["user_sgpr_kernarg_segment_ptr"]
                   + d["user_sgpr_dispatch_id"]) + d["user_sgpr_private_segment_size"]
    d["user_sgpr_count"] = implied + d.get("user_sgpr_kernarg_preload_length", 0) + rng.randint(0, 2)
    return d


@pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_descriptor_fields_against_llvm_mc_encoding(arch, tmp_path):
    """llvm-mc encodes random `.amdhsa_*` settings; we must decode every one of them back."""
    rng = random.Random(arch)
    for _ in range(4):
        want = _random_directives(arch, rng)
        body = "\n".join(f"  .amdhsa_{k} {v}" for k, v in want.items())
        src = tmp_path / "kd.s"
        src.write_text(f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}"\n.text\n.p2align 8\nk:\n  s_endpgm\n.rodata\n'
                       f".p2align 6\n.amdhsa_kernel k\n{body}\n.end_amdhsa_kernel\n")
        obj = tmp_path / "kd.o"
        _tool("llvm-mc-19", "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-filetype=obj", str(src), "-o", str(obj))
        elf = ELFFile(io.BytesIO(obj.read_bytes()))
        sym = next(s for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name == "k.kd")
        raw = elf.get_section(sym["st_shndx"]).data()[sym["st_value"]:sym["st_value"] + 64]
        d = KernelDescriptor.parse(raw, arch)
        ours = _ours(d)
        granule = 4 if arch != "gfx942" and not want.get("wavefront_size32") else 8
        want["next_free_vgpr"] = -(-want["next_free_vgpr"] // granule) * granule
        checked = set(want) - {"reserve_vcc", "next_free_sgpr"}  # assembler inputs the descriptor does not hold as is
        assert {k: ours[k] for k in checked} == {k: want[k] for k in checked}


def test_target_comes_from_e_flags():
    """As in the ROCm loader: EF_AMDGPU_MACH and the xnack / sramecc fields of e_flags name the target; the
    metadata's amdhsa.target is optional (llvm-readelf-19 prints the same processor and features)."""
    data = _compiled("gfx1100", "-O3")
    at = data.index(b"amdhsa.target")
    co = CodeObject.parse(_with(data, at, b"amdhsa.tarXet"))
    assert (co.arch, co.target) == ("gfx1100", "amdgcn-amd-amdhsa--gfx1100")
    co = CodeObject.parse(_with(_compiled("gfx942", "-O3"), 48, (0xD4C).to_bytes(4, "little")))
    assert co.target == "amdgcn-amd-amdhsa--gfx942:sramecc+"
