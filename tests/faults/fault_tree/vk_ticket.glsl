#version 450 core
// vkdiff test shader (not an ExecuTorch shader): right once, different on a repeat.
// out = 2 * x + ticket / n, where each invocation draws a ticket from a scratch counter.
// The counter lives in a buffer that survives between dispatches and is never cleared
// (the bug class --repeat exists for): the first dispatch draws tickets 0..n-1 and is
// exact, the k-th one adds k - 1 everywhere.

#define PRECISION ${PRECISION}

layout(std430) buffer;

${layout_declare_tensor(B, "w", "t_out", "float", "buffer")}
${layout_declare_tensor(B, "r", "t_x", "float", "buffer")}
${layout_declare_tensor(B, "rw", "t_counter", "int", "buffer")}
${layout_declare_ubo(B, "ivec4", "out_sizes")}

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= out_sizes.x) {
    return;
  }
  const int ticket = atomicAdd(t_counter[0], 1);
  t_out[i] = 2.0 * t_x[i] + float(ticket / out_sizes.x);
}
