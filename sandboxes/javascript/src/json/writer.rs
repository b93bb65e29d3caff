//! The JSON writer: a call's arguments written from QuickJS's property tables, as
//! `JSON.stringify` would write them, or `None` before anything observable has happened.

#![allow(
    unsafe_code,
    reason = "reads and builds QuickJS values through its C API; every value is freed or handed on"
)]

use std::fmt::Write as _;
use std::mem::MaybeUninit;

use rquickjs::{Ctx, Value, qjs};

use super::engine::{MAX_DEPTH, Text, address, clear_exception, with_text};
use super::ordinary::Ordinary;

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
