"""The compile cache: file digests (fingerprint.py), the include search (includes.py), the keys of builds
(keys.py), nvcc's dependency records (nvcc_deps.py), the documents of a cache directory (entries.py), the
store that finds and keeps builds by their keys (store.py) and the pool that builds ahead of the tests
(prefetch.py). Imports core/, util/ and tools/.
"""
