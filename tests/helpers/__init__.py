"""What the test files share, by job (imported as `helpers.<module>`: pytest puts tests/ on sys.path when it
imports tests/conftest.py, before any test module, so `helpers` resolves under `pytest tests`, a single file
and xdist workers alike). tests/conftest.py keeps only fixtures.

- `data`: sample records and the suite's kernel sources (SAMPLE_ENTRY, ACC_KERNEL, KERNELS).
- `projects`: scratch projects and CUDA homes written for one test (write, write_tree, copy_kernels,
  fake_home).
- `runs`: pytest and `regbudget` runs and reading what they printed. Every subprocess run of pytest or
  `regbudget` is spelt by `pytest_argv` or `regbudget_argv` here: the running interpreter's, never a script
  found on PATH (tests/test_suite_rules.py holds it). NVDISASM_COUNTER: a conftest that logs nvdisasm's
  runs.
- `toolchain`: what the machine's tools can build (nvcc_usable).
- `history`: a git repository whose baseline file has a known history (the history tests, the benchmark).
- `occupancy`: cuda_occupancy.h of the CUDA 13 runtime wheel as an oracle.
- `browser`: headless Chromium, for the tests that render a report.
- `runner_commands`: a job's output read as the GitHub runner reads it: the workflow commands it would obey,
  and raw terminal controls.
"""
