//! `Ordinary`: the realm's plain objects and arrays, learned before any guest code runs.

#![allow(
    unsafe_code,
    reason = "reads and builds QuickJS values through its C API; every value is freed or handed on"
)]

use rquickjs::{Array, Ctx, Object, qjs};

use super::engine::address;

/// What "ordinary" means in this context, learned before any guest code runs: the
/// realm's own prototypes (their addresses: intrinsics never move and live as long as the
/// context) and the class ids of a plain object and a plain array.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ordinary {
    pub(super) object_prototype: usize,
    pub(super) array_prototype: usize,
    pub(super) object_class: qjs::JSClassID,
    pub(super) array_class: qjs::JSClassID,
    pub(super) to_json: qjs::JSAtom,
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
