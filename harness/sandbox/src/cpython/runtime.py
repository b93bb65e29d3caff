# Cordon's runtime for the CPython guest. It is loaded once, while the image is
# snapshotted, as the module `_cordon_runtime`; every execution is then one `turn` that
# calls `_execute()`.
#
# It gives guest code the same contract as the RustPython guest (`tools`, `ToolError`,
# global async tools, one batch per gather, top-level await, the final expression as the
# result): that part is guest-sdk/python/contract.py, which ends this source. What is
# CPython's own is here: everything crosses to the host through `_host.call`, the
# module's one door, as Cordon's bridge frames with an op byte in front (see door.rs).

import ast
import gc
import json
import json.encoder
import json.scanner
import linecache
import os
import struct
import sys

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
# Tool calls through the door (the contract's `_input_json`, `_call_one`, `_call_batch`)

_input_json = _to_json_bytes

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


# ---------------------------------------------------------------------------------------
# Cells

_first_execution = [True]


def _run_cell(source):
    """Runs the cell; returns the final expression's value (None when there is none)."""
    # Tracebacks show the cell's lines.
    linecache.cache["<cell>"] = (len(source), None, source.splitlines(True), "<cell>")
    tree = compile(source, "<cell>", "exec", ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT)
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        head = ast.Module(body=tree.body[:-1], type_ignores=[])
        if head.body:
            _evaluate(compile(head, "<cell>", "exec", _TOP_LEVEL_AWAIT))
        return _evaluate(compile(ast.Expression(body=last.value), "<cell>", "eval", _TOP_LEVEL_AWAIT))
    _evaluate(compile(tree, "<cell>", "exec", _TOP_LEVEL_AWAIT))
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
        _prepare_cell(names)
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
