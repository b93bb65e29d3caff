# The guest contract both Python guests share: `tools` (module), `ToolError` with `.kind`,
# every declared tool as a global async function, an asyncio event loop that sends every
# tool call awaited together as one batch, and cells run with top-level await whose final
# expression is the result.
#
# It is not a module of its own: each guest's runtime source ends with this text (the
# runtime has set up its streams and made `asyncio` importable by then). The runtime
# defines what differs between the interpreters, used only when a tool is called:
#   _input_json(value)           a tool input as the door takes it (TypeError, ValueError or
#                                RecursionError when it is not JSON)
#   _from_json(text)             a JSON result as a Python value
#   _call_one(name, input)       one call through the door: (status, payload)
#   _call_batch(calls)           [(name, input), ...] through the door: [(status, payload), ...]
# and may define, for `tools.call`'s one step (a default built on the above follows):
#   _call_value(name, value)     (0, result value), (kind status, message), or (-1, reason)
#                                when the value is not JSON

import ast as _ast
import asyncio
import builtins as _builtins
import keyword as _keyword
import sys as _sys
import time as _time
import traceback as _traceback
import types as _types

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


def _usage_error(name):
    return TypeError(
        f"{name}() takes keyword arguments or a single dict, "
        f"e.g. {name}(city='Paris') or {name}({{'city': 'Paris'}})"
    )


def _args_not_json(name, reason):
    return ToolError(f"{name}: arguments are not JSON: {reason}", "invalid_input", name)


def _encode_input(name, args, kwargs):
    if args:
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            value = args[0]
        else:
            raise _usage_error(name)
    else:
        value = kwargs
    try:
        return _input_json(value)
    except (TypeError, ValueError, RecursionError) as error:
        raise _args_not_json(name, error) from None


if "_call_value" not in globals():

    def _call_value(name, value):
        try:
            input_json = _input_json(value)
        except (TypeError, ValueError, RecursionError) as error:
            return -1, str(error)
        status, payload = _call_one(name, input_json)
        return (0, _from_json(payload)) if status == 0 else (status, payload)


def call(name, args=None, /, **kwargs):
    """Calls tool `name` synchronously: `tools.call("get_weather", {"city": "Paris"})`."""
    if not isinstance(name, str):
        raise TypeError("tools.call() needs the tool name as a string")
    if args is None:
        args = kwargs
    elif kwargs:
        raise TypeError("tools.call() takes a dict or keyword arguments, not both")
    if not isinstance(args, dict):
        raise _usage_error(name)
    # One step through the door (encode, call, decode): a loop of calls is the hot path.
    status, payload = _call_value(name, args)
    if status == 0:
        return payload
    if status < 0:
        raise _args_not_json(name, payload)
    return _decode(name, status, payload)


# Calls awaited but not yet sent: (name, input, future). The event loop sends them as one
# batch when every runnable task is blocked.
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


def _make_tool(name):
    async def tool(*args, **kwargs):
        input_json = _encode_input(name, args, kwargs)
        future = asyncio.get_running_loop().create_future()
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


tools = _types.ModuleType("tools", "Tools declared for this execution.")
tools.call = call
tools.ToolError = ToolError
_sys.modules["tools"] = tools


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
            _time.sleep(timeout)
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
_TOP_LEVEL_AWAIT = getattr(_ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0x2000)
_main = {"__name__": "__main__", "__builtins__": _builtins, "__doc__": None}


def _strip_runtime_frames(error):
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<cordon>":
        tb = tb.tb_next
    return error.with_traceback(tb)


def _error_outcome(error):
    """(type name, message, traceback text) of an error the cell raised."""
    error = _strip_runtime_frames(error)
    lines = _traceback.format_exception(type(error), error, error.__traceback__)
    message = str(error)
    if isinstance(error, SyntaxError):
        message = f"{error.msg} (line {error.lineno}, column {error.offset})"
    return (type(error).__name__, message, "".join(lines))


def _evaluate(code_object):
    value = eval(code_object, _main)
    if code_object.co_flags & _CO_COROUTINE:
        value = _event_loop().run_until_complete(value)
    return value


def _prepare_cell(tool_names):
    """Binds this execution's tools into the cell's globals."""
    _bind_tools(tool_names, _main)
    _main["tools"] = tools
    _main["ToolError"] = ToolError
