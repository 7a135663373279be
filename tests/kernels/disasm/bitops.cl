__kernel void bits(__global uint *out, __global const uint *a, __global const ulong *b, uint s) {
  int i = get_global_id(0);
  uint x = a[i];
  ulong y = b[i];
  out[i] = popcount(x) + clz(x) + (uint)popcount(y) + (uint)clz(y) + ((x >> (s & 31)) | (x << (32 - (s & 31))))
         + ((x & 0xff00ff00u) >> 8) + (~x & s) + (uint)(y >> 40) + ((x << 5) | (x >> 27)) * (x >> 16 & 0xf);
}
