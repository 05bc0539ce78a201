"""Kernel suites of tensor ops: elementwise (unary, binary, scalar), creation, movement, indexing, reductions, grids."""
