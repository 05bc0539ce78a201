#ifndef VK_HELPERS_H
#define VK_HELPERS_H

float twice(const float v) {
  return 2.0 * v;
}

#endif // VK_HELPERS_H
