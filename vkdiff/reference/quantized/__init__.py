"""References of ET-VK's quantized ops and fusions: int4/int8 packing, quantize and choose-qparams, the q4gsw and
dq8ca linears and embedding, q8ta ops, quantized convolution and cat."""
