"""Kernel suites of network layers: convolution, matmul, norms, pooling, SDPA and LLM ops, training steps."""
