// Cordon's JavaScript runtime: evaluated once, while the image is snapshotted.
//
// The Rust side (image.rs) owns the driver loop, the tool-call queue and the timers. This
// file owns what is easier to say in JavaScript: `console` and its node-like formatting,
// `ToolError`, `structuredClone`, and how a final value or an exception is reported.
//
// Guest code may replace any global or prototype method (`JSON`, `Object.keys`,
// `Array.prototype.push`, `console` ...). Everything used here is captured now, while the
// intrinsics are pristine ("primordials", as node calls them): prototype methods are
// called through `uncurry`, never looked up on the value at call time.
(function (native) {
  "use strict";

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const getter = (proto, key) => uncurry(Object.getOwnPropertyDescriptor(proto, key).get);

  const {
    keys: ObjectKeys,
    getOwnPropertyNames: ObjectGetOwnPropertyNames,
    getOwnPropertySymbols: ObjectGetOwnPropertySymbols,
    getOwnPropertyDescriptor: ObjectGetOwnPropertyDescriptor,
    getPrototypeOf: ObjectGetPrototypeOf,
    defineProperty: ObjectDefineProperty,
    is: ObjectIs,
    hasOwn: ObjectHasOwn,
    freeze: ObjectFreeze,
  } = Object;
  const ObjectPrototype = Object.prototype;
  const ObjectPrototypeToString = uncurry(Object.prototype.toString);
  const ObjectPrototypePropertyIsEnumerable = uncurry(Object.prototype.propertyIsEnumerable);
  const ArrayIsArray = Array.isArray;
  const ArrayPrototypePush = uncurry(Array.prototype.push);
  const ArrayPrototypeJoin = uncurry(Array.prototype.join);
  const ArrayPrototypeIncludes = uncurry(Array.prototype.includes);
  const ArrayPrototypePop = uncurry(Array.prototype.pop);
  const JSONStringify = JSON.stringify;
  const StringCtor = String;
  const NumberIsFinite = Number.isFinite;
  const MathMin = Math.min;
  const MathFloor = Math.floor;
  const NumberPrototypeToString = uncurry(Number.prototype.toString);
  const NumberPrototypeToFixed = uncurry(Number.prototype.toFixed);
  const performanceNow = uncurry(performance.now);
  const performanceObject = performance;
  const StringPrototypeSlice = uncurry(String.prototype.slice);
  const StringPrototypeIndexOf = uncurry(String.prototype.indexOf);
  const StringPrototypeCharCodeAt = uncurry(String.prototype.charCodeAt);
  const StringPrototypeStartsWith = uncurry(String.prototype.startsWith);
  const StringPrototypeToWellFormed = uncurry(String.prototype.toWellFormed);
  const NumberPrototypeValueOf = uncurry(Number.prototype.valueOf);
  const StringPrototypeValueOf = uncurry(String.prototype.valueOf);
  const BooleanPrototypeValueOf = uncurry(Boolean.prototype.valueOf);
  const BigIntPrototypeValueOf = uncurry(BigInt.prototype.valueOf);
  const BigIntPrototypeToString = uncurry(BigInt.prototype.toString);
  const SymbolPrototypeValueOf = uncurry(Symbol.prototype.valueOf);
  const SymbolPrototypeToString = uncurry(Symbol.prototype.toString);
  const FunctionPrototypeToString = uncurry(Function.prototype.toString);
  const DatePrototypeGetTime = uncurry(Date.prototype.getTime);
  const DatePrototypeToISOString = uncurry(Date.prototype.toISOString);
  const RegExpPrototypeToString = uncurry(RegExp.prototype.toString);
  const RegExpPrototypeSource = getter(RegExp.prototype, "source");
  const MapPrototypeSize = getter(Map.prototype, "size");
  const MapPrototypeForEach = uncurry(Map.prototype.forEach);
  const MapPrototypeSet = uncurry(Map.prototype.set);
  const MapPrototypeGet = uncurry(Map.prototype.get);
  const MapPrototypeHas = uncurry(Map.prototype.has);
  const MapPrototypeDelete = uncurry(Map.prototype.delete);
  const SetPrototypeSize = getter(Set.prototype, "size");
  const SetPrototypeForEach = uncurry(Set.prototype.forEach);
  const SetPrototypeAdd = uncurry(Set.prototype.add);
  const WeakMapPrototypeHas = uncurry(WeakMap.prototype.has);
  const WeakSetPrototypeHas = uncurry(WeakSet.prototype.has);
  const ArrayBufferPrototypeByteLength = getter(ArrayBuffer.prototype, "byteLength");
  const ArrayBufferPrototypeSlice = uncurry(ArrayBuffer.prototype.slice);
  const TypedArrayPrototype = ObjectGetPrototypeOf(Uint8Array.prototype);
  const TypedArrayPrototypeTag = getter(TypedArrayPrototype, Symbol.toStringTag);
  const TypedArrayPrototypeLength = getter(TypedArrayPrototype, "length");
  const TypedArrayPrototypeSlice = uncurry(TypedArrayPrototype.slice);
  const DataViewPrototypeBuffer = getter(DataView.prototype, "buffer");
  const ErrorCtor = Error;
  const ObjectCtor = Object;
  const ArrayCtor = Array;
  const NumberCtor = Number;
  const BooleanCtor = Boolean;
  const RegExpPrototype = RegExp.prototype;
  const errorConstructors = ObjectFreeze({
    __proto__: null,
    Error,
    EvalError,
    RangeError,
    ReferenceError,
    SyntaxError,
    TypeError,
    URIError,
    AggregateError,
  });
  const MapCtor = Map;
  const SetCtor = Set;
  const DateCtor = Date;
  const RegExpCtor = RegExp;
  const DataViewCtor = DataView;
  const TypeErrorCtor = TypeError;
  const DOMExceptionCtor = globalThis.DOMException;
  const TypedArrayPrototypeBuffer = getter(TypedArrayPrototype, "buffer");
  const TypedArrayPrototypeByteOffset = getter(TypedArrayPrototype, "byteOffset");
  const TypedArrayPrototypeByteLength = getter(TypedArrayPrototype, "byteLength");
  const Uint8ArrayCtor = Uint8Array;
  const { write, isError, promiseState, randomUint32 } = native;

  // -------------------------------------------------------------------------------------
  // Small helpers that must not touch anything guest code can replace.

  function define(target, key, value, enumerable) {
    ObjectDefineProperty(target, key, {
      __proto__: null,
      value,
      writable: true,
      enumerable,
      configurable: true,
    });
  }

  function tryCall(f, fallback) {
    try {
      return f();
    } catch {
      return fallback;
    }
  }

  // Lone surrogates cannot cross into Rust as UTF-8; they become U+FFFD.
  function wellFormed(text) {
    return StringPrototypeToWellFormed(text);
  }

  function isIdentifier(key) {
    if (key.length === 0) return false;
    for (let i = 0; i < key.length; i++) {
      const c = StringPrototypeCharCodeAt(key, i);
      const letter = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 36;
      const digit = c >= 48 && c <= 57;
      if (!(letter || (digit && i > 0))) return false;
    }
    return true;
  }

  function indent(text) {
    let out = "";
    let from = 0;
    for (;;) {
      const at = StringPrototypeIndexOf(text, "\n", from);
      if (at < 0) return out + StringPrototypeSlice(text, from);
      out += StringPrototypeSlice(text, from, at) + "\n  ";
      from = at + 1;
    }
  }

  function hasNewline(text) {
    return StringPrototypeIndexOf(text, "\n") >= 0;
  }

  function quote(text) {
    let q = "'";
    if (StringPrototypeIndexOf(text, "'") >= 0) {
      if (StringPrototypeIndexOf(text, '"') < 0) q = '"';
      else if (StringPrototypeIndexOf(text, "`") < 0) q = "`";
    }
    let out = q;
    for (let i = 0; i < text.length; i++) {
      const c = StringPrototypeCharCodeAt(text, i);
      const ch = text[i];
      if (ch === q || ch === "\\") out += "\\" + ch;
      else if (c === 10) out += "\\n";
      else if (c === 13) out += "\\r";
      else if (c === 9) out += "\\t";
      else if (c === 8) out += "\\b";
      else if (c === 12) out += "\\f";
      else if (c === 11) out += "\\v";
      else if (c < 32 || c === 127) out += "\\x" + (c < 16 ? "0" : "") + NumberPrototypeToString(c, 16);
      else out += ch;
    }
    return out + q;
  }

  // -------------------------------------------------------------------------------------
  // inspect: roughly node's util.inspect (depth 2, breaks long lines, [Circular], getters
  // are shown, never called).

  const MAX_ITEMS = 100;
  const BREAK_LENGTH = 80;

  function kindOf(value) {
    if (ArrayIsArray(value)) return "array";
    if (TypedArrayPrototypeTag(value) !== undefined) return "typed";
    if (isError(value)) return "error";
    if (promiseState(value) !== undefined) return "promise";
    // Plain objects and class instances: skip the brand checks below, each of which throws
    // (and so builds an error) for a value it does not match.
    if (tryCall(() => ObjectPrototypeToString(value), "") === "[object Object]") return "object";
    if (tryCall(() => (MapPrototypeSize(value), true), false)) return "map";
    if (tryCall(() => (SetPrototypeSize(value), true), false)) return "set";
    if (tryCall(() => (DatePrototypeGetTime(value), true), false)) return "date";
    if (tryCall(() => (RegExpPrototypeSource(value), true), false) && value !== RegExpPrototype)
      return "regexp";
    if (tryCall(() => (WeakMapPrototypeHas(value, ObjectPrototype), true), false)) return "weakmap";
    if (tryCall(() => (WeakSetPrototypeHas(value, ObjectPrototype), true), false)) return "weakset";
    if (tryCall(() => (ArrayBufferPrototypeByteLength(value), true), false)) return "arraybuffer";
    if (tryCall(() => (NumberPrototypeValueOf(value), true), false)) return "Number";
    if (tryCall(() => (StringPrototypeValueOf(value), true), false)) return "String";
    if (tryCall(() => (BooleanPrototypeValueOf(value), true), false)) return "Boolean";
    if (tryCall(() => (BigIntPrototypeValueOf(value), true), false)) return "BigInt";
    if (tryCall(() => (SymbolPrototypeValueOf(value), true), false)) return "Symbol";
    return "object";
  }

  function constructorName(value) {
    let proto = tryCall(() => ObjectGetPrototypeOf(value), null);
    if (proto === null) return null;
    for (let hops = 0; proto !== null && hops < 100; hops++) {
      const descriptor = ObjectGetOwnPropertyDescriptor(proto, "constructor");
      if (descriptor !== undefined && typeof descriptor.value === "function") {
        const name = ObjectGetOwnPropertyDescriptor(descriptor.value, "name");
        if (name !== undefined && typeof name.value === "string" && name.value !== "")
          return name.value;
      }
      proto = ObjectGetPrototypeOf(proto);
    }
    return "Object";
  }

  function formatKey(key) {
    if (typeof key === "symbol") return "[" + SymbolPrototypeToString(key) + "]";
    return isIdentifier(key) ? key : quote(key);
  }

  // A property's value without calling its getter.
  function formatSlot(value, key, depth, seen) {
    const descriptor = ObjectGetOwnPropertyDescriptor(value, key);
    if (descriptor === undefined) return "undefined";
    if (descriptor.get !== undefined && descriptor.set !== undefined) return "[Getter/Setter]";
    if (descriptor.get !== undefined) return "[Getter]";
    if (descriptor.set !== undefined) return "[Setter]";
    return formatValue(descriptor.value, depth, seen, true);
  }

  function formatProperty(value, key, depth, seen) {
    return formatKey(key) + ": " + formatSlot(value, key, depth, seen);
  }

  // Own enumerable string keys (minus array indices when `skipIndices`) and symbols.
  function ownKeys(value, skipIndices) {
    const result = [];
    const names = ObjectKeys(value);
    for (let i = 0; i < names.length; i++) {
      const key = names[i];
      if (skipIndices && isIndex(key)) continue;
      ArrayPrototypePush(result, key);
    }
    const symbols = ObjectGetOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      if (ObjectPrototypePropertyIsEnumerable(value, symbols[i]))
        ArrayPrototypePush(result, symbols[i]);
    }
    return result;
  }

  function isIndex(key) {
    if (key.length === 0 || key.length > 10) return false;
    for (let i = 0; i < key.length; i++) {
      const c = StringPrototypeCharCodeAt(key, i);
      if (c < 48 || c > 57 || (i === 0 && c === 48 && key.length > 1)) return false;
    }
    return true;
  }

  function formatFunction(value) {
    const source = tryCall(() => FunctionPrototypeToString(value), "");
    const name = tryCall(() => {
      const d = ObjectGetOwnPropertyDescriptor(value, "name");
      return d !== undefined && typeof d.value === "string" ? d.value : "";
    }, "");
    if (StringPrototypeStartsWith(source, "class")) return "[class " + (name || "(anonymous)") + "]";
    // Function, AsyncFunction, GeneratorFunction, AsyncGeneratorFunction
    const type = tryCall(() => constructorName(value), null) || "Function";
    return "[" + type + (name ? ": " + name : " (anonymous)") + "]";
  }

  function errorParts(value) {
    const name = tryCall(() => StringCtor(value.name), "Error");
    const message = tryCall(() => StringCtor(value.message), "");
    const stack = tryCall(() => value.stack, undefined);
    return { name, message, stack: typeof stack === "string" ? cleanStack(stack) : "" };
  }

  // Drops this runtime's own frames: they mean nothing to the code's author. That
  // includes `tools.call`'s own frame above the author's in the errors it raises (a native function's
  // frame; the author's call site is the next line).
  function cleanStack(stack) {
    let out = "";
    let from = 0;
    while (from < stack.length) {
      let at = StringPrototypeIndexOf(stack, "\n", from);
      if (at < 0) at = stack.length;
      const line = StringPrototypeSlice(stack, from, at);
      const own = StringPrototypeIndexOf(line, "<cordon>") >= 0
        || (out === "" && line === "    at call (native)");
      if (!own && line.length > 0) out += line + "\n";
      from = at + 1;
    }
    return StringPrototypeSlice(out, 0, out.length - 1);
  }

  function formatError(value, nested) {
    const { name, message, stack } = errorParts(value);
    const head = message === "" ? name : name + ": " + message;
    if (nested || stack === "") return nested ? "[" + head + "]" : head;
    return head + "\n" + stack;
  }

  function wrap(prefix, open, entries, close, packed) {
    if (entries.length === 0) return (prefix ? prefix + " " : "") + open + close;
    const start = prefix ? prefix + " " + open : open;
    let total = start.length + close.length + entries.length;
    let multiline = false;
    for (let i = 0; i < entries.length; i++) {
      total += entries[i].length;
      if (hasNewline(entries[i])) multiline = true;
    }
    if (!multiline && total + entries.length <= BREAK_LENGTH - 4) {
      return start + " " + ArrayPrototypeJoin(entries, ", ") + " " + close;
    }
    if (packed && !multiline) {
      // Long arrays of short items: fill lines instead of one item per line.
      let out = start;
      let line = "";
      for (let i = 0; i < entries.length; i++) {
        const piece = entries[i] + (i + 1 < entries.length ? "," : "");
        if (line.length > 0 && line.length + 1 + piece.length > BREAK_LENGTH - 4) {
          out += "\n  " + line;
          line = piece;
        } else {
          line = line.length > 0 ? line + " " + piece : piece;
        }
      }
      return out + "\n  " + line + "\n" + close;
    }
    let out = start;
    for (let i = 0; i < entries.length; i++) {
      out += "\n  " + indent(entries[i]) + (i + 1 < entries.length ? "," : "");
    }
    return out + "\n" + close;
  }

  function formatObject(value, depth, seen, nested) {
    if (ArrayPrototypeIncludes(seen, value)) return "[Circular]";
    const kind = kindOf(value);
    const ctor = constructorName(value);
    switch (kind) {
      case "error":
        if (depth > 2) return formatError(value, true);
        break;
      case "date": {
        const time = DatePrototypeGetTime(value);
        return time === time ? DatePrototypeToISOString(value) : "Invalid Date";
      }
      case "regexp":
        return tryCall(() => RegExpPrototypeToString(value), "/(?:)/");
      case "weakmap":
        return "WeakMap { <items unknown> }";
      case "weakset":
        return "WeakSet { <items unknown> }";
      case "Number":
        return "[Number: " + formatValue(NumberPrototypeValueOf(value), depth, seen, true) + "]";
      case "String":
        return "[String: " + quote(StringPrototypeValueOf(value)) + "]";
      case "Boolean":
        return "[Boolean: " + BooleanPrototypeValueOf(value) + "]";
      case "BigInt":
        return "[BigInt: " + BigIntPrototypeToString(BigIntPrototypeValueOf(value)) + "n]";
      case "Symbol":
        return "[Symbol: " + SymbolPrototypeToString(SymbolPrototypeValueOf(value)) + "]";
    }
    const label =
      kind === "array" ? (ctor === "Array" ? "Array" : ctor || "Array")
      : kind === "typed" ? TypedArrayPrototypeTag(value)
      : kind === "map" ? "Map"
      : kind === "set" ? "Set"
      : ctor === null ? "[Object: null prototype]"
      : ctor;
    if (depth > 2) {
      return kind === "array" ? "[Array]" : "[" + (label === "[Object: null prototype]" ? "Object" : label) + "]";
    }
    ArrayPrototypePush(seen, value);
    try {
      const entries = [];
      let prefix = "";
      let open = "{";
      let close = "}";
      let packed = false;
      let skipIndices = false;
      if (kind === "array" || kind === "typed") {
        const length = kind === "array" ? value.length : TypedArrayPrototypeLength(value);
        prefix = kind === "typed" ? label + "(" + length + ")" : label === "Array" ? "" : label + "(" + length + ")";
        open = "[";
        close = "]";
        packed = true;
        skipIndices = true;
        const shown = MathMin(length, MAX_ITEMS);
        let holes = 0;
        for (let i = 0; i < shown; i++) {
          if (kind === "array" && !ObjectHasOwn(value, i)) {
            holes++;
            continue;
          }
          if (holes > 0) {
            ArrayPrototypePush(entries, "<" + holes + " empty item" + (holes > 1 ? "s" : "") + ">");
            holes = 0;
          }
          ArrayPrototypePush(
            entries,
            kind === "array" ? formatSlot(value, i, depth + 1, seen) : formatValue(value[i], depth + 1, seen, true),
          );
        }
        if (holes > 0) ArrayPrototypePush(entries, "<" + holes + " empty item" + (holes > 1 ? "s" : "") + ">");
        if (length > shown) ArrayPrototypePush(entries, "... " + (length - shown) + " more item" + (length - shown > 1 ? "s" : ""));
      } else if (kind === "map") {
        prefix = "Map(" + MapPrototypeSize(value) + ")";
        let count = 0;
        MapPrototypeForEach(value, (v, k) => {
          if (count++ < MAX_ITEMS)
            ArrayPrototypePush(entries, formatValue(k, depth + 1, seen, true) + " => " + formatValue(v, depth + 1, seen, true));
        });
        if (count > MAX_ITEMS) ArrayPrototypePush(entries, "... " + (count - MAX_ITEMS) + " more items");
      } else if (kind === "set") {
        prefix = "Set(" + SetPrototypeSize(value) + ")";
        packed = true;
        let count = 0;
        SetPrototypeForEach(value, (v) => {
          if (count++ < MAX_ITEMS) ArrayPrototypePush(entries, formatValue(v, depth + 1, seen, true));
        });
        if (count > MAX_ITEMS) ArrayPrototypePush(entries, "... " + (count - MAX_ITEMS) + " more items");
      } else if (kind === "promise") {
        prefix = "Promise";
        const state = promiseState(value);
        if (state === "pending") ArrayPrototypePush(entries, "<pending>");
        else {
          const result = native.promiseResult(value);
          ArrayPrototypePush(entries, (state === "rejected" ? "<rejected> " : "") + formatValue(result, depth + 1, seen, true));
        }
      } else if (kind === "arraybuffer") {
        prefix = "ArrayBuffer";
        ArrayPrototypePush(entries, "byteLength: " + ArrayBufferPrototypeByteLength(value));
      } else if (kind !== "error") {
        prefix = label === "Object" ? "" : label;
      }
      const keys = ownKeys(value, skipIndices);
      for (let i = 0; i < keys.length; i++) {
        if (kind === "error" && (keys[i] === "stack" || keys[i] === "message")) continue;
        ArrayPrototypePush(entries, formatProperty(value, keys[i], depth + 1, seen));
      }
      if (kind === "error") {
        const head = formatError(value, nested);
        return entries.length === 0 ? head : head + " " + wrap("", "{", entries, "}", false);
      }
      return wrap(prefix, open, entries, close, packed && entries.length > 6);
    } finally {
      ArrayPrototypePop(seen);
    }
  }

  function formatValue(value, depth, seen, nested) {
    switch (typeof value) {
      case "string":
        return nested ? quote(value) : value;
      case "number":
        return ObjectIs(value, -0) ? "-0" : StringCtor(value);
      case "bigint":
        return BigIntPrototypeToString(value) + "n";
      case "symbol":
        return SymbolPrototypeToString(value);
      case "undefined":
        return "undefined";
      case "boolean":
        return value ? "true" : "false";
      case "function": {
        const head = formatFunction(value);
        if (depth > 2) return head;
        const keys = tryCall(() => ownKeys(value, false), []);
        if (keys.length === 0 || ArrayPrototypeIncludes(seen, value)) return head;
        ArrayPrototypePush(seen, value);
        try {
          const entries = [];
          for (let i = 0; i < keys.length; i++)
            ArrayPrototypePush(entries, formatProperty(value, keys[i], depth + 1, seen));
          return wrap(head, "{", entries, "}", false);
        } finally {
          ArrayPrototypePop(seen);
        }
      }
      default:
        if (value === null) return "null";
        return formatObject(value, depth, seen, nested);
    }
  }

  function inspect(value, nested) {
    try {
      return formatValue(value, 0, [], nested);
    } catch (error) {
      // A Proxy trap or a hostile getter threw: say so rather than lose the output.
      return "<uninspectable value: " + tryCall(() => StringCtor(error), "error") + ">";
    }
  }

  // -------------------------------------------------------------------------------------
  // console

  function formatArgs(args) {
    let out = "";
    let start = 0;
    if (args.length > 0 && typeof args[0] === "string" && StringPrototypeIndexOf(args[0], "%") >= 0) {
      const format = args[0];
      let next = 1;
      let from = 0;
      for (;;) {
        const at = StringPrototypeIndexOf(format, "%", from);
        if (at < 0 || at + 1 >= format.length) break;
        const spec = format[at + 1];
        let piece;
        if (spec === "%") piece = "%";
        else if (next >= args.length && spec !== "%") piece = undefined;
        else if (spec === "s") {
          const arg = args[next++];
          piece = typeof arg === "string" ? arg : typeof arg === "bigint" ? BigIntPrototypeToString(arg) + "n"
            : typeof arg === "object" && arg !== null ? inspect(arg, true) : formatValue(arg, 0, [], false);
        } else if (spec === "d" || spec === "i") {
          const arg = args[next++];
          if (typeof arg === "bigint") piece = BigIntPrototypeToString(arg) + "n";
          else if (typeof arg === "symbol") piece = "NaN";
          else {
            let n = tryCall(() => +arg, NaN);
            if (spec === "i") n = n < 0 ? -MathFloor(-n) : MathFloor(n);
            piece = formatValue(n, 0, [], false);
          }
        } else if (spec === "f") {
          const arg = args[next++];
          piece = typeof arg === "symbol" ? "NaN" : formatValue(tryCall(() => +arg, NaN), 0, [], false);
        } else if (spec === "j") {
          const arg = args[next++];
          piece = tryCall(() => StringCtor(JSONStringify(arg)), "[Circular]");
        } else if (spec === "o" || spec === "O") {
          piece = inspect(args[next++], true);
        } else if (spec === "c") {
          next++;
          piece = "";
        }
        if (piece === undefined) {
          out += StringPrototypeSlice(format, from, at + 2);
        } else {
          out += StringPrototypeSlice(format, from, at) + piece;
        }
        from = at + 2;
      }
      out += StringPrototypeSlice(format, from);
      start = next;
    } else if (args.length > 0) {
      out = inspect(args[0], false);
      start = 1;
    }
    for (let i = start; i < args.length; i++) out += " " + inspect(args[i], false);
    return out;
  }

  const STDOUT = 1;
  const STDERR = 2;
  let groupIndent = "";
  const counts = new MapCtor();
  const timers = new MapCtor();

  function print(stream, args) {
    let text = formatArgs(args);
    if (groupIndent !== "") {
      let out = groupIndent;
      let from = 0;
      for (;;) {
        const at = StringPrototypeIndexOf(text, "\n", from);
        if (at < 0) break;
        out += StringPrototypeSlice(text, from, at + 1) + groupIndent;
        from = at + 1;
      }
      text = out + StringPrototypeSlice(text, from);
    }
    write(stream, wellFormed(text + "\n"));
  }

  const console = {
    log: (...args) => print(STDOUT, args),
    info: (...args) => print(STDOUT, args),
    debug: (...args) => print(STDOUT, args),
    error: (...args) => print(STDERR, args),
    warn: (...args) => print(STDERR, args),
    dir: (value) => print(STDOUT, [inspect(value, true)]),
    trace: (...args) => {
      const stack = cleanStack(tryCall(() => new ErrorCtor().stack, ""));
      print(STDERR, ["Trace" + (args.length > 0 ? ": " + formatArgs(args) : "") + (stack ? "\n" + stack : "")]);
    },
    assert: (condition, ...args) => {
      if (!condition) {
        print(STDERR, args.length > 0 ? ["Assertion failed: " + formatArgs(args)] : ["Assertion failed"]);
      }
    },
    count: (label = "default") => {
      label = StringCtor(label);
      const n = (MapPrototypeGet(counts, label) || 0) + 1;
      MapPrototypeSet(counts, label, n);
      print(STDOUT, [label + ": " + n]);
    },
    countReset: (label = "default") => {
      MapPrototypeSet(counts, StringCtor(label), 0);
    },
    time: (label = "default") => {
      MapPrototypeSet(timers, StringCtor(label), performanceNow(performanceObject));
    },
    timeLog: (label = "default", ...args) => {
      label = StringCtor(label);
      if (!MapPrototypeHas(timers, label)) return print(STDERR, ["Warning: No such label '" + label + "'"]);
      const ms = performanceNow(performanceObject) - MapPrototypeGet(timers, label);
      print(STDOUT, [label + ": " + NumberPrototypeToFixed(ms, 3) + "ms" + (args.length > 0 ? " " + formatArgs(args) : "")]);
    },
    timeEnd: (label = "default") => {
      label = StringCtor(label);
      if (!MapPrototypeHas(timers, label)) return print(STDERR, ["Warning: No such label '" + label + "'"]);
      const ms = performanceNow(performanceObject) - MapPrototypeGet(timers, label);
      MapPrototypeDelete(timers, label);
      print(STDOUT, [label + ": " + NumberPrototypeToFixed(ms, 3) + "ms"]);
    },
    group: (...args) => {
      if (args.length > 0) print(STDOUT, args);
      groupIndent += "  ";
    },
    groupEnd: () => {
      groupIndent = StringPrototypeSlice(groupIndent, 2);
    },
    table: (...args) => print(STDOUT, args),
  };
  console.groupCollapsed = console.group;
  define(globalThis, "console", console, false);

  // -------------------------------------------------------------------------------------
  // ToolError

  class ToolError extends ErrorCtor {
    constructor(message, kind = "tool_failed", tool = undefined) {
      super(message);
      define(this, "kind", kind, true);
      define(this, "tool", tool, true);
    }
  }
  define(ToolError.prototype, "name", "ToolError", false);

  // A failed call's error. `stack` is the stack of the call site, captured when the
  // call was queued: by the time the host answers, the caller's frames are gone.
  function makeToolError(message, kind, tool, stack) {
    const error = new ToolError(message, kind, tool);
    if (typeof stack !== "string") stack = tryCall(() => error.stack, "");
    const cleaned = cleanStack(stack);
    define(error, "stack", cleaned === "" ? "" : cleaned + "\n", false);
    return error;
  }

  function callSite() {
    return tryCall(() => new ErrorCtor().stack, "");
  }

  // -------------------------------------------------------------------------------------
  // structuredClone: the HTML algorithm for the types guest code can have here.

  function structuredClone(value, options = undefined) {
    const memory = new MapCtor();
    const fail = (what) => {
      const message = what + " could not be cloned.";
      throw DOMExceptionCtor ? new DOMExceptionCtor(message, "DataCloneError") : new TypeErrorCtor(message);
    };
    const clone = (v) => {
      if (typeof v === "function") fail(formatFunction(v));
      if (typeof v === "symbol") fail(SymbolPrototypeToString(v));
      if (typeof v !== "object" || v === null) return v;
      if (MapPrototypeHas(memory, v)) return MapPrototypeGet(memory, v);
      let out;
      switch (kindOf(v)) {
        case "array": {
          out = new ArrayCtor(v.length);
          MapPrototypeSet(memory, v, out);
          const keys = ObjectKeys(v);
          for (let i = 0; i < keys.length; i++) define(out, keys[i], clone(v[keys[i]]), true);
          return out;
        }
        case "date":
          out = new DateCtor(DatePrototypeGetTime(v));
          break;
        case "regexp":
          out = new RegExpCtor(v.source, v.flags);
          break;
        case "map":
          out = new MapCtor();
          MapPrototypeSet(memory, v, out);
          MapPrototypeForEach(v, (val, key) => MapPrototypeSet(out, clone(key), clone(val)));
          return out;
        case "set":
          out = new SetCtor();
          MapPrototypeSet(memory, v, out);
          SetPrototypeForEach(v, (val) => SetPrototypeAdd(out, clone(val)));
          return out;
        case "arraybuffer":
          out = ArrayBufferPrototypeSlice(v, 0);
          break;
        case "typed":
          out = TypedArrayPrototypeSlice(v);
          break;
        case "Number": out = new NumberCtor(NumberPrototypeValueOf(v)); break;
        case "String": out = new StringCtor(StringPrototypeValueOf(v)); break;
        case "Boolean": out = new BooleanCtor(BooleanPrototypeValueOf(v)); break;
        case "BigInt": out = ObjectCtor(BigIntPrototypeValueOf(v)); break;
        case "error": {
          const { name, message } = errorParts(v);
          out = new (errorConstructors[name] || ErrorCtor)(message);
          const stack = tryCall(() => v.stack, undefined);
          if (typeof stack === "string") define(out, "stack", stack, false);
          break;
        }
        case "object":
          if (tryCall(() => (DataViewPrototypeBuffer(v), true), false)) {
            out = new DataViewCtor(ArrayBufferPrototypeSlice(DataViewPrototypeBuffer(v), 0), v.byteOffset, v.byteLength);
            break;
          }
          out = {};
          MapPrototypeSet(memory, v, out);
          {
            const keys = ObjectKeys(v);
            for (let i = 0; i < keys.length; i++) define(out, keys[i], clone(v[keys[i]]), true);
          }
          return out;
        default:
          fail(inspect(v, true));
      }
      MapPrototypeSet(memory, v, out);
      return out;
    };
    return clone(value);
  }
  define(globalThis, "structuredClone", structuredClone, false);

  // -------------------------------------------------------------------------------------
  // crypto: the two functions code reaches for (ids and random bytes), from WASI's
  // random source. No `subtle`.

  function domError(message, name) {
    return DOMExceptionCtor ? new DOMExceptionCtor(message, name) : new TypeErrorCtor(message);
  }

  function getRandomValues(array) {
    const tag = tryCall(() => TypedArrayPrototypeTag(array), undefined);
    if (tag === undefined || tag === "Float16Array" || tag === "Float32Array" || tag === "Float64Array") {
      throw domError("getRandomValues() needs an integer typed array", "TypeMismatchError");
    }
    const length = TypedArrayPrototypeByteLength(array);
    if (length > 65536) {
      throw domError("getRandomValues() fills at most 65536 bytes at a time", "QuotaExceededError");
    }
    const bytes = new Uint8ArrayCtor(TypedArrayPrototypeBuffer(array), TypedArrayPrototypeByteOffset(array), length);
    for (let i = 0; i < length; i += 4) {
      let word = randomUint32();
      for (let j = i; j < i + 4 && j < length; j++) {
        bytes[j] = word & 255;
        word >>>= 8;
      }
    }
    return array;
  }

  function randomUUID() {
    const bytes = getRandomValues(new Uint8ArrayCtor(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562 variant
    let out = "";
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) out += "-";
      out += (bytes[i] < 16 ? "0" : "") + NumberPrototypeToString(bytes[i], 16);
    }
    return out;
  }

  const crypto = {};
  define(crypto, "getRandomValues", getRandomValues, true);
  define(crypto, "randomUUID", randomUUID, true);
  define(globalThis, "crypto", crypto, false);

  // -------------------------------------------------------------------------------------
  // Reporting

  const lossy = {};

  // A JSON.stringify replacer that gives up on values JSON would quietly mangle (a Map or
  // a Promise becomes `{}`): the repr says more.
  function losslessOnly(key, value) {
    if (typeof value !== "object" || value === null || ArrayIsArray(value)) return value;
    const proto = ObjectGetPrototypeOf(value);
    if (proto === ObjectPrototype || proto === null) return value;
    const kind = kindOf(value);
    if (kind !== "object" && kind !== "date") throw lossy;
    return value;
  }

  // `[json, repr]` for the final value; both undefined for undefined and null.
  function encodeResult(value) {
    if (value === undefined || value === null) return [undefined, undefined];
    const type = typeof value;
    let plain = type === "string" || type === "boolean" || (type === "number" && NumberIsFinite(value));
    if (type === "object") {
      // JSON would turn these into "{}" and lose what they hold.
      const kind = kindOf(value);
      plain = kind === "object" || kind === "array" || kind === "date";
    }
    if (plain) {
      try {
        const json = JSONStringify(value, losslessOnly);
        if (typeof json === "string") return [wellFormed(json), undefined];
      } catch {
        // circular, BigInt inside, a throwing toJSON: fall through to the repr
      }
    }
    return [undefined, wellFormed(inspect(value, true))];
  }

  // `[type, message, traceback]` for an uncaught exception or a rejection.
  function describe(error) {
    if ((typeof error === "object" && error !== null) || typeof error === "function") {
      if (isError(error) || tryCall(() => "message" in error && "stack" in error, false)) {
        let { name, message, stack } = errorParts(error);
        if (name === "SyntaxError") {
          message += syntaxLocation(stack);
          if (StringPrototypeStartsWith(message, "redeclaration of ")) {
            message += ": top-level let, const and class names live on in the session; " +
              "assign to the existing name, pick another, or use var";
          }
        }
        const extra = [];
        const keys = tryCall(() => ownKeys(error, false), []);
        for (let i = 0; i < keys.length; i++) {
          if (keys[i] !== "stack" && keys[i] !== "message")
            ArrayPrototypePush(extra, tryCall(() => formatProperty(error, keys[i], 1, []), "?"));
        }
        const head = message === "" ? name : name + ": " + message;
        let traceback = head + (stack ? "\n" + stack : "");
        if (extra.length > 0) traceback += " {\n  " + ArrayPrototypeJoin(extra, ",\n  ") + "\n}";
        return [wellFormed(name), wellFormed(message), wellFormed(traceback)];
      }
    }
    const text = inspect(error, false);
    let traceback = "Uncaught " + inspect(error, true);
    // QuickJS raises null when it cannot even allocate the "out of memory" error.
    if (error === null) traceback += " (if the code did not throw null, the engine ran out of memory)";
    return ["Error", wellFormed(text), wellFormed(traceback)];
  }

  // " (line L, column C)" from the first frame of a SyntaxError's stack.
  function syntaxLocation(stack) {
    const at = StringPrototypeIndexOf(stack, "<cell>:");
    if (at < 0) return "";
    let i = at + 7;
    let line = "";
    while (i < stack.length && stack[i] >= "0" && stack[i] <= "9") line += stack[i++];
    if (stack[i] !== ":") return line ? " (line " + line + ")" : "";
    i++;
    let column = "";
    while (i < stack.length && stack[i] >= "0" && stack[i] <= "9") column += stack[i++];
    return " (line " + line + ", column " + column + ")";
  }

  const tools = {};
  define(tools, "ToolError", ToolError, false);

  return ObjectFreeze({
    __proto__: null,
    encodeResult,
    describe,
    makeToolError,
    callSite,
    ToolError,
    tools,
    // Names that exist before any code runs: a tool never shadows one as a global.
    intrinsics: ObjectGetOwnPropertyNames(globalThis),
  });
})
