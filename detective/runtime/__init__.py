"""Runtime tracer: run a real torch_xla script and record, per step, which programs it compiled.

Data flows one way: the child process (``child``/``tracer``) appends events to ``events.jsonl``;
``record`` loads them; :mod:`detective.report.steps` turns them into the per-step table.
Modules used inside the traced process import only the standard library (and torch_xla,
once the user has imported it), so the child's interpreter needs nothing else installed.
"""
