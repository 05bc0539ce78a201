#version 450
// 16-bit float storage buffers (shader-f16).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { f16vec4 t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly XBuf { f16vec4 t_x[]; };
layout(set = 0, binding = 2) buffer restrict readonly YBuf { f16vec4 t_y[]; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const int n4 = 0;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i < n4) {
    t_out[i] = t_x[i] * float16_t(2.0) + t_y[i];
  }
}
