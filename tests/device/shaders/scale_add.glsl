#version 450
// Buffer path: SSBO in/out, UBO sizes, push constants, spec constants (incl. a folded spec-constant op).
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly OutBuf { float t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly InBuf { float t_in[]; };
layout(set = 0, binding = 2) uniform restrict readonly SizesUBO { ivec4 sizes; };
layout(push_constant) uniform restrict Block { float mul; int offset; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const int add_k = 0;
const int add_twice = add_k * 2;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= sizes.x) {
    return;
  }
  t_out[i] = t_in[i] * mul + float(add_twice + offset) + float(gl_WorkGroupSize.x);
}
