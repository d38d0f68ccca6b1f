"""One run without pytest: the build side (builder.py), the session and its state (session.py, state.py),
and where a report's numbers came from (provenance.py). Both faces use it: the pytest adapter (plugin/) and
the `regbudget` command (cli/).
"""
