"""The state of one pytest run: configured archs, the toolkit, and every KernelReport produced.

plugin.py's hooks hand off here. Under pytest-xdist each worker holds its own session and ships its reports
to the controller through `workeroutput`; only the controller writes files.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .arch import get_arch
from .budget import KernelReport, check
from .compiler import DEFAULT_PTXAS_TIMEOUT, CompiledKernel, CompileOptions, compile_kernel
from .markers import Budget, MarkerError, parse_marker
from .report import KernelRecord, record_list, summary_lines, to_record, write_json
from .toolchain import ToolchainError, Toolkit, discover

WORKEROUTPUT_KEY = "regbudget_reports"


class RegbudgetWarning(UserWarning):
    """A budget exceeded by a kernel whose marker says level="warn"."""


@dataclass
class ItemState:
    """What a marked test carries from collection to its call phase."""

    arch: str
    budget: Budget | None = None
    marker_error: str | None = None
    reports: list[KernelReport] = field(default_factory=list)


class RegbudgetSession:
    def __init__(
        self,
        archs: Sequence[str],
        cuda_home: str | None,
        json_path: Path | None,
        ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT,
    ) -> None:
        self.archs = tuple(archs)
        self.cuda_home = cuda_home
        self.json_path = json_path
        self.ptxas_timeout = ptxas_timeout
        self.records: list[KernelRecord] = []
        self._toolkit: Toolkit | None = None
        self._toolkit_error: str | None = None

    # -- toolkit ---------------------------------------------------------------------------------
    def toolkit(self) -> Toolkit:
        if self._toolkit is None and self._toolkit_error is None:
            try:
                self._toolkit = discover(self.cuda_home)
            except ToolchainError as exc:
                self._toolkit_error = str(exc)
        if self._toolkit is None:
            raise ToolchainError(self._toolkit_error or "no toolkit")
        return self._toolkit

    def header(self) -> str:
        archs = ",".join(self.archs)
        try:
            tk = self.toolkit()
        except ToolchainError:
            return f"regbudget: archs {archs}; NO CUDA TOOLKIT FOUND (marked tests will fail and say why)"
        return f"regbudget: {tk.describe()}; archs {archs}"

    # -- collection --------------------------------------------------------------------------------
    def item_archs(self, budget: Budget | None) -> list[str]:
        if budget is None or budget.archs is None:
            return list(self.archs)
        return [a for a in self.archs if a in budget.archs]

    @staticmethod
    def parse(marker: pytest.Mark | None, test_path: Path) -> tuple[Budget | None, str | None]:
        if marker is None:
            return None, None
        try:
            return parse_marker(marker.args, marker.kwargs, test_path.parent), None
        except MarkerError as exc:
            return None, str(exc)

    # -- the test's call phase ---------------------------------------------------------------------
    def compile_and_check(
        self,
        state: ItemState,
        nodeid: str,
        source: Path,
        kernel: str,
        options: CompileOptions,
    ) -> KernelReport:
        """Compile one kernel for the item's arch and judge it; compile errors become CompileError."""
        tk = self.toolkit()
        compiled: CompiledKernel = compile_kernel(
            source, kernel, state.arch, options, tk, ptxas_timeout=self.ptxas_timeout
        )
        budget = state.budget or Budget()
        report = check(
            nodeid,
            kernel,
            state.arch,
            str(source),
            compiled.resources,
            budget.limits(state.arch),
            budget.level,
        )
        report.ptxas_version = tk.ptxas_version
        report.nvrtc_version = tk.nvrtc_version
        state.reports.append(report)
        return report

    def record_error(self, state: ItemState, nodeid: str, kernel: str, source: Path, error: str) -> None:
        report = KernelReport(
            nodeid=nodeid, kernel=kernel, arch=state.arch, source=str(source), resources=None, error=error
        )
        state.reports.append(report)

    def verdict(self, state: ItemState) -> str | None:
        """The failure text of a finished test, or None; warn-level violations become warnings."""
        self.records.extend(to_record(r) for r in state.reports)
        failures = [r.failure_text() for r in state.reports if r.outcome == "failed"]
        for r in state.reports:
            if r.outcome == "warned":
                warnings.warn(RegbudgetWarning(r.failure_text()), stacklevel=1)
        return "\n".join(failures) if failures else None

    # -- end of run --------------------------------------------------------------------------------
    def worker_payload(self) -> list[KernelRecord]:
        return self.records

    def merge_worker(self, payload: Any) -> None:
        self.records.extend(record_list(payload))

    def summary(self) -> list[str]:
        return summary_lines(self.records)

    def write_outputs(self) -> None:
        if self.json_path is not None:
            write_json(self.json_path, self.records)


def parse_archs(values: Sequence[str]) -> list[str]:
    """Flatten repeated, comma-separated arch values, validating each and keeping the first of duplicates."""
    out: list[str] = []
    for value in values:
        for name in (v.strip() for v in value.replace("\n", ",").split(",")):
            if name and name not in out:
                get_arch(name)
                out.append(name)
    return out
