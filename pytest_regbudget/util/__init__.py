"""Generic helpers that know nothing of CUDA (files.py). Imports nothing of the package."""
