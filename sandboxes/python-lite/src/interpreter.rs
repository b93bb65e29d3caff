//! The interpreter, its `_cordon` native module and the ABI exports.

use std::cell::RefCell;

use cordon_guest::{Guest, Outcome};
use rustpython::InterpreterBuilderExt;
use rustpython_vm::{
    AsObject, Interpreter, InterpreterBuilder, PyObjectRef, PyResult, Settings, VirtualMachine,
    builtins::{PyStr, PyTuple},
};

/// The Python half of the runtime: RustPython's own part, then the guest contract both
/// Python guests share (`tools`, `ToolError`, the batching event loop, cells).
const RUNTIME: &str = concat!(
    include_str!("runtime.py"),
    "\n",
    include_str!("../../../guest-sdk/python/contract.py")
);

struct Loaded {
    interpreter: Interpreter,
    run_cell: PyObjectRef,
}

thread_local! {
    // wasm32-wasip1 has one thread; this lives in linear memory and so in the snapshot.
    static LOADED: RefCell<Option<Loaded>> = const { RefCell::new(None) };
}

fn settings() -> Settings {
    let mut settings = Settings::default();
    settings.isolated = true;
    settings.ignore_environment = true;
    settings.import_site = false;
    settings.user_site_directory = false;
    settings.install_signal_handlers = false;
    settings.write_bytecode = false;
    settings.safe_path = true;
    settings.buffered_stdio = false;
    settings
}

fn load_runtime(vm: &VirtualMachine) -> PyResult<PyObjectRef> {
    let scope = vm.new_scope_with_builtins();
    vm.run_string(scope.clone(), RUNTIME, "<cordon>")?;
    scope.globals.get_item("_run_cell", vm)
}

fn text(vm: &VirtualMachine, value: &PyObjectRef) -> Option<String> {
    if vm.is_none(value) {
        return None;
    }
    value
        .downcast_ref::<PyStr>()
        .map(|s| s.to_string_lossy().into_owned())
}

/// `_run_cell` returns `(kind, a, b, c)`: `("ok", json, repr, None)` or
/// `("error", type, message, traceback)`.
fn outcome_from(vm: &VirtualMachine, value: &PyObjectRef) -> Outcome {
    let fields: Vec<Option<String>> = match value.downcast_ref::<PyTuple>() {
        Some(tuple) if tuple.len() == 4 => tuple.as_slice().iter().map(|v| text(vm, v)).collect(),
        _ => return internal_error("the runtime returned an unexpected value"),
    };
    let [kind, a, b, c] = <[Option<String>; 4]>::try_from(fields).unwrap_or_default();
    match kind.as_deref() {
        Some("ok") => Outcome::Completed {
            result_json: a,
            result_repr: b,
        },
        _ => Outcome::Error {
            error_type: a.unwrap_or_else(|| "Exception".into()),
            message: b.unwrap_or_default(),
            traceback: c.unwrap_or_default(),
        },
    }
}

fn internal_error(message: &str) -> Outcome {
    Outcome::Error {
        error_type: "CordonInternalError".into(),
        message: message.into(),
        traceback: String::new(),
    }
}

fn describe_exception(
    vm: &VirtualMachine,
    exc: &rustpython_vm::builtins::PyBaseExceptionRef,
) -> Outcome {
    let mut traceback = String::new();
    let _ = vm.write_exception(&mut traceback, exc);
    Outcome::Error {
        error_type: exc.class().name().to_string(),
        message: exc
            .as_object()
            .str(vm)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        traceback,
    }
}

struct Python;

impl Guest for Python {
    fn initialize() {
        let builder = InterpreterBuilder::new().settings(settings()).init_stdlib();
        let bridge = _cordon::module_def(&builder.ctx);
        let interpreter = builder.add_native_module(bridge).build();
        let run_cell = interpreter.enter(|vm| match load_runtime(vm) {
            Ok(run_cell) => run_cell,
            Err(exc) => {
                // Fails the image build loudly: the traceback goes to the builder's stderr.
                vm.print_exception(&exc);
                std::process::abort();
            }
        });
        LOADED.with_borrow_mut(|loaded| {
            *loaded = Some(Loaded {
                interpreter,
                run_cell,
            })
        });
    }

    fn execute(code: &str, tools: &[&str]) -> Outcome {
        LOADED.with_borrow(|loaded| {
            let Some(loaded) = loaded else {
                return internal_error("the image was not pre-initialized");
            };
            loaded.interpreter.enter(|vm| {
                let names: Vec<PyObjectRef> = tools
                    .iter()
                    .map(|name| vm.ctx.new_str(*name).into())
                    .collect();
                let names = vm.ctx.new_list(names);
                match loaded.run_cell.call((vm.ctx.new_str(code), names), vm) {
                    Ok(value) => outcome_from(vm, &value),
                    Err(exc) => describe_exception(vm, &exc),
                }
            })
        })
    }
}

cordon_guest::export_guest!(Python);

/// The native half of the bridge, seen by `runtime.py` only.
#[rustpython_vm::pymodule]
mod _cordon {
    use cordon_guest::abi::{CallResult, STREAM_STDERR, STREAM_STDOUT};
    use rustpython_vm::{
        AsObject, PyObjectRef, PyResult, VirtualMachine, builtins::PyStrRef, function::ArgBytesLike,
    };

    fn status(result: CallResult) -> (u8, String) {
        match result {
            Ok(json) => (0, json),
            Err(failure) => (failure.kind.code(), failure.message),
        }
    }

    fn stream(number: i32) -> i32 {
        if number == 2 {
            STREAM_STDERR
        } else {
            STREAM_STDOUT
        }
    }

    /// `call(name, input_json) -> (status, payload)`: one tool call, synchronously.
    #[pyfunction]
    fn call(name: PyStrRef, input: PyStrRef) -> (u8, String) {
        status(cordon_guest::call(
            &name.to_string_lossy(),
            &input.to_string_lossy(),
        ))
    }

    /// `call_value(name, value) -> (status, payload)`: `tools.call` in one native step —
    /// the value encoded, the call made, a success decoded: `(0, value)`, a failure
    /// `(kind code, message)`, a value that is not JSON `(-1, reason)` (the errors the
    /// encoder raises for that; any other exception propagates).
    #[pyfunction]
    fn call_value(
        name: PyStrRef,
        value: PyObjectRef,
        vm: &VirtualMachine,
    ) -> PyResult<(i32, PyObjectRef)> {
        let input = match crate::json::encode(vm, &value) {
            Ok(input) => input,
            Err(error) => {
                let exceptions = &vm.ctx.exceptions;
                let not_json = [
                    exceptions.type_error,
                    exceptions.value_error,
                    exceptions.recursion_error,
                ]
                .iter()
                .any(|class| error.fast_isinstance(class));
                if !not_json {
                    return Err(error);
                }
                return Ok((-1, error.as_object().str(vm)?.into()));
            }
        };
        let (code, payload) = status(cordon_guest::call(&name.to_string_lossy(), &input));
        let payload = if code == 0 {
            crate::json::decode(vm, &payload)?
        } else {
            vm.ctx.new_str(payload).into()
        };
        Ok((i32::from(code), payload))
    }

    /// `call_batch(names, inputs) -> [(status, payload)]`: calls awaited together.
    #[pyfunction]
    fn call_batch(
        names: PyObjectRef,
        inputs: PyObjectRef,
        vm: &VirtualMachine,
    ) -> PyResult<PyObjectRef> {
        let names: Vec<PyStrRef> = names.try_to_value(vm)?;
        let inputs: Vec<PyStrRef> = inputs.try_to_value(vm)?;
        if names.len() != inputs.len() {
            return Err(vm.new_value_error("names and inputs differ in length"));
        }
        let owned: Vec<(String, String)> = names
            .iter()
            .zip(&inputs)
            .map(|(n, i)| {
                (
                    n.to_string_lossy().into_owned(),
                    i.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let borrowed: Vec<(&str, &str)> = owned
            .iter()
            .map(|(n, i)| (n.as_str(), i.as_str()))
            .collect();
        let results = cordon_guest::call_many(&borrowed)
            .into_iter()
            .map(|result| {
                let (code, payload) = status(result);
                vm.ctx
                    .new_tuple(vec![
                        vm.ctx.new_int(code).into(),
                        vm.ctx.new_str(payload).into(),
                    ])
                    .into()
            })
            .collect();
        Ok(vm.ctx.new_list(results).into())
    }

    /// `last_expression_start(source) -> int`: where the last top-level statement starts
    /// (a character index) when it is an expression, else -1 (also for unparsable code,
    /// which the compiler then reports properly).
    #[pyfunction]
    fn last_expression_start(source: PyStrRef) -> i64 {
        let source = source.to_string_lossy();
        let Ok(parsed) = ruff_parser_pin::parse_module(&source) else {
            return -1;
        };
        match parsed.syntax().body.last() {
            Some(ruff_ast_pin::Stmt::Expr(statement)) => {
                let byte = statement.range.start().to_usize();
                source
                    .get(..byte)
                    .map_or(-1, |head| head.chars().count() as i64)
            }
            _ => -1,
        }
    }

    /// `encode(value) -> str`: compact JSON of a Python value (native; see `json.rs`).
    #[pyfunction]
    fn encode(value: PyObjectRef, vm: &VirtualMachine) -> PyResult<String> {
        crate::json::encode(vm, &value)
    }

    /// `decode(text) -> value`: Python value of JSON text (native).
    #[pyfunction]
    fn decode(text: PyStrRef, vm: &VirtualMachine) -> PyResult<PyObjectRef> {
        crate::json::decode(vm, &text.to_string_lossy())
    }

    /// `write(stream, text)`: stdout (1) or stderr (2). Lone surrogates become U+FFFD.
    #[pyfunction]
    fn write(number: i32, data: PyStrRef) {
        cordon_guest::write_output(stream(number), data.to_string_lossy().as_bytes());
    }

    /// The time-zone database packed by `build.rs`.
    static TZDATA: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tzdata.bin"));

    /// Each `(name, data)` entry of [`TZDATA`].
    fn zones() -> impl Iterator<Item = (&'static str, &'static [u8])> {
        let mut rest = TZDATA;
        std::iter::from_fn(move || {
            let (len, tail) = rest.split_first_chunk::<2>()?;
            let (name, tail) = tail.split_at_checked(usize::from(u16::from_le_bytes(*len)))?;
            let (len, tail) = tail.split_first_chunk::<4>()?;
            let (data, tail) = tail.split_at_checked(u32::from_le_bytes(*len) as usize)?;
            rest = tail;
            Some((std::str::from_utf8(name).ok()?, data))
        })
    }

    /// `tzdata(key) -> bytes | None`: the compiled zone file for `Europe/Paris`.
    #[pyfunction]
    fn tzdata(key: PyStrRef, vm: &VirtualMachine) -> PyObjectRef {
        let key = key.to_string_lossy();
        match zones().find(|(name, _)| *name == key) {
            Some((_, data)) => vm.ctx.new_bytes(data.to_vec()).into(),
            None => vm.ctx.none(),
        }
    }

    /// `tzdata_zones() -> [str]`: every zone name in the packed database.
    #[pyfunction]
    fn tzdata_zones(vm: &VirtualMachine) -> PyObjectRef {
        let names = zones()
            .map(|(name, _)| vm.ctx.new_str(name).into())
            .collect();
        vm.ctx.new_list(names).into()
    }

    /// `write_bytes(stream, data)`: raw bytes; the host decodes them lossily.
    #[pyfunction]
    fn write_bytes(number: i32, data: ArgBytesLike) {
        data.with_ref(|bytes| cordon_guest::write_output(stream(number), bytes));
    }
}
