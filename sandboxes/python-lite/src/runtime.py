# Cordon's Python runtime for the RustPython guest: runs once, while the image is
# snapshotted.
#
# The guest contract (`tools`, `ToolError`, global async tools, one batch per gather,
# top-level await, the final expression as the result) is guest-sdk/python/contract.py,
# which ends this source; what is RustPython's own is here: streams and tool calls over
# the native `_cordon` module, stubs for what WASI lacks, packed time-zone data.
# `_run_cell` is the entry point the Rust side calls for each execution.

import sys
import types

import _cordon


class _Stream:
    """sys.stdout / sys.stderr: every write goes straight to the host (streamed, counted)."""

    def __init__(self, number, name):
        self._number = number
        self.name = name
        self.encoding = "utf-8"
        self.errors = "replace"
        self.buffer = _BinaryStream(number)

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        _cordon.write(self._number, text)
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def fileno(self):
        return self._number


class _BinaryStream:
    def __init__(self, number):
        self._number = number

    def write(self, data):
        _cordon.write_bytes(self._number, data)
        return len(data)

    def flush(self):
        pass


sys.stdout = sys.__stdout__ = _Stream(1, "<stdout>")
sys.stderr = sys.__stderr__ = _Stream(2, "<stderr>")


def _install_stubs_and_import(name, attempts=40):
    """Imports `name`; modules WASI lacks (sockets, signals, subprocesses) become stubs.

    asyncio imports them at module level but never uses them for pure event-loop work.
    """
    stubbed = []
    for _ in range(attempts):
        try:
            return __import__(name), stubbed
        except ModuleNotFoundError as error:
            missing = error.name
            if not missing or missing in sys.modules or missing in stubbed:
                raise
            stub = types.ModuleType(missing)
            stub.__cordon_stub__ = True
            sys.modules[missing] = stub
            stubbed.append(missing)
    raise ImportError(f"could not import {name}")


asyncio, _ = _install_stubs_and_import("asyncio")

# asyncio.run installs a SIGINT handler when the `signal` module offers one; WASI's has no
# signals, so give it the names asyncio reads and nothing to install.
import signal as _signal
if not hasattr(_signal, "SIGINT"):
    _signal.SIGINT = 2
if not hasattr(_signal, "default_int_handler"):
    def _no_signals(*_args):
        raise KeyboardInterrupt
    _signal.default_int_handler = _no_signals
if not hasattr(_signal, "getsignal"):
    _signal.getsignal = lambda _signum: None
if not hasattr(_signal, "signal"):
    _signal.signal = lambda _signum, _handler: None
# WASI files have no permission bits and RustPython's `os` has no `chmod` there, which
# `shutil.copy` and `copytree` call: accept it for a path that exists, change nothing.
import os as _os
if not hasattr(_os, "chmod"):
    def _chmod(path, mode, *, dir_fd=None, follow_symlinks=True):
        _os.stat(path)
    _os.chmod = _chmod
# `zoneinfo` reads zones from the database packed into the image (`_cordon.tzdata`), as it
# would from the `tzdata` package: the guest has no /usr/share/zoneinfo.
import io as _io
import zoneinfo as _zoneinfo
import zoneinfo._common as _zoneinfo_common
import zoneinfo._tzpath as _zoneinfo_tzpath


def _load_tzdata(key):
    data = _cordon.tzdata(key) if isinstance(key, str) else None
    if data is None:
        raise _zoneinfo_common.ZoneInfoNotFoundError(f"No time zone found with key {key}")
    return _io.BytesIO(data)


def _available_timezones():
    return set(_cordon.tzdata_zones()) - {"posixrules", "localtime", "Factory"}


_zoneinfo_common.load_tzdata = _load_tzdata
_zoneinfo_tzpath.available_timezones = _available_timezones
_zoneinfo.available_timezones = _available_timezones

# The standard modules models reach for, loaded now so `import` costs nothing later.
for _name in (
    "json", "re", "math", "datetime", "collections", "itertools", "functools", "random", "string",
    "statistics", "textwrap", "dataclasses", "typing", "decimal", "fractions", "heapq",
    "bisect", "base64", "hashlib", "uuid", "csv", "io", "enum", "copy", "operator", "pprint",
):
    try:
        __import__(_name)
    except Exception:  # a missing optional module must not break the image
        pass
del _name

import random as _random

# ---------------------------------------------------------------------------------------
# Tool calls through the native bridge (the contract's `_input_json`, `_from_json`,
# `_call_one`, `_call_batch`, `_call_value`; the contract is guest-sdk/python/contract.py,
# which ends this source)

_to_json = _cordon.encode
_from_json = _cordon.decode
_input_json = _cordon.encode
_call_one = _cordon.call
_call_value = _cordon.call_value


def _call_batch(calls):
    return _cordon.call_batch([name for name, _ in calls], [input_json for _, input_json in calls])


# ---------------------------------------------------------------------------------------
# Cells

_seeded = [False]


def _describe(error):
    return ("error",) + _error_outcome(error)


def _encode_result(value):
    if value is None:
        return ("ok", None, None, None)
    try:
        return ("ok", _to_json(value), None, None)
    except Exception:
        try:
            return ("ok", None, repr(value), None)
        except Exception as error:
            return ("ok", None, f"<unrepresentable {type(value).__name__}: {error}>", None)


def _run_cell(source, tool_names):
    if not _seeded[0]:
        # The snapshot froze the generator's state: every instance would draw the same
        # numbers. Reseed from WASI's random source on first use in this instance.
        # seed() without an argument draws from an RNG that is frozen in the snapshot too.
        import os as _os
        _random.seed(int.from_bytes(_os.urandom(32), "little"))
        _seeded[0] = True
    try:
        _prepare_cell(tool_names)
        # The final expression's value is the result: split the cell there (natively;
        # Python's ast round trip costs several times more).
        start = _cordon.last_expression_start(source)
        value = None
        if start < 0:
            _evaluate(compile(source, "<cell>", "exec", _TOP_LEVEL_AWAIT))
        else:
            head, tail = source[:start], source[start:]
            if head.strip():
                _evaluate(compile(head, "<cell>", "exec", _TOP_LEVEL_AWAIT))
            # Leading newlines keep the expression's line numbers right in tracebacks.
            tail = "\n" * head.count("\n") + tail
            value = _evaluate(compile(tail, "<cell>", "eval", _TOP_LEVEL_AWAIT))
        return _encode_result(value)
    except SystemExit as error:
        if error.code in (None, 0):
            return ("ok", None, None, None)
        return _describe(error)
    except BaseException as error:
        return _describe(error)
