"""References of the ATen ops ET-VK implements in float: elementwise, movement, indexing, reductions, norms,
convolution, pooling, matmul, grid sampling, LLM ops (SDPA, RoPE) and training steps."""
