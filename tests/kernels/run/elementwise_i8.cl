// ew_i8: out[i] = (char)((a[i] * b[i]) + (a[i] >> 1) - (b[i] ^ 0x5a)), for i < n.
// C integer promotion: a and b are sign-extended to int, the expression is computed in int32 and its low 8 bits
// stored; numpy: ((a.astype(np.int32) * b + (a >> 1) - (b ^ 0x5a)).astype(np.int8)). Exact.
// Launch: 1-D, any block size; threads at i >= n do nothing.
kernel void ew_i8(global const char *a, global const char *b, global char *out, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = (char)((a[i] * b[i]) + (a[i] >> 1) - (b[i] ^ 0x5a));
}
