//! The DLPack-level API for memory Rust does not own: device pointers,
//! buffers of other libraries, strided views. `unsafe`: the caller vouches
//! for the tensors.
//!
//! ```
//! use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
//! // A view of 3 floats that another library allocated (here: a Vec).
//! let mut foreign = vec![1.0f64, 2.0, 3.0];
//! let mut shape = [3i64];
//! let view = DLTensor {
//!     data: foreign.as_mut_ptr().cast(),
//!     device: DLDevice { device_type: omniccl::sys::kDLCPU, device_id: 0 },
//!     ndim: 1,
//!     dtype: DLDataType { code: omniccl::sys::kDLFloat as u8, bits: 64, lanes: 1 },
//!     shape: shape.as_mut_ptr(),
//!     strides: std::ptr::null_mut(),
//!     byte_offset: 0,
//! };
//! # let dir = tempfile::tempdir().unwrap();
//! # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
//! // SAFETY: `view` describes `foreign`, alive and otherwise unused during the call.
//! unsafe { comm.all_reduce_dlpack(&view, &view, omniccl::ReduceOp::Max)? };
//! # Ok::<(), omniccl::Error>(())
//! ```

use std::ptr;

use omniccl_sys as sys;

pub use sys::{DLDataType, DLDevice, DLTensor};

use crate::comm::Communicator;
use crate::error::Result;
use crate::op::{RawOp, ReduceOp};

impl Communicator {
    /// [`all_reduce`](Communicator::all_reduce) on DLPack tensors (the same
    /// tensor twice for in place). The library checks dtype, device and
    /// contiguity and reports a clear error.
    ///
    /// # Safety
    /// Each tensor must describe memory that is valid for the tensor's
    /// device, dtype and shape for the whole call, `recv`'s writable and not
    /// used by anything else meanwhile; `shape`/`strides` must point to
    /// `ndim` values.
    ///
    /// ```
    /// use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut data = [1.0f32, 2.0];
    /// let mut shape = [2i64];
    /// let t = DLTensor {
    ///     data: data.as_mut_ptr().cast(),
    ///     device: DLDevice { device_type: omniccl::sys::kDLCPU, device_id: 0 },
    ///     ndim: 1,
    ///     dtype: DLDataType { code: omniccl::sys::kDLFloat as u8, bits: 32, lanes: 1 },
    ///     shape: shape.as_mut_ptr(),
    ///     strides: std::ptr::null_mut(),
    ///     byte_offset: 0,
    /// };
    /// // SAFETY: `t` describes `data`, alive and otherwise unused during the call.
    /// unsafe { comm.all_reduce_dlpack(&t, &t, omniccl::ReduceOp::Sum)? };
    /// assert_eq!(data, [1.0, 2.0]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn all_reduce_dlpack(&self, send: &DLTensor, recv: &DLTensor, op: ReduceOp) -> Result<()> {
        let op = RawOp::new(op, self.as_raw())?;
        // SAFETY: the caller vouches for the tensors; NULL work blocks.
        self.call(ptr::null_mut(), |c, w| unsafe {
            sys::occl_all_reduce(send, recv, op.op, c, w)
        })
    }

    /// [`broadcast`](Communicator::broadcast) of a DLPack tensor.
    ///
    /// # Safety
    /// As [`all_reduce_dlpack`](Communicator::all_reduce_dlpack); `tensor` is
    /// written on every rank but the root.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut data = [7u8; 4];
    /// let mut shape = [4i64];
    /// let t = omniccl::dlpack::DLTensor {
    ///     data: data.as_mut_ptr().cast(),
    ///     device: omniccl::dlpack::DLDevice { device_type: omniccl::sys::kDLCPU, device_id: 0 },
    ///     ndim: 1,
    ///     dtype: omniccl::dlpack::DLDataType { code: omniccl::sys::kDLUInt as u8, bits: 8, lanes: 1 },
    ///     shape: shape.as_mut_ptr(),
    ///     strides: std::ptr::null_mut(),
    ///     byte_offset: 0,
    /// };
    /// // SAFETY: `t` describes `data` for the whole call.
    /// unsafe { comm.broadcast_dlpack(&t, 0)? };
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn broadcast_dlpack(&self, tensor: &DLTensor, root: usize) -> Result<()> {
        let root = self.rank_arg("root", root)?;
        // SAFETY: the caller vouches for the tensor.
        self.call(ptr::null_mut(), |c, w| unsafe {
            sys::occl_broadcast(tensor, root, c, w)
        })
    }

    /// [`all_gather`](Communicator::all_gather) on DLPack tensors.
    ///
    /// # Safety
    /// As [`all_reduce_dlpack`](Communicator::all_reduce_dlpack).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
    /// let tensor = |data: *mut i32, shape: &mut [i64; 1]| DLTensor {
    ///     data: data.cast(),
    ///     device: DLDevice { device_type: omniccl::sys::kDLCPU, device_id: 0 },
    ///     ndim: 1,
    ///     dtype: DLDataType { code: omniccl::sys::kDLInt as u8, bits: 32, lanes: 1 },
    ///     shape: shape.as_mut_ptr(),
    ///     strides: std::ptr::null_mut(),
    ///     byte_offset: 0,
    /// };
    /// let (mut a, mut b) = ([5i32], [0i32]);
    /// let (mut sa, mut sb) = ([1i64], [1i64]);
    /// let (ta, tb) = (tensor(a.as_mut_ptr(), &mut sa), tensor(b.as_mut_ptr(), &mut sb));
    /// // SAFETY: both tensors describe live, separate arrays.
    /// unsafe { comm.all_gather_dlpack(&ta, &tb)? };
    /// assert_eq!(b, [5]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn all_gather_dlpack(&self, send: &DLTensor, recv: &DLTensor) -> Result<()> {
        // SAFETY: the caller vouches for the tensors.
        self.call(ptr::null_mut(), |c, w| unsafe {
            sys::occl_all_gather(send, recv, c, w)
        })
    }

    /// [`reduce_scatter`](Communicator::reduce_scatter) on DLPack tensors.
    ///
    /// # Safety
    /// As [`all_reduce_dlpack`](Communicator::all_reduce_dlpack).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
    /// let tensor = |data: *mut u32, shape: &mut [i64; 1]| DLTensor {
    ///     data: data.cast(),
    ///     device: DLDevice { device_type: omniccl::sys::kDLCPU, device_id: 0 },
    ///     ndim: 1,
    ///     dtype: DLDataType { code: omniccl::sys::kDLUInt as u8, bits: 32, lanes: 1 },
    ///     shape: shape.as_mut_ptr(),
    ///     strides: std::ptr::null_mut(),
    ///     byte_offset: 0,
    /// };
    /// let (mut a, mut b) = ([6u32, 7], [0u32; 2]);
    /// let (mut sa, mut sb) = ([2i64], [2i64]);
    /// let (ta, tb) = (tensor(a.as_mut_ptr(), &mut sa), tensor(b.as_mut_ptr(), &mut sb));
    /// // SAFETY: both tensors describe live, separate arrays.
    /// unsafe { comm.reduce_scatter_dlpack(&ta, &tb, omniccl::ReduceOp::Sum)? };
    /// assert_eq!(b, [6, 7]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn reduce_scatter_dlpack(&self, send: &DLTensor, recv: &DLTensor, op: ReduceOp) -> Result<()> {
        let op = RawOp::new(op, self.as_raw())?;
        // SAFETY: the caller vouches for the tensors.
        self.call(ptr::null_mut(), |c, w| unsafe {
            sys::occl_reduce_scatter(send, recv, op.op, c, w)
        })
    }

    /// [`all_to_all`](Communicator::all_to_all) on DLPack tensors.
    ///
    /// # Safety
    /// As [`all_reduce_dlpack`](Communicator::all_reduce_dlpack).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
    /// let mut data = [1i16, 2];
    /// let mut shape = [2i64];
    /// let t = DLTensor {
    ///     data: data.as_mut_ptr().cast(),
    ///     device: DLDevice { device_type: omniccl::sys::kDLCPU, device_id: 0 },
    ///     ndim: 1,
    ///     dtype: DLDataType { code: omniccl::sys::kDLInt as u8, bits: 16, lanes: 1 },
    ///     shape: shape.as_mut_ptr(),
    ///     strides: std::ptr::null_mut(),
    ///     byte_offset: 0,
    /// };
    /// // SAFETY: `t` describes `data` for the whole call (in place).
    /// unsafe { comm.all_to_all_dlpack(&t, &t)? };
    /// assert_eq!(data, [1, 2]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn all_to_all_dlpack(&self, send: &DLTensor, recv: &DLTensor) -> Result<()> {
        // SAFETY: the caller vouches for the tensors.
        self.call(ptr::null_mut(), |c, w| unsafe {
            sys::occl_all_to_all(send, recv, c, w)
        })
    }

    /// [`send`](Communicator::send) of a DLPack tensor to rank `peer`.
    ///
    /// # Safety
    /// `tensor` must describe memory valid for its device, dtype and shape
    /// for the whole call.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// # let t: omniccl::dlpack::DLTensor = unimplemented!();
    /// // SAFETY: `t` describes live memory (e.g. from another library).
    /// unsafe { comm.send_dlpack(&t, 1)? };
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn send_dlpack(&self, tensor: &DLTensor, peer: usize) -> Result<()> {
        let peer = self.rank_arg("peer", peer)?;
        // SAFETY: the caller vouches for the tensor.
        self.call(ptr::null_mut(), |c, w| unsafe { sys::occl_send(tensor, peer, c, w) })
    }

    /// [`recv`](Communicator::recv) into a DLPack tensor from rank `peer`.
    ///
    /// # Safety
    /// `tensor` must describe writable memory valid for its device, dtype and
    /// shape for the whole call, used by nothing else meanwhile.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// # let t: omniccl::dlpack::DLTensor = unimplemented!();
    /// // SAFETY: `t` describes live, writable memory.
    /// unsafe { comm.recv_dlpack(&t, 0)? };
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn recv_dlpack(&self, tensor: &DLTensor, peer: usize) -> Result<()> {
        let peer = self.rank_arg("peer", peer)?;
        // SAFETY: the caller vouches for the tensor.
        self.call(ptr::null_mut(), |c, w| unsafe { sys::occl_recv(tensor, peer, c, w) })
    }
}
