// Global and LDS atomics; every checked result is independent of the order the atomics happen in.
// atomics_global: for i < n, v = in[i]:
//   hist[v & 15] += 1; stats[0] = max(stats[0], v); stats[1] = min(stats[1], v); stats[2] |= 1 << (v & 31);
//   stats[3] ^= v; stats[4] &= v | 0x80000000; stats[5] -= v; tickets[i] = old value of stats[6]++ (uint32).
//   With hist and stats zeroed except stats[1] = stats[4] = 0xffffffff: hist = bincount(in & 15, 16),
//   stats[0..5] = max, min, OR of bits, XOR, AND, -sum (mod 2**32), stats[6] = n and sorted(tickets) = arange(n).
// atomics_lds: per workgroup, LDS counters lh[16] (zeroed by the first 16 items) and a ticket counter:
//   for i < n: lh[in[i] & 15] += 1 and ltickets[i] = old value of the group's LDS ticket counter (incremented);
//   then hist[k] += lh[k] for k < 16 (global atomic add). With hist zeroed: hist = bincount(in & 15, 16), and
//   within each group the tickets of its items i < n are a permutation of 0..count-1.
// Launch: 1-D; atomics_lds needs blocks of at least 16 work-items.
kernel void atomics_global(global const uint *in, global uint *hist, global uint *stats, global uint *tickets,
                           int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  uint v = in[i];
  atomic_add(&hist[v & 15], 1u);
  atomic_max(&stats[0], v);
  atomic_min(&stats[1], v);
  atomic_or(&stats[2], 1u << (v & 31));
  atomic_xor(&stats[3], v);
  atomic_and(&stats[4], v | 0x80000000u);
  atomic_sub(&stats[5], v);
  tickets[i] = atomic_add(&stats[6], 1u);
}

kernel void atomics_lds(global const uint *in, global uint *hist, global uint *ltickets, int n) {
  __local uint lh[16];
  __local uint counter;
  uint l = get_local_id(0), i = get_global_id(0);
  if (l < 16) lh[l] = 0;
  if (l == 0) counter = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (i < (uint)n) {
    atomic_add(&lh[in[i] & 15], 1u);
    ltickets[i] = atomic_add(&counter, 1u);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l < 16) atomic_add(&hist[l], lh[l]);
}
