"""recompile-detective: find what makes torch_xla compile new programs.

The linter (``detective.lint``) never imports torch; the runtime half
(``detective.runtime``) needs the ``xla`` extra.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "watch", "watch_compile", "step", "load_run"]


def __getattr__(name):
    # Lazy so that ``import detective`` stays cheap and torch-free for the linter.
    if name == "watch":
        from detective.runtime.watch import watch

        return watch
    if name == "watch_compile":
        from detective.runtime.dynamo_watch import watch_compile

        return watch_compile
    if name == "step":
        from detective.runtime.dynamo_watch import step

        return step
    if name == "load_run":
        from detective.runtime.record import load_run

        return load_run
    raise AttributeError(f"module 'detective' has no attribute {name!r}")
