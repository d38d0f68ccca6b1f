"""What a run prints before and after its tests: the header (where it builds, its archs, its baseline) and
its section of the terminal summary (cache, compilers, GPU, the finish lines, then the table).
"""

from __future__ import annotations

from ..core.errors import CompileError, ToolchainError, Unbuildable
from ..core.text import safe_block
from ..report.layout import wrap
from ..report.terminal import (
    compilers_line,
    empty_binaries_line,
    enforced_line,
    github_annotations,
    gpu_line,
    no_arch_line,
    summary_table,
)
from ..update import broken
from .progress import slowest_line
from .session import RegbudgetSession


def header(session: RegbudgetSession, *, nvcc: bool = False, binaries: bool = False) -> str:
    """The toolkit found, and the nvcc when the run is set to use one (`nvcc`: a manifest table names it);
    the summary's compilers line says what each kernel was built with in the end."""
    s = session.settings
    archs = ",".join(s.archs)
    try:
        where = "; ".join(b.toolkit().describe() for b in session.builders.values())
    except ToolchainError:
        where = "NO CUDA TOOLKIT FOUND (marked tests will fail and say why)"
    if binaries:
        # A manifest of prebuilt binaries compiles nothing: what reads them comes first.
        where = (
            f"{session.builder.cuobjdump() or 'NO CUOBJDUMP FOUND'}; toolkit for compiled kernels: {where}"
        )
    if nvcc or s.nvcc or s.compiler == "nvcc":
        try:
            found = session.builder.nvcc()
            where += f"; {found.describe()}"
        except (CompileError, ToolchainError, Unbuildable) as exc:
            where += f"; NO NVCC ({str(exc).splitlines()[0]})"
    base = "-"
    if s.baseline_path is not None:
        count = f"{len(session.baseline)} entries" if s.baseline_path.exists() else "not yet written"
        base = f"{s.display(s.baseline_path)} ({count}{', updating' if s.update else ''})"
    return f"regbudget: {where}; archs {archs}; baseline {base}; gpu {s.gpu_mode}"


def cache_line(session: RegbudgetSession) -> str:
    if session.settings.cache_refused:
        # The summary's cache line, under -q too (which hides the header): once, with the fix.
        return session.settings.cache_refused
    return session.builder.cache_line(session.cache_stats(session.worker_cache, skip_first=True))


def _compilers_line(session: RegbudgetSession) -> str | None:
    described = session.nvcc_found()
    read = any(r["compiler"] == "binary" for r in session.records)
    return compilers_line(session.records, described, session.builder.cuobjdump() if read else None)


def lines(session: RegbudgetSession, mode: str = "changes", width: int | None = None) -> list[str]:
    """The run's section of the terminal summary: where it built and what it found first, then the table
    (terminal.summary_table), so that its failing rows end next to pytest's own summary."""
    s = session.settings
    records = session.records
    annotations = github_annotations(records, s.rootdir) if s.annotate else []
    counted = enforced_line(records, updating=s.update, strict=s.strict)
    compared: list[str] = []
    if len({r["release"] for r in records}) > 1:  # the toolkits' differences, where there are several
        from ..report import compare  # a run of one toolkit compares none

        compared = compare.summary_lines(compare.across_releases(records))
    finish = [*compared, *([counted] if counted else []), *session.finish_lines]
    finish += broken.summary_lines(session.builds, updating=s.update)
    finish += empty_binaries_line(session.empty_binaries, s.archs, session.empty_sources)
    finish += no_arch_line(session.no_arch, s.archs)
    slowest = slowest_line(list({id(b.progress): b.progress for b in session.builders.values()}.values()))
    if not records and not finish and slowest is None:
        return []
    finish = [
        cache_line(session),
        *([slowest] if slowest else []),
        *filter(None, [_compilers_line(session)]),
        gpu_line(records, s.gpu_mode),
        *finish,
    ]
    # Every line but the annotations quotes outside text (paths, OS errors, names, ids): each is guarded
    # here, where the section leaves (core/text.py), so that none reads as a workflow command. The
    # annotations are the run's own commands, their text escaped as a command's data and properties.
    # Prose wraps at spaces within the width (the table fits it by itself); the annotations never do.
    return [
        *annotations,
        *(
            safe_block(line)
            for line in [*wrap(finish, width), *summary_table(records, mode=mode, width=width)]
        ),
    ]
