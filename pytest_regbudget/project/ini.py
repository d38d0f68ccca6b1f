"""pytest's ini settings read without pytest, for the `regbudget` command: the configuration file pytest would
find from a directory, and the values of the keys that project/options.py shares with the plugin.

The file is found as pytest finds it when given no path (`_pytest/config/findpaths.py`, `locate_config`): in
the directory and then each above it, the first of pytest.toml, .pytest.toml, pytest.ini, .pytest.ini,
pyproject.toml, tox.ini and setup.cfg that holds pytest's settings ([pytest]; [tool.pytest] or
[tool.pytest.ini_options]; [pytest]; [tool:pytest]). pytest.toml and pytest.ini count even when empty. Its
directory is the rootdir.
"""

from __future__ import annotations

import configparser
from collections.abc import Callable, Mapping
from pathlib import Path

from msgspec import Struct, field

from ..util.files import parse_nested, read_regular
from .options import IniKey

Values = Mapping[str, object]


class IniError(ValueError):
    """A configuration file that pytest would fail on too: TOML or INI it cannot parse."""


class IniSettings(Struct, frozen=True):
    """The pytest settings of one file (none found: empty), and the directory it makes the rootdir."""

    rootdir: Path
    path: Path | None = None
    values: Values = field(default_factory=dict)

    def string(self, key: IniKey) -> str:
        """The key's value as text, or its default; a TOML list is its items, comma-joined."""
        value = self.values.get(key.name)
        if value is None:
            return "" if key.default is None else str(key.default)
        if isinstance(value, list):
            return ",".join(str(v) for v in value)
        return str(value)

    def linelist(self, key: IniKey) -> list[str]:
        """A `linelist` key as pytest gives it: one item per non-empty line (or per TOML list item)."""
        value = self.values.get(key.name)
        if value is None:
            return []
        if isinstance(value, list):
            return [str(v) for v in value]
        return [line.strip() for line in str(value).splitlines() if line.strip()]

    def flag(self, key: IniKey) -> bool:
        """A `bool` key as pytest reads it: true/yes/on/1 (any case); a TOML boolean as it is."""
        value = self.values.get(key.name)
        if value is None:
            return bool(key.default)
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() in ("true", "yes", "y", "on", "t", "1")


def _text(path: Path) -> str:
    try:
        return read_regular(path).decode("utf-8")
    except OSError as exc:
        raise IniError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise IniError(f"{path}: not UTF-8 ({exc})") from None


def _toml(path: Path) -> dict[str, object]:
    import tomli  # only where a TOML file is read (1.5 ms, with its teardown, of a run that reads none)

    try:
        return parse_nested(tomli.loads, _text(path))
    except ValueError as exc:  # TOMLDecodeError, or TooDeep
        raise IniError(f"{path}: {exc}") from None


def _ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(_text(path), str(path))
    except configparser.Error as exc:
        raise IniError(f"{path}: {exc}") from None
    return parser


def _section(path: Path, name: str, *, always: bool = False) -> Values | None:
    parser = _ini(path)
    if parser.has_section(name):
        return dict(parser.items(name))
    return {} if always else None


def _table(doc: Mapping[str, object], *keys: str) -> Values | None:
    found: object = doc
    for key in keys:
        if not isinstance(found, Mapping) or key not in found:
            return None
        found = found[key]
    return found if isinstance(found, Mapping) else None


def _pytest_toml(path: Path) -> Values | None:
    return _table(_toml(path), "pytest") or {}


def _pyproject(path: Path) -> Values | None:
    tool = _table(_toml(path), "tool", "pytest")
    if tool is None:
        return None
    native = {k: v for k, v in tool.items() if k != "ini_options"}
    return native or _table(tool, "ini_options")


# pytest's own order (CONFIG_LOADERS_BY_NAME): the first file of a directory that holds settings wins.
_LOADERS: tuple[tuple[str, Callable[[Path], Values | None]], ...] = (
    ("pytest.toml", _pytest_toml),
    (".pytest.toml", _pytest_toml),
    ("pytest.ini", lambda p: _section(p, "pytest", always=True)),
    (".pytest.ini", lambda p: _section(p, "pytest", always=True)),
    ("pyproject.toml", _pyproject),
    ("tox.ini", lambda p: _section(p, "pytest")),
    ("setup.cfg", lambda p: _section(p, "tool:pytest")),
)


def read(start: Path) -> IniSettings:
    """The settings pytest run in `start` would read; IniError for a file it could not parse. Without any,
    the rootdir is the nearest pyproject.toml's directory, else `start` (pytest's: the common ancestor of
    its arguments, which here are `start`)."""
    start = start.resolve()
    pyproject = None
    for folder in (start, *start.parents):
        for name, load in _LOADERS:
            path = folder / name
            if path.is_file():
                values = load(path)
                if values is not None:
                    return IniSettings(folder, path, values)
                if name == "pyproject.toml" and pyproject is None:
                    pyproject = path
    return IniSettings(start) if pyproject is None else IniSettings(pyproject.parent, pyproject)
