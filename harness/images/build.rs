#![allow(
    clippy::expect_used,
    reason = "a build script reports failure by panicking"
)]

//! Builds the guest images for `wasm32-wasip1` (never for the host) and hands their paths
//! to the crate, which embeds them (`src/lib.rs`).
//!
//! The guests are members of this workspace but compile to empty crates on the host, so a
//! plain `cargo build` never compiles an interpreter for x86_64. Here we run a nested
//! `cargo build --target wasm32-wasip1 --profile guest` into `<target>/guests`, the same
//! way wasmtime's test-programs artifacts are built.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct GuestCrate {
    /// Name used for the embedded image and the env var `CORDON_GUEST_<NAME>`.
    name: &'static str,
    package: &'static str,
    dir: &'static str,
    /// Extra environment for crates that compile C for wasm (QuickJS).
    env: &'static [(&'static str, &'static str)],
}

const GUESTS: &[GuestCrate] = &[
    GuestCrate {
        name: "python_lite",
        package: "cordon-python-lite-guest",
        dir: "sandboxes/python-lite",
        env: &[],
    },
    GuestCrate {
        name: "javascript",
        package: "cordon-javascript-guest",
        dir: "sandboxes/javascript",
        env: &[
            // rquickjs would otherwise download wasi-sdk; Debian's clang + wasi-libc work.
            ("RQUICKJS_SYS_NO_WASI_SDK", "1"),
            ("CC_wasm32_wasip1", "clang"),
            ("AR_wasm32_wasip1", "llvm-ar-14"),
            ("CFLAGS_wasm32_wasip1", "--target=wasm32-wasi"),
        ],
    },
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir
        .join("../..")
        .canonicalize()
        .expect("workspace root exists");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out; guests go to <target>/guests so
    // every profile (and clippy) shares one guest build.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.clone());
    let guest_target = target_dir.join("guests");

    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("guest-sdk").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("Cargo.lock").display()
    );
    println!("cargo:rerun-if-env-changed=CORDON_SKIP_GUESTS");

    for guest in GUESTS {
        let crate_dir = workspace.join(guest.dir);
        let var = format!("CORDON_GUEST_{}", guest.name.to_uppercase());
        let artifact = guest_target
            .join("wasm32-wasip1/guest")
            .join(format!("{}.wasm", guest.package.replace('-', "_")));
        if !crate_dir.join("Cargo.toml").exists() || env::var_os("CORDON_SKIP_GUESTS").is_some() {
            // Not part of this checkout (or skipped): embed nothing; the sandbox reports the
            // image as missing at runtime.
            let placeholder = out_dir.join(format!("{}-not-built.wasm", guest.name));
            std::fs::write(&placeholder, b"").expect("OUT_DIR is writable");
            println!("cargo:rustc-env={var}={}", placeholder.display());
            continue;
        }
        println!("cargo:rerun-if-changed={}", crate_dir.display());
        build_guest(guest, &workspace, &guest_target);
        println!("cargo:rustc-env={var}={}", artifact.display());
    }
}

fn build_guest(guest: &GuestCrate, workspace: &Path, guest_target: &Path) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args([
            "build",
            "--package",
            guest.package,
            "--target",
            "wasm32-wasip1",
            "--profile",
            "guest",
        ])
        .arg("--target-dir")
        .arg(guest_target);
    // The outer build's flags, wrappers (clippy-driver) and target settings are for the host;
    // the guests' own flags live in .cargo/config.toml under [target.wasm32-wasip1].
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let strip = key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_MAKEFLAGS"
            || key.starts_with("RUSTC")
            || key == "RUSTFLAGS"
            || key == "RUSTDOCFLAGS";
        if strip {
            command.env_remove(key.as_ref());
        }
    }
    for (key, value) in guest.env {
        command.env(key, value);
    }
    let status = command
        .status()
        .unwrap_or_else(|error| panic!("could not run cargo: {error}"));
    if !status.success() {
        panic!(
            "building the {} guest for wasm32-wasip1 failed (see above).\n\
             Missing target? `rustup target add wasm32-wasip1` (rust-toolchain.toml installs it).\n\
             Missing C toolchain for QuickJS? `sudo apt-get install -y clang lld wasi-libc libclang-rt-dev-wasm32 llvm`",
            guest.name
        );
    }
}
