"""Kernel suites of quantized ops: choose-qparams, q4gsw/dq8ca/q8 linears and embedding, q8ta ops, quantized conv."""
