"""The state of one pytest run: settings, the toolkit, the baseline, and every kernel's record.

plugin.py's hooks hand off here. Under pytest-xdist each worker holds its own session and ships its records
(and what it collected) to the controller through `workeroutput`; only the controller writes files.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import baseline as bl
from .arch import get_arch
from .budget import KernelReport, check, compare
from .compiler import DEFAULT_PTXAS_TIMEOUT, CompileOptions, compile_kernel, error_location
from .markers import Budget, MarkerError, parse_marker
from .report import (
    KernelRecord,
    baseline_lines,
    entry_from_record,
    github_annotations,
    markdown_report,
    summary_lines,
    to_record,
    write_json,
)
from .toolchain import ToolchainError, Toolkit, discover

WORKEROUTPUT_KEY = "regbudget"
UPDATE_HINT = "pytest --regbudget-update"


class RegbudgetWarning(UserWarning):
    """A budget exceeded by a kernel whose marker says level="warn", or a baseline that cannot be compared."""


@dataclass(frozen=True)
class Settings:
    archs: tuple[str, ...]
    rootdir: Path
    cuda_home: str | None = None
    json_path: Path | None = None
    ptxas_timeout: float = DEFAULT_PTXAS_TIMEOUT
    baseline_path: Path | None = None
    update: bool = False
    tolerance: dict[str, float] = field(default_factory=dict)
    markdown_path: Path | None = None
    step_summary: Path | None = None  # $GITHUB_STEP_SUMMARY
    annotate: bool = False  # GITHUB_ACTIONS=true


@dataclass
class ItemState:
    """What a marked test carries from collection to its call phase."""

    arch: str
    budget: Budget | None = None
    marker_error: str | None = None
    reports: list[KernelReport] = field(default_factory=list)


@dataclass
class RunScope:
    """Which baseline entries this run could have seen: the base of stale-entry detection."""

    collected: set[str] = field(default_factory=set)
    completed: set[str] = field(default_factory=set)  # tests whose body ran to the end
    partial: bool = False  # -k, -m, --lf, node ids: some tests were left out on purpose
    prefixes: tuple[str, ...] = ("",)  # nodeid prefixes of the paths given on the command line


class RegbudgetSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.records: list[KernelRecord] = []
        self.scope = RunScope()
        self.finish_lines: list[str] = []
        self._toolkit: Toolkit | None = None
        self._toolkit_error: str | None = None
        self._warned_versions: set[tuple[str, str]] = set()
        # Raises BaselineError (a usage error) before any test runs, leaving the file untouched.
        self.baseline = bl.load(settings.baseline_path) if settings.baseline_path else {}

    # -- toolkit ---------------------------------------------------------------------------------
    def toolkit(self) -> Toolkit:
        if self._toolkit is None and self._toolkit_error is None:
            try:
                self._toolkit = discover(self.settings.cuda_home)
            except ToolchainError as exc:
                self._toolkit_error = str(exc)
        if self._toolkit is None:
            raise ToolchainError(self._toolkit_error or "no toolkit")
        return self._toolkit

    def header(self) -> str:
        s = self.settings
        archs = ",".join(s.archs)
        try:
            where = self.toolkit().describe()
        except ToolchainError:
            where = "NO CUDA TOOLKIT FOUND (marked tests will fail and say why)"
        base = "-"
        if s.baseline_path is not None:
            count = f"{len(self.baseline)} entries" if s.baseline_path.exists() else "not yet written"
            base = f"{self._display(s.baseline_path)} ({count}{', updating' if s.update else ''})"
        return f"regbudget: {where}; archs {archs}; baseline {base}"

    def _display(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.settings.rootdir))
        except ValueError:
            return str(path)

    # -- collection --------------------------------------------------------------------------------
    def item_archs(self, budget: Budget | None) -> list[str]:
        if budget is None or budget.archs is None:
            return list(self.settings.archs)
        return [a for a in self.settings.archs if a in budget.archs]

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
        self, state: ItemState, nodeid: str, source: Path, kernel: str, options: CompileOptions
    ) -> KernelReport:
        """Compile one kernel for the item's arch and judge it against budgets and baseline."""
        tk = self.toolkit()
        compiled = compile_kernel(source, kernel, state.arch, options, tk, self.settings.ptxas_timeout)
        budget = state.budget or Budget()
        report = check(
            nodeid,
            self._kernel_id(state, kernel),
            state.arch,
            str(source),
            compiled.resources,
            budget.limits(state.arch),
            budget.level,
        )
        report.ptxas_version = tk.ptxas_version
        report.nvrtc_version = tk.nvrtc_version
        report.options_hash = self._options_hash(options)
        report.line = compiled.line
        self._ratchet(report, {**self.settings.tolerance, **budget.tolerance})
        state.reports.append(report)
        return report

    @staticmethod
    def _kernel_id(state: ItemState, kernel: str) -> str:
        # A test may compile one kernel several ways; each gets its own baseline entry.
        n = sum(1 for r in state.reports if r.kernel == kernel or r.kernel.startswith(f"{kernel} #"))
        return kernel if n == 0 else f"{kernel} #{n + 1}"

    def _options_hash(self, options: CompileOptions) -> str:
        # Include dirs relative to the rootdir, so that the hash is the same on every checkout.
        dirs = [os.path.relpath(d, self.settings.rootdir) for d in options.include_dirs]
        return bl.options_hash(options.defines, dirs, options.options, options.ptxas_options)

    def _ratchet(self, report: KernelReport, tolerance: dict[str, float]) -> None:
        old = self.baseline.get((report.nodeid, report.kernel, report.arch))
        if old is None:
            report.baseline_status = "new" if self.settings.baseline_path else "none"
            return
        report.baseline = old
        report.deltas = compare(old, entry_from_record(to_record(report)), tolerance)
        if old.ptxas != report.ptxas_version:
            report.baseline_status = "toolkit-mismatch"
            self._warn_toolkit_mismatch(old.ptxas, report.ptxas_version)
            return
        report.baseline_status = "compared"
        if self.settings.update:
            return  # this run accepts whatever it measures
        name = self._display(self.settings.baseline_path) if self.settings.baseline_path else "the baseline"
        for d in report.deltas:
            if d.verdict == "worse":
                allowed = f", tolerance {d.tolerance:g}" if d.tolerance else ""
                report.violations.append(
                    f"{d.text()} is worse than the baseline{allowed}; if intended, accept it with "
                    f"{UPDATE_HINT} and commit {name}"
                )

    def _warn_toolkit_mismatch(self, old: str, new: str) -> None:
        if (old, new) in self._warned_versions:
            return
        self._warned_versions.add((old, new))
        warnings.warn(
            RegbudgetWarning(
                f"baseline {self.settings.baseline_path} was recorded with ptxas {old}, this run uses ptxas "
                f"{new}: its entries are shown but not enforced. Refresh it with this toolkit: {UPDATE_HINT}"
            ),
            stacklevel=1,
        )

    def record_error(self, state: ItemState, nodeid: str, kernel: str, source: Path, error: str) -> None:
        where = error_location(error)
        report = KernelReport(
            nodeid=nodeid,
            kernel=kernel,
            arch=state.arch,
            source=where[0] if where else str(source),
            resources=None,
            error=error,
            line=where[1] if where else None,
        )
        state.reports.append(report)

    def verdict(self, state: ItemState, nodeid: str, completed: bool) -> str | None:
        """The failure text of a finished test, or None; warn-level violations become warnings."""
        if completed:
            self.scope.completed.add(nodeid)
        self.records.extend(to_record(r) for r in state.reports)
        failures = [r.failure_text() for r in state.reports if r.outcome == "failed"]
        for r in state.reports:
            if r.outcome == "warned":
                warnings.warn(RegbudgetWarning(r.failure_text()), stacklevel=1)
        return "\n".join(failures) if failures else None

    # -- xdist -------------------------------------------------------------------------------------
    def worker_payload(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "collected": sorted(self.scope.collected),
            "completed": sorted(self.scope.completed),
            "partial": self.scope.partial,
        }

    def merge_worker(self, payload: dict[str, Any]) -> None:
        self.records.extend(payload.get("records", []))
        self.scope.collected.update(payload.get("collected", []))
        self.scope.completed.update(payload.get("completed", []))
        self.scope.partial = self.scope.partial or bool(payload.get("partial", False))

    # -- end of run (controller only) --------------------------------------------------------------
    def stale_keys(self) -> set[bl.Key]:
        """Entries whose test or kernel no longer exists; empty when the run left tests out on purpose."""
        if self.scope.partial:
            return set()
        seen = {(r["nodeid"], r["kernel"], r["arch"]) for r in self.records}
        stale = set()
        for key in self.baseline:
            nodeid = key[0]
            if not any(nodeid.startswith(p) for p in self.scope.prefixes):
                continue
            if nodeid not in self.scope.collected or (nodeid in self.scope.completed and key not in seen):
                stale.add(key)
        return stale

    def finish(self) -> int | None:
        """Write what the run produced; returns an exit code when the baseline could not be written."""
        s = self.settings
        stale = self.stale_keys()
        exit_code = None
        if s.update and s.baseline_path is not None:
            fresh = {
                (r["nodeid"], r["kernel"], r["arch"]): entry_from_record(r)
                for r in self.records
                if r["registers"] is not None
            }
            try:
                counts = bl.update(s.baseline_path, fresh, stale)
            except bl.BaselineError as exc:
                self.finish_lines.append(f"baseline NOT updated: {exc}")
                exit_code = int(pytest.ExitCode.USAGE_ERROR)
            else:
                self.finish_lines.append(f"baseline {self._display(s.baseline_path)} updated: {counts}")
        self.finish_lines[:0] = baseline_lines(
            self.records,
            sorted(stale),
            updating=s.update,
            partial=self.scope.partial,
        )
        if s.json_path is not None:
            write_json(s.json_path, self.records)
        markdown = markdown_report(self.records) if self.records else ""
        if markdown and s.markdown_path is not None:
            bl.atomic_write(s.markdown_path, markdown)
        if markdown and s.step_summary is not None:
            # GitHub's step summary is shared by every command of the step: append, never replace.
            with open(s.step_summary, "a", encoding="utf-8") as fh:
                fh.write(markdown)
        return exit_code

    def summary(self) -> list[str]:
        lines = [*summary_lines(self.records), *self.finish_lines]
        if self.settings.annotate:
            lines += github_annotations(self.records, self.settings.rootdir)
        return lines


def parse_archs(values: Sequence[str]) -> list[str]:
    """Flatten repeated, comma-separated arch values, validating each and keeping the first of duplicates."""
    out: list[str] = []
    for value in values:
        for name in (v.strip() for v in value.replace("\n", ",").split(",")):
            if name and name not in out:
                get_arch(name)
                out.append(name)
    return out
