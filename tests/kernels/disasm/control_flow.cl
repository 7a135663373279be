__kernel void branchy(__global int *out, __global const int *in, __global const uchar *c, __global short *sh) {
  int i = get_global_id(0);
  int v = in[i];
  int r;
  switch (c[i] & 3) {
    case 0: r = v * 3; break;
    case 1: r = v / 7; break;
    case 2: r = v ? 100 / v : -1; break;
    default: r = (int)(uchar)(v >> 4);
  }
  while (r > 1000) r = r / 2 - 17;
  out[i] = r;
  sh[i] = (short)(r + sh[i]);
}
