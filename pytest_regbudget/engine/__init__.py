"""One run without pytest: the build side (builder.py), the session and its state (session.py, state.py),
judging one kernel (judge.py: facts + budget + what the run knows -> its report), what the run prints
(summary.py), the xdist workers' results (workers.py), the end of the run (finish.py) and where a report's
numbers came from (provenance.py). Both faces use it: the pytest adapter (plugin/) and the `regbudget`
command (cli/).
"""
