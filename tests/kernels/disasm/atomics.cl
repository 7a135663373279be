__kernel void histo(__global uint *hist, __global const uint *data, __global int *minmax, int n) {
  __local uint lh[64];
  int l = get_local_id(0);
  if (l < 64) lh[l] = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
    uint v = data[i];
    atomic_add(&lh[v & 63], 1u);
    atomic_min(&minmax[0], (int)v);
    atomic_max(&minmax[1], (int)v);
    atomic_xor(&hist[64], v);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l < 64) atomic_add(&hist[l], lh[l]);
  if (l == 0) atomic_xchg(&minmax[2], n);
}
