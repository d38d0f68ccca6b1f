"""What a project declares about its kernels: the marker's keys (`markers.py`) and the kernel manifest
(`manifest.py`, each of its `[[kernels]]` tables `kernel_tables.py`). No pytest: the pytest plugin and the
`regbudget` command read them alike (`regbudget explain` builds a manifest's kernel with the table that
covers its file).
"""
