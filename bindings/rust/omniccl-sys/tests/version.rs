//! The library linked fits the header these bindings were generated from,
//! and this crate's version is the library's. (Struct layouts are checked at
//! compile time by bindgen's assertions in src/bindings.rs.)

use omniccl_sys as sys;

#[test]
fn library_version_matches_the_bindings() {
    let mut version = 0;
    // SAFETY: version is a valid int.
    assert_eq!(unsafe { sys::occl_get_version(&mut version) }, sys::OCCL_SUCCESS);
    assert_eq!(version as u32, sys::OCCL_VERSION_CODE, "library vs header version");
    // SAFETY: plain values.
    let status = unsafe { sys::occl_init_check(sys::OCCL_ABI_VERSION as i32, sys::OCCL_VERSION_CODE as i32) };
    assert_eq!(status, sys::OCCL_SUCCESS);
}

#[test]
fn crate_version_is_the_library_version() {
    let header = format!(
        "{}.{}.{}",
        sys::OCCL_VERSION_MAJOR,
        sys::OCCL_VERSION_MINOR,
        sys::OCCL_VERSION_PATCH
    );
    assert_eq!(env!("CARGO_PKG_VERSION"), header);
}

#[test]
fn a_newer_header_is_refused() {
    // SAFETY: plain values.
    let status = unsafe { sys::occl_init_check(sys::OCCL_ABI_VERSION as i32 + 1, sys::OCCL_VERSION_CODE as i32) };
    assert_eq!(status, sys::OCCL_ERR_VERSION);
}
