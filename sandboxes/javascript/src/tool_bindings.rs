//! The declared tools as JavaScript functions: their names, and where they are bound
//! (globals, the `tools` object, dotted namespaces) before each execution.

use std::collections::HashMap;
use std::rc::Rc;

use rquickjs::{Ctx, Function, Object, Value, function::Rest};

use crate::bridge::Bridge;
use crate::exception::caught;
use crate::saved::{Saved, restore};

/// Words that cannot name a global binding: such tools are reachable through `tools` only.
const RESERVED: &str = "arguments await break case catch class const continue debugger default \
    delete do else enum eval export extends false finally for function if implements import in \
    instanceof interface let new null package private protected public return static super \
    switch this throw true try typeof var void while with yield";

/// A tool name part as a JavaScript identifier (the same rule as the Python guest's).
fn js_name(part: &str) -> String {
    let mut name: String = part
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// Exposes the declared tools as globals and under `tools`. A tool whose first name
/// part is a reserved word or an existing standard global is reachable through
/// `tools` only; `tools.call` and `tools.ToolError` are never replaced.
pub(crate) fn bind_tools<'js>(
    ctx: &Ctx<'js>,
    bridge: &Rc<Bridge>,
    call: &Saved<Function<'static>>,
    tools: &[&str],
) {
    // Each binding stands alone: if guest code made one impossible (a non-writable
    // global, say), the others still happen, and its code meets a clear error later.
    let attempt = |result: rquickjs::Result<()>| {
        if let Err(error) = result {
            let _ = caught(ctx, error);
        }
    };
    let hooks = &bridge.hooks;
    let globals = ctx.globals();
    let (Ok(holder), Ok(tool_error)) =
        (restore(&hooks.tools, ctx), restore(&hooks.tool_error, ctx))
    else {
        return;
    };
    attempt(restore(call, ctx).and_then(|call| holder.set("call", call)));
    attempt(holder.set("ToolError", tool_error.clone()));
    attempt(globals.set("tools", holder.clone()));
    attempt(globals.set("ToolError", tool_error));
    let mut namespaces: HashMap<String, Object<'js>> = HashMap::new();
    for &tool in tools {
        let parts: Vec<String> = tool.split('.').map(js_name).collect();
        let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
            continue;
        };
        let function = match tool_function(ctx, bridge, tool, last) {
            Ok(function) => function,
            Err(error) => {
                attempt(Err(error));
                continue;
            }
        };
        if first != "call" && first != "ToolError" {
            place(ctx, &holder, &parts, &function, &mut namespaces);
        }
        let reserved = RESERVED.split_whitespace().any(|word| word == first);
        if !reserved && !hooks.intrinsics.contains(first) {
            place(ctx, &globals, &parts, &function, &mut namespaces);
        }
    }
}

/// Sets `holder.a.b.c = function`, creating the namespace objects on the way (shared
/// between `tools` and the globals, so `server.x` and `tools.server.x` are one object).
fn place<'js>(
    ctx: &Ctx<'js>,
    holder: &Object<'js>,
    parts: &[String],
    function: &Function<'js>,
    namespaces: &mut HashMap<String, Object<'js>>,
) {
    let placed = (|| -> rquickjs::Result<()> {
        let mut target = holder.clone();
        let mut path = String::new();
        let Some((last, inner)) = parts.split_last() else {
            return Ok(());
        };
        for part in inner {
            path.push_str(part);
            path.push('.');
            let namespace = match namespaces.get(&path) {
                Some(namespace) => namespace.clone(),
                None => {
                    let namespace = Object::new(ctx.clone())?;
                    namespaces.insert(path.clone(), namespace.clone());
                    namespace
                }
            };
            target.set(part.as_str(), namespace.clone())?;
            target = namespace;
        }
        target.set(last.as_str(), function.clone())
    })();
    if let Err(error) = placed {
        let _ = caught(ctx, error);
    }
}

fn tool_function<'js>(
    ctx: &Ctx<'js>,
    bridge: &Rc<Bridge>,
    tool: &str,
    shown: &str,
) -> rquickjs::Result<Function<'js>> {
    let bridge = Rc::clone(bridge);
    let tool = tool.to_owned();
    let shown_name = shown.to_owned();
    let function = Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Rest<Value<'js>>| {
        bridge.queue_call(&ctx, &tool, &shown_name, &args.0)
    })?;
    function.set_name(shown)?;
    Ok(function)
}
