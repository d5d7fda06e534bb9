//! Finds libomniccl for linking, in this order:
//!
//! 1. `OMNICCL_DIR`: an install prefix (`lib/`, `lib64/`) or a CMake build
//!    directory of the repository (`capi/`); the first holding
//!    `libomniccl.so` wins, and it is an error if none does.
//! 2. pkg-config (`omniccl.pc`, installed with the library).
//! 3. The repository's CMake project, built into `OUT_DIR` by the `cmake`
//!    crate. Its sources are found through `OMNICCL_SOURCE_DIR`, else by
//!    walking up from this crate to the checkout root (a packaged crate from a
//!    registry does not carry the C++ sources: set one of the two variables).
//!
//! Dependents get `DEP_OMNICCL_LIBDIR` and `DEP_OMNICCL_INCLUDE`. The raw
//! bindings are checked in (`src/bindings.rs`), so no libclang is needed here.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=OMNICCL_DIR");
    println!("cargo:rerun-if-env-changed=OMNICCL_SOURCE_DIR");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let sources = source_dir(&manifest);

    if let Some(dir) = env::var_os("OMNICCL_DIR") {
        let dir = PathBuf::from(dir);
        let candidates = [dir.join("lib"), dir.join("lib64"), dir.join("capi"), dir.clone()];
        let Some(libdir) = candidates.iter().find(|d| d.join("libomniccl.so").exists()) else {
            let tried: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
            panic!(
                "OMNICCL_DIR={} holds no libomniccl.so (looked in {}); point it at an install \
                 prefix or at a CMake build directory of the repository",
                dir.display(),
                tried.join(", ")
            );
        };
        let include = if dir.join("include/omniccl/omniccl.h").exists() {
            Some(dir.join("include"))
        } else {
            sources.as_ref().map(|s| s.join("capi/include"))
        };
        emit(libdir.clone(), include);
        return;
    }

    match pkg_config::Config::new().atleast_version("0.1").probe("omniccl") {
        Ok(lib) => {
            // pkg-config has printed the link lines; pass the paths on.
            if let Some(libdir) = lib.link_paths.first() {
                println!("cargo:libdir={}", libdir.display());
            }
            if let Some(include) = lib.include_paths.first() {
                println!("cargo:include={}", include.display());
            }
            return;
        }
        Err(e) => println!("cargo:warning=omniccl: pkg-config did not find omniccl ({e}); building it with CMake"),
    }

    let Some(src) = sources else {
        panic!(
            "omniccl-sys cannot find libomniccl: OMNICCL_DIR is unset, pkg-config has no \
             'omniccl' and the OmniCCL sources are not next to this crate; set OMNICCL_DIR \
             (installed library or build directory), PKG_CONFIG_PATH, or OMNICCL_SOURCE_DIR \
             (a checkout to build with CMake)"
        );
    };
    println!("cargo:rerun-if-changed={}", src.join("capi").display());
    println!("cargo:rerun-if-changed={}", src.join("core").display());
    let out = cmake::Config::new(&src)
        .define("OMNICCL_BUILD_TESTS", "OFF")
        .define("OMNICCL_BUILD_EXAMPLES", "OFF")
        .define("CMAKE_BUILD_TYPE", "RelWithDebInfo")
        .build_target("omniccl")
        .build();
    emit(out.join("build/capi"), Some(src.join("capi/include")));
}

/// Prints the link lines and the metadata for dependents.
fn emit(libdir: PathBuf, include: Option<PathBuf>) {
    println!("cargo:rustc-link-search=native={}", libdir.display());
    println!("cargo:rustc-link-lib=dylib=omniccl");
    println!("cargo:libdir={}", libdir.display());
    if let Some(include) = include {
        println!("cargo:include={}", include.display());
    }
}

/// The checkout root (holding `capi/include/omniccl/omniccl.h` and
/// `CMakeLists.txt`): `OMNICCL_SOURCE_DIR`, else the nearest ancestor of this
/// crate that is one.
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
    manifest.ancestors().find(|d| is_root(d)).map(Path::to_path_buf)
}
