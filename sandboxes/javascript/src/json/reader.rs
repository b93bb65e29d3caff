//! The JSON reader: a tool result's value built into QuickJS's tables as `JSON.parse`
//! would build it, or `None` for text left to `JSON.parse`.

#![allow(
    unsafe_code,
    reason = "reads and builds QuickJS values through its C API; every value is freed or handed on"
)]

use rquickjs::{Ctx, Value, qjs};

use super::engine::{MAX_DEPTH, clear_exception};

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
