// Multi-dimensional grids.
// transpose_add: for x < w, y < h (x = get_global_id(0), y = get_global_id(1)):
//   out[x * h + y] = in[y * w + x] + x * 1000 + y      (int32; out is in transposed, plus an id stamp). Exact.
//   Launch: 2-D, e.g. block (8, 4), grid (ceil(w / 8), ceil(h / 4)); threads outside w x h do nothing.
// ids3d: for every work-item of a 3-D launch, with X, Y = get_global_size(0), get_global_size(1) and
//   idx = (z * Y + y) * X + x for the global ids (x, y, z):
//   out[idx] = x + 1000 * y + 1000000 * z and loc[idx] = lx | ly << 8 | lz << 16 | gx << 24 (uint32), where
//   (lx, ly, lz) are the local ids and gx the group id in x. Exact.
//   Launch: 3-D, any block and grid (global ids must stay below 1000 in x and y).
kernel void transpose_add(global const int *in, global int *out, int w, int h) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x < w && y < h) out[x * h + y] = in[y * w + x] + x * 1000 + y;
}

kernel void ids3d(global uint *out, global uint *loc) {
  uint x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
  uint idx = (z * get_global_size(1) + y) * get_global_size(0) + x;
  out[idx] = x + 1000u * y + 1000000u * z;
  loc[idx] = get_local_id(0) | get_local_id(1) << 8 | get_local_id(2) << 16 | get_group_id(0) << 24;
}
