"""The band of results the Vulkan spec lets a conformant device give for a shader's arithmetic.

``precision`` holds the spec's precision table as interval operations, ``declarations`` what
each ET-VK shader computes, and ``envelope`` evaluates a declaration under each liberty the
spec grants, on a case's own inputs, around ATen's reference.
"""
