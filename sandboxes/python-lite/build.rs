#![allow(
    clippy::expect_used,
    reason = "a build script reports failure by panicking"
)]

//! Packs the IANA time-zone database into the image, for `zoneinfo` (the guest has no
//! `/usr/share/zoneinfo` and no `tzdata` package). The source is the build machine's
//! compiled zone files — Debian's `tzdata`, installed by `tests/bootstrap.sh` — or
//! `CORDON_TZDIR`. Without one the image has no zones, and `ZoneInfo(...)` raises
//! `ZoneInfoNotFoundError` as it did before.
//!
//! Format of `$OUT_DIR/tzdata.bin`, entry after entry: name length (u16 LE), the name
//! (`Europe/Paris`), data length (u32 LE), the TZif file.

use std::path::{Path, PathBuf};

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        // `posix/` and `right/` repeat every zone (the latter with leap seconds).
        if prefix.is_empty() && matches!(name.as_str(), "posix" | "right") {
            continue;
        }
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        if path.is_dir() {
            collect(&path, &key, out);
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.starts_with(b"TZif")
        {
            out.push((key, bytes));
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CORDON_TZDIR");
    if std::env::var("CARGO_CFG_TARGET_FAMILY").as_deref() != Ok("wasm") {
        return;
    }
    let dir = std::env::var("CORDON_TZDIR").unwrap_or_else(|_| "/usr/share/zoneinfo".into());
    println!("cargo:rerun-if-changed={dir}");
    let mut zones = Vec::new();
    collect(Path::new(&dir), "", &mut zones);
    zones.sort();
    let mut blob = Vec::new();
    for (name, data) in zones {
        let name_len = u16::try_from(name.len()).expect("zone names are short");
        let data_len = u32::try_from(data.len()).expect("zone files are small");
        blob.extend_from_slice(&name_len.to_le_bytes());
        blob.extend_from_slice(name.as_bytes());
        blob.extend_from_slice(&data_len.to_le_bytes());
        blob.extend_from_slice(&data);
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("tzdata.bin");
    std::fs::write(out, blob).expect("OUT_DIR is writable");
}
