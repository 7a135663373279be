"""Bounded resources and checked arguments (issue 12, items 2 and 5): every size a code object or a caller gives
is checked against the limits of objfile.codeobj before anything is allocated, with an error naming the field,
its value and the limit; buffers and code objects are released by free/unload; kernel arguments are checked
against the metadata's types and ranges, never reinterpreted."""
from __future__ import annotations

import dataclasses
import functools
import gc
import os
import re
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.amd.limits import LimitError as EmuLimitError
from objfile import codeobj, kernargs
from objfile.codeobj import CodeObject, CodeObjectError, CodeObjectLimitError, KernArg, LimitError
from objfile.kernargs import pack_kernargs
from stack.codegen import opencl
from tools import fuzz

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 build the code objects")


@functools.cache
def saxpy(arch: str = "gfx1100") -> fuzz.Target:
    return fuzz.Target(opencl.compile_cl(fuzz.SAXPY, arch))


def with_u32(blob: bytes, at: int, value: int, fmt: str = "<I") -> bytes:
    b = bytearray(blob)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def descriptor_field(t: fuzz.Target, offset: int, value: int) -> bytes:
    return with_u32(t.blob, t.descriptors["saxpy"] + offset, value)


def resident() -> int:
    """Bytes of host memory this process has resident now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def gpu_and_args(arch: str = "gfx1100"):
    from emu.amd import GPU
    gpu = GPU(arch)
    return gpu, [gpu.alloc(4096), gpu.alloc(4096), np.float32(2), np.uint32(64)]


# -- item 2: sizes from code objects -------------------------------------------------------------------------------
@pytest.mark.parametrize("offset,field,value,limit", [
    (8, "descriptor kernarg_size", 1 << 30, "64 KiB"),
    (0, "descriptor group_segment_fixed_size", 1 << 20, "64 KiB"),
    (4, "descriptor private_segment_fixed_size", 1 << 24, str(((1 << 15) - 1) * 256 // 32)),
])
def test_descriptor_sizes_are_bounded_before_loading(offset, field, value, limit):
    gpu, _ = gpu_and_args()
    before = len(gpu.vm.mappings)
    with pytest.raises(CodeObjectLimitError, match=re.escape(f"kernel 'saxpy': {field} {value} exceeds the {limit} "
                                                             "limit")):
        gpu.load(descriptor_field(saxpy(), offset, value))
    assert len(gpu.vm.mappings) == before  # nothing was allocated


@pytest.mark.parametrize("key,value,message", [
    (".kernarg_segment_size", 1 << 30, "metadata .kernarg_segment_size 1073741824 exceeds the 64 KiB limit"),
    (".group_segment_fixed_size", 1 << 17, "metadata .group_segment_fixed_size 131072 exceeds the 64 KiB limit"),
    (".private_segment_fixed_size", -1, "metadata .private_segment_fixed_size -1 is negative"),
    (".max_flat_workgroup_size", 1 << 16, "metadata .max_flat_workgroup_size 65536 exceeds the 1024 limit"),
])
def test_metadata_sizes_are_bounded(key, value, message):
    blob = saxpy().with_metadata(key, value)
    with pytest.raises(CodeObjectLimitError, match=re.escape(f"kernel 'saxpy': {message}")):
        CodeObject.parse(blob)


def test_segment_span_is_bounded():
    t = saxpy()
    last = t.phoff + 56 * 3  # the third PT_LOAD (the data segment) of the saxpy code object
    assert int.from_bytes(t.blob[last:last + 4], "little") == 1
    end = (1 << 30) + int.from_bytes(t.blob[last + 40:last + 48], "little")  # the new p_vaddr + p_memsz
    with pytest.raises(CodeObjectLimitError, match=re.escape(f"PT_LOAD segment 3: p_vaddr + p_memsz {end} exceeds the "
                                                             "256 MiB limit")):
        CodeObject.parse(with_u32(t.blob, last + 16, 1 << 30, "<Q"))


def test_a_sparse_image_is_not_made_resident():
    """A segment moved 200 MiB up (within the limit) maps 200 MiB of VA but only the file's pages become host
    memory; unloading unmaps it."""
    t = saxpy()
    gpu, _ = gpu_and_args()
    before = len(gpu.vm.mappings)
    rss = resident()
    prog = gpu.load(with_u32(t.blob, t.phoff + 56 * 3 + 16, 200 << 20, "<Q"))
    assert prog.co.image_size > 200 << 20 and resident() - rss < 16 << 20
    gpu.unload(prog)
    assert len(gpu.vm.mappings) == before


def test_code_object_files_are_bounded(tmp_path):
    big = tmp_path / "big.hsaco"
    with open(big, "wb") as f:
        f.truncate(codeobj.MAX_CODE_OBJECT + 1)  # sparse: nothing is written
    with pytest.raises(CodeObjectLimitError, match="big.hsaco: larger than the 256 MiB limit of a code object"):
        codeobj.read_file(big)
    with pytest.raises(CodeObjectLimitError, match="/dev/zero: larger than the 64 KiB limit of a kernarg segment"):
        codeobj.read_file("/dev/zero", codeobj.MAX_KERNARG_SEGMENT, "a kernarg segment")
    with pytest.raises(TypeError):  # bytes(n) would make n zero bytes
        CodeObject.parse(10**12)


# -- item 2: sizes from a launch --------------------------------------------------------------------------------------
@pytest.mark.parametrize("grid,block,message", [
    ((1 << 26,), (64,), "work-items in x (grid 67108864 x block 64) 4294967296 exceeds the 2^32 - 1 limit"),
    ((1 << 31, 1, 1), (64,), "work-items in x (grid 2147483648 x block 64) 137438953472 exceeds the 2^32 - 1 limit"),
    ((1 << 16, 1 << 16), (1,), "work-items (grid (65536, 65536, 1) x block (1, 1, 1)) 4294967296 exceeds the "
                               "2^32 - 1 limit"),
])
def test_grids_of_2_to_the_32_work_items_are_refused(grid, block, message):
    gpu, args = gpu_and_args()
    prog = gpu.load(saxpy().blob)
    with pytest.raises(EmuLimitError, match=re.escape(f"kernel 'saxpy': {message}")):
        gpu.launch(prog, "saxpy", grid=grid, block=block, args=args)


def test_launch_sizes_are_bounded():
    gpu, args = gpu_and_args()
    prog = gpu.load(saxpy().blob)
    n = len(gpu.vm.mappings)
    with pytest.raises(EmuLimitError, match=re.escape("kernel 'saxpy': LDS bytes (group_segment_fixed_size + "
                                                   "dynamic_lds) 1048576 exceeds the 64 KiB limit")):
        gpu.launch(prog, "saxpy", block=64, args=args, dynamic_lds=1 << 20)
    with pytest.raises(ValueError, match="dynamic_lds must be a non-negative int, not -1"):
        gpu.launch(prog, "saxpy", block=64, args=args, dynamic_lds=-1)
    with pytest.raises(EmuLimitError, match="block .* has 2048 work-items; kernel 'saxpy' allows at most 256"):
        gpu.launch(prog, "saxpy", block=2048, args=args)
    with pytest.raises(EmuLimitError, match="kernel 'saxpy': raw kernargs size 65537 exceeds the 64 KiB limit"):
        gpu.launch(prog, "saxpy", kernargs=bytes(65537))
    with pytest.raises(ValueError, match=r"grid 1\.5: give 1 to 3 integers"):
        gpu.launch(prog, "saxpy", grid=1.5, args=args)
    assert len(gpu.vm.mappings) == n


KERNEL_CODE_PROPERTIES, WAVEFRONT_SIZE32 = 56, 1 << 10  # AMDGPUUsage: the kernel descriptor's u16 at byte 56, bit 10


def test_a_wave32_bit_on_a_wave64_chip_is_checked_as_wave64():
    """gfx942 has no wave32: a descriptor asking for it runs wave64 (Generation.lanes), so a work-item's private
    segment is checked against a wave's largest scratch over 64 lanes, not 32 (the launch was refused by a field
    encoder's overflow, naming no kernel)."""
    t = saxpy("gfx942")
    kd = t.descriptors["saxpy"]
    props = struct.unpack_from("<H", t.blob, kd + KERNEL_CODE_PROPERTIES)[0]
    blob = with_u32(descriptor_field(t, 4, 200000), kd + KERNEL_CODE_PROPERTIES, props | WAVEFRONT_SIZE32, "<H")
    gpu, args = gpu_and_args("gfx942")
    prog = gpu.load(blob)  # the host's check: 200000 is below ((1 << 13) - 1) KiB / 32
    with pytest.raises(EmuLimitError, match=re.escape("kernel 'saxpy': private segment bytes per work-item (wave64) "
                                                      f"200000 exceeds the {((1 << 13) - 1) * 1024 // 64} limit")):
        gpu.launch(prog, "saxpy", block=64, args=args)

def test_alloc_of_absurd_sizes_is_a_value_error(monkeypatch):
    from emu.amd import GPU
    from emu.amd.memory import VM
    gpu = GPU("gfx1100")
    for n in (1 << 40, 10**30, codeobj.MAX_BUFFER + 1):
        with pytest.raises(EmuLimitError, match=f"alloc: size {n} exceeds the 4 GiB limit"):
            gpu.alloc(n)
    for bad in (0, -1, 1.5, True, "1", None):
        with pytest.raises(ValueError, match="alloc: size must be a positive integer"):
            gpu.alloc(bad)

    def no_memory(*args, **kw):
        raise MemoryError
    monkeypatch.setattr(VM, "alloc", no_memory)  # the host is out of memory below the limit
    with pytest.raises(EmuLimitError, match="buffer: the host has no memory left for 4096 bytes"):
        gpu.alloc(4096)


# -- item 2: stack.Device loads and launches under the same limits ---------------------------------------------------
@pytest.fixture(scope="module")
def device():
    from stack import Device
    dev = Device("MOCKKFD+AMD:gfx1100")
    yield dev
    dev.close()


def test_device_alloc_of_absurd_sizes_is_a_limit_error(device):
    live = len(device.memory.live)
    for n in (codeobj.MAX_BUFFER + 1, 1 << 40):
        with pytest.raises(LimitError, match=f"alloc: size {n} exceeds the 4 GiB limit"):
            device.alloc(n)
    assert len(device.memory.live) == live


@pytest.mark.parametrize("offset,field,value,limit", [
    (8, "descriptor kernarg_size", 1 << 30, "64 KiB"),
    (0, "descriptor group_segment_fixed_size", 1 << 20, "64 KiB"),
    (4, "descriptor private_segment_fixed_size", 1 << 24, str(((1 << 15) - 1) * 256 // 32)),
])
def test_device_program_checks_sizes_before_allocating(device, offset, field, value, limit):
    live = len(device.memory.live)
    with pytest.raises(CodeObjectLimitError, match=re.escape(f"kernel 'saxpy': {field} {value} exceeds the {limit} "
                                                             "limit")):
        device.program(descriptor_field(saxpy(), offset, value), "saxpy")
    assert len(device.memory.live) == live


def test_device_program_copies_no_whole_image():
    """A segment moved 200 MiB up (within the 256 MiB span limit): the program loads its file data and zeroes its
    .bss through SDMA, without a host copy of the image, and runs."""
    from stack import Device
    t = saxpy()
    blob = with_u32(t.blob, t.phoff + 56 * 3 + 16, 200 << 20, "<Q")
    with Device("MOCKKFD+AMD:gfx1100") as dev:
        tracemalloc.start()
        prog = dev.program(blob, "saxpy")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert prog.code.size > 200 << 20 and peak < 16 << 20, f"{peak} bytes allocated by the load"
        y, x = dev.alloc(256), dev.alloc(256)
        dev.copyin(y, np.ones(64, np.float32))
        dev.copyin(x, np.arange(64, dtype=np.float32))
        prog(y, x, np.float32(2), np.uint32(64), global_size=(1,), local_size=(64,))
        np.testing.assert_array_equal(np.frombuffer(dev.copyout(y), np.float32), 2 * np.arange(64) + 1)


def test_device_grids_of_2_to_the_32_work_items_are_refused(device):
    prog = device.program(saxpy().blob, "saxpy")
    y = device.alloc(256)
    scratch = device.scratch
    for groups, local, message in [
            ((1 << 26,), (64,), "work-items in x (grid 67108864 x block 64) 4294967296 exceeds the 2^32 - 1 limit"),
            ((1 << 16, 1 << 16), (1,), "work-items (grid (65536, 65536, 1) x block (1, 1, 1)) 4294967296 exceeds the "
                                       "2^32 - 1 limit")]:
        with pytest.raises(LimitError, match=re.escape(f"kernel 'saxpy': {message}")):
            prog(y, y, np.float32(2), np.uint32(64), global_size=groups, local_size=local)
    assert device.scratch is scratch and device.launches == 0


# -- item 2: free and unload -----------------------------------------------------------------------------------------
def test_free_and_unload_release_mappings_and_host_memory():
    gpu, _ = gpu_and_args()
    idle = len(gpu.vm.mappings)
    code = saxpy().blob

    def cycle():
        y, x = gpu.alloc(1 << 16), gpu.alloc(1 << 16)
        gpu.write(x, np.ones(1 << 14, np.float32))
        with gpu.load(code) as prog:
            gpu.launch(prog, "saxpy", grid=1, block=64, args=[y, x, 2.0, 64])
        gpu.free(y)
        gpu.free(x)
    cycle()  # warm the decoder's and planner's caches
    gc.collect()
    tracemalloc.start()
    first = tracemalloc.take_snapshot()
    for _ in range(100):
        cycle()
    gc.collect()  # decoded programs are reference cycles: garbage, once collected
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(first, "filename"))
    tracemalloc.stop()
    assert len(gpu.vm.mappings) == idle
    assert grown < 1 << 20, f"{grown} bytes kept after 100 load/launch/unload cycles"


def test_freed_buffers_and_unloaded_code_cannot_be_used():
    gpu, (y, x, a, n) = gpu_and_args()
    prog = gpu.load(saxpy().blob)
    gpu.free(x)
    with pytest.raises(ValueError, match=f"read: buffer at {x.addr:#x} was freed"):
        gpu.read(x)
    with pytest.raises(ValueError, match=f"free: buffer at {x.addr:#x} was freed"):
        gpu.free(x)
    with pytest.raises(ValueError, match=f"launch argument 1: buffer at {x.addr:#x} was freed"):
        gpu.launch(prog, "saxpy", block=64, args=[y, x, a, n])
    gpu.unload(prog)
    with pytest.raises(ValueError, match="launch: the code object was unloaded"):
        gpu.launch(prog, "saxpy", block=64, args=[y, y, a, n])
    with pytest.raises(ValueError, match="unload: the code object was unloaded"):
        gpu.unload(prog)


# -- item 5: arguments checked, not guessed -------------------------------------------------------------------------
def test_a_buffer_of_another_gpu_is_refused():
    gpu, (y, x, a, n) = gpu_and_args()
    other, (theirs, *_) = gpu_and_args()
    prog = gpu.load(saxpy().blob)
    assert theirs.addr == y.addr  # the same address in the other VM: accepting it would overwrite y
    for call in (lambda: gpu.launch(prog, "saxpy", block=64, args=[theirs, x, a, n]),
                 lambda: gpu.write(theirs, b"1234"), lambda: gpu.read(theirs), lambda: gpu.free(theirs)):
        with pytest.raises(ValueError, match=f"buffer at {theirs.addr:#x} belongs to another GPU"):
            call()
    with pytest.raises(ValueError, match="launch: the code object was loaded into another GPU"):
        other.launch(prog, "saxpy", block=64, args=[theirs, theirs, a, n])


@pytest.mark.parametrize("index,value,message", [
    (2, 3, "2 (float, 4 bytes): an int (3) is not a float value"),
    (2, np.int32(3), "2 (float, 4 bytes): a numpy int32 is not a float value"),
    (2, 1e300, "2 (float, 4 bytes): 1e+300 is outside the range of a 32-bit float"),
    (2, np.float64(2), "2 (float, 4 bytes) is 4 bytes, the value is 8"),
    (3, 2.5, "3 (uint, 4 bytes): cannot pack float 2.5"),
    (3, -1, "3 (uint, 4 bytes): -1 does not fit 4 bytes as an unsigned integer"),
    (3, np.int32(-1), "3 (uint, 4 bytes): -1 does not fit 4 bytes as an unsigned integer"),
    (3, 1 << 32, "3 (uint, 4 bytes): 4294967296 does not fit 4 bytes as an unsigned integer"),
    (3, np.float32(1), "3 (uint, 4 bytes): a numpy float32 is not a uint value"),
    (3, True, "3 (uint, 4 bytes): True is a bool, not a uint value"),
    (3, "64", "3 (uint, 4 bytes): cannot pack a str"),
    (0, 2.0, "0 (float*, 8 bytes): cannot pack float 2.0"),
])
def test_kernel_arguments_of_the_wrong_type_or_range(index, value, message):
    gpu, args = gpu_and_args()
    prog = gpu.load(saxpy().blob)
    args[index] = value
    with pytest.raises(ValueError, match=re.escape(f"kernel 'saxpy' argument {message}")):
        gpu.launch(prog, "saxpy", block=64, args=args)


def kernel_with(type_name: str, size: int, value_kind: str = "by_value") -> codeobj.Kernel:
    k = CodeObject.parse(saxpy().blob).kernels["saxpy"]
    return dataclasses.replace(k, args=(KernArg(0, size, value_kind, "v", type_name),), kernarg_segment_size=size)


TYPES = st.sampled_from([("float", 4), ("half", 2), ("double", 8), ("int", 4), ("uint", 4), ("char", 1),
                         ("uchar", 1), ("long", 8), ("ulong", 8), ("short", 2), ("float4", 16), ("int2", 8),
                         ("float*", 8), ("", 4), ("struct S", 12)])
VALUES = st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=False, width=64), st.booleans(),
                   st.binary(max_size=20), st.text(max_size=3), st.none(),
                   st.sampled_from([np.float32(1.5), np.float16(-2), np.float64(3), np.int8(-1), np.uint16(7),
                                    np.int64(-5), np.uint64(1 << 63), np.zeros(4, np.float32)]))


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(TYPES, VALUES)
def test_kernel_argument_packing_never_reinterprets(ts, value):
    """Packing either keeps the value (read back by the argument's type) or raises ValueError: never another
    exception, never other bits."""
    type_name, size = ts
    k = kernel_with(type_name, size, "global_buffer" if type_name.endswith("*") else "by_value")
    try:
        raw = pack_kernargs(k, [value])[:size]
    except ValueError:
        return
    kind, scalar = kernargs.arg_type(k.args[0])
    if isinstance(value, (bytes, np.ndarray)) or isinstance(value, np.generic) and not kind:
        assert raw == bytes(value.tobytes() if hasattr(value, "tobytes") else value)
    elif kind == "float":
        assert isinstance(value, (float, np.floating)) and scalar
        got = struct.unpack(kernargs.FLOAT_FORMATS[size], raw)[0]
        assert got == np.asarray(value).astype({2: np.float16, 4: np.float32, 8: np.float64}[size]) or \
            np.isnan(got) == np.isnan(value)
    else:
        assert isinstance(value, (int, np.integer)) and not isinstance(value, float)
        signed = kind == "int" or (not kind and value < 0)
        assert int.from_bytes(raw, "little", signed=signed) == int(value)


# -- hypothesis over the code-object parser ----------------------------------------------------------------------------
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(fuzz.ARCHES), st.integers(0, 2**32 - 1))
def test_corrupted_code_objects_parse_or_raise_a_named_error(arch, seed):
    """Any mutation of a real code object parses (then every size is within the limits) or raises CodeObjectError;
    the disassembler's reader raises DisasmError. Nothing else escapes."""
    from emu.amd.asm.disasm import DisasmError, code_object_instructions
    t = saxpy(arch)
    blob = fuzz.mutate(t.blob, np.random.default_rng(seed), t)
    try:
        co = CodeObject.parse(blob)
    except CodeObjectError:
        pass
    else:
        assert co.image_size <= codeobj.MAX_IMAGE
        for k in co.kernels.values():
            assert max(k.kernarg_segment_size, k.descriptor.kernarg_size) <= codeobj.MAX_KERNARG_SEGMENT
            assert max(k.group_segment_fixed_size, k.descriptor.group_segment_fixed_size) <= codeobj.max_lds(arch)
    try:
        code_object_instructions(blob, arch)
    except DisasmError:
        pass
