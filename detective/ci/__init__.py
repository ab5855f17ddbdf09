"""What CI owners and storm hunters run: the compile-budget gate, its output formats,
the pytest plugin and the bisector."""
