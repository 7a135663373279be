"""The kernel descriptor (AMDGPUUsage "Kernel Descriptor"; amdgpu_kd.h): its 64-byte layout and register fields.

The layout (llvm_amdhsa_kernel_descriptor_t) and the COMPUTE_PGM_RSRC1/2/3, KERNEL_CODE_PROPERTY_* and
KERNARG_PRELOAD_SPEC_* fields come from the vendor header (emu.amd.hw). The packet processor reads a descriptor
from GPU memory, so `parse` treats its bytes as untrusted: anything it cannot take is a DescriptorError naming the
field and where the descriptor was.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from emu.amd import hw
from emu.amd.hw.bits import Register, register_class

_T = hw.tables()["kd"]
_F = _T["fields"]
SIZE: int = _T["size"]
OFFSETS: dict[str, int] = {name: off for name, (off, _) in _T["layout"].items()}

Rsrc1 = register_class("Rsrc1", _F["rsrc1"], "COMPUTE_PGM_RSRC1 (the descriptor's word and the register).", __name__)
Rsrc2 = register_class("Rsrc2", _F["rsrc2"], "COMPUTE_PGM_RSRC2 (the descriptor's word and the register).", __name__)
Rsrc3Cdna = register_class("Rsrc3Cdna", {k: v for k, v in _F["rsrc3"].items() if k.startswith("gfx90a_")},
                           "COMPUTE_PGM_RSRC3 on gfx90a and later CDNA chips.", __name__)
CodeProperties = register_class("CodeProperties", _F["code_properties"],
                                "kernel_code_properties: the user SGPRs the kernel expects, wave32, dynamic stack.",
                                __name__)
KernargPreload = register_class("KernargPreload", _F["kernarg_preload"],
                                "kernarg_preload: kernarg dwords (offset, length) preloaded into user SGPRs.", __name__)
PRELOAD_PROLOGUE_BYTES = 256  # AMDGPUUsage "Preloaded Kernel Arguments": code for firmware without the feature

# (field, struct format) in layout order; offsets from the vendor layout
_WORDS = (("group_segment_fixed_size", "I"), ("private_segment_fixed_size", "I"), ("kernarg_size", "I"),
          ("kernel_code_entry_byte_offset", "q"), ("compute_pgm_rsrc3", "I"), ("compute_pgm_rsrc1", "I"),
          ("compute_pgm_rsrc2", "I"), ("kernel_code_properties", "H"), ("kernarg_preload", "H"))


class DescriptorError(ValueError):
    """A kernel descriptor the packet processor cannot run; the message names the field and the descriptor."""


@dataclass(frozen=True)
class KernelDescriptor:
    """A kernel descriptor as the packet processor reads it."""
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    kernel_code_entry_byte_offset: int  # signed, from the descriptor's own address
    rsrc1: Register
    rsrc2: Register
    rsrc3: int  # raw: its fields differ per generation (Rsrc3Cdna for gfx90a+)
    code_properties: Register
    kernarg_preload: Register

    @property
    def wave32(self) -> bool:
        return bool(self.code_properties.enable_wavefront_size32)

    @classmethod
    def parse(cls, data: bytes, where: str = "kernel descriptor") -> KernelDescriptor:
        """Decode SIZE bytes; DescriptorError naming `where` for any other length."""
        if len(data) != SIZE:
            raise DescriptorError(f"{where}: {len(data)} bytes, a kernel descriptor has {SIZE}")
        v = {name: struct.unpack_from("<" + fmt, data, OFFSETS[name])[0] for name, fmt in _WORDS}
        return cls(v["group_segment_fixed_size"], v["private_segment_fixed_size"], v["kernarg_size"],
                   v["kernel_code_entry_byte_offset"], Rsrc1(v["compute_pgm_rsrc1"]), Rsrc2(v["compute_pgm_rsrc2"]),
                   v["compute_pgm_rsrc3"], CodeProperties(v["kernel_code_properties"]),
                   KernargPreload(v["kernarg_preload"]))
