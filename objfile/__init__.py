"""Object files both sides of the device read: ELF (objfile.elf) and HSA code objects (objfile.codeobj; their
kernarg segments: objfile.kernargs).

A leaf package: it imports neither the emulator (emu) nor the host runtime (stack), which both import it. The
host runtime loads code objects with it; emu's clients of the device (the runner, the CLI, the disassembler, fault
reports) and the Hexagon loader read their files with it. The device model itself reads no files: it reads kernel
descriptors from memory with the hardware's own layout (emu.amd.hw).
"""
