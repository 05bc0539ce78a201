#version 450
// Infinite float literals as ET-VK's SDPA shaders write them (the running max's start, a masked score).
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { float v[]; } o;

void main() {
  o.v[0] = -1.0 / 0.0;
  o.v[1] = 1.0 / 0.0;
  o.v[2] = 2.0;
}
