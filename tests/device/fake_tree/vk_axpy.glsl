#version 450 core
// vkdiff test template in ET-VK's codegen dialect (not an ExecuTorch shader).

${define_required_extensions(STORAGE, DTYPE)}

#define PRECISION ${PRECISION}
#define T ${buffer_scalar_type(DTYPE)}

layout(std430) buffer;

#include "vk_helpers.h"

${layout_declare_tensor(B, "w", "t_out", DTYPE, STORAGE)}
${layout_declare_tensor(B, "r", "t_x", DTYPE, STORAGE)}
${layout_declare_ubo(B, "ivec4", "out_sizes")}

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

${layout_declare_spec_const(C, "int", "alpha", "1")}

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= out_sizes.x) {
    return;
  }
  t_out[i] = T(twice(float(t_x[i])) * float(alpha));
}
