//! JSON across the bridge, read from and written to QuickJS's own tables, without
//! `JSON.stringify` and `JSON.parse`.
//!
//! Both set themselves up anew on every call (`JSON.stringify`: a wrapper object, a stack
//! array, a string buffer, a `toJSON` lookup), which costs several times what building
//! the same text directly does (figures in `docs/benchmarks.md`); a tool call paid both
//! every time.
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
//!
//! The writer and the reader are a file each; `ordinary` is what the writer takes as plain
//! data, `engine` what both use.

mod engine;
mod ordinary;
mod reader;
mod writer;

pub(crate) use engine::{Text, with_text};
pub(crate) use ordinary::Ordinary;
pub(crate) use reader::{decode, decode_raw};
pub(crate) use writer::{encode, encode_raw};
