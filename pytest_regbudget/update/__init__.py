"""From a run's records to baseline entries: the stale rule (scope) and the update plan, one path for a pytest
run and for `regbudget merge`. Imports core/ and report/.
"""
