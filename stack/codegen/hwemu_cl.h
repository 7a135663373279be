// Work-item functions and the few OpenCL builtins our kernels use, for -nogpulib builds (no ROCm device
// libraries): ids from the amdgcn builtins, sizes from the HSA kernel dispatch packet, as the device libs do.
typedef struct {
  ushort header, setup, workgroup_size[3], reserved0;
  uint grid_size[3], private_segment_size, group_segment_size;
} hwemu_dispatch_packet;

#define HWEMU_DISPATCH ((__constant hwemu_dispatch_packet *)__builtin_amdgcn_dispatch_ptr())
#define HWEMU_OVL __attribute__((overloadable))

size_t HWEMU_OVL get_local_id(uint d) {
  return d == 0 ? __builtin_amdgcn_workitem_id_x() : d == 1 ? __builtin_amdgcn_workitem_id_y()
       : d == 2 ? __builtin_amdgcn_workitem_id_z() : 0;
}
size_t HWEMU_OVL get_group_id(uint d) {
  return d == 0 ? __builtin_amdgcn_workgroup_id_x() : d == 1 ? __builtin_amdgcn_workgroup_id_y()
       : d == 2 ? __builtin_amdgcn_workgroup_id_z() : 0;
}
size_t HWEMU_OVL get_local_size(uint d) { return d < 3 ? HWEMU_DISPATCH->workgroup_size[d] : 1; }
size_t HWEMU_OVL get_global_size(uint d) { return d < 3 ? HWEMU_DISPATCH->grid_size[d] : 1; }
size_t HWEMU_OVL get_num_groups(uint d) {
  return d < 3 ? (get_global_size(d) + get_local_size(d) - 1) / get_local_size(d) : 1;
}
size_t HWEMU_OVL get_global_id(uint d) { return get_group_id(d) * get_local_size(d) + get_local_id(d); }

void HWEMU_OVL barrier(cl_mem_fence_flags flags) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

#define HWEMU_ATOMIC(name, builtin, T, AS) \
  T HWEMU_OVL name(volatile AS T *p, T v) { return builtin((AS T *)p, v, __ATOMIC_RELAXED); }
#define HWEMU_ATOMICS(name, builtin) \
  HWEMU_ATOMIC(name, builtin, int, __global) HWEMU_ATOMIC(name, builtin, uint, __global) \
  HWEMU_ATOMIC(name, builtin, int, __local) HWEMU_ATOMIC(name, builtin, uint, __local)
HWEMU_ATOMICS(atomic_add, __atomic_fetch_add)
HWEMU_ATOMICS(atomic_sub, __atomic_fetch_sub)
HWEMU_ATOMICS(atomic_and, __atomic_fetch_and)
HWEMU_ATOMICS(atomic_or, __atomic_fetch_or)
HWEMU_ATOMICS(atomic_xor, __atomic_fetch_xor)
HWEMU_ATOMICS(atomic_min, __atomic_fetch_min)
HWEMU_ATOMICS(atomic_max, __atomic_fetch_max)
HWEMU_ATOMICS(atomic_xchg, __atomic_exchange_n)

int HWEMU_OVL popcount(int x) { return __builtin_popcount(x); }
uint HWEMU_OVL popcount(uint x) { return __builtin_popcount(x); }
long HWEMU_OVL popcount(long x) { return __builtin_popcountl(x); }
ulong HWEMU_OVL popcount(ulong x) { return __builtin_popcountl(x); }
int HWEMU_OVL clz(int x) { return x ? __builtin_clz(x) : 32; }
uint HWEMU_OVL clz(uint x) { return x ? __builtin_clz(x) : 32; }
long HWEMU_OVL clz(long x) { return x ? __builtin_clzl(x) : 64; }
ulong HWEMU_OVL clz(ulong x) { return x ? __builtin_clzl(x) : 64; }

#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define HWEMU_MATH1(name, builtin) \
  float HWEMU_OVL name(float x) { return builtin##f(x); } double HWEMU_OVL name(double x) { return builtin(x); } \
  half HWEMU_OVL name(half x) { return builtin##f16(x); }
#define HWEMU_MATH2(name, builtin) \
  float HWEMU_OVL name(float x, float y) { return builtin##f(x, y); } \
  double HWEMU_OVL name(double x, double y) { return builtin(x, y); } \
  half HWEMU_OVL name(half x, half y) { return builtin##f16(x, y); }
#define HWEMU_MATH3(name, builtin) \
  float HWEMU_OVL name(float x, float y, float z) { return builtin##f(x, y, z); } \
  double HWEMU_OVL name(double x, double y, double z) { return builtin(x, y, z); } \
  half HWEMU_OVL name(half x, half y, half z) { return builtin##f16(x, y, z); }
HWEMU_MATH1(floor, __builtin_floor) HWEMU_MATH1(ceil, __builtin_ceil) HWEMU_MATH1(trunc, __builtin_trunc)
HWEMU_MATH1(rint, __builtin_rint) HWEMU_MATH1(round, __builtin_round) HWEMU_MATH1(fabs, __builtin_fabs)
HWEMU_MATH1(sqrt, __builtin_sqrt)
HWEMU_MATH2(fmin, __builtin_fmin) HWEMU_MATH2(fmax, __builtin_fmax) HWEMU_MATH2(copysign, __builtin_copysign)
HWEMU_MATH3(fma, __builtin_fma) HWEMU_MATH3(mad, __builtin_fma)
