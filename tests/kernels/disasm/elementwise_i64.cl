__kernel void i64ops(__global long *out, __global const long *a, __global const ulong *b, long k) {
  int i = get_global_id(0);
  long x = a[i];
  ulong y = b[i];
  out[i] = (x * k + (long)(y >> 3)) ^ (x << 7) | (long)(y / 13u) - (x % 5) + (x < 0 ? -x : x);
}
