#version 450 core
// Does not compile on purpose: BUILD_FAIL must carry glslc's message.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

void main() {
  undeclared_identifier = 1;
}
