#version 450
// The strict profile's tanh rule: tanh(a), which it rewrites through exp.
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { float t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly ABuf { float t_a[]; };
layout(local_size_x = 64) in;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  t_out[i] = tanh(t_a[i]);
}
