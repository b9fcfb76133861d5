"""Field access and value checks shared by the JSON loaders.

Every check raises :class:`ValueError` whose message starts with the field's path
(``nodes[3].flops``) and ends with the offending value, so a bad file is fixed in one go.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")
Source = str | os.PathLike[str] | Mapping[str, Any]


#: Longest value shown in a message; longer ones are cut (``...``).
SHOWN_CHARS = 100


def fail(where: str, problem: str, value: Any = None, *, show_value: bool = True) -> ValueError:
    """Build the ValueError for field ``where``; the value is appended when given."""
    msg = f"{where}: {problem}"
    if show_value:
        shown = repr(value)
        if len(shown) > SHOWN_CHARS:
            shown = shown[: SHOWN_CHARS - 3] + "..."
        msg += f", got {shown}"
    return ValueError(msg)


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of a file; a missing file, a directory or a binary (non-UTF-8) file
    gives an error naming the path."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a directory, not a {what} file") from None
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{p}: not a {what} file (not UTF-8 text: byte 0x{e.object[e.start]:02x} "
            f"at offset {e.start})"
        ) from None


def read_json(source: Source, what: str) -> dict[str, Any]:
    """Return a dict from a mapping or a JSON file path; errors name the file."""
    if isinstance(source, Mapping):
        return dict(source)
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"{what}: expected a path or a dict, got {type(source).__name__}")
    path = Path(source)
    text = read_text(path, f"{what} JSON")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except ValueError:  # json raises it for an integer beyond Python's digit limit
        raise ValueError(
            f"{path}: not a usable {what} file (an integer of more than "
            f"{sys.get_int_max_str_digits()} digits)"
        ) from None
    except RecursionError:
        raise ValueError(f"{path}: not a usable {what} file (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def load_document(source: Source, what: str, parse: Callable[[Mapping[str, Any]], T]) -> T:
    """Parse a dict or JSON file with ``parse``; errors from a file are prefixed by its path."""
    data = read_json(source, what)
    if isinstance(source, Mapping):
        return parse(data)
    try:
        return parse(data)
    except ValueError as e:
        raise ValueError(f"{os.fspath(source)}: {e}") from None


def check_format(data: Mapping[str, Any], tag: str, *others: str) -> None:
    """Check the ``format`` tag of a document: ``tag`` (or one of ``others``, the other
    versions the reader also takes)."""
    expected = " or ".join(repr(t) for t in (tag, *others))
    if "format" not in data:
        raise ValueError(f"format: missing field (expected {expected})")
    if data["format"] not in (tag, *others):
        raise fail("format", f"unknown format tag, expected {expected}", data["format"])


def get(obj: Mapping[str, Any], key: str, where: str, default: Any = ...) -> Any:
    """``obj[key]``; a missing key without default raises naming ``where.key``."""
    if key in obj:
        return obj[key]
    if default is ...:
        path = f"{where}.{key}" if where else key
        raise ValueError(f"{path}: missing field")
    return default


def as_list(value: Any, where: str) -> list[Any]:
    """``value`` as a list, else the error naming ``where``."""
    if not isinstance(value, list | tuple):
        raise fail(where, "expected a list", value)
    return list(value)


def as_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as a mapping, else the error naming ``where``."""
    if not isinstance(value, Mapping):
        raise fail(where, "expected an object", value)
    return value


def number(value: Any, where: str, *, positive: bool = False) -> float:
    """A finite number >= 0 (> 0 with ``positive``)."""
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok:
        raise fail(where, "expected a number", value)
    try:
        x = float(value)
    except OverflowError:  # an int beyond the float range (about 1.8e308)
        raise fail(where, "too large for a float", _short(value)) from None
    if not math.isfinite(x):
        raise fail(where, "must be finite", value)
    if positive and x <= 0:
        raise fail(where, "must be > 0", value)
    if x < 0:
        raise fail(where, "must be >= 0", value)
    return x


#: Integers in documents must fit int64 (they are stored in int64 arrays).
INT_RANGE = (-(2**63), 2**63)

#: Size limits, checked before anything of that size is allocated: a tiny file that asks
#: for a billion devices gets one line, not a MemoryError a minute later. A cluster's
#: device-pair tables take ``D²`` floats each (4,096 devices: 134 MB a table); the
#: largest shipped instances have 9,313 nodes and 1,024 devices.
DEVICE_LIMIT = 4_096
NODE_LIMIT = 1_000_000
EDGE_LIMIT = 20_000_000


def size(count: int, where: str, limit: int) -> int:
    """``count``, or ``ValueError`` naming ``where`` when it is over ``limit``."""
    if count > limit:
        raise fail(where, f"{count:,} is over the limit of {limit:,}", show_value=False)
    return count


def integer(value: Any, where: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """An integer in ``[lo, hi)`` (either bound optional), always within int64."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise fail(where, "expected an integer", value)
    v = int(value)
    if lo is not None and v < lo:
        raise fail(where, f"must be >= {lo}", _short(v))
    if hi is not None and v >= hi:
        raise fail(where, f"out of range (must be < {hi})", _short(v))
    if not INT_RANGE[0] <= v < INT_RANGE[1]:
        raise fail(where, "out of range (must fit in 64 bits)", _short(v))
    return v


class _Shown:
    """A value as shown in a message (its ``repr`` is the text as is)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _short(value: Any) -> Any:
    """``value``, or for an integer of more than 20 digits its size instead of its digits."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        digits = math.floor(math.log10(abs(value))) + 1
        return _Shown(f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits")
    return value


def check_array(arr: np.ndarray, where: str, *, positive: bool = False) -> None:
    """Vectorised :func:`number` over an array; names the first bad index."""
    bad = ~np.isfinite(arr) | (arr <= 0 if positive else arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        number(arr[i].item(), where.format(i=i), positive=positive)


def compact(x: float) -> int | float:
    """Integral floats as ints, so saved files read naturally."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)
