"""Kernel compilation for the host stack: OpenCL C via clang-19, LLVM IR via llvmlite."""
