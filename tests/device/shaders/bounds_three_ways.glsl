#version 450
// One write no check guards, one clamped by the metadata, one (and a read) under an if on it: the static bounds
// check must flag the first only.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) buffer Unchecked { float unchecked_out[]; };
layout(set = 0, binding = 1) buffer Checked { float checked_out[]; };
layout(set = 0, binding = 2) buffer Clamped { float clamped_out[]; };
layout(set = 0, binding = 3) readonly buffer Input { float x[]; };
layout(set = 0, binding = 4) uniform Meta { int numel; };
layout(set = 0, binding = 5, rgba32f) uniform writeonly image3D t_image;

void main() {
  const int idx = int(gl_GlobalInvocationID.x);
  unchecked_out[idx] = 1.0;
  clamped_out[min(idx, numel - 1)] = 2.0;
  if (idx < numel) {
    checked_out[idx] = x[idx];
    imageStore(t_image, ivec3(idx, 0, 0), vec4(x[idx]));
  }
  imageStore(t_image, ivec3(idx, 1, 0), vec4(1.0));
}
