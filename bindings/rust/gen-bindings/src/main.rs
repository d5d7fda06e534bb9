//! Writes the raw bindings of `omniccl.h` (and the DLPack types it uses).
//!
//! Usage: `gen-bindings INCLUDE_DIR OUT_FILE RUSTFMT_TOML` (the formatting
//! configuration is explicit so the output does not depend on where it runs). Only `occl_*` / `OCCL_*` items
//! and the DLPack types are emitted; enums become integer type aliases plus
//! constants (the C ABI may append enumerators, and a Rust `enum` holding an
//! unknown value would be undefined behaviour). Layout tests are kept, so
//! `cargo test -p omniccl-sys` checks every struct's size and field offsets.

use std::{env, path::PathBuf, process::ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: gen-bindings INCLUDE_DIR OUT_FILE RUSTFMT_TOML");
        return ExitCode::from(2);
    }
    let include = PathBuf::from(&args[1]);
    let header = include.join("omniccl/omniccl.h");
    let result = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg("-std=c99")
        .allowlist_function("occl_.*")
        .allowlist_type("occl_.*|DL.*")
        .allowlist_var("OCCL_.*|DLPACK_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .layout_tests(true)
        .use_core()
        .formatter(bindgen::Formatter::Rustfmt)
        .rustfmt_configuration_file(Some(PathBuf::from(&args[3])))
        .generate();
    let bindings = match result {
        Ok(b) => b,
        Err(e) => {
            eprintln!("gen-bindings: bindgen failed on {}: {e}", header.display());
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = bindings.write_to_file(&args[2]) {
        eprintln!("gen-bindings: cannot write {}: {e}", args[2]);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
