//! `Saved<T>`: a QuickJS value kept past its context borrow, and restoring it into one.

use rquickjs::{Ctx, Persistent};

pub(crate) type Saved<T> = Persistent<T>;

pub(crate) fn restore<'js, T>(saved: &Saved<T>, ctx: &Ctx<'js>) -> rquickjs::Result<T::Changed<'js>>
where
    T: Clone + rquickjs::JsLifetime<'static>,
{
    saved.clone().restore(ctx)
}
