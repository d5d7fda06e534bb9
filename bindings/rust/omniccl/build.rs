//! Lets this crate's own tests and examples find libomniccl at run time
//! without LD_LIBRARY_PATH: an rpath to the directory omniccl-sys linked
//! (`DEP_OMNICCL_LIBDIR`). Cargo applies it to tests, examples and binaries
//! of this package only; programs depending on `omniccl` choose their own way
//! (installed library, their own rpath, or LD_LIBRARY_PATH).

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_OMNICCL_LIBDIR");
    if let Ok(dir) = std::env::var("DEP_OMNICCL_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
