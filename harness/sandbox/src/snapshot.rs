//! Pre-initializing a bridge guest: its initializer (interpreter start-up, imports) run
//! under wasmtime-wizer with only `output` usable, and the result snapshotted.

use std::sync::{Arc, Mutex};

use cordon_guest::abi;
use wasmtime::{Engine, Linker, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;

use crate::error::SandboxError;

/// State of the instance being snapshotted: WASI with stderr captured for diagnostics.
struct InitState {
    wasi: WasiP1Ctx,
    diagnostics: Arc<Mutex<Vec<u8>>>,
}

/// Runs the guest's initializer (interpreter start-up, imports) and snapshots the result.
pub(crate) async fn snapshot(wasm: &[u8]) -> Result<Vec<u8>, SandboxError> {
    let fail =
        |what: &str, error: wasmtime::Error| SandboxError::Image(format!("{what}: {error:#}"));
    let engine = Engine::new(&wasmtime::Config::new()).map_err(|e| fail("snapshot engine", e))?;
    let mut linker: Linker<InitState> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state: &mut InitState| &mut state.wasi)
        .map_err(|e| fail("linking WASI", e))?;
    define_init_bridge(&mut linker).map_err(|e| fail("linking the bridge", e))?;
    let diagnostics = Arc::new(Mutex::new(Vec::new()));
    let pipe = wasmtime_wasi::p2::pipe::MemoryOutputPipe::new(64 * 1024);
    let wasi = WasiCtxBuilder::new()
        .stderr(pipe.clone())
        .stdout(pipe.clone())
        .build_p1();
    let mut store = Store::new(
        &engine,
        InitState {
            wasi,
            diagnostics: diagnostics.clone(),
        },
    );
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func(abi::EXPORT_INITIALIZE);
    let result = wizer
        .run(&mut store, wasm, async |store, module| {
            linker.instantiate_async(store, module).await
        })
        .await;
    result.map_err(|error| {
        let mut printed = pipe.contents().to_vec();
        printed.extend_from_slice(&diagnostics.lock().map(|d| d.clone()).unwrap_or_default());
        SandboxError::Image(format!(
            "pre-initializing the guest failed: {error:#}\n{}",
            String::from_utf8_lossy(&printed)
        ))
    })
}

/// During snapshotting only `output` (panic and diagnostic messages) may be used.
fn define_init_bridge(linker: &mut Linker<InitState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_OUTPUT,
        |mut caller: wasmtime::Caller<'_, InitState>, _stream: i32, ptr: i32, len: i32| {
            if let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") {
                let (start, len) = (
                    usize::try_from(ptr).unwrap_or(0),
                    usize::try_from(len).unwrap_or(0),
                );
                let bytes = memory
                    .data(&caller)
                    .get(start..start.saturating_add(len))
                    .map(<[u8]>::to_vec);
                if let (Some(bytes), Ok(mut sink)) = (bytes, caller.data().diagnostics.lock()) {
                    sink.extend_from_slice(&bytes);
                }
            }
        },
    )?;
    let unavailable = |name: &'static str| {
        move || -> wasmtime::Result<()> {
            wasmtime::bail!("`cordon.{name}` was called during pre-initialization")
        }
    };
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_INBOX_READ, {
        let f = unavailable(abi::IMPORT_INBOX_READ);
        move |_: i32, _: i32| -> wasmtime::Result<i32> { f().map(|()| 0) }
    })?;
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_CALL_TOOL, {
        let f = unavailable(abi::IMPORT_CALL_TOOL);
        move |_: i32, _: i32, _: i32, _: i32| -> wasmtime::Result<i32> { f().map(|()| 0) }
    })?;
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_CALL_BATCH, {
        let f = unavailable(abi::IMPORT_CALL_BATCH);
        move |_: i32, _: i32| -> wasmtime::Result<i32> { f().map(|()| 0) }
    })?;
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_FINISH, {
        let f = unavailable(abi::IMPORT_FINISH);
        move |_: i32, _: i32| -> wasmtime::Result<()> { f() }
    })?;
    Ok(())
}
