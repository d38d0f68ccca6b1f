"""Every rendering of a run's records: the record itself (also what xdist workers send), the terminal table,
Markdown, HTML, the comparison of two runs and the file writers. Imports only core/.
"""
