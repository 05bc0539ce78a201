"""ET-VK's shaders as vkdiff builds and loads them: the tree and its ported C++, glslc builds and their cache, SPIR-V
reflection and transforms, compute pipelines, and the static checks of every variant (bounds, uniformity)."""
