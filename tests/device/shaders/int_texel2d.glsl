#version 450
// Integer 2D textures: isampler2D read, iimage2D write.
layout(set = 0, binding = 0, rgba32i) uniform highp restrict writeonly iimage2D t_out;
layout(set = 0, binding = 1) uniform highp isampler2D t_in;
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const int width = 1;
layout(constant_id = 4) const int height = 1;

void main() {
  const ivec2 pos = ivec2(gl_GlobalInvocationID.xy);
  if (pos.x >= width || pos.y >= height) {
    return;
  }
  imageStore(t_out, pos, texelFetch(t_in, pos, 0) * 3 - ivec4(1, 2, 3, 4));
}
