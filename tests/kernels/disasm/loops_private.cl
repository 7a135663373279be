__kernel void sortish(__global int *out, __global const int *in, int n) {
  int p[16];
  int g = get_global_id(0);
  for (int i = 0; i < 16; i++) p[i] = in[(g * 16 + i) % n];
  for (int i = 0; i < 16; i++)
    for (int j = i + 1; j < 16; j++)
      if (p[j] < p[i]) { int t = p[i]; p[i] = p[j]; p[j] = t; }
  int acc = 0;
  for (int i = 0; i < n; i++) acc += p[in[i] & 15] * i;
  out[g] = acc;
}
