#version 450
// The strict profile's builtin rules: each builtin in its own slot, and the primitives the rules compose them from.
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { float t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly ABuf { float t_a[]; };
layout(set = 0, binding = 2) buffer restrict readonly BBuf { float t_b[]; };
layout(local_size_x = 64) in;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  const float a = t_a[i];
  const float b = t_b[i];
  const uint o = 13 * i;
  t_out[o + 0] = pow(a, b);
  t_out[o + 1] = tan(a);
  t_out[o + 2] = sin(a);
  t_out[o + 3] = exp(a);
  t_out[o + 4] = log(a);
  t_out[o + 5] = sqrt(a);
  t_out[o + 6] = sinh(a);
  t_out[o + 7] = a * b;
  t_out[o + 8] = exp2(b);
  t_out[o + 9] = log2(a);
  t_out[o + 10] = inversesqrt(a);
  t_out[o + 11] = cos(a);
  t_out[o + 12] = a;
}
