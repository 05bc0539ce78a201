#version 450
// Specialization constants of every kind ET-VK declares (bool, int, uint, float), and an 8-bit storage buffer
// with 16-bit arithmetic: naga cannot load it, raw Vulkan runs it as built.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { int t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly InBuf { int8_t t_in[]; };
layout(push_constant) uniform restrict Block { int n; int bias; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const bool negate = false;
layout(constant_id = 4) const int mul = 1;
layout(constant_id = 5) const uint shift = 0;
layout(constant_id = 6) const float scale = 1.0;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= n) {
    return;
  }
  int16_t y = int16_t(t_in[i]) * int16_t(mul) + int16_t(bias);
  int v = int(y) << shift;
  t_out[i] = int(float(negate ? -v : v) * scale);
}
