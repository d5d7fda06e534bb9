//! Collectives on device memory (CUDA device pointers) with per-call options:
//! a CUDA stream and a deadline, through the C ABI's `occl_*_ex` entry points.
//!
//! - [`DeviceBuffer`]: a one-dimensional view of `len` elements on a
//!   [`Device`], built from a raw device pointer with the `unsafe`
//!   [`DeviceBuffer::from_raw_parts`] (or safely from a host slice with
//!   [`DeviceBuffer::host`]).
//! - [`CallOptions`]: the [`CudaStream`] a call is ordered on and its own
//!   deadline, in place of the communicator's.
//! - `Communicator::*_device` (e.g.
//!   [`all_reduce_device`](Communicator::all_reduce_device)): every
//!   collective on such buffers; non-blocking forms (e.g.
//!   [`Scope::iall_reduce_device`](crate::Scope::iall_reduce_device)) start in
//!   a [`Communicator::scope`], and their `wait()` returns once the results
//!   are on the device.
//!
//! Semantics are NCCL's: a call on CUDA buffers enqueues the work on the
//! stream and returns without waiting for the GPU; work queued after it on
//! the same stream sees the result. An error that happens on the GPU later
//! makes the communicator unusable, and the next call reports it.
//!
//! **Without a GPU** (no CUDA driver or device, or a build of the C library
//! without CUDA) a CUDA buffer is an [`ErrorKind::Unsupported`] error whose
//! message names the device (`cuda:0`) and the reason; buffers of one call on
//! different devices (CPU and CUDA) are [`ErrorKind::InvalidArgument`]. This
//! crate's tests run those error paths and the host-memory paths; the CUDA
//! data path itself is tested by the C++ `gpu` suites on a machine with a GPU.
//!
//! [`ErrorKind::Unsupported`]: crate::ErrorKind::Unsupported
//! [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
//!
//! ```no_run
//! use omniccl::device::{CallOptions, CudaStream, Device, DeviceBuffer};
//! use omniccl::{Communicator, InitMethod, ReduceOp};
//! # fn cuda_malloc_f32(n: usize) -> *mut f32 { unimplemented!() }
//! # fn cuda_stream_create() -> *mut std::ffi::c_void { unimplemented!() }
//! let comm = Communicator::init(InitMethod::Env)?;
//! let n = 1 << 20;
//! // Memory and stream from your CUDA library (cudarc, a CUDA FFI, ...).
//! let grads: *mut f32 = cuda_malloc_f32(n);
//! // SAFETY: `grads` is device memory of GPU 0 holding n f32 values, left
//! // alone by other work until the stream has run this call.
//! let buf = unsafe { DeviceBuffer::from_raw_parts(grads, n, Device::Cuda(0)) };
//! // SAFETY: a live cudaStream_t of GPU 0, alive until the work is done.
//! let stream = unsafe { CudaStream::from_raw(cuda_stream_create()) };
//! let opts = CallOptions::new().stream(stream);
//! comm.all_reduce_device(&buf, &buf, ReduceOp::Avg, &opts)?; // enqueued on `stream`
//! // ... queue more work on `stream`, or synchronize it, to use the result.
//! # Ok::<(), omniccl::Error>(())
//! ```

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;
use std::time::Duration;

use omniccl_sys as sys;

use crate::comm::Communicator;
use crate::element::Element;
use crate::error::{Result, check, invalid};
use crate::op::{RawOp, ReduceOp};

/// Where the memory of a [`DeviceBuffer`] lives.
///
/// ```
/// use omniccl::device::Device;
/// assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
/// assert_eq!(Device::Cpu.to_string(), "cpu");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// Host memory.
    Cpu,
    /// Memory of CUDA device `id` (`cudaMalloc`; DLPack `kDLCUDA`).
    Cuda(i32),
    /// CUDA managed memory attached to device `id` (`cudaMallocManaged`;
    /// DLPack `kDLCUDAManaged`).
    CudaManaged(i32),
}

impl Device {
    /// The DLPack device.
    fn to_dl(self) -> sys::DLDevice {
        let (device_type, device_id) = match self {
            Device::Cpu => (sys::kDLCPU, 0),
            Device::Cuda(id) => (sys::kDLCUDA, id),
            Device::CudaManaged(id) => (sys::kDLCUDAManaged, id),
        };
        sys::DLDevice { device_type, device_id }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(id) => write!(f, "cuda:{id}"),
            Device::CudaManaged(id) => write!(f, "cuda_managed:{id}"),
        }
    }
}

/// A one-dimensional, contiguous view of `len` elements on a [`Device`]:
/// what the `*_device` collectives take. It holds no memory; the lifetime
/// `'a` is that of the borrowed slice ([`host`](Self::host)) or the one the
/// caller vouched for ([`from_raw_parts`](Self::from_raw_parts)).
///
/// Neither `Send` nor `Sync` (it holds a raw pointer): make one where the
/// call is made.
///
/// ```
/// use omniccl::device::{Device, DeviceBuffer};
/// let mut host = [1.0f32, 2.0];
/// let buf = DeviceBuffer::host(&mut host);
/// assert_eq!((buf.len(), buf.device()), (2, Device::Cpu));
/// ```
#[derive(Debug)]
pub struct DeviceBuffer<'a> {
    data: *mut c_void,
    len: usize,
    dtype: sys::DLDataType,
    device: Device,
    _memory: PhantomData<&'a mut [u8]>,
}

impl<'a> DeviceBuffer<'a> {
    /// Describes `len` elements of `T` at `ptr` on `device`: a CUDA device
    /// pointer for [`Device::Cuda`], a managed one for
    /// [`Device::CudaManaged`], a host pointer for [`Device::Cpu`].
    ///
    /// # Safety
    /// For the lifetime `'a` and, for CUDA memory, until every call given this
    /// buffer has run on its stream (NCCL rule: the call only enqueues work):
    /// `ptr` points to `len` initialized, properly aligned elements of `T`
    /// allocated on `device` (of that device, not another GPU), readable and,
    /// where the buffer receives results, writable, and no other work reads
    /// or writes the memory a call writes while that call runs. The library
    /// reads or writes it only through the calls it is passed to.
    ///
    /// ```no_run
    /// use omniccl::device::{Device, DeviceBuffer};
    /// # let dev_ptr: *mut half::bf16 = std::ptr::null_mut();
    /// // SAFETY: dev_ptr holds 1024 bf16 values allocated on GPU 0 (cudaMalloc).
    /// let buf = unsafe { DeviceBuffer::from_raw_parts(dev_ptr, 1024, Device::Cuda(0)) };
    /// ```
    pub unsafe fn from_raw_parts<T: Element>(ptr: *mut T, len: usize, device: Device) -> DeviceBuffer<'a> {
        // SAFETY: the caller's contract is this function's.
        unsafe { DeviceBuffer::from_raw_dtype(ptr.cast(), len, T::DTYPE, device) }
    }

    /// Like [`from_raw_parts`](Self::from_raw_parts) for an element type
    /// given as a DLPack type (e.g. fp8, which has no Rust [`Element`] type).
    /// The C library checks that it knows `dtype` when the buffer is used.
    ///
    /// # Safety
    /// As [`from_raw_parts`](Self::from_raw_parts), with `dtype` describing
    /// the elements at `ptr`.
    ///
    /// ```no_run
    /// use omniccl::device::{Device, DeviceBuffer};
    /// use omniccl::dlpack::DLDataType;
    /// # let dev_ptr: *mut std::ffi::c_void = std::ptr::null_mut();
    /// let e4m3fn = DLDataType { code: omniccl::sys::kDLFloat8_e4m3fn as u8, bits: 8, lanes: 1 };
    /// // SAFETY: dev_ptr holds 4096 fp8 values allocated on GPU 1.
    /// let buf = unsafe { DeviceBuffer::from_raw_dtype(dev_ptr, 4096, e4m3fn, Device::Cuda(1)) };
    /// ```
    pub unsafe fn from_raw_dtype(
        ptr: *mut c_void,
        len: usize,
        dtype: sys::DLDataType,
        device: Device,
    ) -> DeviceBuffer<'a> {
        DeviceBuffer {
            data: ptr,
            len,
            dtype,
            device,
            _memory: PhantomData,
        }
    }

    /// A view of a host slice (safe: the borrow keeps it alive and unshared),
    /// for running the `*_device` calls with [`CallOptions`] on CPU memory.
    ///
    /// ```
    /// use omniccl::device::{CallOptions, DeviceBuffer};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut x = [3i32, 4];
    /// let buf = DeviceBuffer::host(&mut x);
    /// let opts = CallOptions::new().timeout(std::time::Duration::from_secs(5));
    /// comm.all_reduce_device(&buf, &buf, omniccl::ReduceOp::Sum, &opts)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn host<T: Element>(slice: &'a mut [T]) -> DeviceBuffer<'a> {
        // SAFETY: the exclusive borrow keeps the slice alive, initialized and
        // used by nothing else for 'a; host calls finish before returning.
        unsafe { DeviceBuffer::from_raw_parts(slice.as_mut_ptr(), slice.len(), Device::Cpu) }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the memory lives.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The DLPack element type.
    pub fn dtype(&self) -> sys::DLDataType {
        self.dtype
    }

    /// The address of the first element.
    pub(crate) fn as_ptr(&self) -> *mut c_void {
        self.data
    }

    /// The DLPack descriptor, pointing at `shape` (keep it alive meanwhile).
    fn describe(&self, shape: &mut i64) -> Result<sys::DLTensor> {
        *shape =
            i64::try_from(self.len).map_err(|_| invalid(format!("length {} does not fit in an int64", self.len)))?;
        Ok(sys::DLTensor {
            data: self.data,
            device: self.device.to_dl(),
            ndim: 1,
            dtype: self.dtype,
            shape,
            strides: ptr::null_mut(),
            byte_offset: 0,
        })
    }
}

/// A CUDA stream handle (`cudaStream_t`) that a call is ordered on; the
/// library never creates or destroys one.
///
/// `Send` and `Sync`: it is an opaque handle this crate never dereferences; the
/// CUDA runtime accepts a stream from any host thread, so moving or sharing
/// the handle is sound. What the handle is used for is governed by
/// [`from_raw`](Self::from_raw)'s contract.
///
/// ```
/// use omniccl::device::CudaStream;
/// assert!(CudaStream::DEFAULT.as_raw().is_null());
/// fn send_sync<T: Send + Sync>() {}
/// send_sync::<CudaStream>();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaStream(*mut c_void);

// SAFETY: see the type's documentation: an opaque handle, never dereferenced
// here, valid from any thread as far as CUDA is concerned.
unsafe impl Send for CudaStream {}
// SAFETY: as for Send; &CudaStream only reads the handle value.
unsafe impl Sync for CudaStream {}

impl CudaStream {
    /// The default (legacy NULL) stream, which the calls without options use.
    pub const DEFAULT: CudaStream = CudaStream(ptr::null_mut());

    /// Wraps a `cudaStream_t` (e.g. from cudarc's `CudaStream::cu_stream()`).
    ///
    /// # Safety
    /// `raw` is NULL (the default stream) or a stream created on the device
    /// of the buffers it is used with, not destroyed before every call given
    /// it has run on it.
    ///
    /// ```
    /// use omniccl::device::CudaStream;
    /// // SAFETY: NULL is the default stream.
    /// let s = unsafe { CudaStream::from_raw(std::ptr::null_mut()) };
    /// assert_eq!(s, CudaStream::DEFAULT);
    /// ```
    pub unsafe fn from_raw(raw: *mut c_void) -> CudaStream {
        CudaStream(raw)
    }

    /// The `cudaStream_t`.
    pub fn as_raw(self) -> *mut c_void {
        self.0
    }
}

/// Per-call options: the [`CudaStream`] the call's CUDA buffers are ordered
/// on (default: the default stream; ignored for host buffers) and a deadline
/// for this call only (default: the communicator's, [`Config::timeout`]).
///
/// [`Config::timeout`]: crate::Config::timeout
///
/// ```
/// use std::time::Duration;
/// use omniccl::device::{CallOptions, CudaStream};
/// let opts = CallOptions::new().stream(CudaStream::DEFAULT).timeout(Duration::from_secs(2));
/// assert_eq!(opts.get_timeout(), Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallOptions {
    stream: Option<CudaStream>,
    timeout: Option<Duration>,
}

impl CallOptions {
    /// All defaults (the same as a call without options).
    pub fn new() -> CallOptions {
        CallOptions::default()
    }

    /// Orders the call's CUDA work on `stream`.
    pub fn stream(mut self, stream: CudaStream) -> CallOptions {
        self.stream = Some(stream);
        self
    }

    /// Ends the call with [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
    /// if it waits longer than `timeout` (at least 1 ms; counted from when it
    /// first has to wait), instead of the communicator's deadline.
    pub fn timeout(mut self, timeout: Duration) -> CallOptions {
        self.timeout = Some(timeout);
        self
    }

    /// The stream set with [`stream`](Self::stream), if any.
    pub fn get_stream(&self) -> Option<CudaStream> {
        self.stream
    }

    /// The deadline set with [`timeout`](Self::timeout), if any.
    pub fn get_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The C struct (`OCCL_OPTIONS_INIT` with the fields set here).
    pub(crate) fn to_raw(self) -> Result<sys::occl_options_t> {
        let mut raw = sys::occl_options_init();
        if let Some(s) = self.stream {
            raw.stream = s.0;
        }
        if let Some(t) = self.timeout {
            let ms = i64::try_from(t.as_millis()).map_err(|_| invalid(format!("timeout {t:?} is too long")))?;
            if ms < 1 {
                return Err(invalid(format!("timeout {t:?} is shorter than 1 ms")));
            }
            raw.timeout_ms = ms;
        }
        Ok(raw)
    }
}

/// `Some(buffer)`'s descriptor pointer, or NULL.
fn opt_ptr(t: &Option<sys::DLTensor>) -> *const sys::DLTensor {
    t.as_ref().map_or(ptr::null(), |t| t as *const _)
}

/// Checks that a call's two buffers are on one device (before anything is
/// sent, and whether or not a GPU is present).
/// A `None` buffer (root-only, off the root) is not checked.
fn same_device(call: &str, send: Option<&DeviceBuffer<'_>>, recv: Option<&DeviceBuffer<'_>>) -> Result<()> {
    match (send, recv) {
        (Some(send), Some(recv)) if recv.device != send.device => Err(invalid(format!(
            "{call}: send is on {} but recv is on {}; the buffers of one call must not be on different devices",
            send.device, recv.device
        ))),
        _ => Ok(()),
    }
}

/// A rooted call's root-only buffer: required on the root, ignored elsewhere.
fn root_only<'b, 'c>(
    call: &str,
    name: &str,
    rank: usize,
    root: usize,
    buf: Option<&'b DeviceBuffer<'c>>,
) -> Result<Option<&'b DeviceBuffer<'c>>> {
    match buf {
        _ if rank != root => Ok(None),
        Some(b) => Ok(Some(b)),
        None => Err(invalid(format!(
            "{call}: rank {root} is the root and needs a {name} buffer"
        ))),
    }
}

/// Runs `f(comm, options, work)`; `work` is NULL for a blocking call (which
/// blocks for host buffers and enqueues for CUDA buffers), else receives the
/// handle of the started operation.
fn call_ex(
    comm: &Communicator,
    opts: &CallOptions,
    work: *mut sys::occl_work_t,
    f: impl FnOnce(sys::occl_comm_t, *const sys::occl_options_t, *mut sys::occl_work_t) -> sys::occl_status_t,
) -> Result<()> {
    let raw = opts.to_raw()?;
    check(f(comm.as_raw(), &raw, work))
}

// Each operation once, as `*_impl` taking a work handle (NULL: the blocking
// form below; non-NULL: the Scope's non-blocking form, device_scope.rs). It
// returns the C reduce op, which must outlive a started operation.
impl Communicator {
    pub(crate) fn all_reduce_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("all_reduce", Some(send), Some(recv))?;
        let op = RawOp::new(op, self.as_raw())?;
        let (mut n1, mut n2) = (0, 0);
        let (s, r) = (send.describe(&mut n1)?, recv.describe(&mut n2)?);
        // SAFETY: the buffers' creators vouched for their memory; the
        // descriptors and options live through the call.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_all_reduce_ex(&s, &r, op.op, c, o, w)
        })
        .map(|()| Some(op))
    }

    pub(crate) fn broadcast_device_impl(
        &self,
        buf: &DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        let root = self.rank_arg("root", root)?;
        let mut n = 0;
        let t = buf.describe(&mut n)?;
        // SAFETY: as in all_reduce_device_impl.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_broadcast_ex(&t, root, c, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn reduce_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: Option<&DeviceBuffer<'_>>,
        op: ReduceOp,
        root: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("reduce", Some(send), recv.filter(|_| self.rank() == root))?;
        let root_c = self.rank_arg("root", root)?;
        let op = RawOp::new(op, self.as_raw())?;
        let (mut n1, mut n2) = (0, 0);
        let s = send.describe(&mut n1)?;
        let r = root_only("reduce", "recv", self.rank(), root, recv)?;
        let r = r.map(|r| r.describe(&mut n2)).transpose()?;
        // SAFETY: as in all_reduce_device_impl; recv may be NULL off the root.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_reduce_ex(&s, opt_ptr(&r), op.op, root_c, c, o, w)
        })
        .map(|()| Some(op))
    }

    pub(crate) fn scatter_device_impl(
        &self,
        send: Option<&DeviceBuffer<'_>>,
        recv: &DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("scatter", send.filter(|_| self.rank() == root), Some(recv))?;
        let root_c = self.rank_arg("root", root)?;
        let (mut n1, mut n2) = (0, 0);
        let s = root_only("scatter", "send", self.rank(), root, send)?;
        let s = s.map(|s| s.describe(&mut n1)).transpose()?;
        let r = recv.describe(&mut n2)?;
        // SAFETY: as in all_reduce_device_impl; send may be NULL off the root.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_scatter_ex(opt_ptr(&s), &r, root_c, c, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn gather_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: Option<&DeviceBuffer<'_>>,
        root: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("gather", Some(send), recv.filter(|_| self.rank() == root))?;
        let root_c = self.rank_arg("root", root)?;
        let (mut n1, mut n2) = (0, 0);
        let s = send.describe(&mut n1)?;
        let r = root_only("gather", "recv", self.rank(), root, recv)?;
        let r = r.map(|r| r.describe(&mut n2)).transpose()?;
        // SAFETY: as in all_reduce_device_impl; recv may be NULL off the root.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_gather_ex(&s, opt_ptr(&r), root_c, c, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn all_gather_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("all_gather", Some(send), Some(recv))?;
        let (mut n1, mut n2) = (0, 0);
        let (s, r) = (send.describe(&mut n1)?, recv.describe(&mut n2)?);
        // SAFETY: as in all_reduce_device_impl.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_all_gather_ex(&s, &r, c, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn reduce_scatter_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("reduce_scatter", Some(send), Some(recv))?;
        let op = RawOp::new(op, self.as_raw())?;
        let (mut n1, mut n2) = (0, 0);
        let (s, r) = (send.describe(&mut n1)?, recv.describe(&mut n2)?);
        // SAFETY: as in all_reduce_device_impl.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_reduce_scatter_ex(&s, &r, op.op, c, o, w)
        })
        .map(|()| Some(op))
    }

    pub(crate) fn all_to_all_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("all_to_all", Some(send), Some(recv))?;
        let (mut n1, mut n2) = (0, 0);
        let (s, r) = (send.describe(&mut n1)?, recv.describe(&mut n2)?);
        // SAFETY: as in all_reduce_device_impl.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_all_to_all_ex(&s, &r, c, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn barrier_with_impl(&self, opts: &CallOptions, work: *mut sys::occl_work_t) -> Result<Option<RawOp>> {
        // SAFETY: live handle; the options live through the call.
        call_ex(self, opts, work, |c, o, w| unsafe { sys::occl_barrier_ex(c, o, w) }).map(|()| None)
    }

    pub(crate) fn all_gatherv_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        counts: &[usize],
        displs: Option<&[usize]>,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("all_gatherv", Some(send), Some(recv))?;
        let (c, d) = self.v_layout("all_gatherv recv", recv.len(), counts, displs)?;
        let dp = d.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        let (mut n1, mut n2) = (0, 0);
        let (s, r) = (send.describe(&mut n1)?, recv.describe(&mut n2)?);
        // SAFETY: as in all_reduce_device_impl; count arrays hold size() entries.
        call_ex(self, opts, work, |cm, o, w| unsafe {
            sys::occl_all_gatherv_ex(&s, &r, c.as_ptr(), dp, cm, o, w)
        })
        .map(|()| None)
    }

    #[allow(clippy::too_many_arguments)] // the C call's arguments, options and work
    pub(crate) fn all_to_allv_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        send_counts: &[usize],
        send_displs: Option<&[usize]>,
        recv: &DeviceBuffer<'_>,
        recv_counts: &[usize],
        recv_displs: Option<&[usize]>,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("all_to_allv", Some(send), Some(recv))?;
        let (sc, sd) = self.v_layout("all_to_allv send", send.len(), send_counts, send_displs)?;
        let (rc, rd) = self.v_layout("all_to_allv recv", recv.len(), recv_counts, recv_displs)?;
        let sdp = sd.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        let rdp = rd.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        let (mut n1, mut n2) = (0, 0);
        let (s, r) = (send.describe(&mut n1)?, recv.describe(&mut n2)?);
        // SAFETY: as in all_reduce_device_impl; count arrays hold size() entries.
        call_ex(self, opts, work, |cm, o, w| unsafe {
            sys::occl_all_to_allv_ex(&s, sc.as_ptr(), sdp, &r, rc.as_ptr(), rdp, cm, o, w)
        })
        .map(|()| None)
    }

    #[allow(clippy::too_many_arguments)] // the C call's arguments, options and work
    pub(crate) fn gatherv_device_impl(
        &self,
        send: &DeviceBuffer<'_>,
        recv: Option<&DeviceBuffer<'_>>,
        counts: &[usize],
        displs: Option<&[usize]>,
        root: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("gatherv", Some(send), recv.filter(|_| self.rank() == root))?;
        let root_c = self.rank_arg("root", root)?;
        let (mut n1, mut n2) = (0, 0);
        let s = send.describe(&mut n1)?;
        if self.rank() != root {
            // SAFETY: as in all_reduce_device_impl; root-only arguments are NULL.
            return call_ex(self, opts, work, |cm, o, w| unsafe {
                sys::occl_gatherv_ex(&s, ptr::null(), ptr::null(), ptr::null(), root_c, cm, o, w)
            })
            .map(|()| None);
        }
        let recv = recv.ok_or_else(|| invalid(format!("gatherv: rank {root} is the root and needs a recv buffer")))?;
        let (c, d) = self.v_layout("gatherv recv", recv.len(), counts, displs)?;
        let dp = d.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        let r = recv.describe(&mut n2)?;
        // SAFETY: as in all_reduce_device_impl; count arrays hold size() entries.
        call_ex(self, opts, work, |cm, o, w| unsafe {
            sys::occl_gatherv_ex(&s, &r, c.as_ptr(), dp, root_c, cm, o, w)
        })
        .map(|()| None)
    }

    #[allow(clippy::too_many_arguments)] // the C call's arguments, options and work
    pub(crate) fn scatterv_device_impl(
        &self,
        send: Option<&DeviceBuffer<'_>>,
        counts: &[usize],
        displs: Option<&[usize]>,
        recv: &DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        same_device("scatterv", send.filter(|_| self.rank() == root), Some(recv))?;
        let root_c = self.rank_arg("root", root)?;
        let (mut n1, mut n2) = (0, 0);
        let r = recv.describe(&mut n2)?;
        if self.rank() != root {
            // SAFETY: as in all_reduce_device_impl; root-only arguments are NULL.
            return call_ex(self, opts, work, |cm, o, w| unsafe {
                sys::occl_scatterv_ex(ptr::null(), ptr::null(), ptr::null(), &r, root_c, cm, o, w)
            })
            .map(|()| None);
        }
        let send = send.ok_or_else(|| invalid(format!("scatterv: rank {root} is the root and needs a send buffer")))?;
        let (c, d) = self.v_layout("scatterv send", send.len(), counts, displs)?;
        let dp = d.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        let s = send.describe(&mut n1)?;
        // SAFETY: as in all_reduce_device_impl; count arrays hold size() entries.
        call_ex(self, opts, work, |cm, o, w| unsafe {
            sys::occl_scatterv_ex(&s, c.as_ptr(), dp, &r, root_c, cm, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn send_device_impl(
        &self,
        buf: &DeviceBuffer<'_>,
        peer: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        let peer = self.rank_arg("peer", peer)?;
        let mut n = 0;
        let t = buf.describe(&mut n)?;
        // SAFETY: as in all_reduce_device_impl.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_send_ex(&t, peer, c, o, w)
        })
        .map(|()| None)
    }

    pub(crate) fn recv_device_impl(
        &self,
        buf: &DeviceBuffer<'_>,
        peer: usize,
        opts: &CallOptions,
        work: *mut sys::occl_work_t,
    ) -> Result<Option<RawOp>> {
        let peer = self.rank_arg("peer", peer)?;
        let mut n = 0;
        let t = buf.describe(&mut n)?;
        // SAFETY: as in all_reduce_device_impl.
        call_ex(self, opts, work, |c, o, w| unsafe {
            sys::occl_recv_ex(&t, peer, c, o, w)
        })
        .map(|()| None)
    }

    // ---- the blocking forms (non-blocking ones: Scope::i*_device) ----

    /// [`all_reduce`](Communicator::all_reduce) on device buffers (the same
    /// buffer twice for in place). On CUDA buffers it enqueues the work on
    /// `opts`' stream and returns (see the [module](crate::device) docs).
    /// The library checks lengths, dtypes and devices.
    ///
    /// ```
    /// use omniccl::device::{CallOptions, DeviceBuffer};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let (mut a, mut b) = ([1.5f64, 2.5], [0.0f64; 2]);
    /// let (send, recv) = (DeviceBuffer::host(&mut a), DeviceBuffer::host(&mut b));
    /// comm.all_reduce_device(&send, &recv, omniccl::ReduceOp::Sum, &CallOptions::new())?;
    /// # drop((send, recv));
    /// assert_eq!(b, [1.5, 2.5]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_reduce_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
    ) -> Result<()> {
        self.all_reduce_device_impl(send, recv, op, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`broadcast`](Communicator::broadcast) of a device buffer (written on
    /// every rank but `root`).
    pub fn broadcast_device(&self, buf: &DeviceBuffer<'_>, root: usize, opts: &CallOptions) -> Result<()> {
        self.broadcast_device_impl(buf, root, opts, ptr::null_mut()).map(drop)
    }

    /// [`reduce`](Communicator::reduce) on device buffers; `recv` is used on
    /// `root` only (pass `None` elsewhere).
    pub fn reduce_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: Option<&DeviceBuffer<'_>>,
        op: ReduceOp,
        root: usize,
        opts: &CallOptions,
    ) -> Result<()> {
        self.reduce_device_impl(send, recv, op, root, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`scatter`](Communicator::scatter) of device buffers; `send` is used
    /// on `root` only.
    pub fn scatter_device(
        &self,
        send: Option<&DeviceBuffer<'_>>,
        recv: &DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<()> {
        self.scatter_device_impl(send, recv, root, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`gather`](Communicator::gather) into device buffers; `recv` is used
    /// on `root` only.
    pub fn gather_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: Option<&DeviceBuffer<'_>>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<()> {
        self.gather_device_impl(send, recv, root, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`all_gather`](Communicator::all_gather) on device buffers.
    pub fn all_gather_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        opts: &CallOptions,
    ) -> Result<()> {
        self.all_gather_device_impl(send, recv, opts, ptr::null_mut()).map(drop)
    }

    /// [`reduce_scatter`](Communicator::reduce_scatter) on device buffers.
    pub fn reduce_scatter_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
    ) -> Result<()> {
        self.reduce_scatter_device_impl(send, recv, op, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`all_to_all`](Communicator::all_to_all) on device buffers.
    pub fn all_to_all_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        opts: &CallOptions,
    ) -> Result<()> {
        self.all_to_all_device_impl(send, recv, opts, ptr::null_mut()).map(drop)
    }

    /// [`barrier`](Communicator::barrier) with per-call options (its deadline;
    /// a barrier has no buffers, so there is no CUDA work to order on a stream).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let opts = omniccl::device::CallOptions::new().timeout(std::time::Duration::from_secs(1));
    /// comm.barrier_with(&opts)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn barrier_with(&self, opts: &CallOptions) -> Result<()> {
        self.barrier_with_impl(opts, ptr::null_mut()).map(drop)
    }

    /// [`all_gatherv`](Communicator::all_gatherv) on device buffers (rank
    /// `i`'s `send` holds `counts[i]` elements, placed at `displs[i]` of
    /// `recv`, `None`: packed).
    pub fn all_gatherv_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: &DeviceBuffer<'_>,
        counts: &[usize],
        displs: Option<&[usize]>,
        opts: &CallOptions,
    ) -> Result<()> {
        self.all_gatherv_device_impl(send, recv, counts, displs, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`all_to_allv`](Communicator::all_to_allv) on device buffers.
    #[allow(clippy::too_many_arguments)] // the C call's arguments, plus options
    pub fn all_to_allv_device(
        &self,
        send: &DeviceBuffer<'_>,
        send_counts: &[usize],
        send_displs: Option<&[usize]>,
        recv: &DeviceBuffer<'_>,
        recv_counts: &[usize],
        recv_displs: Option<&[usize]>,
        opts: &CallOptions,
    ) -> Result<()> {
        self.all_to_allv_device_impl(
            send,
            send_counts,
            send_displs,
            recv,
            recv_counts,
            recv_displs,
            opts,
            ptr::null_mut(),
        )
        .map(drop)
    }

    /// [`gatherv`](Communicator::gatherv) into device buffers; `recv`,
    /// `counts` and `displs` are used on `root` only.
    pub fn gatherv_device(
        &self,
        send: &DeviceBuffer<'_>,
        recv: Option<&DeviceBuffer<'_>>,
        counts: &[usize],
        displs: Option<&[usize]>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<()> {
        self.gatherv_device_impl(send, recv, counts, displs, root, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`scatterv`](Communicator::scatterv) of device buffers; `send`,
    /// `counts` and `displs` are used on `root` only.
    pub fn scatterv_device(
        &self,
        send: Option<&DeviceBuffer<'_>>,
        counts: &[usize],
        displs: Option<&[usize]>,
        recv: &DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<()> {
        self.scatterv_device_impl(send, counts, displs, recv, root, opts, ptr::null_mut())
            .map(drop)
    }

    /// [`send`](Communicator::send) of a device buffer to rank `peer`. (The
    /// C library's CUDA data path does not cover send/recv yet: a CUDA
    /// buffer is an `Unsupported` error; host buffers work, with options.)
    pub fn send_device(&self, buf: &DeviceBuffer<'_>, peer: usize, opts: &CallOptions) -> Result<()> {
        self.send_device_impl(buf, peer, opts, ptr::null_mut()).map(drop)
    }

    /// [`recv`](Communicator::recv) into a device buffer from rank `peer`
    /// (see [`send_device`](Self::send_device)).
    pub fn recv_device(&self, buf: &DeviceBuffer<'_>, peer: usize, opts: &CallOptions) -> Result<()> {
        self.recv_device_impl(buf, peer, opts, ptr::null_mut()).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_options_are_occl_options_init() {
        let raw = CallOptions::new().to_raw().unwrap();
        assert_eq!(raw.size, std::mem::size_of::<sys::occl_options_t>());
        assert_eq!((raw.magic, raw.version), (0x4f43_434f, 1));
        assert!(raw.stream.is_null());
        assert_eq!(
            raw.timeout_ms,
            i64::MIN,
            "OCCL_CONFIG_UNDEF_INT64: the communicator's deadline"
        );
        assert!(raw.interrupt.is_none() && raw.interrupt_data.is_null());
    }

    #[test]
    fn stream_and_timeout_reach_the_c_struct() {
        // SAFETY: the handle is only copied into the struct, never used.
        let stream = unsafe { CudaStream::from_raw(0x5eed_0000usize as *mut c_void) };
        let opts = CallOptions::new().stream(stream).timeout(Duration::from_millis(1250));
        let raw = opts.to_raw().unwrap();
        assert_eq!(raw.stream as usize, 0x5eed_0000);
        assert_eq!(raw.timeout_ms, 1250);
        assert_eq!(opts.get_stream(), Some(stream));
        // Whole milliseconds, rounded down, as Config::timeout does.
        let raw = CallOptions::new()
            .timeout(Duration::from_micros(2999))
            .to_raw()
            .unwrap();
        assert_eq!(raw.timeout_ms, 2);
    }

    #[test]
    fn a_timeout_under_1_ms_is_rejected_naming_it() {
        let err = CallOptions::new()
            .timeout(Duration::from_micros(500))
            .to_raw()
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert!(err.message().contains("500") && err.message().contains("1 ms"), "{err}");
    }

    #[test]
    fn buffers_describe_their_device_and_dtype() {
        let mut shape = 0;
        // SAFETY: only described, never dereferenced.
        let cuda = unsafe { DeviceBuffer::from_raw_parts(0x1000usize as *mut u16, 7, Device::Cuda(3)) };
        let dl = cuda.describe(&mut shape).unwrap();
        assert_eq!((dl.device.device_type, dl.device.device_id), (sys::kDLCUDA, 3));
        assert_eq!(
            (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
            (sys::kDLUInt as u8, 16, 1)
        );
        assert_eq!((dl.ndim, shape, dl.data as usize), (1, 7, 0x1000));
        assert!(dl.strides.is_null());
        // SAFETY: as above.
        let managed = unsafe { DeviceBuffer::from_raw_parts(0x2000usize as *mut f32, 1, Device::CudaManaged(1)) };
        assert_eq!(
            managed.describe(&mut shape).unwrap().device.device_type,
            sys::kDLCUDAManaged
        );
        assert_eq!(Device::CudaManaged(1).to_string(), "cuda_managed:1");
    }
}
