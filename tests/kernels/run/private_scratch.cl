// Private (scratch) memory: a private array indexed at run time, and a kernel that must spill registers.
// private_index: per work-item i (one output per launched item; n = number of elements of `in`):
//   p[k] = in[(i + k) % n] + k for k < 64; a = in[i % n];
//   for k in 0..7: p[(a + 5k) & 63] ^= a >> k; a = p[(a * 7 + k) & 63]   (uint32 wrap-around, in this order)
//   out[i] = a + p[i & 63]. Exact (numpy: the same steps on uint32 arrays, vectorised over i).
//   Launch: 1-D, any block size; out holds one element per launched work-item.
// spill: v[k] = in[i * 48 + k] for k < 48; `rounds` times: for k = 0..47 in order:
//   v[k] = v[k] * 3 + (v[(k + 7) % 48] ^ r)   (r = round number, uint32 wrap-around)
//   then out[i * 48 + k] = v[k]. All 48 values stay live while the VGPR budget is capped at 24
//   (amdgpu_num_vgpr), so the compiler spills to scratch even at -O3. Exact.
//   Launch: 1-D, any block size; in and out hold 48 elements per launched work-item.
kernel void private_index(global const uint *in, global uint *out, int n) {
  uint i = get_global_id(0);
  uint p[64];
  for (int k = 0; k < 64; k++) p[k] = in[(i + k) % (uint)n] + k;
  uint a = in[i % (uint)n];
  for (int k = 0; k < 8; k++) {
    p[(a + 5 * k) & 63] ^= a >> k;
    a = p[(a * 7 + k) & 63];
  }
  out[i] = a + p[i & 63];
}

#define NV 48
kernel __attribute__((amdgpu_num_vgpr(24))) void spill(global const uint *in, global uint *out, int rounds) {
  uint i = get_global_id(0);
  uint v[NV];
#pragma unroll
  for (int k = 0; k < NV; k++) v[k] = in[i * NV + k];
  for (int r = 0; r < rounds; r++) {
#pragma unroll
    for (int k = 0; k < NV; k++) v[k] = v[k] * 3u + (v[(k + 7) % NV] ^ (uint)r);
  }
#pragma unroll
  for (int k = 0; k < NV; k++) out[i * NV + k] = v[k];
}
