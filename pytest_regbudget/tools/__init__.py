"""Running NVIDIA's tools, one module per tool: toolkit discovery (toolkit.py), NVRTC (nvrtc.py), ptxas
(ptxas.py), nvcc (nvcc.py), nvdisasm (nvdisasm.py), cuobjdump (cuobjdump.py), and the Triton and Numba front
ends (frontends.py); what each compiler builds (targets.py), and how a tool is run and its answers
remembered (running.py); the one build path from a translation unit to its outputs (units.py,
compiler.py, outputs.py, options.py). Imports only core/ and util/.
"""
