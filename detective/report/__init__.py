"""Attribution and the joined report: point every recompile at the line that caused it.

One-way modules: ``steps`` (the per-step table and its summary); ``ir`` (parse saved IR) ->
``diff`` (align two graphs) -> ``attribution`` (closest earlier graph, kind, source line) ->
``join`` (links to static findings, returned) -> ``render``. Records and relation names: ``model``.
"""
