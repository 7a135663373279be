"""LLVM-syntax disassembly of decoded AMD instructions: `text.render` (str(Inst)), the printers per encoding
(alu, memory), operand spellings (operands, spell, syntax, names) and the `disasm` CLI."""
