"""Can a function take a call's arguments? Signatures and call shapes as short strings.

When a call's receiver has no known class (``self.decoder.step(x, normalize=False)`` with
``self.decoder`` handed in), the call graph links the project's few methods of that name;
one whose parameters cannot take the call's arguments (no ``normalize``, too few places,
a required parameter left out) is not the one called. Both sides are recorded per file
(libcst nodes read by attribute, so this module imports nothing heavy) and compared in
the cross-file pass.

A signature is ``"a,b,c|2|*,**|k"``: positional parameter names (``self`` of a method
left out), how many of them are required, ``*``/``**`` when it takes ``*args``/``**kwargs``,
keyword-only names. A call shape is ``"2;normalize,out"`` (positional count; keywords), or
``"?"`` when ``*args``/``**kwargs`` hide what is passed; several calls: joined with ``/``.
"""

from __future__ import annotations


def signature_of(params, bound: bool) -> str:
    """``params``: a libcst ``Parameters``; ``bound``: the first parameter is ``self``/``cls``."""
    positional = [*params.posonly_params, *params.params]
    if bound and positional:
        positional = positional[1:]
    required = sum(1 for p in positional if p.default is None)
    flags = [flag for flag, param in (("*", params.star_arg), ("**", params.star_kwarg))
             if hasattr(param, "name")]
    return "|".join((",".join(p.name.value for p in positional), str(required), ",".join(flags),
                     ",".join(p.name.value for p in params.kwonly_params)))


def call_shape(call) -> str:
    """The shape of a libcst ``Call``'s arguments."""
    positional, keywords = 0, []
    for arg in call.args:
        if arg.star:
            return "?"
        if arg.keyword is not None:
            keywords.append(arg.keyword.value)
        else:
            positional += 1
    return f"{positional};{','.join(keywords)}"


def accepts(signature: str, shapes: str) -> bool:
    """Could a function of ``signature`` take one of the calls in ``shapes``? Yes when either
    is unknown."""
    if not signature or not shapes:
        return True
    names, required, flags, kwonly = signature.split("|")
    positional = names.split(",") if names else []
    keyword_only = set(kwonly.split(",")) if kwonly else set()
    star, star_star = "*" in flags.split(","), "**" in flags.split(",")
    for shape in shapes.split("/"):
        if shape == "?":
            return True
        count, _, passed = shape.partition(";")
        given = int(count)
        keywords = passed.split(",") if passed else []
        if given > len(positional) and not star:
            continue
        free = set(positional[given:]) | keyword_only
        if not star_star and any(k not in free for k in keywords):
            continue
        if any(name not in keywords for name in positional[given:int(required)]):
            continue
        return True
    return False
