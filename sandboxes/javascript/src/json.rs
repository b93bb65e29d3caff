//! JSON across the bridge, read from and written to QuickJS's own tables, without
//! `JSON.stringify` and `JSON.parse`.
//!
//! Both set themselves up anew on every call (`JSON.stringify`: a wrapper object, a stack
//! array, a string buffer, a `toJSON` lookup): in this build `JSON.stringify({key: i})`
//! takes 1.55 µs where the same text built by concatenation takes 0.2 µs, and
//! `JSON.parse('{"value":1}')` 0.6 µs; a tool call paid both every time.
//!
//! [`encode`] writes a call's arguments for the values they are made of — ordinary
//! objects and arrays whose own properties are data properties holding strings,
//! booleans, `null`, `undefined` and numbers — and returns `None` for anything else
//! *before anything observable has happened*: it reads own property descriptors only, so
//! no getter runs and no proxy is trapped, and the caller hands such a value to
//! `JSON.stringify`, which then behaves exactly as it would have alone (getters called
//! once, `toJSON` honoured, cycles and BigInts reported).
//!
//! [`decode`] builds a result's value as `JSON.parse` would (own data properties in text
//! order, the last of duplicate keys winning in the first one's place, `__proto__` an
//! ordinary key) and returns `None` for text it leaves to `JSON.parse`: invalid JSON
//! (whose error message `JSON.parse` words), an escaped lone surrogate, deep nesting.

#![allow(
    unsafe_code,
    reason = "reads and builds QuickJS values through its C API; every value is freed or handed on"
)]

use std::fmt::Write as _;
use std::mem::MaybeUninit;

use rquickjs::{Array, Ctx, Object, Value, qjs};

/// Values nested deeper than this go to `JSON.stringify` (which also reports cycles) and
/// `JSON.parse`.
const MAX_DEPTH: usize = 32;

/// What "ordinary" means in this context, learned before any guest code runs: the
/// realm's own prototypes (their addresses: intrinsics never move and live as long as the
/// context) and the class ids of a plain object and a plain array.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ordinary {
    object_prototype: usize,
    array_prototype: usize,
    object_class: qjs::JSClassID,
    array_class: qjs::JSClassID,
    to_json: qjs::JSAtom,
}

impl Ordinary {
    pub(crate) fn learn(ctx: &Ctx<'_>) -> rquickjs::Result<Self> {
        fn prototype<'js>(ctx: &Ctx<'js>, constructor: &str) -> rquickjs::Result<Object<'js>> {
            ctx.globals()
                .get::<_, Object>(constructor)?
                .get("prototype")
        }
        let object = Object::new(ctx.clone())?;
        let array = Array::new(ctx.clone())?;
        // SAFETY: plain reads of values this function holds; the atom is one of the
        // engine's built-in names, which are never freed.
        unsafe {
            Ok(Ordinary {
                object_prototype: address(prototype(ctx, "Object")?.as_raw()),
                array_prototype: address(prototype(ctx, "Array")?.as_raw()),
                object_class: qjs::JS_GetClassID(object.as_raw()),
                array_class: qjs::JS_GetClassID(array.as_raw()),
                to_json: qjs::JS_NewAtom(ctx.as_raw().as_ptr(), c"toJSON".as_ptr()),
            })
        }
    }
}

impl Ordinary {
    /// Whether `value` is an object of the plain object class (not an array, a function,
    /// a proxy or any other exotic object).
    ///
    /// # Safety
    /// `value` is alive.
    pub(crate) unsafe fn is_plain_object(&self, value: qjs::JSValue) -> bool {
        // SAFETY: reading a live value's tag and class id.
        unsafe {
            qjs::JS_VALUE_GET_NORM_TAG(value) == qjs::JS_TAG_OBJECT
                && qjs::JS_GetClassID(value) == self.object_class
        }
    }
}

/// `value` (an object) as `JSON.stringify` would write it, or `None` when it is not made
/// only of the ordinary parts above (nothing observable has happened then).
pub(crate) fn encode(ctx: &Ctx<'_>, ordinary: &Ordinary, value: &Value<'_>) -> Option<String> {
    let buffer = String::with_capacity(64);
    // SAFETY: both are alive for the call.
    unsafe { encode_raw(ctx.as_raw().as_ptr(), ordinary, value.as_raw(), buffer) }
}

/// [`encode`] for a value the caller holds as the engine's own, written into `buffer`
/// (cleared first; a caller that writes often passes the last one back).
///
/// # Safety
/// `ctx` is the live context and `value` a value alive in it for the call.
pub(crate) unsafe fn encode_raw(
    ctx: *mut qjs::JSContext,
    ordinary: &Ordinary,
    value: qjs::JSValue,
    mut buffer: String,
) -> Option<String> {
    buffer.clear();
    let mut writer = Writer {
        ctx,
        ordinary,
        out: buffer,
    };
    // SAFETY: `value` is alive for the call; the writer frees every value it reads.
    unsafe {
        // `JSON.stringify` looks `toJSON` up on every object it writes, through the
        // prototype chain: the chains of plain objects and arrays must be the realm's own
        // (`Array.prototype`'s parent can be replaced; `Object.prototype`'s cannot) and
        // carry none. Each object's own `toJSON` is checked as it is written.
        if !writer.is_parent(ordinary.array_prototype, ordinary.object_prototype) {
            return None;
        }
        for prototype in [ordinary.object_prototype, ordinary.array_prototype] {
            if writer.has_own(prototype, ordinary.to_json) {
                return None;
            }
        }
        if qjs::JS_VALUE_GET_NORM_TAG(value) != qjs::JS_TAG_OBJECT {
            return None;
        }
        writer.object(value, 0)?;
    }
    Some(writer.out)
}

/// A string the engine holds: a string value, or a property key.
pub(crate) enum Text {
    Value(qjs::JSValue),
    Atom(qjs::JSAtom),
}

/// Hands `read` the text of `of` as the engine writes it out (its own bytes for ASCII, no
/// copy), then frees it. `None` when the engine cannot (the exception is dropped) or the
/// text is not UTF-8: a lone surrogate, which the engine keeps as its own three bytes
/// (`JSON.stringify` escapes it as `\udXXX`).
///
/// # Safety
/// `ctx` is the live context and `of` alive in it.
pub(crate) unsafe fn with_text<R>(
    ctx: *mut qjs::JSContext,
    of: Text,
    read: impl FnOnce(&str) -> R,
) -> Option<R> {
    let mut len: qjs::size_t = 0;
    // SAFETY: the engine returns `len` bytes at `text`, alive until freed here.
    unsafe {
        let text = match of {
            Text::Value(value) => qjs::JS_ToCStringLen2(ctx, &mut len, value, false),
            Text::Atom(atom) => qjs::JS_AtomToCStringLen(ctx, &mut len, atom),
        };
        if text.is_null() {
            clear_exception(ctx);
            return None;
        }
        let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len as usize);
        let read = std::str::from_utf8(bytes).ok().map(read);
        qjs::JS_FreeCString(ctx, text);
        read
    }
}

/// Drops an exception the engine raised (only running out of memory can raise one here):
/// the caller falls back to `JSON.stringify` or `JSON.parse`, which meet the same condition
/// and report it.
unsafe fn clear_exception(ctx: *mut qjs::JSContext) {
    // SAFETY: takes the pending exception (or undefined) and frees it.
    unsafe { qjs::JS_FreeValue(ctx, qjs::JS_GetException(ctx)) }
}

/// The address of an object value: its identity.
unsafe fn address(value: qjs::JSValue) -> usize {
    // SAFETY: reading the pointer bits of a value; nothing is dereferenced.
    unsafe { qjs::JS_VALUE_GET_PTR(value) as usize }
}

struct Writer<'a> {
    ctx: *mut qjs::JSContext,
    ordinary: &'a Ordinary,
    out: String,
}

/// What writing one value did.
enum Wrote {
    /// Its JSON is in the output.
    Json,
    /// It was `undefined`: left out of an object, `null` in an array.
    Nothing,
}

impl Writer<'_> {
    /// Whether the object at `address` has an own property `atom` (of any kind).
    unsafe fn has_own(&self, address: usize, atom: qjs::JSAtom) -> bool {
        let object = qjs::JS_MKPTR(qjs::JS_TAG_OBJECT, address as *mut _);
        // SAFETY: `object` is an intrinsic prototype, alive with the context; no
        // descriptor is filled, so nothing needs freeing.
        unsafe { qjs::JS_GetOwnProperty(self.ctx, std::ptr::null_mut(), object, atom) != 0 }
    }

    /// Whether the object at `parent` is the prototype of the one at `child`. Neither is a
    /// proxy (both are intrinsic prototypes), so no trap runs.
    unsafe fn is_parent(&self, child: usize, parent: usize) -> bool {
        let child = qjs::JS_MKPTR(qjs::JS_TAG_OBJECT, child as *mut _);
        // SAFETY: `child` is an intrinsic prototype, alive with the context; the
        // prototype's new reference is freed at once.
        unsafe {
            let prototype = qjs::JS_GetPrototype(self.ctx, child);
            let same = qjs::JS_VALUE_GET_NORM_TAG(prototype) == qjs::JS_TAG_OBJECT
                && address(prototype) == parent;
            qjs::JS_FreeValue(self.ctx, prototype);
            same
        }
    }

    unsafe fn clear_exception(&self) {
        // SAFETY: `self.ctx` is the live context.
        unsafe { clear_exception(self.ctx) }
    }

    unsafe fn value(&mut self, value: qjs::JSValue, depth: usize) -> Option<Wrote> {
        // SAFETY: `value` is borrowed from a descriptor the caller frees afterwards.
        unsafe {
            match qjs::JS_VALUE_GET_NORM_TAG(value) {
                qjs::JS_TAG_INT => push_int(&mut self.out, qjs::JS_VALUE_GET_INT(value)),
                qjs::JS_TAG_FLOAT64 => self.number(qjs::JS_VALUE_GET_FLOAT64(value))?,
                qjs::JS_TAG_BOOL => self.out.push_str(if qjs::JS_VALUE_GET_BOOL(value) {
                    "true"
                } else {
                    "false"
                }),
                qjs::JS_TAG_NULL => self.out.push_str("null"),
                qjs::JS_TAG_UNDEFINED => return Some(Wrote::Nothing),
                qjs::JS_TAG_STRING | qjs::JS_TAG_STRING_ROPE => self.string(value)?,
                qjs::JS_TAG_OBJECT => self.object(value, depth)?,
                // Symbols, BigInts and engine-internal tags: JSON.stringify's business.
                _ => return None,
            }
        }
        Some(Wrote::Json)
    }

    /// A number as JavaScript writes it. Rust's shortest round-trip digits are the same;
    /// only the notation differs outside [1e-6, 1e21), where JavaScript switches to an
    /// exponent: those numbers go to `JSON.stringify`.
    fn number(&mut self, number: f64) -> Option<()> {
        if !number.is_finite() {
            self.out.push_str("null");
        } else if number == 0.0 {
            // -0 too.
            self.out.push('0');
        } else if (1e-6..1e21).contains(&number.abs()) {
            let _ = write!(self.out, "{number}");
        } else {
            return None;
        }
        Some(())
    }

    unsafe fn string(&mut self, value: qjs::JSValue) -> Option<()> {
        // SAFETY: `value` is a live string.
        unsafe {
            with_text(self.ctx, Text::Value(value), |text| {
                quote_into(&mut self.out, text)
            })
        }
    }

    unsafe fn key(&mut self, atom: qjs::JSAtom) -> Option<()> {
        // SAFETY: `atom` is a live property key.
        unsafe {
            with_text(self.ctx, Text::Atom(atom), |text| {
                quote_into(&mut self.out, text)
            })
        }
    }

    unsafe fn object(&mut self, object: qjs::JSValue, depth: usize) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        // SAFETY: `object` is an object value; the prototype's reference is freed at once
        // (only its address is compared). Neither class can be a proxy, whose
        // `getPrototypeOf` trap would run code: the class is checked first.
        unsafe {
            let class = qjs::JS_GetClassID(object);
            if class != self.ordinary.object_class && class != self.ordinary.array_class {
                return None;
            }
            let prototype = qjs::JS_GetPrototype(self.ctx, object);
            let prototype_address = if qjs::JS_VALUE_GET_NORM_TAG(prototype) == qjs::JS_TAG_OBJECT {
                address(prototype)
            } else {
                0
            };
            qjs::JS_FreeValue(self.ctx, prototype);
            // An own `toJSON`, enumerable or not, on an object or an array.
            if self.has_own(address(object), self.ordinary.to_json) {
                return None;
            }
            if class == self.ordinary.object_class
                && prototype_address == self.ordinary.object_prototype
            {
                self.members(object, depth)
            } else if class == self.ordinary.array_class
                && prototype_address == self.ordinary.array_prototype
            {
                self.elements(object, depth)
            } else {
                None
            }
        }
    }

    /// Reads own property `atom` of `object` as a data property: its value is passed to
    /// `write` and freed after. `None` for an accessor or a missing property.
    unsafe fn with_data_property(
        &mut self,
        object: qjs::JSValue,
        atom: qjs::JSAtom,
        write: impl FnOnce(&mut Self, qjs::JSValue) -> Option<Wrote>,
    ) -> Option<Wrote> {
        let mut descriptor = MaybeUninit::<qjs::JSPropertyDescriptor>::uninit();
        // SAFETY: an ordinary object has no exotic hooks: reading a descriptor runs no
        // guest code. A found descriptor holds three references, all freed here.
        unsafe {
            match qjs::JS_GetOwnProperty(self.ctx, descriptor.as_mut_ptr(), object, atom) {
                found if found > 0 => {}
                0 => return None,
                _ => {
                    self.clear_exception();
                    return None;
                }
            }
            let descriptor = descriptor.assume_init();
            let wrote = if descriptor.flags & qjs::JS_PROP_GETSET as i32 != 0 {
                None
            } else {
                write(self, descriptor.value)
            };
            qjs::JS_FreeValue(self.ctx, descriptor.value);
            qjs::JS_FreeValue(self.ctx, descriptor.getter);
            qjs::JS_FreeValue(self.ctx, descriptor.setter);
            wrote
        }
    }

    unsafe fn members(&mut self, object: qjs::JSValue, depth: usize) -> Option<()> {
        let mut table: *mut qjs::JSPropertyEnum = std::ptr::null_mut();
        let mut count: u32 = 0;
        // The same keys, in the same order, as `JSON.stringify` asks for.
        let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as i32;
        // SAFETY: the table is freed below, whatever happens in between.
        unsafe {
            if qjs::JS_GetOwnPropertyNames(self.ctx, &mut table, &mut count, object, flags) < 0 {
                self.clear_exception();
                return None;
            }
            let entries = std::slice::from_raw_parts(table, count as usize);
            let written = self.write_members(object, entries, depth);
            qjs::JS_FreePropertyEnum(self.ctx, table, count);
            written
        }
    }

    unsafe fn write_members(
        &mut self,
        object: qjs::JSValue,
        entries: &[qjs::JSPropertyEnum],
        depth: usize,
    ) -> Option<()> {
        self.out.push('{');
        let mut empty = true;
        for entry in entries {
            // Written first, taken back if the value turns out to be `undefined`.
            let start = self.out.len();
            if !empty {
                self.out.push(',');
            }
            // SAFETY: `object` is an ordinary object, alive for the call.
            unsafe {
                self.key(entry.atom)?;
                self.out.push(':');
                match self.with_data_property(object, entry.atom, |writer, value| {
                    writer.value(value, depth + 1)
                })? {
                    Wrote::Json => empty = false,
                    Wrote::Nothing => self.out.truncate(start),
                }
            }
        }
        self.out.push('}');
        Some(())
    }

    unsafe fn elements(&mut self, array: qjs::JSValue, depth: usize) -> Option<()> {
        let mut length: i64 = 0;
        // SAFETY: an array's length is a data property: reading it runs no guest code.
        unsafe {
            if qjs::JS_GetLength(self.ctx, array, &mut length) < 0 {
                self.clear_exception();
                return None;
            }
        }
        let length = u32::try_from(length).ok()?;
        self.out.push('[');
        for index in 0..length {
            if index > 0 {
                self.out.push(',');
            }
            // SAFETY: the atom (a tagged integer below 2^31, a string above) is freed
            // below. A hole (no own element) is `None`:
            // `JSON.stringify` would look it up on the prototypes.
            unsafe {
                let atom = qjs::JS_NewAtomUInt32(self.ctx, index);
                let wrote = self.with_data_property(array, atom, |writer, value| {
                    writer.value(value, depth + 1)
                });
                qjs::JS_FreeAtom(self.ctx, atom);
                if let Wrote::Nothing = wrote? {
                    self.out.push_str("null");
                }
            }
        }
        self.out.push(']');
        Some(())
    }
}

/// `n` in decimal, without the formatting machinery (a measurable part of a call).
fn push_int(out: &mut String, n: i32) {
    if n < 0 {
        out.push('-');
    }
    let mut digits = [0u8; 10];
    let mut rest = n.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[start..] {
        out.push(char::from(digit));
    }
}

/// `text` as a JSON string, escaped as `JSON.stringify` escapes it: `"`, `\`, and the
/// control characters (with `\b \t \n \f \r` short forms, else `\u00xx`).
fn quote_into(out: &mut String, text: &str) {
    out.push('"');
    let mut plain_from = 0;
    for (at, byte) in text.bytes().enumerate() {
        let short = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0..0x20 => "",
            _ => continue,
        };
        out.push_str(&text[plain_from..at]);
        if short.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(short);
        }
        plain_from = at + 1;
    }
    out.push_str(&text[plain_from..]);
    out.push('"');
}

/// `text` as the value `JSON.parse(text)` makes, or `None` for text left to `JSON.parse`.
pub(crate) fn decode<'js>(ctx: &Ctx<'js>, text: &str) -> Option<Value<'js>> {
    // SAFETY: the context is alive; the value returned is owned and handed to its wrapper.
    unsafe {
        let value = decode_raw(ctx.as_raw().as_ptr(), text)?;
        Some(Value::from_raw(ctx.clone(), value))
    }
}

/// [`decode`], the value returned as the engine's own (the caller owns its reference).
///
/// # Safety
/// `ctx` is the live context.
pub(crate) unsafe fn decode_raw(ctx: *mut qjs::JSContext, text: &str) -> Option<qjs::JSValue> {
    let mut reader = Reader {
        ctx,
        source: text,
        text: text.as_bytes(),
        at: 0,
        unescaped: String::new(),
    };
    // SAFETY: the reader hands back an owned value or frees what it built.
    unsafe {
        let value = reader.value(0)?;
        reader.skip_space();
        if reader.at != text.len() {
            qjs::JS_FreeValue(reader.ctx, value);
            return None;
        }
        Some(value)
    }
}

struct Reader<'a> {
    ctx: *mut qjs::JSContext,
    /// The text, and its bytes: pieces are cut at ASCII bytes, so never mid-character.
    source: &'a str,
    text: &'a [u8],
    at: usize,
    /// Reused for strings with escapes.
    unescaped: String,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &[u8], value: qjs::JSValue) -> Option<qjs::JSValue> {
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            Some(value)
        } else {
            None
        }
    }

    /// Clears the engine's exception: the text goes to `JSON.parse`.
    unsafe fn failed<T>(&self) -> Option<T> {
        // SAFETY: `self.ctx` is the live context.
        unsafe { clear_exception(self.ctx) };
        None
    }

    /// One value, owned by the caller.
    unsafe fn value(&mut self, depth: usize) -> Option<qjs::JSValue> {
        self.skip_space();
        // SAFETY: every value built is returned or freed.
        unsafe {
            match self.peek()? {
                b'{' if depth < MAX_DEPTH => {
                    self.container(qjs::JS_NewObject(self.ctx), depth, Self::members)
                }
                b'[' if depth < MAX_DEPTH => {
                    self.container(qjs::JS_NewArray(self.ctx), depth, Self::elements)
                }
                b'"' => {
                    let ctx = self.ctx;
                    let text = self.string()?;
                    let string = qjs::JS_NewStringLen(ctx, text.as_ptr().cast(), text.len() as _);
                    if qjs::JS_IsException(string) {
                        return self.failed();
                    }
                    Some(string)
                }
                b't' => self.literal(b"true", qjs::JS_TRUE),
                b'f' => self.literal(b"false", qjs::JS_FALSE),
                b'n' => self.literal(b"null", qjs::JS_NULL),
                b'-' | b'0'..=b'9' => self.number(),
                _ => None,
            }
        }
    }

    /// A number, by JSON's grammar: integers that fit 32 bits as the engine's small
    /// integers, the rest as doubles (Rust's parse rounds as JavaScript's does).
    /// `JSON.parse` makes doubles of all of them; guest code cannot tell the difference.
    fn number(&mut self) -> Option<qjs::JSValue> {
        let start = self.at;
        let digits = |reader: &mut Self| {
            let from = reader.at;
            while let Some(b'0'..=b'9') = reader.peek() {
                reader.at += 1;
            }
            reader.at - from
        };
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let whole = self.at;
        if digits(self) == 0 || (self.text[whole] == b'0' && self.at - whole > 1) {
            return None;
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            integral = false;
            if digits(self) == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            integral = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if digits(self) == 0 {
                return None;
            }
        }
        let text = self.source.get(start..self.at)?;
        if integral
            && text != "-0"
            && let Ok(small) = text.parse::<i32>()
        {
            return Some(qjs::JS_MKVAL(qjs::JS_TAG_INT, small));
        }
        text.parse::<f64>().ok().map(qjs::JS_NewFloat64)
    }

    /// A string's contents, unescaped; `None` for invalid text or a lone surrogate.
    fn string(&mut self) -> Option<&str> {
        self.at += 1;
        let start = self.at;
        // The common case: no escapes, borrowed as it is.
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return self.source.get(start..self.at - 1);
                }
                b'\\' => break,
                0..0x20 => return None,
                _ => self.at += 1,
            }
        }
        let mut unescaped = std::mem::take(&mut self.unescaped);
        unescaped.clear();
        unescaped.push_str(self.source.get(start..self.at)?);
        loop {
            let run = self.at;
            while let Some(byte) = self.peek() {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.at += 1;
            }
            unescaped.push_str(self.source.get(run..self.at)?);
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    break;
                }
                b'\\' => {
                    self.at += 1;
                    let escaped = self.peek()?;
                    self.at += 1;
                    unescaped.push(match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.escaped_char()?,
                        _ => return None,
                    });
                }
                _ => return None,
            }
        }
        self.unescaped = unescaped;
        Some(&self.unescaped)
    }

    /// The character of a `\uXXXX` escape (the `\u` read), joining a surrogate pair.
    fn escaped_char(&mut self) -> Option<char> {
        let high = self.hex4()?;
        if !(0xd800..0xdc00).contains(&high) {
            return char::from_u32(high);
        }
        if !self.text[self.at..].starts_with(b"\\u") {
            return None;
        }
        self.at += 2;
        let low = self.hex4()?;
        if !(0xdc00..0xe000).contains(&low) {
            return None;
        }
        char::from_u32(0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.at..self.at + 4)?;
        self.at += 4;
        let digits = std::str::from_utf8(digits).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }

    /// A container whose opening bracket is next: `made` (a new object or array, owned
    /// here) filled by `fill`, or freed if the text goes wrong.
    unsafe fn container(
        &mut self,
        made: qjs::JSValue,
        depth: usize,
        fill: unsafe fn(&mut Self, qjs::JSValue, usize) -> Option<()>,
    ) -> Option<qjs::JSValue> {
        self.at += 1;
        // SAFETY: the container is freed on every way out but the last.
        unsafe {
            if qjs::JS_IsException(made) {
                return self.failed();
            }
            if fill(self, made, depth).is_none() {
                qjs::JS_FreeValue(self.ctx, made);
                return None;
            }
            Some(made)
        }
    }

    /// After an opening bracket: whether `close` follows at once (read if so).
    fn closes_at_once(&mut self, close: u8) -> Option<bool> {
        self.skip_space();
        let closes = self.peek()? == close;
        if closes {
            self.at += 1;
        }
        Some(closes)
    }

    /// After a member or an element: `true` when `close` ended the container, `false`
    /// after a comma; `None` for anything else.
    fn closes_after_item(&mut self, close: u8) -> Option<bool> {
        self.skip_space();
        let next = self.peek()?;
        self.at += 1;
        match next {
            b',' => Some(false),
            _ if next == close => Some(true),
            _ => None,
        }
    }

    unsafe fn members(&mut self, object: qjs::JSValue, depth: usize) -> Option<()> {
        if self.closes_at_once(b'}')? {
            return Some(());
        }
        loop {
            self.skip_space();
            if self.peek()? != b'"' {
                return None;
            }
            let ctx = self.ctx;
            let key = self.string()?;
            // SAFETY: the atom is freed below; the value is handed to the object.
            unsafe {
                let atom = if key.is_ascii() {
                    qjs::JS_NewAtomLen(ctx, key.as_ptr().cast(), key.len() as _)
                } else {
                    // `JS_NewAtomLen` first compares the UTF-8 bytes with existing one-byte
                    // atoms ("é" would match an atom "Ã©"): go through a string, as
                    // `JSON.parse` does.
                    let string = qjs::JS_NewStringLen(ctx, key.as_ptr().cast(), key.len() as _);
                    if qjs::JS_IsException(string) {
                        0
                    } else {
                        let atom = qjs::JS_ValueToAtom(ctx, string);
                        qjs::JS_FreeValue(ctx, string);
                        atom
                    }
                };
                if atom == 0 {
                    return self.failed();
                }
                self.skip_space();
                let value = if self.peek() == Some(b':') {
                    self.at += 1;
                    self.value(depth + 1)
                } else {
                    None
                };
                let defined = value.map(|value| {
                    qjs::JS_DefinePropertyValue(
                        self.ctx,
                        object,
                        atom,
                        value,
                        qjs::JS_PROP_C_W_E as i32,
                    )
                });
                qjs::JS_FreeAtom(self.ctx, atom);
                if defined? < 0 {
                    return self.failed();
                }
            }
            if self.closes_after_item(b'}')? {
                return Some(());
            }
        }
    }

    unsafe fn elements(&mut self, array: qjs::JSValue, depth: usize) -> Option<()> {
        if self.closes_at_once(b']')? {
            return Some(());
        }
        let mut index: u32 = 0;
        loop {
            // SAFETY: the value is handed to the array.
            unsafe {
                let value = self.value(depth + 1)?;
                let flags = qjs::JS_PROP_C_W_E as i32;
                if qjs::JS_DefinePropertyValueUint32(self.ctx, array, index, value, flags) < 0 {
                    return self.failed();
                }
            }
            index = index.checked_add(1)?;
            if self.closes_after_item(b']')? {
                return Some(());
            }
        }
    }
}
