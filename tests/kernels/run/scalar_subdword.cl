// scalar_subdword: uniform loads of bytes and shorts at any offset, which clang-19 compiles to RDNA4's
// s_load_u8 / s_load_i8 / s_load_u16 / s_load_i16 (older chips: vector loads). For each work-item k:
//   load_u8: out[k] = b[i] (zero-extended)   load_i8: out[k] = (char)b[i] (sign-extended)
//   load_u16: out[k] = h[i] (zero-extended)  load_i16: out[k] = (short)h[i] (sign-extended)
// Exact (numpy indexing).
__kernel void load_u8(__global int *out, __constant uchar *b, int i) { out[get_global_id(0)] = b[i]; }
__kernel void load_i8(__global int *out, __constant char *b, int i) { out[get_global_id(0)] = b[i]; }
__kernel void load_u16(__global int *out, __constant ushort *h, int i) { out[get_global_id(0)] = h[i]; }
__kernel void load_i16(__global int *out, __constant short *h, int i) { out[get_global_id(0)] = h[i]; }
