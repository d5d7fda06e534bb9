//! [`Window`]: a buffer registered with a communicator
//! (`occl_comm_window_register`), so that collectives on the CUDA IPC path
//! read the peers' copies of it in place instead of staging through the
//! communicator's scratch buffers.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

use omniccl_sys as sys;

use crate::comm::Communicator;
use crate::device::DeviceBuffer;
use crate::error::{Result, check};

/// A registered buffer (NCCL's `ncclCommWindowRegister`): while it lives,
/// operations on the CUDA IPC path whose buffers lie inside it on every rank
/// (at the same offset of the same registration) read the peers' memory in
/// place: `all_reduce` (input and output registered), `all_gather`,
/// `broadcast` and `reduce_scatter` (input registered). Made by
/// [`Communicator::register_window`] or
/// [`Communicator::register_window_raw`].
///
/// **Collective.** Registering and deregistering are collective: every rank
/// registers one buffer of its own (its own size and place) in the same
/// order, and deregisters them in the same order. `Drop` deregisters, so
/// every rank must drop its windows in the same order (Rust drops locals in
/// reverse order of declaration: the same code on every rank does). `Drop`
/// cannot report a failure; [`deregister`](Self::deregister) does.
///
/// **Without the device path** (a communicator without GPUs, or CUDA
/// tensors that are staged) registering succeeds and changes nothing; the
/// buffer still has to be a real one (not null, at least one byte).
///
/// The lifetime `'a` borrows the communicator and, for
/// [`register_window`](Communicator::register_window), the buffer's memory:
/// the memory outlives the registration (it may be freed once the window is
/// deregistered):
///
/// ```compile_fail,E0505
/// # let dir = tempfile::tempdir().unwrap();
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// let mut x = vec![0f32; 16];
/// let window = comm.register_window(&omniccl::device::DeviceBuffer::host(&mut x))?;
/// drop(x); // error: the registration still borrows x
/// window.deregister()?;
/// # Ok::<(), omniccl::Error>(())
/// ```
///
/// ```no_run
/// use omniccl::device::{CallOptions, Device, DeviceBuffer};
/// use omniccl::{Communicator, InitMethod, ReduceOp};
/// # fn cuda_malloc_f32(n: usize) -> *mut f32 { unimplemented!() }
/// let comm = Communicator::init(InitMethod::Env)?;
/// let n = 1 << 20;
/// let grads: *mut f32 = cuda_malloc_f32(n);
/// // SAFETY: `grads` is device memory of GPU 0 holding n f32 values.
/// let buf = unsafe { DeviceBuffer::from_raw_parts(grads, n, Device::Cuda(0)) };
/// let window = comm.register_window(&buf)?; // collective: every rank, same order
/// for _ in 0..100 {
///     // Reads the peers' `grads` in place on the CUDA IPC path.
///     comm.all_reduce_device(&buf, &buf, ReduceOp::Sum, &CallOptions::new())?;
/// }
/// window.deregister()?; // collective; dropping it would deregister too
/// // `grads` may be freed now.
/// # Ok::<(), omniccl::Error>(())
/// ```
#[must_use = "dropping a window deregisters it at once"]
pub struct Window<'a> {
    comm: &'a Communicator,
    handle: sys::occl_window_t,
    bytes: usize,
    _memory: PhantomData<&'a mut [u8]>,
}

impl Window<'_> {
    /// The library's handle of the registration (`occl_window_t`, never
    /// `OCCL_WINDOW_NULL` while the window lives).
    pub fn as_raw(&self) -> sys::occl_window_t {
        self.handle
    }

    /// The size of the registered buffer in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The communicator the buffer is registered with.
    pub fn communicator(&self) -> &Communicator {
        self.comm
    }

    /// Deregisters the buffer as `Drop` does, but returns the status.
    /// Collective, in the same order on every rank; waits (within the
    /// communicator's deadline: [`ErrorKind::Timeout`]) until the operations
    /// issued before it that may read the buffer have passed on every rank.
    ///
    /// [`ErrorKind::Timeout`]: crate::ErrorKind::Timeout
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut x = [0f32; 16];
    /// let window = comm.register_window(&omniccl::device::DeviceBuffer::host(&mut x))?;
    /// window.deregister()?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn deregister(self) -> Result<()> {
        let mut this = ManuallyDrop::new(self);
        this.deregister_now()
    }

    fn deregister_now(&mut self) -> Result<()> {
        // SAFETY: the communicator is live (borrowed for 'a) and `handle` is
        // a valid occl_window_t for the call to read and reset; it came from
        // this communicator and is deregistered only here (by deregister(),
        // which skips Drop, or by Drop).
        check(unsafe { sys::occl_comm_window_deregister(self.comm.as_raw(), &mut self.handle) })
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        // Errors cannot be reported here; deregister() shows them.
        let _ = self.deregister_now();
    }
}

impl std::fmt::Debug for Window<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("handle", &self.handle)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Communicator {
    /// Registers the memory of `buf` with this communicator (NCCL's
    /// `ncclCommWindowRegister`) until the returned [`Window`] is dropped or
    /// [deregistered](Window::deregister); see [`Window`] for what that
    /// changes.
    ///
    /// **Collective**: every rank registers one buffer of its own in the same
    /// order (and drops or deregisters the windows in the same order).
    /// Blocking, within the communicator's deadline.
    ///
    /// Errors, on every rank alike (the message names the rank that could
    /// not register): [`ErrorKind::InvalidArgument`] for an empty buffer,
    /// memory that is not device memory of the communicator's GPU (on the
    /// CUDA IPC path) or reaches past the end of its allocation;
    /// [`ErrorKind::Unsupported`] for memory of CUDA's virtual memory API
    /// made without a shareable handle type (PyTorch's expandable segments
    /// have one and are mapped). On a communicator without the
    /// device path registering succeeds and changes nothing.
    ///
    /// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
    /// [`ErrorKind::Unsupported`]: crate::ErrorKind::Unsupported
    ///
    /// ```
    /// use omniccl::device::DeviceBuffer;
    /// use omniccl::{Communicator, InitMethod};
    /// # let dir = tempfile::tempdir().unwrap();
    /// // One CPU rank here: registering succeeds and changes nothing.
    /// let comm = Communicator::init(InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut x = [1.0f32; 256];
    /// let window = comm.register_window(&DeviceBuffer::host(&mut x))?;
    /// assert_eq!(window.bytes(), 1024);
    /// drop(window); // deregisters (collective)
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn register_window<'a>(&'a self, buf: &DeviceBuffer<'a>) -> Result<Window<'a>> {
        let dtype = buf.dtype();
        let bits = u128::from(dtype.bits) * u128::from(dtype.lanes);
        let bytes = (buf.len() as u128 * bits).div_ceil(8);
        // Larger than memory only if `buf` broke its contract; still passed on
        // (the library checks the size against the allocation on the device
        // path) so that every rank takes part in the collective call.
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: `buf`'s contract (from_raw_parts, or the borrow of host())
        // keeps its memory allocated for 'a, which the window's lifetime
        // cannot outlive.
        unsafe { self.register_window_raw(buf.as_ptr(), bytes) }
    }

    /// Registers `bytes` of memory at `ptr`, as
    /// [`register_window`](Self::register_window) does for a
    /// [`DeviceBuffer`]: for memory described by a raw pointer (a CUDA
    /// allocation from another library). A null `ptr` or zero `bytes` is an
    /// [`ErrorKind::InvalidArgument`] error, on every rank.
    ///
    /// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
    ///
    /// # Safety
    /// If `ptr` is not null, the `bytes` bytes at `ptr` stay allocated (not
    /// freed or reused for another allocation) until the returned window is
    /// dropped or deregistered: the library lets the peers map them. The
    /// library checks itself that they are device memory of the
    /// communicator's GPU and never reads them outside the operations they
    /// are passed to.
    ///
    /// ```
    /// use omniccl::ErrorKind;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut x = vec![0u8; 4096];
    /// // SAFETY: `x` stays allocated until the window is dropped.
    /// let window = unsafe { comm.register_window_raw(x.as_mut_ptr().cast(), x.len()) }?;
    /// drop(window);
    /// // SAFETY: a null pointer registers nothing (an error).
    /// let err = unsafe { comm.register_window_raw(std::ptr::null_mut(), 64) }.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub unsafe fn register_window_raw(&self, ptr: *mut c_void, bytes: usize) -> Result<Window<'_>> {
        let mut handle: sys::occl_window_t = 0;
        // SAFETY: the communicator is live and `handle` is a valid
        // occl_window_t to write; the memory at `ptr` is only registered,
        // not read here, and the caller keeps it allocated while registered.
        check(unsafe { sys::occl_comm_window_register(self.as_raw(), ptr, bytes, &mut handle) })?;
        Ok(Window {
            comm: self,
            handle,
            bytes,
            _memory: PhantomData,
        })
    }
}
