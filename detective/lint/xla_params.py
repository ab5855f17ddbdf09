"""Parameters that are None whenever the code runs on XLA, decided across calls.

A repository's XLA branch often drops an optional argument before passing it on
(``if self.tpu: masked = None`` then ``model(x, masked=masked)``): inside the callee,
``if masked is not None: x[masked]`` then never runs on XLA. Calls are made through
``model(...)``, ``self.encoder(...)`` or ``**kwargs``, which a call graph resolves only in
part, so the fact is keyed on the parameter's *name* across the project:

  a parameter name ``P`` is None on XLA when some call in the project passes ``P`` a value
  its caller's XLA branch set to None, and every other way the project hands a value to a
  ``P`` is ``None``, the same XLA-None value, or the caller's own parameter ``P`` passed on.

Any other value given to ``P`` anywhere poisons the fact: a keyword ``P=v``, a ``"P"`` key
of a dict literal or a ``d["P"] = v`` (they may be ``**``-expanded into a call), or a
positional argument at ``P``'s place in a call the call graph resolves. Callers outside
the project (a user calling the model with a real mask) are not seen: the fact only
covers what the project itself runs.

Per file, :class:`~detective.lint.param_guards.ParamGuards` records in the shared walk,
for each candidate, the parameters (default ``None``) whose ``is not None`` test guards
it, and for each call what it passes; :func:`none_on_xla` joins the files.
"""

from __future__ import annotations

from collections import defaultdict

# What a call passes for a parameter: "x" a value None on XLA (set so by the caller's XLA
# branch), "n" the literal None, "f" the caller's own same-named parameter passed on,
# "z" a false literal (False, 0, ""), "l" another Python literal, "c" another Python value:
# a setting (args.fp16, self.cfg.normalize, self.training) or a builtin's result (float(s)), "t" a name bound to a tensor not made on
# the CPU, "o" anything else; "k": a mapping with that key is read somewhere, so values may
# come from data the project does not show (read by detective.lint.arg_facts only).
XLA_NONE, NONE, FORWARDED, OTHER = "x", "n", "f", "o"
FALSY, LITERAL, CONFIG, KEY, DEVICE_TENSOR = "z", "l", "c", "k", "t"


def none_on_xla(project) -> frozenset[str]:
    """Parameter names None whenever the project's code runs on XLA (see the module doc)."""
    flags: dict[str, set[str]] = defaultdict(set)
    for summary in project.files.values():
        for passes in summary.keyword_passes.values():
            for name, passed in passes.items():
                flags[name].update(passed)
    if not any(XLA_NONE in passed for passed in flags.values()) and not any(
            XLA_NONE in places.partition(";")[0].split(",") for summary in project.files.values()
            for _scope, _target, places in summary.positional_passes):
        return frozenset()  # no XLA branch hands None on: nothing to resolve
    for summary in project.files.values():
        for scope_name, target, places in summary.positional_passes:
            passed = [p for p in places.partition(";")[0].split(",") if p and p != "*"]
            if not passed:
                continue
            scope = summary.scopes.get(scope_name)
            callee = project.resolve(target, summary, scope.class_name if scope else None)
            if callee is None:
                continue
            for name, index in project.files[callee[0]].scopes[callee[1]].none_params.items():
                if 0 <= index < len(passed):
                    place = passed[index]
                    flags[name].add(FORWARDED if place == f"@{name}" else (
                        place if place in (XLA_NONE, NONE) else OTHER))
    ok = {XLA_NONE, NONE, FORWARDED, KEY}  # a key read is no value passed (see arg_facts)
    return frozenset(name for name, passed in flags.items() if XLA_NONE in passed and passed <= ok)
