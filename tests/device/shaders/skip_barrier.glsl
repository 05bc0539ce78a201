#version 450
// A shared-memory reduction whose out-of-range invocations return before the barrier (the reduce bug), unless
// CLAMPED; LOOP_BEFORE / LOOP_AROUND add a loop with a per-invocation trip count before / around the barrier.
layout(set = 0, binding = 0) buffer restrict Buf { float v[]; };
layout(set = 0, binding = 1) uniform restrict readonly Sizes { ivec4 sizes; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
shared float partial[64];

void main() {
  int i = int(gl_GlobalInvocationID.x);
  const uint lid = gl_LocalInvocationID.x;
#ifdef CLAMPED
  i = min(i, sizes.x - 1);
#else
  if (i >= sizes.x) {
    return;
  }
#endif
  float acc = v[i];
#ifdef LOOP_BEFORE
  for (uint k = 0; k < lid; ++k) {
    acc += v[k];
  }
#endif
#ifdef LOOP_AROUND
  for (uint k = 0; k < lid; ++k) {
    partial[lid] = acc + float(k);
    barrier();
  }
#else
  partial[lid] = acc;
  barrier();
#endif
  if (lid == 0) {
    v[i] = partial[1];
  }
}
