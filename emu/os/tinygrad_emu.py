"""tinygrad's emulator entry point `test.mockgpu.amd.emu.run_asm`, served by hwemu's engine.

tinygrad's hardware-confirmed ISA tests (test/amd/hw in a tinygrad checkout) run instruction snippets through
`run_asm(lib, lib_sz, gx, gy, gz, lx, ly, lz, args_ptr, rsrc2, scratch_size, arch, user_data)` of tinygrad's own
emulator: raw code at host address `lib`, one dispatch of gx*gy*gz workgroups of lx*ly*lz work-items, s[0:1] =
`args_ptr` (or s0.. = `user_data`), workgroup ids and LDS from `rsrc2`, `scratch_size` private bytes per
work-item, wave32 for `arch` rdna3 / rdna4 and wave64 for cdna; the code's memory accesses use host addresses
(pointers into ctypes buffers the test made). Returns 0; a GPU fault raises `GPUFault` with its report.

Here the dispatch runs on hwemu's engine (every tier) through a GPU VM of its own, made for the call, in which
this process's pages are identity-mapped when the code first touches them (`HostVM`): readable pages become
readable, writable ones writable, and an address the process has not mapped is a GPU fault, as on hardware.
Waves start in the float modes of the descriptor tinygrad's hardware harness assembles (LLVM's .amdhsa
defaults: f32 denormals flushed, f16/f64 kept, DX10_CLAMP and IEEE on where they exist) on the chip the vectors
were confirmed on (rdna3: gfx1100, rdna4: gfx1201, cdna: gfx950).

This entry point is only for those tests: the caller's buffers must stay mapped for the call (tinygrad's
emulator asks the same). The other names of tinygrad's emulator module (`parse_pcode`, its pcode parser;
`sqtt_traces`) belong to tinygrad's emulator itself and come from the checkout's own test/mockgpu/amd/emu.py;
so does run_asm with tinygrad's PROFILE on, whose `sqtt_traces` are tinygrad's emulator's own:
test/amd/test_sqtt_encoder.py tests that encoder (hwemu's thread trace is the GPU's, emu.amd.sqtt).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import mmap
import sys

import numpy as np

from emu.amd.memory import PAGE, VA_LIMIT, VM, GPUFault
from emu.amd.usermem import host_array

# tinygrad's arch name -> (chip, wave size, COMPUTE_PGM_RSRC1 of the hardware harness's descriptor: 256 VGPRs,
# float modes as above; llvm-mc-19 assembles run_program_hw's .amdhsa block to these)
ARCHES = {"rdna3": ("gfx1100", 32, 0x60AC001F), "rdna4": ("gfx1201", 32, 0x600C001F),
          "cdna": ("gfx950", 64, 0x00AC031F)}


class HostVM(VM):
    """A GPU VM over this process's address space: a page the GPU reaches is mapped at its own address when first
    touched, if the process has it mapped (its whole mapping, as far as the VM's neighbours allow)."""

    def _map_host(self, va: int) -> bool:
        """Map the host mapping holding `va` (readable; writable if the process may write it); False if none."""
        if not 0 <= va < VA_LIMIT or super().mapping(va) is not None:
            return False
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                if lo <= va < hi:
                    break
            else:
                return False
        if perms[0] != "r":
            return False
        with self._lock:
            ix = self.index
            i = int(np.searchsorted(ix.starts, np.uint64(va), side="right"))
            lo = max(lo, int(ix.ends[i - 1]) if i else 0)
            hi = min(hi, int(ix.starts[i]) if i < len(ix.maps) else VA_LIMIT, VA_LIMIT)
            self.map(lo, host_array(lo, hi - lo), writable=perms[1] == "w", name=f"host {lo:#x}")
        return True

    def mapping(self, va: int):
        m = super().mapping(va)
        return m if m is not None or not self._map_host(va) else super().mapping(va)

    def _translate(self, addr, nbytes: int, active, write: bool):
        while True:
            try:
                return super()._translate(addr, nbytes, active, write)
            except GPUFault as e:
                rec = e.record
                ends = [a + nbytes - 1 for a in rec.addresses]
                if rec.kind != "unmapped" or not [a for a in (*rec.addresses, *ends) if self._map_host(a)]:
                    raise


def _check(name: str, value, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"run_asm: {name} must be an integer in [{lo}, {hi}], not {value!r}")
    return value


def run_asm(lib: int, lib_sz: int, gx: int, gy: int, gz: int, lx: int, ly: int, lz: int, args_ptr: int,
            rsrc2: int = 0x19C, scratch_size: int = 0, arch: str = "rdna3",
            user_data: list[int] | None = None) -> int:
    """Run the code at host address `lib` as one dispatch on hwemu (see the module docstring); returns 0."""
    from emu.amd import target
    from emu.amd.compute import ComputeRegisters, launch, scratch_slots, tmpring
    from emu.amd.hw.kd import Rsrc1, Rsrc2
    if arch not in ARCHES:
        raise ValueError(f"run_asm: arch {arch!r}: expected one of {', '.join(ARCHES)}")
    chip, lanes, rsrc1 = ARCHES[arch]
    _check("lib", lib, 1, VA_LIMIT - 1)
    _check("lib_sz", lib_sz, 1, VA_LIMIT - lib)
    grid = tuple(_check(n, v, 1, 0xFFFFFFFF) for n, v in (("gx", gx), ("gy", gy), ("gz", gz)))
    block = tuple(_check(n, v, 1, 1024) for n, v in (("lx", lx), ("ly", ly), ("lz", lz)))
    if block[0] * block[1] * block[2] > 1024:
        raise ValueError(f"run_asm: a workgroup of {block} has more than 1024 work-items")
    r2 = Rsrc2.decode(_check("rsrc2", rsrc2, 0, 0xFFFFFFFF))
    _check("scratch_size", scratch_size, 0, 1 << 24)
    sgprs = [_check("args_ptr", args_ptr, 0, (1 << 64) - 1) & 0xFFFFFFFF, args_ptr >> 32] if user_data is None \
        else [_check(f"user_data[{i}]", v, 0, 0xFFFFFFFF) for i, v in enumerate(user_data)]
    if len(sgprs) > r2.user_sgpr_count:
        raise ValueError(f"run_asm: {len(sgprs)} user SGPRs given, rsrc2 USER_SGPR_COUNT is {r2.user_sgpr_count}")
    profile = getattr(sys.modules.get("tinygrad.helpers"), "PROFILE", None)
    if profile is not None and profile.value:  # an SQTT trace is asked for: tinygrad's emulator writes it
        return tinygrads_own("run_asm")(lib, lib_sz, gx, gy, gz, lx, ly, lz, args_ptr, rsrc2, scratch_size, arch,
                                        user_data)
    gpu = _HostGPU(target.get(chip))
    nwaves = -(-block[0] * block[1] * block[2] // lanes)
    try:
        ring = tmpring(gpu.chip, nwaves, scratch_size * lanes) if scratch_size else 0
    except ValueError:
        raise ValueError(f"run_asm: scratch_size {scratch_size} is more than a wave's scratch can hold") from None
    waves, wave_bytes = scratch_slots(gpu.chip, ring)
    # scratch is host memory identity-mapped like the rest, so it takes no VA the code might reach the host at
    scratch = np.frombuffer(mmap.mmap(-1, max(waves * wave_bytes, PAGE)), np.uint8)
    gpu.vm.map(scratch.ctypes.data, scratch, name="scratch")
    regs = ComputeRegisters(lib, Rsrc1.decode(rsrc1), r2, tuple(sgprs), block, lanes == 32, ring,
                            scratch.ctypes.data if scratch_size else 0)
    launch(gpu, regs, grid, "run_asm")
    return 0


class _HostGPU:
    """The GPU of one run_asm call: a HostVM, the chip, an instruction cache of its own."""

    def __init__(self, chip):
        from emu.amd.icache import InstructionCache
        self.vm, self.chip, self.sqtt, self.perfmon = HostVM(), chip, None, None
        self.code = InstructionCache(self.vm, chip.arch)


def tinygrads_own(name: str):
    """`name` of tinygrad's own emulator module, loaded from the checkout (as OWN, beside this module)."""
    own = sys.modules.get(OWN)
    if own is None:
        try:
            import test.mockgpu.amd as pkg  # a tinygrad checkout's (CPython's own `test` package has no mockgpu)
            spec = importlib.machinery.PathFinder.find_spec("emu", pkg.__path__)
        except ImportError:
            spec = None
        if spec is None:
            raise AttributeError(f"test.mockgpu.amd.emu.{name} is tinygrad's emulator's own (hwemu serves "
                                 "run_asm); no tinygrad checkout with test/mockgpu/amd/emu.py is importable")
        own = importlib.util.module_from_spec(importlib.util.spec_from_file_location(OWN, spec.origin))
        sys.modules[OWN] = own
        try:
            own.__spec__.loader.exec_module(own)
        except BaseException:
            del sys.modules[OWN]
            raise
    return getattr(own, name)


def __getattr__(name: str):
    """Names of tinygrad's emulator module that hwemu does not serve: tinygrad's own (not the import system's
    probes, e.g. `__path__`)."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return tinygrads_own(name)


OWN = "test.mockgpu.amd.tinygrad_emu"
