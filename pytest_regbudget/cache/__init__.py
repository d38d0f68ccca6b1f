"""The compile cache: its keys and the fingerprints they hold (fingerprint.py), the include search
(includes.py), the store of entries (store.py) and the pool that builds ahead of the tests (prefetch.py).
Imports core/, util/ and tools/.
"""
