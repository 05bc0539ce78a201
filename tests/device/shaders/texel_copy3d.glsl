#version 450
// Texture path: combined sampler3D read with texelFetch, image3D write, WHCN sizes UBO.
layout(set = 0, binding = 0, rgba32f) uniform highp restrict writeonly image3D t_out;
layout(set = 0, binding = 1) uniform highp sampler3D t_in;
layout(set = 0, binding = 2) uniform restrict readonly SizesUBO { ivec4 sizes; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

void main() {
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  const ivec3 extent = ivec3((sizes.x + 3) / 4, sizes.y, sizes.z * sizes.w);
  if (any(greaterThanEqual(pos, extent))) {
    return;
  }
  // Twice the same texel load: glslang CSEs the sampler load into several OpImage.
  const vec4 a = texelFetch(t_in, pos, 0);
  const vec4 b = texelFetch(t_in, pos + ivec3(0, 0, 0), 0);
  imageStore(t_out, pos, a + b + vec4(pos.x, pos.y, pos.z, 0.0));
}
