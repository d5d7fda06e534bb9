//! DLPack descriptions of Rust slices, built for the length of one call.

use std::marker::PhantomData;

use omniccl_sys as sys;

use crate::element::Element;

/// A one-dimensional contiguous CPU `DLTensor` over a slice. The descriptor
/// points at `shape`, which must outlive it (the lifetime `'a` says so). The
/// C library reads the descriptor only during the call that takes it.
pub(crate) struct Tensor<'a> {
    pub(crate) dl: sys::DLTensor,
    _shape: PhantomData<&'a mut i64>,
}

impl<'a> Tensor<'a> {
    /// Describes `len` elements of `T` at `data` (which the caller keeps
    /// valid for as long as the library uses it).
    pub(crate) fn new<T: Element>(data: *const T, len: usize, shape: &'a mut i64) -> Tensor<'a> {
        // A slice never holds more than isize::MAX bytes, so this fits.
        *shape = len as i64;
        Tensor {
            dl: sys::DLTensor {
                data: data as *mut std::ffi::c_void,
                device: sys::DLDevice {
                    device_type: sys::kDLCPU,
                    device_id: 0,
                },
                ndim: 1,
                dtype: T::DTYPE,
                shape,
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            _shape: PhantomData,
        }
    }

    /// The descriptor, for a C call.
    pub(crate) fn ptr(&self) -> *const sys::DLTensor {
        &self.dl
    }
}
