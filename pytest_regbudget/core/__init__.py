"""The pure core: arch limits, occupancy, the ptxas and SASS parsers, kernel names, what was measured (facts),
timing statistics, errors, the baseline file format and the verdict.

Nothing here runs a tool or imports pytest, CuPy or NVRTC, and nothing here imports another folder of the
package: every other layer builds on it (tests/test_purity.py).
"""
