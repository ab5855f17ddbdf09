"""Lint rules, one module per rule (imported as ``detective.rules``)."""
