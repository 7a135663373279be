// Rounding functions in float32, float64 and float16. For i < n, v = x[i], o = out + 5 * i:
//   o[0] = floor(v)  o[1] = ceil(v)  o[2] = trunc(v)  o[3] = rint(v) (ties to even: np.rint)
//   o[4] = round(v) (ties away from zero: np.trunc(v) + np.sign(v) where |v - trunc(v)| >= 0.5, else trunc(v))
//   conv[i] = (int)v (truncation; inputs must satisfy |v| < 2**31). All exact, in the kernel's precision.
// Kernels: round_f32 (float), round_f64 (double), round_f16 (half); same layout.
// Launch: 1-D, any block size; threads at i >= n do nothing.
#define ROUNDING(name, T)                                                       \
  kernel void name(global const T *x, global T *out, global int *conv, int n) { \
    int i = get_global_id(0);                                                   \
    if (i >= n) return;                                                         \
    T v = x[i];                                                                 \
    global T *o = out + 5 * i;                                                  \
    o[0] = floor(v);                                                            \
    o[1] = ceil(v);                                                             \
    o[2] = trunc(v);                                                            \
    o[3] = rint(v);                                                             \
    o[4] = round(v);                                                            \
    conv[i] = (int)v;                                                           \
  }
ROUNDING(round_f32, float)
ROUNDING(round_f64, double)
ROUNDING(round_f16, half)
