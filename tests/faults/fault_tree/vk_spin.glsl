#version 450 core
// vkdiff test shader (not an ExecuTorch shader): a dispatch that never finishes.
// Every invocation adds 2 to a counter that starts at 0 until it draws an odd value,
// which never happens. The loop writes memory on every iteration: compilers may delete a
// loop without side effects (even one that only reads a flag atomically) as if it ended,
// but not this one. llvmpipe ends any invocation's loops after 65535 iterations (its own
// guard against hangs), so the launcher dispatches the largest grid a device allows:
// 65535 x 65535 workgroups of 64, each spinning, which no device finishes in days.

#define PRECISION ${PRECISION}

layout(std430) buffer;

${layout_declare_tensor(B, "w", "t_out", "float", "buffer")}
${layout_declare_tensor(B, "r", "t_x", "float", "buffer")}
${layout_declare_tensor(B, "rw", "t_flag", "int", "buffer")}
${layout_declare_ubo(B, "ivec4", "out_sizes")}

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  while ((atomicAdd(t_flag[0], 2) & 1) == 0) {
  }
  if (i < out_sizes.x) {
    t_out[i] = t_x[i];
  }
}
