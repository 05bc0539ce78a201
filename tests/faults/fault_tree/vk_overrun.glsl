#version 450 core
// vkdiff test shader (not an ExecuTorch shader): right in bounds, and one write past the tensor.
// out = 2 * x, and invocation 0 also writes out[padded numel + past]: with past = 2, just past the tensor's storage
// (numel rounded up to 16 bytes), inside the buffer the graph binds; with past = 100000, past the whole bound range.

#define PRECISION ${PRECISION}

layout(std430) buffer;

${layout_declare_tensor(B, "w", "t_out", "float", "buffer")}
${layout_declare_tensor(B, "r", "t_x", "float", "buffer")}
${layout_declare_ubo(B, "ivec4", "out_sizes")}

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const int past = 2;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= out_sizes.x) {
    return;
  }
  t_out[i] = 2.0 * t_x[i];
  if (i == 0) {
    t_out[((out_sizes.x + 3) / 4) * 4 + past] = -1.0;
  }
}
