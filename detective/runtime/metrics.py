"""Poll torch_xla.debug.metrics. Counters are cheap; metric sample lists are read only when needed."""

from __future__ import annotations


# torch_xla counts `.item()` as the fallback aten::_local_scalar_dense; it is a host transfer
# (counted as one), not a missing lowering, so it stays out of the fallback column.
HOST_READS = frozenset({"aten::_local_scalar_dense"})


class MetricsProbe:
    def __init__(self, met):
        self._met = met

    def _counter(self, name: str) -> int:
        return self._met.counter_value(name) or 0  # None when the counter never fired

    def compiles(self) -> tuple[int, int]:
        """(UncachedCompile, CachedCompile): every graph execution bumps exactly one."""
        return self._counter("UncachedCompile"), self._counter("CachedCompile")

    def compile_time(self) -> tuple[int, float, list[float]]:
        """(samples, total ns, recent sample values in ns, oldest first)."""
        data = self._met.metric_data("CompileTime")
        if data is None:
            return 0, 0.0, []
        return data[0], data[1], [value for _, value in data[2]]

    def transfers(self) -> int:
        data = self._met.metric_data("TransferFromDeviceTime")
        return data[0] if data else 0

    def fallbacks(self) -> dict[str, int]:
        """aten::<op> counters: ops torch_xla ran on the CPU, except ``.item()``'s host read."""
        return {name: self._counter(name) for name in self._met.executed_fallback_ops() if name not in HOST_READS}

    def totals(self) -> dict:
        """torch_xla's own view of the whole process, for checking our counts against it."""
        uncached, cached = self.compiles()
        _, compile_ns, _ = self.compile_time()
        return {
            "UncachedCompile": uncached,
            "CachedCompile": cached,
            "CompileTime_s": compile_ns / 1e9,
            "TransferFromDevice": self.transfers(),
            "MarkStep": self._counter("MarkStep"),
            "fallback_ops": self.fallbacks(),
        }
