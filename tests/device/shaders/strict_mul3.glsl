#version 450
// The strict profile's reassociation rule: (a * b) * c, which it computes as a * (b * c).
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { float t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly ABuf { float t_a[]; };
layout(set = 0, binding = 2) buffer restrict readonly BBuf { float t_b[]; };
layout(set = 0, binding = 3) buffer restrict readonly CBuf { float t_c[]; };
layout(local_size_x = 64) in;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  t_out[i] = t_a[i] * t_b[i] * t_c[i];
}
