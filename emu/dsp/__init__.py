"""Hexagon DSP (scalar core + 128-byte HVX): semantics compiled from the vendor's definitions, an LLVM-exact
decoder and disassembler, and a core that runs static Linux programs.

    vendor      QEMU's target/hexagon/imported/ (Qualcomm) from Debian's qemu 7.2 source package, cached
    cpp         the small C preprocessor the vendor files need
    isa         the instruction table: syntax, attributes, semantics text, encodings, duplexes, macros
    operands    operands read from the syntax strings
    syntax      parser of the semantics (C statements over the macros.def macros)
    library     which macros expand from macros.def (their parameter lists) and which are primitives
    fixups      the one table of missing or wrong definitions, with reasons
    tables      numeric tables the vendor text indexes but does not contain (seed ROMs, CABAC)
    ir, lower   typed IR (C types, HVX vectors) and the lowering to it
    pyback      Python backend (one function per instruction; generated source cached), runtime, ieee
    llvmback    LLVM backend (llvmfloat: floats); native: hot blocks run natively (native_core, native_packet,
                native_block emit them)
    coverage    python -m emu.dsp.coverage [--json]
    decode      words -> packets (parse bits, duplexes, immext, end-of-loop, new values); strategies
    disasm      LLVM syntax
    memory      paged VM with faults; core: a thread and packet execution; linux: ELF loader, syscalls
    __main__    python -m emu.dsp [-strace] PROGRAM: a qemu-hexagon drop-in

Checks: tools/dsp_llvm_agreement.py (llvm-mc-19 / llvm-objdump-19), tools/dsp_qemu_insn_diff.py and
tests/dsp_programs (qemu-hexagon), tools/bench_dsp.py (speed against qemu-hexagon).
"""
