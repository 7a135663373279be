"""AMD GPUs: ISA tables (emu.amd.isa), decoder and disassembler (emu.amd.decode, emu.amd.disasm),
the kernel runner (GPU, GPUFault) and free-standing waves (Wave)."""
from emu.amd.decode import Inst, Operand, decode

__all__ = ["Inst", "Operand", "decode", "GPU", "GPUFault", "Wave"]

_LAZY = {"GPU": "emu.amd.gpu", "GPUFault": "emu.amd.memory", "Wave": "emu.amd.wave"}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'emu.amd' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(mod), name)
