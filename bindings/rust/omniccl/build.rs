//! Lets this crate's own tests and examples find a shared libomniccl at run
//! time without LD_LIBRARY_PATH: an rpath to the directory omniccl-sys linked
//! (`DEP_OMNICCL_LIBDIR`) when it linked the shared library
//! (`DEP_OMNICCL_LINK=dynamic`). Cargo applies it to tests, examples and
//! binaries of this package only. A library built from source is linked
//! statically (`static`), so no program needs a loader path for it.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_OMNICCL_LIBDIR");
    println!("cargo:rerun-if-env-changed=DEP_OMNICCL_LINK");
    let dynamic = std::env::var("DEP_OMNICCL_LINK").is_ok_and(|link| link == "dynamic");
    if let (true, Ok(dir)) = (dynamic, std::env::var("DEP_OMNICCL_LIBDIR")) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
