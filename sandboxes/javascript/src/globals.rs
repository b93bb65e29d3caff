//! The Rust-backed globals: timers, `Math.random`, `tools.call` and `fs`.

use std::rc::Rc;

use rquickjs::{
    Ctx, Function, Object, Persistent, Value,
    function::{Opt, Rest},
};

use crate::bridge::Bridge;
use crate::native_call;
use crate::random::random_u64;
use crate::saved::Saved;

/// Installs the Rust-backed globals (timers, `Math.random`) and returns `tools.call`.
pub(crate) fn install_globals<'js>(
    ctx: &Ctx<'js>,
    bridge: &Rc<Bridge>,
) -> rquickjs::Result<Saved<Function<'static>>> {
    let globals = ctx.globals();
    let random = Function::new(ctx.clone(), || {
        // 53 random bits, as V8 does.
        (random_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    })?;
    random.set_name("random")?;
    globals.get::<_, Object>("Math")?.set("random", random)?;
    for (name, repeat) in [("setTimeout", false), ("setInterval", true)] {
        let bridge = Rc::clone(bridge);
        let function = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  callback: Value<'js>,
                  delay: Opt<Value<'js>>,
                  args: Rest<Value<'js>>| {
                bridge.set_timer(&ctx, callback, delay.0, args.0, repeat)
            },
        )?;
        function.set_name(name)?;
        globals.set(name, function)?;
    }
    for name in ["clearTimeout", "clearInterval"] {
        let bridge = Rc::clone(bridge);
        let function = Function::new(ctx.clone(), move |id: Opt<Value<'js>>| {
            bridge.clear_timer(id.0)
        })?;
        function.set_name(name)?;
        globals.set(name, function)?;
    }
    let call_bridge = Rc::clone(bridge);
    let general = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, name: Value<'js>, args: Opt<Value<'js>>| {
            call_bridge.call_now(&ctx, &name, args.0)
        },
    )?;
    let call = native_call::tools_call(ctx, bridge, &general)?;
    call.set_name("call")?;
    crate::fs::install(ctx)?;
    Ok(Persistent::save(ctx, call))
}
