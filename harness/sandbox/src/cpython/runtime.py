# Cordon's runtime for the CPython guest. It is loaded once, while the image is
# snapshotted, as the module `_cordon_runtime`; every execution is then one `turn` that
# calls `_execute()`.
#
# It gives guest code the same contract as the RustPython guest: `tools` (module),
# `ToolError`, every declared tool as a global async function, top-level await, an asyncio
# event loop that sends every tool call awaited together as one batch, the final
# expression as the result. Everything crosses to the host through `_host.call`, the
# module's one door, as Cordon's bridge frames with an op byte in front (see door.rs).

import ast
import builtins
import gc
import json
import json.encoder
import json.scanner
import keyword
import linecache
import os
import struct
import sys
import time
import traceback
import types

import _host

_OP_BEGIN = b"\x01"
_OP_CALL = b"\x02"
_OP_BATCH = b"\x03"
_OP_FINISH = b"\x04"

# ---------------------------------------------------------------------------------------
# Frames (guest-sdk/src/abi.rs): little-endian u32 lengths, UTF-8 strings.


def _put_str(out, text):
    data = text.encode("utf-8", "surrogatepass")
    out += struct.pack("<I", len(data))
    out += data


class _Reader:
    __slots__ = ("data", "at")

    def __init__(self, data):
        self.data = data
        self.at = 0

    def u8(self):
        value = self.data[self.at]
        self.at += 1
        return value

    def u32(self):
        (value,) = struct.unpack_from("<I", self.data, self.at)
        self.at += 4
        return value

    def str(self):
        size = self.u32()
        text = self.data[self.at:self.at + size].decode("utf-8", "surrogatepass")
        self.at += size
        return text


# ---------------------------------------------------------------------------------------
# Output: every write goes straight to WASI stdout/stderr (streamed and counted by the
# host); nothing sits in a buffer.


def _write_all(number, data):
    view = memoryview(data)
    while view:
        written = os.write(number, view)
        view = view[written:]


class _BinaryStream:
    def __init__(self, number):
        self._number = number

    def write(self, data):
        _write_all(self._number, bytes(data))
        return len(data)

    def flush(self):
        pass


class _Stream:
    """sys.stdout / sys.stderr, unbuffered."""

    def __init__(self, number, name):
        self._number = number
        self.name = name
        self.encoding = "utf-8"
        self.errors = "replace"
        self.buffer = _BinaryStream(number)

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        _write_all(self._number, text.encode("utf-8", "replace"))
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


sys.stdout = sys.__stdout__ = _Stream(1, "<stdout>")
sys.stderr = sys.__stderr__ = _Stream(2, "<stderr>")

# ---------------------------------------------------------------------------------------
# JSON, as the RustPython guest's native encoder: compact, key order kept, NaN and
# infinities refused, lone surrogates refused.


# One encoder for every call: `json.dumps` with options builds a new one each time, which
# costs more than the encoding of a small tool input itself.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_DECODER = json.JSONDecoder()


def _not_json(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder and scanner called directly: `JSONEncoder.encode` makes a new C encoder on
# every call and `JSONDecoder.decode` matches whitespace around the value with two regular
# expressions, which together cost more than the tool call's trip to the host (measured
# in the guest: 4.4 -> 1.6 us to encode a small input, 3.0 -> 0.9 us to decode a small
# result). No cycle markers: a cyclic value ends in RecursionError, reported like any
# other unencodable input.
_c_encoder = getattr(json.encoder, "c_make_encoder", None)
_c_scanner = getattr(json.scanner, "c_make_scanner", None)
_encode_chunks = (
    _c_encoder(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    if _c_encoder is not None
    else None
)
_scan = _c_scanner(_DECODER) if _c_scanner is not None else None


def _json_text(value):
    if _encode_chunks is not None:
        return "".join(_encode_chunks(value, 0))
    return _ENCODER.encode(value)


def _to_json_bytes(value):
    """UTF-8 JSON of `value`; lone surrogates are refused (ValueError)."""
    try:
        return _json_text(value).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string contains lone surrogates") from None


def _to_json(value):
    text = _json_text(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string contains lone surrogates") from None
    return text


def _from_json(text):
    # The host sends compact JSON (no surrounding whitespace): the scanner alone reads it;
    # anything else takes the full decoder, which also words its errors.
    if _scan is not None:
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text):
                return value
    return _DECODER.decode(text)


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
        return _to_json_bytes(value)
    except (TypeError, ValueError, RecursionError) as error:
        raise ToolError(f"{name}: arguments are not JSON: {error}", "invalid_input", name) from None


_pack_len = struct.Struct("<I").pack
_unpack_response = struct.Struct("<BI").unpack_from


def _call_one(name, input_bytes):
    name_bytes = name.encode("utf-8", "surrogatepass")
    answer = _host.call(
        b"".join((_OP_CALL, _pack_len(len(name_bytes)), name_bytes, _pack_len(len(input_bytes)), input_bytes))
    )
    status, size = _unpack_response(answer)
    return status, answer[5:5 + size].decode("utf-8", "surrogatepass")


def _call_batch(calls):
    frame = bytearray(_OP_BATCH)
    frame += _pack_len(len(calls))
    for name, input_bytes in calls:
        _put_str(frame, name)
        frame += _pack_len(len(input_bytes))
        frame += input_bytes
    reader = _Reader(_host.call(bytes(frame)))
    return [(reader.u8(), reader.str()) for _ in range(reader.u32())]


def call(name, args=None, /, **kwargs):
    """Calls tool `name` synchronously: `tools.call("get_weather", {"city": "Paris"})`."""
    if not isinstance(name, str):
        raise TypeError("tools.call() needs the tool name as a string")
    if args is None:
        args = kwargs
    elif kwargs:
        raise TypeError("tools.call() takes a dict or keyword arguments, not both")
    status, payload = _call_one(name, _encode_input(name, (args,), {}))
    return _decode(name, status, payload)


# Calls awaited but not yet sent: (name, input as UTF-8 JSON, future). The event loop
# sends them as one batch when every runnable task is blocked.
_pending = []


def _flush_pending():
    batch = [entry for entry in _pending if not entry[2].done()]
    _pending.clear()
    if not batch:
        return
    if len(batch) == 1:
        results = [_call_one(batch[0][0], batch[0][1])]
    else:
        results = _call_batch([(entry[0], entry[1]) for entry in batch])
    for (name, _input, future), (status, payload) in zip(batch, results):
        if future.done():
            continue
        try:
            future.set_result(_decode(name, status, payload))
        except Exception as error:  # ToolError, or a result that is not JSON
            future.set_exception(error)


import asyncio  # noqa: E402  (after the streams: importing it may warn)


def _make_tool(name):
    async def tool(*args, **kwargs):
        input_bytes = _encode_input(name, args, kwargs)
        future = asyncio.get_running_loop().create_future()
        _pending.append((name, input_bytes, future))
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


tools = types.ModuleType("tools", "Tools declared for this execution.")
tools.call = call
tools.ToolError = ToolError
sys.modules["tools"] = tools


def _bind_tools(names, namespace):
    """Exposes each tool as `tools.<name>` and as a global of the cell."""
    for name in names:
        function = _make_tool(name)
        parts = [_python_name(p) for p in name.split(".")]
        if any(keyword.iskeyword(p) for p in parts):
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
# The event loop: WASI has no sockets or signals (the default loop's self-pipe needs
# `socketpair`), so the loop's "selector" does two things only: send pending tool calls
# as one batch, or sleep until the next timer.


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


def _install_loop():
    policy_base = getattr(asyncio.events, "_BaseDefaultEventLoopPolicy", None) or getattr(
        asyncio.events, "BaseDefaultEventLoopPolicy", None
    )
    if policy_base is not None:

        class _Policy(policy_base):
            _loop_factory = CordonEventLoop

        setter = getattr(asyncio.events, "_set_event_loop_policy", None) or getattr(
            asyncio, "set_event_loop_policy"
        )
        try:
            setter(_Policy())
        except Exception:
            pass
    asyncio.new_event_loop = asyncio.events.new_event_loop = CordonEventLoop
    # asyncio.run and asyncio.Runner make their loop with this unless given a factory.
    original_run = asyncio.run

    def run(main, *, debug=None, loop_factory=None):
        return original_run(main, debug=debug, loop_factory=loop_factory or CordonEventLoop)

    asyncio.run = asyncio.runners.run = run
    original_runner_init = asyncio.Runner.__init__

    def runner_init(self, *, debug=None, loop_factory=None):
        original_runner_init(self, debug=debug, loop_factory=loop_factory or CordonEventLoop)

    asyncio.Runner.__init__ = runner_init


_install_loop()
_loop = None


def _event_loop():
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = CordonEventLoop()
    return _loop


# ---------------------------------------------------------------------------------------
# Cells

_CO_COROUTINE = 0x80
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_main = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
_first_execution = [True]


def _strip_runtime_frames(error):
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<cordon>":
        tb = tb.tb_next
    return error.with_traceback(tb)


def _error_outcome(error):
    error = _strip_runtime_frames(error)
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    message = str(error)
    if isinstance(error, SyntaxError):
        message = f"{error.msg} (line {error.lineno}, column {error.offset})"
    return (type(error).__name__, message, "".join(lines))


def _evaluate(code_object):
    value = eval(code_object, _main)
    if code_object.co_flags & _CO_COROUTINE:
        value = _event_loop().run_until_complete(value)
    return value


def _run_cell(source):
    """Runs the cell; returns the final expression's value (None when there is none)."""
    # Tracebacks show the cell's lines.
    linecache.cache["<cell>"] = (len(source), None, source.splitlines(True), "<cell>")
    tree = compile(source, "<cell>", "exec", ast.PyCF_ONLY_AST | _FLAGS)
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        head = ast.Module(body=tree.body[:-1], type_ignores=[])
        if head.body:
            _evaluate(compile(head, "<cell>", "exec", _FLAGS))
        return _evaluate(compile(ast.Expression(body=last.value), "<cell>", "eval", _FLAGS))
    _evaluate(compile(tree, "<cell>", "exec", _FLAGS))
    return None


def _completed_frame(value):
    frame = bytearray(_OP_FINISH)
    frame.append(0)
    json_text = repr_text = None
    if value is not None:
        try:
            json_text = _to_json(value)
        except Exception:
            try:
                repr_text = repr(value)
            except Exception as error:
                repr_text = f"<unrepresentable {type(value).__name__}: {error}>"
    for text in (json_text, repr_text):
        if text is None:
            frame.append(0)
        else:
            frame.append(1)
            _put_str(frame, text)
    return frame


def _error_frame(error_type, message, trace):
    frame = bytearray(_OP_FINISH)
    frame.append(1)
    for text in (error_type, message, trace):
        _put_str(frame, text)
    return frame


def _reseed():
    """The snapshot froze every generator's state: each instance reseeds from WASI's
    random source before its first execution."""
    import random

    random.seed(os.urandom(32))
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed(list(struct.unpack("<8I", os.urandom(32))))


def _execute():
    """One execution: take the request, run the cell, report the outcome."""
    if _first_execution[0]:
        _first_execution[0] = False
        _reseed()
    reader = _Reader(_host.call(_OP_BEGIN))
    names = [reader.str() for _ in range(reader.u32())]
    source = reader.str()
    try:
        os.chdir("/workspace")
    except OSError:
        pass
    try:
        _bind_tools(names, _main)
        _main["tools"] = tools
        _main["ToolError"] = ToolError
        frame = _completed_frame(_run_cell(source))
    except SystemExit as error:
        if error.code in (None, 0):
            frame = _completed_frame(None)
        else:
            frame = _error_frame(*_error_outcome(error))
    except BaseException as error:
        frame = _error_frame(*_error_outcome(error))
    finally:
        _pending.clear()
    _host.call(bytes(frame))


# ---------------------------------------------------------------------------------------
# Snapshot time


# The standard modules models reach for, loaded now so `import` costs nothing later.
_STANDARD = (
    "json", "re", "math", "datetime", "collections", "itertools", "functools", "random",
    "string", "statistics", "textwrap", "dataclasses", "typing", "decimal", "fractions",
    "heapq", "bisect", "base64", "hashlib", "uuid", "csv", "io", "enum", "copy", "operator",
    "pprint", "zoneinfo", "sqlite3",
)


def _preload(packages):
    """Imports the standard modules and `packages` into the image, then freezes the heap
    so the collector never walks (and copies) the snapshot's objects."""
    for name in _STANDARD:
        try:
            __import__(name)
        except Exception:  # a missing optional module must not break the image
            pass
    # matplotlib wants a writable config folder; /tmp is one while the image is made. Its
    # font list is built there once and kept in memory by the snapshot.
    os.environ["MPLCONFIGDIR"] = "/tmp/matplotlib"
    for name in packages:
        __import__(name)
        if name == "matplotlib":
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401  builds the font list now

    # Executions start with an empty environment.
    os.environ.pop("MPLCONFIGDIR", None)
    gc.collect()
    gc.freeze()
