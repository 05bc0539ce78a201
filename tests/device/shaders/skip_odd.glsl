#version 450
// A deliberately broken kernel: never writes odd elements (poison detection must catch it).
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { float t_out[]; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const int numel = 0;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i < numel && i % 2 == 0) {
    t_out[i] = float(i);
  }
}
