# Cordon's Python runtime: runs once, while the image is snapshotted.
#
# It gives guest code `tools` (module), `ToolError`, every declared tool as a global async
# function, top-level await, and an asyncio event loop that sends all tool calls awaited
# together (asyncio.gather, TaskGroup, ...) to the host as one batch. `_run_cell` is the
# entry point the Rust side calls for each execution.

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
import ast
import time
import traceback
import builtins

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
# Tools


class ToolError(Exception):
    """A tool call failed, was denied, or got arguments that violate its schema.

    `kind` is one of: tool_failed, invalid_input, denied, unknown_tool, timeout.
    """

    def __init__(self, message, kind="tool_failed", tool=None):
        super().__init__(message)
        self.kind = kind
        self.tool = tool


_KINDS = {1: "tool_failed", 2: "invalid_input", 3: "denied", 4: "unknown_tool", 5: "timeout"}


_to_json = _cordon.encode
_from_json = _cordon.decode


def _decode(name, status, payload):
    if status == 0:
        return _from_json(payload)
    raise ToolError(f"{name}: {payload}", _KINDS.get(status, "tool_failed"), name)


def _encode_input(name, args, kwargs):
    if args:
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            value = args[0]
        else:
            raise TypeError(
                f"{name}() takes keyword arguments or a single dict, "
                f"e.g. {name}(city='Paris') or {name}({{'city': 'Paris'}})"
            )
    else:
        value = kwargs
    try:
        return _to_json(value)
    except (TypeError, ValueError) as error:
        raise ToolError(f"{name}: arguments are not JSON: {error}", "invalid_input", name) from None


def call(name, args=None, /, **kwargs):
    """Calls tool `name` synchronously: `tools.call("get_weather", {"city": "Paris"})`."""
    if not isinstance(name, str):
        raise TypeError("tools.call() needs the tool name as a string")
    if args is None:
        args = kwargs
    elif kwargs:
        raise TypeError("tools.call() takes a dict or keyword arguments, not both")
    status, payload = _cordon.call(name, _encode_input(name, (args,), {}))
    return _decode(name, status, payload)


# Calls awaited but not yet sent: (name, input_json, future). The event loop sends them
# as one batch when every runnable task is blocked.
_pending = []


def _flush_pending():
    batch = [entry for entry in _pending if not entry[2].done()]
    _pending.clear()
    if not batch:
        return
    if len(batch) == 1:
        results = [_cordon.call(batch[0][0], batch[0][1])]
    else:
        results = _cordon.call_batch([e[0] for e in batch], [e[1] for e in batch])
    for (name, _input, future), (status, payload) in zip(batch, results):
        if future.done():
            continue
        try:
            future.set_result(_decode(name, status, payload))
        except Exception as error:  # ToolError, or a result that is not JSON
            future.set_exception(error)


def _make_tool(name):
    async def tool(*args, **kwargs):
        input_json = _encode_input(name, args, kwargs)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        _pending.append((name, input_json, future))
        return await future

    short = name.rsplit(".", 1)[-1]
    tool.__name__ = tool.__qualname__ = short
    tool.__doc__ = f"Calls the tool {name!r}: `await {short}(...)` with keyword arguments."
    return tool


class _Namespace:
    """Tools of one connected server, reached as `await server.tool(...)`."""

    def __init__(self, name):
        self.__name = name

    def __repr__(self):
        return f"<tools of {self.__name}>"


def _python_name(name):
    cleaned = "".join(c if (c.isalnum() or c == "_") else "_" for c in name)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "_" + cleaned
    return cleaned


import keyword as _keyword

tools = types.ModuleType("tools", "Tools declared for this execution.")
tools.call = call
tools.ToolError = ToolError
sys.modules["tools"] = tools


def _bind_tools(names, namespace):
    """Exposes each tool as `tools.<name>` and as a global of the cell."""
    for name in names:
        function = _make_tool(name)
        parts = [_python_name(p) for p in name.split(".")]
        if any(_keyword.iskeyword(p) for p in parts):
            setattr(tools, "_".join(parts), function)
            continue
        for holder in (tools, namespace):
            target = holder
            for part in parts[:-1]:
                current = target.get(part) if isinstance(target, dict) else getattr(target, part, None)
                if not isinstance(current, _Namespace):
                    current = _Namespace(part)
                    if isinstance(target, dict):
                        target[part] = current
                    else:
                        setattr(target, part, current)
                target = current
            if isinstance(target, dict):
                target[parts[-1]] = function
            else:
                setattr(target, parts[-1], function)


# ---------------------------------------------------------------------------------------
# The event loop: WASI has no sockets or signals, so the loop's "selector" does two things
# only: send pending tool calls as one batch, or sleep until the next timer.


class _BridgeSelector:
    def select(self, timeout):
        if _pending:
            if timeout == 0:
                return []  # runnable tasks first: they may add calls to this batch
            _flush_pending()
            return []
        if timeout is None:
            raise RuntimeError(
                "deadlock: every task is waiting, and no tool call or timer is pending"
            )
        if timeout > 0:
            time.sleep(timeout)
        return []

    def close(self):
        pass


class CordonEventLoop(asyncio.BaseEventLoop):
    def __init__(self):
        super().__init__()
        self._selector = _BridgeSelector()

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass


def _install_loop_policy():
    policy_base = getattr(asyncio.events, "BaseDefaultEventLoopPolicy", None)
    if policy_base is not None:

        class _Policy(policy_base):
            _loop_factory = CordonEventLoop

        try:
            asyncio.events._set_event_loop_policy(_Policy())
        except AttributeError:
            asyncio.set_event_loop_policy(_Policy())
    asyncio.new_event_loop = asyncio.events.new_event_loop = CordonEventLoop


_install_loop_policy()
_loop = None


def _event_loop():
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = CordonEventLoop()
    return _loop


# ---------------------------------------------------------------------------------------
# Cells

_CO_COROUTINE = 0x80
_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0x2000)
_main = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
_seeded = [False]


def _strip_runtime_frames(error):
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<cordon>":
        tb = tb.tb_next
    return error.with_traceback(tb)


def _describe(error):
    error = _strip_runtime_frames(error)
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    message = str(error)
    if isinstance(error, SyntaxError):
        message = f"{error.msg} (line {error.lineno}, column {error.offset})"
    return ("error", type(error).__name__, message, "".join(lines))


def _evaluate(code_object):
    value = eval(code_object, _main)
    if code_object.co_flags & _CO_COROUTINE:
        value = _event_loop().run_until_complete(value)
    return value


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
        _bind_tools(tool_names, _main)
        _main["tools"] = tools
        _main["ToolError"] = ToolError
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
