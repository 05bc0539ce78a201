#version 450
// GLSL mediump (as ET-VK's half variants declare since 3a9230de32): RelaxedPrecision values in the SPIR-V.
precision mediump float;
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { float t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly InBuf { float t_in[]; };
layout(local_size_x = 64) in;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  t_out[i] = t_in[i] * 3.0 + 1.0;
}
