"""One walk over a libcst tree, and the tables that dispatch each node to its handlers.

``module.visit(visitor)`` would make the same visits, but libcst reconstructs (and
re-validates) every node on the way back up and visits every whitespace, comma and
bracket: about half the cost of linting a file. No handler looks at those tokens, so
:func:`walk` follows only the fields that carry syntax, in libcst's visiting order.

Handlers are plain ``visit_<Node>``/``leave_<Node>`` methods, found by name
(:func:`dispatch_tables`); we dispatch ourselves rather than through
``libcst.batched_visitor`` so the order between the semantic model, the facts rules
share and the rules is fixed, and matcher decorators cannot be silently ignored.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

# Tokens and whitespace: never walked.
_TRIVIA = (
    cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline,
    cst.Comment, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon,
    cst.AssignEqual, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp,
    cst.BaseAugOp, cst.Asynchronous, cst.ImportStar,
)
_TRIVIA_FIELDS = frozenset({
    "leading_lines", "lines_after_decorators", "lpar", "rpar", "comma", "dot", "semicolon", "equal",
    "colon", "first_colon", "second_colon", "lbracket", "rbracket", "lbrace", "rbrace", "header",
    "footer", "trailing_whitespace", "operator", "asynchronous", "newline", "indent",
})
# Where libcst visits children in another order than its dataclass fields are declared.
_FIELD_ORDER = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
    cst.Arg: ("keyword", "value"),
    cst.MatchCase: ("pattern", "guard", "body"),
}
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
# Concrete type -> 0 (skip: token, whitespace, str, None), 1 (node to walk), 2 (sequence).
# isinstance against libcst's abstract bases is slow; a dict lookup per type is not.
_KIND: dict[type, int] = {}
# Subtrees nothing looks into: imports are handled whole, annotations are not evaluated.
SKIP_CHILDREN = frozenset({"Import", "ImportFrom", "Annotation"})


def _classify(cls: type) -> int:
    mro = cls.__mro__  # not issubclass: abstract-base checks walk every registered subclass
    if tuple in mro or list in mro:
        kind = 2
    elif cst.CSTNode in mro and not any(base in mro for base in _TRIVIA):
        kind = 1
    else:
        kind = 0
    _KIND[cls] = kind
    return kind


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _FIELD_ORDER.get(cls) or tuple(
            f.name for f in dataclasses.fields(cls)
            if f.name not in _TRIVIA_FIELDS and not f.name.startswith("whitespace")
        )
        _CHILD_FIELDS[cls] = fields
    return fields


def walk(node: cst.CSTNode, on_visit, on_leave) -> None:
    """``on_visit(node)`` (children are walked when it returns True), then ``on_leave(node)``."""
    if on_visit(node):
        kinds = _KIND
        for name in _child_fields(type(node)):
            value = getattr(node, name)
            kind = kinds.get(type(value))
            if kind is None:
                kind = _classify(type(value))
            if kind == 1:
                walk(value, on_visit, on_leave)
            elif kind == 2:
                for child in value:
                    kind = kinds.get(type(child))
                    if kind is None:
                        kind = _classify(type(child))
                    if kind == 1:
                        walk(child, on_visit, on_leave)
    on_leave(node)


def syntax_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children :func:`walk` visits, in order: ``node.children`` without its tokens and
    whitespace, and without its cost (libcst builds that list by a visit that re-validates
    every child node)."""
    children = []
    kinds = _KIND
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        kind = kinds.get(type(value))
        if kind is None:
            kind = _classify(type(value))
        if kind == 1:
            children.append(value)
        elif kind == 2:
            for child in value:
                kind = kinds.get(type(child))
                if kind is None:
                    kind = _classify(type(child))
                if kind == 1:
                    children.append(child)
    return children


def dispatch_tables(handlers) -> tuple[dict[str, list], dict[str, list]]:
    """Node type name -> bound ``visit_``/``leave_`` methods of ``handlers``, in order."""
    visit: dict[str, list] = {}
    leave: dict[str, list] = {}
    for handler in handlers:
        for attr, node_name, is_visit in _handler_methods(type(handler)):
            (visit if is_visit else leave).setdefault(node_name, []).append(getattr(handler, attr))
    return visit, leave


_HANDLER_METHODS: dict[type, tuple[tuple[str, str, bool], ...]] = {}


def _handler_methods(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, node type name, is a visit) for each handler method of ``cls``; ``dir`` of
    every handler class was a noticeable share of linting a small file, so once per class."""
    methods = _HANDLER_METHODS.get(cls)
    if methods is None:
        methods = _HANDLER_METHODS[cls] = tuple(
            (attr, attr[6:], attr.startswith("visit_")) for attr in dir(cls)
            if attr.startswith(("visit_", "leave_")))
    return methods
