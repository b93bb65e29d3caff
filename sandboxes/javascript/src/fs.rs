//! The `fs` global: node-like synchronous file functions over the workspace (`/workspace`,
//! the working directory). They go through WASI like any program's file calls, so the
//! host's rules — the workspace only, its quotas — apply; failures throw an `Error` with
//! node's `code` (`ENOENT`, `ENOSPC`, …), `syscall` and `path`.

use std::io::ErrorKind;

use rquickjs::{
    Array, ArrayBuffer, Ctx, Exception, Function, Object, TypedArray, Value, function::Opt,
};

/// WASI errno (as wasi-libc reports it) → node's code and text.
fn describe(error: &std::io::Error) -> (&'static str, &'static str) {
    match error.raw_os_error() {
        Some(2) => ("EACCES", "permission denied"),
        Some(8) => ("EBADF", "bad file descriptor"),
        Some(19) => ("EDQUOT", "disk quota exceeded"),
        Some(20) => ("EEXIST", "file already exists"),
        Some(28) => ("EINVAL", "invalid argument"),
        Some(31) => ("EISDIR", "illegal operation on a directory"),
        Some(44) => ("ENOENT", "no such file or directory"),
        Some(51) => ("ENOSPC", "no space left on device"),
        Some(54) => ("ENOTDIR", "not a directory"),
        Some(55) => ("ENOTEMPTY", "directory not empty"),
        Some(63) => ("EPERM", "operation not permitted"),
        Some(76) => ("ENOTCAPABLE", "outside the workspace"),
        _ => match error.kind() {
            ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
            ErrorKind::AlreadyExists => ("EEXIST", "file already exists"),
            ErrorKind::PermissionDenied => ("EPERM", "operation not permitted"),
            _ => ("EIO", "i/o error"),
        },
    }
}

fn fail<'js>(ctx: &Ctx<'js>, syscall: &str, path: &str, error: std::io::Error) -> rquickjs::Error {
    let (code, text) = describe(&error);
    let message = format!("{code}: {text}, {syscall} '{path}'");
    let exception = match Exception::from_message(ctx.clone(), &message) {
        Ok(exception) => exception,
        Err(error) => return error,
    };
    let object = exception.as_object();
    let _ = object.set("code", code);
    let _ = object.set("syscall", syscall);
    let _ = object.set("path", path);
    exception.throw()
}

/// The bytes of a string, a typed array (its view) or an ArrayBuffer.
#[allow(
    unsafe_code,
    reason = "copies a typed array's bytes while no JavaScript runs"
)]
fn bytes_of<'js>(ctx: &Ctx<'js>, data: &Value<'js>) -> rquickjs::Result<Vec<u8>> {
    if let Some(text) = data.as_string() {
        return Ok(text.to_string()?.into_bytes());
    }
    if let Some(object) = data.as_object() {
        if let Ok(array) = TypedArray::<u8>::from_object(object.clone()) {
            // SAFETY: copied at once; no JavaScript runs while the slice lives.
            return Ok(unsafe { array.as_bytes() }.unwrap_or_default().to_vec());
        }
        if let Some(buffer) = ArrayBuffer::from_object(object.clone()) {
            // SAFETY: as above.
            return Ok(unsafe { buffer.as_bytes() }.unwrap_or_default().to_vec());
        }
    }
    Err(Exception::throw_type(
        ctx,
        "data must be a string, a Uint8Array or an ArrayBuffer",
    ))
}

/// `"utf8"` / `{encoding: "utf8"}` → text; nothing → bytes.
fn wants_text(options: &Option<Value<'_>>) -> bool {
    let encoding = match options {
        Some(value) if value.is_string() => value.as_string().and_then(|s| s.to_string().ok()),
        Some(value) => value
            .as_object()
            .and_then(|object| object.get::<_, Option<String>>("encoding").ok().flatten()),
        None => None,
    };
    encoding.is_some()
}

fn flag(options: &Option<Value<'_>>, name: &str) -> bool {
    options
        .as_ref()
        .and_then(Value::as_object)
        .and_then(|object| object.get::<_, Option<bool>>(name).ok().flatten())
        .unwrap_or(false)
}

/// Installs `fs` on the global object.
pub(crate) fn install<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<()> {
    let fs = Object::new(ctx.clone())?;
    fs.set(
        "readFileSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>,
             path: String,
             options: Opt<Value<'js>>|
             -> rquickjs::Result<Value<'js>> {
                let bytes =
                    std::fs::read(&path).map_err(|error| fail(&ctx, "open", &path, error))?;
                if wants_text(&options.0) {
                    let text = String::from_utf8_lossy(&bytes);
                    Ok(rquickjs::String::from_str(ctx.clone(), &text)?.into_value())
                } else {
                    Ok(TypedArray::<u8>::new(ctx.clone(), bytes)?.into_value())
                }
            },
        )?,
    )?;
    for (name, append) in [("writeFileSync", false), ("appendFileSync", true)] {
        fs.set(
            name,
            Function::new(
                ctx.clone(),
                move |ctx: Ctx<'js>, path: String, data: Value<'js>| -> rquickjs::Result<()> {
                    let bytes = bytes_of(&ctx, &data)?;
                    let written = if append {
                        use std::io::Write;
                        std::fs::OpenOptions::new()
                            .append(true)
                            .create(true)
                            .open(&path)
                            .and_then(|mut file| file.write_all(&bytes))
                    } else {
                        std::fs::write(&path, &bytes)
                    };
                    written.map_err(|error| fail(&ctx, "write", &path, error))
                },
            )?,
        )?;
    }
    fs.set(
        "readdirSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, path: Opt<String>| -> rquickjs::Result<Array<'js>> {
                let path = path.0.unwrap_or_else(|| ".".into());
                let mut names: Vec<String> = std::fs::read_dir(&path)
                    .and_then(|entries| {
                        entries
                            .map(|entry| {
                                entry.map(|e| e.file_name().to_string_lossy().into_owned())
                            })
                            .collect()
                    })
                    .map_err(|error| fail(&ctx, "scandir", &path, error))?;
                names.sort();
                let array = Array::new(ctx.clone())?;
                for (index, name) in names.into_iter().enumerate() {
                    array.set(index, name)?;
                }
                Ok(array)
            },
        )?,
    )?;
    fs.set(
        "existsSync",
        Function::new(ctx.clone(), |path: String| std::fs::metadata(path).is_ok())?,
    )?;
    fs.set(
        "statSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, path: String| -> rquickjs::Result<Object<'js>> {
                let meta =
                    std::fs::metadata(&path).map_err(|error| fail(&ctx, "stat", &path, error))?;
                let stat = Object::new(ctx.clone())?;
                stat.set("size", meta.len() as f64)?;
                let modified = meta
                    .modified()
                    .ok()
                    .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0.0, |elapsed| elapsed.as_secs_f64() * 1000.0);
                stat.set("mtimeMs", modified)?;
                let (file, dir) = (meta.is_file(), meta.is_dir());
                stat.set("isFile", Function::new(ctx.clone(), move || file)?)?;
                stat.set("isDirectory", Function::new(ctx.clone(), move || dir)?)?;
                Ok(stat)
            },
        )?,
    )?;
    fs.set(
        "mkdirSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, path: String, options: Opt<Value<'js>>| -> rquickjs::Result<()> {
                let made = if flag(&options.0, "recursive") {
                    std::fs::create_dir_all(&path)
                } else {
                    std::fs::create_dir(&path)
                };
                made.map_err(|error| fail(&ctx, "mkdir", &path, error))
            },
        )?,
    )?;
    fs.set(
        "unlinkSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, path: String| -> rquickjs::Result<()> {
                std::fs::remove_file(&path).map_err(|error| fail(&ctx, "unlink", &path, error))
            },
        )?,
    )?;
    fs.set(
        "rmdirSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, path: String| -> rquickjs::Result<()> {
                std::fs::remove_dir(&path).map_err(|error| fail(&ctx, "rmdir", &path, error))
            },
        )?,
    )?;
    fs.set(
        "rmSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, path: String, options: Opt<Value<'js>>| -> rquickjs::Result<()> {
                let removed = match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_dir() => {
                        if flag(&options.0, "recursive") {
                            std::fs::remove_dir_all(&path)
                        } else {
                            std::fs::remove_dir(&path)
                        }
                    }
                    Ok(_) => std::fs::remove_file(&path),
                    Err(error) => Err(error),
                };
                match removed {
                    Err(error)
                        if error.kind() == ErrorKind::NotFound && flag(&options.0, "force") =>
                    {
                        Ok(())
                    }
                    other => other.map_err(|error| fail(&ctx, "rm", &path, error)),
                }
            },
        )?,
    )?;
    fs.set(
        "renameSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, from: String, to: String| -> rquickjs::Result<()> {
                std::fs::rename(&from, &to).map_err(|error| fail(&ctx, "rename", &from, error))
            },
        )?,
    )?;
    fs.set(
        "copyFileSync",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, from: String, to: String| -> rquickjs::Result<()> {
                std::fs::read(&from)
                    .and_then(|bytes| std::fs::write(&to, bytes))
                    .map_err(|error| fail(&ctx, "copyfile", &from, error))
            },
        )?,
    )?;
    ctx.globals().set("fs", fs)
}
