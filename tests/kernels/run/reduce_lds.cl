// Per-workgroup reductions through LDS with barriers (tree reduction, halving strides).
// reduce_sum_u32: partial[g] = sum of in[i] (uint32, wrap-around) over the workgroup's items i = g * B + l < n
//   (items at i >= n contribute 0). numpy: np.add.reduceat over blocks of B, as uint32. Exact.
// reduce_max_f32: partial[g] = max of in[i] over the same items (items at i >= n contribute -INFINITY).
//   Max is exact and independent of order: numpy np.max per block (finite inputs, no NaN).
// Launch: 1-D, block size B a power of two <= 256 (the LDS arrays hold 256), grid = ceil(n / B) groups.
kernel void reduce_sum_u32(global const uint *in, global uint *partial, int n) {
  __local uint s[256];
  uint l = get_local_id(0), i = get_global_id(0);
  s[l] = i < (uint)n ? in[i] : 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint stride = get_local_size(0) / 2; stride > 0; stride >>= 1) {
    if (l < stride) s[l] += s[l + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) partial[get_group_id(0)] = s[0];
}

kernel void reduce_max_f32(global const float *in, global float *partial, int n) {
  __local float s[256];
  uint l = get_local_id(0), i = get_global_id(0);
  s[l] = i < (uint)n ? in[i] : -INFINITY;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint stride = get_local_size(0) / 2; stride > 0; stride >>= 1) {
    if (l < stride) s[l] = fmax(s[l], s[l + stride]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) partial[get_group_id(0)] = s[0];
}
