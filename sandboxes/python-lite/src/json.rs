//! JSON ⇄ Python values, natively. RustPython's `json` module is pure Python (about 16 µs
//! to encode a one-key dict); every tool call encodes its input and decodes its result.

use rustpython_vm::builtins::{PyDict, PyFloat, PyInt, PyList, PyStr, PyTuple};
use rustpython_vm::{AsObject, PyObject, PyObjectRef, PyResult, VirtualMachine};
use serde_json::Value;

/// Deeper structures are almost certainly cycles or abuse.
const MAX_DEPTH: usize = 200;

/// Encodes a Python value as compact JSON text (dict key order kept). Raises `TypeError`
/// for values JSON has no form for and `ValueError` for NaN, infinities and lone surrogates.
pub(crate) fn encode(vm: &VirtualMachine, value: &PyObject) -> PyResult<String> {
    let mut out = String::new();
    write_value(vm, value, &mut out, 0)?;
    Ok(out)
}

fn write_str(vm: &VirtualMachine, text: &PyStr, out: &mut String) -> PyResult<()> {
    let text = text
        .to_str()
        .ok_or_else(|| vm.new_value_error("string contains lone surrogates"))?;
    let quoted =
        serde_json::to_string(text).map_err(|error| vm.new_value_error(error.to_string()))?;
    out.push_str(&quoted);
    Ok(())
}

fn write_value(
    vm: &VirtualMachine,
    value: &PyObject,
    out: &mut String,
    depth: usize,
) -> PyResult<()> {
    if depth > MAX_DEPTH {
        return Err(vm.new_value_error("nested too deeply to encode as JSON"));
    }
    if vm.is_none(value) {
        out.push_str("null");
    } else if value.is(&vm.ctx.true_value) {
        out.push_str("true");
    } else if value.is(&vm.ctx.false_value) {
        out.push_str("false");
    } else if let Some(text) = value.downcast_ref::<PyStr>() {
        write_str(vm, text, out)?;
    } else if let Some(int) = value.downcast_ref::<PyInt>() {
        out.push_str(&int.as_bigint().to_string());
    } else if let Some(float) = value.downcast_ref::<PyFloat>() {
        let number = float.to_f64();
        if !number.is_finite() {
            return Err(vm.new_value_error(format!("{number} is not valid JSON")));
        }
        out.push_str(
            &serde_json::to_string(&number)
                .map_err(|error| vm.new_value_error(error.to_string()))?,
        );
    } else if let Some(list) = value.downcast_ref::<PyList>() {
        // Copy the references out: encoding may run no Python code, but keep the lock short.
        let items = list.borrow_vec().to_vec();
        write_sequence(vm, &items, out, depth)?;
    } else if let Some(tuple) = value.downcast_ref::<PyTuple>() {
        write_sequence(vm, tuple.as_slice(), out, depth)?;
    } else if let Some(dict) = value.downcast_ref::<PyDict>() {
        out.push('{');
        for (index, (key, item)) in dict.into_iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            write_key(vm, &key, out)?;
            out.push(':');
            write_value(vm, &item, out, depth + 1)?;
        }
        out.push('}');
    } else {
        return Err(vm.new_type_error(format!(
            "Object of type {} is not JSON serializable",
            value.class().name()
        )));
    }
    Ok(())
}

fn write_sequence(
    vm: &VirtualMachine,
    items: &[PyObjectRef],
    out: &mut String,
    depth: usize,
) -> PyResult<()> {
    out.push('[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        write_value(vm, item, out, depth + 1)?;
    }
    out.push(']');
    Ok(())
}

/// Keys as Python's `json` writes them: strings as-is; numbers, booleans and None as text.
fn write_key(vm: &VirtualMachine, key: &PyObject, out: &mut String) -> PyResult<()> {
    if let Some(text) = key.downcast_ref::<PyStr>() {
        return write_str(vm, text, out);
    }
    let mut scalar = String::new();
    if vm.is_none(key)
        || key.is(&vm.ctx.true_value)
        || key.is(&vm.ctx.false_value)
        || key.downcast_ref::<PyInt>().is_some()
        || key.downcast_ref::<PyFloat>().is_some()
    {
        write_value(vm, key, &mut scalar, 0)?;
        let quoted = serde_json::to_string(&scalar)
            .map_err(|error| vm.new_value_error(error.to_string()))?;
        out.push_str(&quoted);
        return Ok(());
    }
    Err(vm.new_type_error(format!(
        "keys must be str, int, float, bool or None, not {}",
        key.class().name()
    )))
}

/// Decodes JSON text into Python values (objects keep their key order).
pub(crate) fn decode(vm: &VirtualMachine, text: &str) -> PyResult<PyObjectRef> {
    let value: Value = serde_json::from_str(text)
        .map_err(|error| vm.new_value_error(format!("invalid JSON: {error}")))?;
    to_python(vm, &value)
}

fn to_python(vm: &VirtualMachine, value: &Value) -> PyResult<PyObjectRef> {
    Ok(match value {
        Value::Null => vm.ctx.none(),
        Value::Bool(flag) => vm.ctx.new_bool(*flag).into(),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(int), _) => vm.ctx.new_int(int).into(),
            (None, Some(int)) => vm.ctx.new_int(int).into(),
            _ => vm.ctx.new_float(number.as_f64().unwrap_or(f64::NAN)).into(),
        },
        Value::String(text) => vm.ctx.new_str(text.as_str()).into(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| to_python(vm, item))
                .collect::<PyResult<Vec<_>>>()?;
            vm.ctx.new_list(items).into()
        }
        Value::Object(map) => {
            let dict = vm.ctx.new_dict();
            for (key, item) in map {
                dict.set_item(key.as_str(), to_python(vm, item)?, vm)?;
            }
            dict.into()
        }
    })
}
