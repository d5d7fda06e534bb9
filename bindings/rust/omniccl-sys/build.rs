//! Provides libomniccl for linking, in this order:
//!
//! 1. `OMNICCL_DIR`: the shared library of an install prefix (`lib/`,
//!    `lib64/`) or of a CMake build directory of the repository (`capi/`); the
//!    first holding `libomniccl.so` wins, and it is an error if none does.
//! 2. Feature `dynamic`: the installed shared library that pkg-config finds
//!    (`omniccl.pc`); an error if it finds none.
//! 3. Otherwise the library is built from source with CMake (the `cmake`
//!    crate, into `OUT_DIR`) and linked statically, with the C++ runtime, so
//!    programs need no loader path at run time. The sources are
//!    `OMNICCL_SOURCE_DIR`, else in a packaged crate the copy it carries
//!    (`vendor/`, written by `vendor.sh`), else the checkout this crate sits
//!    in. This build is CPU-only (`OMNICCL_CUDA=OFF`); CUDA tensors need a
//!    CUDA build of the shared library (1 or 2).
//!
//! With 1 and 2 the loader must find `libomniccl.so.1` when a program starts
//! (installed system-wide, an rpath, or `LD_LIBRARY_PATH`).
//!
//! Dependents get `DEP_OMNICCL_INCLUDE`, `DEP_OMNICCL_LIBDIR` and
//! `DEP_OMNICCL_LINK` (`static` or `dynamic`). The raw bindings are checked in
//! (`src/bindings.rs`), so no libclang is needed here.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=OMNICCL_DIR");
    println!("cargo:rerun-if-env-changed=OMNICCL_SOURCE_DIR");
    println!("cargo:rerun-if-env-changed=CXXSTDLIB");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let sources = source_dir(&manifest);

    if let Some(dir) = env::var_os("OMNICCL_DIR") {
        let dir = PathBuf::from(dir);
        let include = if dir.join("include/omniccl/omniccl.h").exists() {
            Some(dir.join("include"))
        } else {
            sources.as_ref().map(|s| s.join("capi/include"))
        };
        emit_dynamic(shared_libdir(&dir), include);
    } else if env::var_os("CARGO_FEATURE_DYNAMIC").is_some() {
        link_pkg_config();
    } else {
        let Some(src) = sources else {
            panic!(
                "omniccl-sys cannot build libomniccl: this crate was packaged without its sources \
                 (vendor/, which vendor.sh writes before cargo package) or is not inside an \
                 OmniCCL checkout; set OMNICCL_SOURCE_DIR (a checkout), OMNICCL_DIR (an installed \
                 library or a build directory), or enable feature `dynamic` (an installed library \
                 that pkg-config finds)"
            );
        };
        build_static(&src);
    }
}

/// The directory under `OMNICCL_DIR` holding `libomniccl.so`.
fn shared_libdir(dir: &Path) -> PathBuf {
    let candidates = [dir.join("lib"), dir.join("lib64"), dir.join("capi"), dir.to_path_buf()];
    if let Some(libdir) = candidates.iter().find(|d| d.join("libomniccl.so").exists()) {
        return libdir.clone();
    }
    let tried: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
    panic!(
        "OMNICCL_DIR={} holds no libomniccl.so (looked in {}); point it at an install prefix or \
         at a CMake build directory of the repository",
        dir.display(),
        tried.join(", ")
    );
}

/// Feature `dynamic`: the shared library that pkg-config finds.
fn link_pkg_config() {
    match pkg_config::Config::new().atleast_version("0.1").probe("omniccl") {
        Ok(lib) => {
            // pkg-config has printed the link lines; pass the paths on.
            if let Some(libdir) = lib.link_paths.first() {
                println!("cargo:libdir={}", libdir.display());
            }
            if let Some(include) = lib.include_paths.first() {
                println!("cargo:include={}", include.display());
            }
            println!("cargo:link=dynamic");
        }
        Err(e) => panic!(
            "omniccl-sys: feature `dynamic` links an installed libomniccl, but pkg-config did not \
             find omniccl.pc: {e}\nInstall the library (cmake --install), add its lib/pkgconfig \
             to PKG_CONFIG_PATH, or build without the feature (then the library is built from \
             source and linked statically)"
        ),
    }
}

/// Builds `libomniccl.a` from `src` with CMake and links it statically.
fn build_static(src: &Path) {
    for part in ["CMakeLists.txt", "cmake", "kernels", "core", "capi"] {
        println!("cargo:rerun-if-changed={}", src.join(part).display());
    }
    let out = cmake::Config::new(src)
        .define("OMNICCL_STATIC_LIB", "ON")
        .define("OMNICCL_CUDA", "OFF")
        .define("OMNICCL_JAVA", "OFF")
        .define("OMNICCL_BUILD_TESTS", "OFF")
        .define("OMNICCL_BUILD_EXAMPLES", "OFF")
        .define("OMNICCL_BUILD_TOOLS", "OFF")
        .profile("RelWithDebInfo")
        .build_target("omniccl_static")
        .build();
    let libdir = out.join("build/capi");
    println!("cargo:rustc-link-search=native={}", libdir.display());
    println!("cargo:rustc-link-lib=static=omniccl");
    // The library is C++: its runtime comes from the system, as the cc crate
    // links it (CXXSTDLIB names another, e.g. c++ for libc++).
    let cxx = env::var("CXXSTDLIB").unwrap_or_else(|_| "stdc++".to_string());
    if !cxx.is_empty() {
        println!("cargo:rustc-link-lib=dylib={cxx}");
    }
    println!("cargo:libdir={}", libdir.display());
    println!("cargo:include={}", src.join("capi/include").display());
    println!("cargo:link=static");
}

/// Prints the link lines of a shared library and the metadata for dependents.
fn emit_dynamic(libdir: PathBuf, include: Option<PathBuf>) {
    println!("cargo:rustc-link-search=native={}", libdir.display());
    println!("cargo:rustc-link-lib=dylib=omniccl");
    println!("cargo:libdir={}", libdir.display());
    if let Some(include) = include {
        println!("cargo:include={}", include.display());
    }
    println!("cargo:link=dynamic");
}

/// The library's sources (a directory holding `CMakeLists.txt` and
/// `capi/include/omniccl/omniccl.h`): `OMNICCL_SOURCE_DIR`; else, in a
/// packaged crate (cargo keeps the original manifest as `Cargo.toml.orig`),
/// its `vendor/` copy; else the nearest ancestor of this crate that is a
/// checkout. So a `vendor/` left in a checkout is never built.
fn source_dir(manifest: &Path) -> Option<PathBuf> {
    let is_root = |d: &Path| d.join("CMakeLists.txt").exists() && d.join("capi/include/omniccl/omniccl.h").exists();
    if let Some(dir) = env::var_os("OMNICCL_SOURCE_DIR") {
        let dir = PathBuf::from(dir);
        assert!(
            is_root(&dir),
            "OMNICCL_SOURCE_DIR={} is not an OmniCCL checkout (no CMakeLists.txt and \
             capi/include/omniccl/omniccl.h)",
            dir.display()
        );
        return Some(dir);
    }
    if manifest.join("Cargo.toml.orig").exists() {
        let vendored = manifest.join("vendor");
        return is_root(&vendored).then_some(vendored);
    }
    manifest.ancestors().find(|d| is_root(d)).map(Path::to_path_buf)
}
