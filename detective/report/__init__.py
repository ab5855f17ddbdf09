"""Attribution and the joined report: point every recompile at the line that caused it.

One-way modules: ``ir`` (parse saved IR) -> ``diff`` (align two graphs) -> ``attribution``
(closest earlier graph, kind, source line) -> ``join`` (static findings) -> ``render``.
"""
