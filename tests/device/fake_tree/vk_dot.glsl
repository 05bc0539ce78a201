#version 450 core
// Exercises dotPacked4x8AccSatEXT (polyfilled when glslc lacks GL_EXT_integer_dot_product).
#extension GL_EXT_integer_dot_product : require

#define PRECISION ${PRECISION}

layout(std430) buffer;

${layout_declare_tensor(B, "w", "t_out", "int", "buffer")}
${layout_declare_tensor(B, "r", "t_a", "int", "buffer")}
${layout_declare_tensor(B, "r", "t_b", "int", "buffer")}
${layout_declare_tensor(B, "r", "t_acc", "int", "buffer")}

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

${layout_declare_spec_const(C, "int", "numel", "0")}

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i < numel) {
    t_out[i] = dotPacked4x8AccSatEXT(t_a[i], t_b[i], t_acc[i]);
  }
}
