//! [`Communicator`]: creation, identity, lifetime and the blocking operations.

use std::ffi::{CStr, CString};
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::time::Duration;

use omniccl_sys as sys;

use crate::config::{Config, InitMethod};
use crate::element::Element;
use crate::error::{Error, Result, check, invalid};
use crate::op::{RawOp, ReduceOp};
use crate::tensor::Tensor;

/// A group of ranks that run collective operations together; owns the C
/// handle (`Drop` destroys it).
///
/// `Send` but not `Sync`: a communicator may move to another thread, but the C
/// ABI lets only one thread at a time issue operations on it, so it cannot be
/// shared (`&Communicator` across threads):
///
/// ```
/// fn send<T: Send>() {}
/// send::<omniccl::Communicator>();
/// ```
///
/// ```compile_fail,E0277
/// fn sync<T: Sync>() {}
/// sync::<omniccl::Communicator>(); // error: Communicator is not Sync
/// ```
///
/// Every rank must call the same operations in the same order with matching
/// lengths, root and reduce op; a difference is an [`ErrorKind::Mismatch`]
/// error on every rank. Every blocking call has a deadline
/// ([`Config::timeout`]), so nothing waits forever.
///
/// [`ErrorKind::Mismatch`]: crate::ErrorKind::Mismatch
///
/// ```
/// use omniccl::{Communicator, InitMethod, ReduceOp};
/// # let dir = tempfile::tempdir().unwrap();
/// // One rank here; run N processes (omniccl-run -n N) with InitMethod::Env.
/// let comm = Communicator::init(InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// let mut grads = vec![1.0f32, 2.0, 3.0];
/// comm.all_reduce_in_place(&mut grads, ReduceOp::Avg)?;
/// assert_eq!(grads, [1.0, 2.0, 3.0]);
/// # Ok::<(), omniccl::Error>(())
/// ```
pub struct Communicator {
    raw: NonNull<sys::occl_comm>,
    rank: usize,
    size: usize,
}

// SAFETY: the C library allows a communicator to be used from any thread, one
// thread at a time; moving the owner to another thread keeps that rule.
// (Not Sync: two threads issuing operations through `&Communicator` at once
// would break it.)
unsafe impl Send for Communicator {}

/// Converts a rank-like value for C, with an error naming it.
fn c_int(what: &str, value: usize) -> Result<i32> {
    i32::try_from(value).map_err(|_| invalid(format!("{what} {value} does not fit in a C int")))
}

/// Converts counts or displacements (elements) for C.
fn c_counts(what: &str, values: &[usize]) -> Result<Vec<i64>> {
    values
        .iter()
        .map(|&v| i64::try_from(v).map_err(|_| invalid(format!("{what} value {v} does not fit in an int64"))))
        .collect()
}

impl Communicator {
    /// Creates a communicator with the default [`Config`]; collective over all
    /// ranks of the rendezvous.
    ///
    /// ```
    /// use omniccl::{Communicator, InitMethod};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let comm = Communicator::init(InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert_eq!((comm.rank(), comm.size()), (0, 1));
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn init(method: InitMethod) -> Result<Communicator> {
        Communicator::init_with_config(method, &Config::default())
    }

    /// Creates a communicator with `config` (deadline, transport, algorithm).
    ///
    /// ```
    /// use omniccl::{Communicator, Config, InitMethod};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let config = Config::new().timeout(std::time::Duration::from_secs(20));
    /// let comm = Communicator::init_with_config(
    ///     InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 }, &config)?;
    /// assert_eq!(comm.size(), 1);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn init_with_config(method: InitMethod, config: &Config) -> Result<Communicator> {
        let (raw_config, _strings) = config.to_raw()?;
        let mut comm: sys::occl_comm_t = ptr::null_mut();
        let status = match method {
            InitMethod::UniqueId { id, rank, world_size } => {
                let raw_id = id.to_raw();
                let (rank, size) = (c_int("rank", rank)?, c_int("world size", world_size)?);
                // SAFETY: every pointer is valid for the call; the config's
                // strings (_strings) outlive it.
                unsafe { sys::occl_comm_init_unique_id(&mut comm, size, &raw_id, rank, &raw_config) }
            }
            other => {
                let (url, rank, size) = match other {
                    InitMethod::Env => ("env://".to_string(), sys::OCCL_FROM_ENV, sys::OCCL_FROM_ENV),
                    InitMethod::Tcp { addr, rank, world_size } => (
                        format!("tcp://{addr}"),
                        c_int("rank", rank)?,
                        c_int("world size", world_size)?,
                    ),
                    InitMethod::File { path, rank, world_size } => {
                        let path = path
                            .to_str()
                            .ok_or_else(|| invalid(format!("path {path:?} is not UTF-8")))?;
                        (
                            format!("file://{path}"),
                            c_int("rank", rank)?,
                            c_int("world size", world_size)?,
                        )
                    }
                    InitMethod::UniqueId { .. } => unreachable!("handled above"),
                };
                let url = CString::new(url).map_err(|_| invalid("init method contains a NUL byte"))?;
                // SAFETY: as above; url outlives the call.
                unsafe { sys::occl_comm_init(&mut comm, url.as_ptr(), rank, size, &raw_config) }
            }
        };
        check(status)?;
        let raw = NonNull::new(comm).ok_or_else(|| invalid("occl_comm_init returned no communicator"))?;
        Communicator::from_handle(raw)
    }

    /// Wraps a new handle, reading its rank and size once.
    fn from_handle(raw: NonNull<sys::occl_comm>) -> Result<Communicator> {
        let mut comm = Communicator { raw, rank: 0, size: 0 };
        let (mut rank, mut size) = (0, 0);
        // SAFETY: raw is a live handle owned by `comm`.
        check(unsafe { sys::occl_comm_rank(raw.as_ptr(), &mut rank) })?;
        // SAFETY: as above.
        check(unsafe { sys::occl_comm_size(raw.as_ptr(), &mut size) })?;
        comm.rank = rank as usize;
        comm.size = size as usize;
        Ok(comm)
    }

    /// This process's rank, `0..size()`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert!(comm.rank() < comm.size());
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert_eq!(comm.size(), 1);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// The transport in use: `"shm"`, `"tcp"`, `"mixed"` or `"self"` (one rank).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert_eq!(comm.transport()?, "self");
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn transport(&self) -> Result<&'static str> {
        let mut name: *const std::ffi::c_char = ptr::null();
        // SAFETY: live handle; name receives a static string.
        check(unsafe { sys::occl_comm_transport(self.raw.as_ptr(), &mut name) })?;
        // SAFETY: the library returns a static NUL-terminated ASCII string.
        Ok(unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("unknown"))
    }

    /// Changes the deadline of later blocking calls (at least 1 ms).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.set_timeout(std::time::Duration::from_secs(10))?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn set_timeout(&self, timeout: Duration) -> Result<()> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: live handle.
        check(unsafe { sys::occl_comm_set_timeout(self.raw.as_ptr(), ms) })
    }

    /// The error that made the communicator unusable, or `None` while it is
    /// usable (NCCL's `ncclCommGetAsyncError`). After an operation failed (a
    /// peer died, a deadline passed, a mismatch was reported) every later
    /// call fails; this returns that error without making such a call, e.g.
    /// for a watchdog thread that decides to abort.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert!(comm.async_error()?.is_none());
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn async_error(&self) -> Result<Option<Error>> {
        let mut error: sys::occl_status_t = sys::OCCL_SUCCESS;
        // SAFETY: live handle; error is a valid place.
        check(unsafe { sys::occl_comm_get_async_error(self.raw.as_ptr(), &mut error) })?;
        match error {
            sys::OCCL_SUCCESS | sys::OCCL_ERR_IN_PROGRESS => Ok(None),
            // check() reads occl_last_error(), which now holds the failure's message.
            status => Ok(check(status).err()),
        }
    }

    /// Splits the communicator: ranks passing the same `color` get a new one
    /// together, ordered by `key` (ties by old rank). `None` opts out and
    /// gets `Ok(None)`. Collective over this communicator.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let even = comm.split(Some((comm.rank() % 2) as u32), 0)?.expect("has a color");
    /// assert_eq!(even.size(), 1);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Communicator>> {
        let color = match color {
            Some(c) => c_int("color", c as usize)?,
            None => sys::OCCL_SPLIT_NOCOLOR,
        };
        let mut new: sys::occl_comm_t = ptr::null_mut();
        // SAFETY: live handle; NULL config inherits this communicator's.
        check(unsafe { sys::occl_comm_split(self.raw.as_ptr(), color, key, ptr::null(), &mut new) })?;
        NonNull::new(new).map(Communicator::from_handle).transpose()
    }

    /// Aborts and frees the communicator: local, never waits for peers.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.abort()?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn abort(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        // SAFETY: the handle is live and, with Drop skipped, freed only here.
        check(unsafe { sys::occl_comm_abort(this.raw.as_ptr()) })
    }

    /// Frees the communicator like `Drop`, but returns the status (peers are
    /// told this rank left).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.destroy()?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn destroy(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        // SAFETY: the handle is live and, with Drop skipped, freed only here.
        check(unsafe { sys::occl_comm_destroy(this.raw.as_ptr()) })
    }

    /// The C handle, for calling `omniccl_sys` directly. It stays owned by
    /// `self`: do not destroy it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut size = 0;
    /// // SAFETY: the handle is live while `comm` is.
    /// unsafe { omniccl::sys::occl_comm_size(comm.as_raw(), &mut size) };
    /// assert_eq!(size, 1);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn as_raw(&self) -> sys::occl_comm_t {
        self.raw.as_ptr()
    }

    // ---- checks and C calls shared by blocking and non-blocking forms ----

    /// Checks that `value` names a rank of this communicator.
    pub(crate) fn rank_arg(&self, what: &str, value: usize) -> Result<i32> {
        if value >= self.size {
            return Err(invalid(format!(
                "{what} {value} is not a rank of this communicator (size {})",
                self.size
            )));
        }
        c_int(what, value)
    }

    /// Checks the root-only buffer of a rooted call: on the root it must be
    /// given (`len` is its length) and hold `want` elements (`rule` says why,
    /// for the message); on other ranks it is ignored. Returns whether it
    /// takes part in the call (true only on the root).
    pub(crate) fn root_buffer(
        &self,
        call: &str,
        name: &str,
        root: usize,
        len: Option<usize>,
        want: usize,
        rule: impl FnOnce() -> String,
    ) -> Result<bool> {
        if self.rank != root {
            return Ok(false);
        }
        match len {
            Some(n) if n == want => Ok(true),
            Some(n) => Err(invalid(format!(
                "{call}: the root's {name} has {n} elements but {}",
                rule()
            ))),
            None => Err(invalid(format!(
                "{call}: rank {root} is the root and needs a {name} buffer"
            ))),
        }
    }

    /// Runs `call(comm, work)`; `work` is NULL for a blocking call.
    pub(crate) fn call(
        &self,
        work: *mut sys::occl_work_t,
        call: impl FnOnce(sys::occl_comm_t, *mut sys::occl_work_t) -> sys::occl_status_t,
    ) -> Result<()> {
        check(call(self.raw.as_ptr(), work))
    }

    /// Checks that `send` (if any) is as long as `recv`, then calls `f` with
    /// the two tensors (`send` `None`: `recv` is both, in place), the handle
    /// and `work`.
    fn same_length_call<T: Element>(
        &self,
        what: &str,
        send: Option<&[T]>,
        recv: &mut [T],
        work: *mut sys::occl_work_t,
        f: impl FnOnce(
            *const sys::DLTensor,
            *const sys::DLTensor,
            sys::occl_comm_t,
            *mut sys::occl_work_t,
        ) -> sys::occl_status_t,
    ) -> Result<()> {
        if let Some(send) = send {
            if send.len() != recv.len() {
                return Err(invalid(format!(
                    "{what}: send has {} elements but recv has {}; they must be equal",
                    send.len(),
                    recv.len()
                )));
            }
        }
        let (mut n1, mut n2) = (0, 0);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        let s = match send {
            Some(send) => Tensor::new(send.as_ptr(), send.len(), &mut n1),
            None => Tensor::new(recv.as_ptr(), recv.len(), &mut n1),
        };
        self.call(work, |c, w| f(s.ptr(), r.ptr(), c, w))
    }

    pub(crate) fn send_impl<T: Element>(&self, buf: &[T], peer: usize, work: *mut sys::occl_work_t) -> Result<()> {
        let peer = self.rank_arg("peer", peer)?;
        let mut n = 0;
        let t = Tensor::new(buf.as_ptr(), buf.len(), &mut n);
        // SAFETY: the tensor describes `buf`, valid for the call (blocking) or
        // borrowed until the request is waited (non-blocking).
        self.call(work, |c, w| unsafe { sys::occl_send(t.ptr(), peer, c, w) })
    }

    pub(crate) fn recv_impl<T: Element>(&self, buf: &mut [T], peer: usize, work: *mut sys::occl_work_t) -> Result<()> {
        let peer = self.rank_arg("peer", peer)?;
        let mut n = 0;
        let t = Tensor::new(buf.as_mut_ptr(), buf.len(), &mut n);
        // SAFETY: as in send_impl; `buf` is exclusively borrowed.
        self.call(work, |c, w| unsafe { sys::occl_recv(t.ptr(), peer, c, w) })
    }

    pub(crate) fn broadcast_impl<T: Element>(
        &self,
        buf: &mut [T],
        root: usize,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let root = self.rank_arg("root", root)?;
        let mut n = 0;
        let t = Tensor::new(buf.as_mut_ptr(), buf.len(), &mut n);
        // SAFETY: as in recv_impl.
        self.call(work, |c, w| unsafe { sys::occl_broadcast(t.ptr(), root, c, w) })
    }

    pub(crate) fn all_reduce_impl<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        op: ReduceOp,
        work: *mut sys::occl_work_t,
    ) -> Result<RawOp> {
        let op = RawOp::new(op, self.as_raw())?;
        self.same_length_call("all_reduce", send, recv, work, |s, r, c, w| {
            // SAFETY: s and r describe live slices of equal length (the same
            // one in place) for the whole call.
            unsafe { sys::occl_all_reduce(s, r, op.op, c, w) }
        })?;
        Ok(op)
    }

    /// Inclusive (`exclusive` false) or exclusive prefix reduction into
    /// `recv`; `send` `None` is in place.
    pub(crate) fn scan_impl<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        op: ReduceOp,
        exclusive: bool,
        work: *mut sys::occl_work_t,
    ) -> Result<RawOp> {
        let what = if exclusive { "exscan" } else { "scan" };
        let op = RawOp::new(op, self.as_raw())?;
        let scan = if exclusive {
            sys::occl_exscan_ex
        } else {
            sys::occl_scan_ex
        };
        self.same_length_call(what, send, recv, work, |s, r, c, w| {
            // SAFETY: s and r describe live slices of equal length (the same
            // one in place) for the whole call; NULL options are the defaults.
            unsafe { scan(s, r, op.op, c, ptr::null(), w) }
        })?;
        Ok(op)
    }

    pub(crate) fn reduce_impl<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: ReduceOp,
        root: usize,
        work: *mut sys::occl_work_t,
    ) -> Result<RawOp> {
        let root_c = self.rank_arg("root", root)?;
        let used = self.root_buffer(
            "reduce",
            "recv",
            root,
            recv.as_ref().map(|r| r.len()),
            send.len(),
            || format!("must have send's {}", send.len()),
        )?;
        let recv = recv.filter(|_| used);
        let op = RawOp::new(op, self.as_raw())?;
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = recv.map(|r| Tensor::new(r.as_mut_ptr(), r.len(), &mut n2));
        let rp = r.as_ref().map_or(ptr::null(), |r| r.ptr());
        // SAFETY: the tensors describe live slices; recv is NULL off the root.
        self.call(work, |c, w| unsafe {
            sys::occl_reduce(s.ptr(), rp, op.op, root_c, c, w)
        })?;
        Ok(op)
    }

    pub(crate) fn scatter_impl<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: usize,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let root_c = self.rank_arg("root", root)?;
        let want = recv
            .len()
            .checked_mul(self.size)
            .ok_or_else(|| invalid("scatter: recv is too long"))?;
        let used = self.root_buffer("scatter", "send", root, send.map(|s| s.len()), want, || {
            format!("must have recv's {} x {} ranks = {want}", recv.len(), self.size)
        })?;
        let send = send.filter(|_| used);
        let (mut n1, mut n2) = (0, 0);
        let s = send.map(|s| Tensor::new(s.as_ptr(), s.len(), &mut n1));
        let sp = s.as_ref().map_or(ptr::null(), |s| s.ptr());
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        // SAFETY: the tensors describe live slices; send is NULL off the root.
        self.call(work, |c, w| unsafe { sys::occl_scatter(sp, r.ptr(), root_c, c, w) })
    }

    pub(crate) fn gather_impl<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: usize,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let root_c = self.rank_arg("root", root)?;
        let want = send
            .len()
            .checked_mul(self.size)
            .ok_or_else(|| invalid("gather: send is too long"))?;
        let used = self.root_buffer("gather", "recv", root, recv.as_ref().map(|r| r.len()), want, || {
            format!("must have send's {} x {} ranks = {want}", send.len(), self.size)
        })?;
        let recv = recv.filter(|_| used);
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = recv.map(|r| Tensor::new(r.as_mut_ptr(), r.len(), &mut n2));
        let rp = r.as_ref().map_or(ptr::null(), |r| r.ptr());
        // SAFETY: the tensors describe live slices; recv is NULL off the root.
        self.call(work, |c, w| unsafe { sys::occl_gather(s.ptr(), rp, root_c, c, w) })
    }

    pub(crate) fn all_gather_impl<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        if Some(recv.len()) != send.len().checked_mul(self.size) {
            return Err(invalid(format!(
                "all_gather: recv has {} elements but must have send's {} x {} ranks",
                recv.len(),
                send.len(),
                self.size
            )));
        }
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        // SAFETY: the tensors describe live slices.
        self.call(work, |c, w| unsafe { sys::occl_all_gather(s.ptr(), r.ptr(), c, w) })
    }

    pub(crate) fn reduce_scatter_impl<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        work: *mut sys::occl_work_t,
    ) -> Result<RawOp> {
        if Some(send.len()) != recv.len().checked_mul(self.size) {
            return Err(invalid(format!(
                "reduce_scatter: send has {} elements but must have recv's {} x {} ranks",
                send.len(),
                recv.len(),
                self.size
            )));
        }
        let op = RawOp::new(op, self.as_raw())?;
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        // SAFETY: the tensors describe live slices.
        self.call(work, |c, w| unsafe {
            sys::occl_reduce_scatter(s.ptr(), r.ptr(), op.op, c, w)
        })?;
        Ok(op)
    }

    pub(crate) fn all_to_all_impl<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        if send.len() != recv.len() || send.len() % self.size != 0 {
            return Err(invalid(format!(
                "all_to_all: send has {} elements and recv {}; they must be equal and a multiple of {} ranks",
                send.len(),
                recv.len(),
                self.size
            )));
        }
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        // SAFETY: the tensors describe live slices.
        self.call(work, |c, w| unsafe { sys::occl_all_to_all(s.ptr(), r.ptr(), c, w) })
    }

    /// Checks per-rank counts and displacements against a buffer of `len`
    /// elements; returns them for C (displacements `None` = packed).
    pub(crate) fn v_layout(
        &self,
        what: &str,
        len: usize,
        counts: &[usize],
        displs: Option<&[usize]>,
    ) -> Result<(Vec<i64>, Option<Vec<i64>>)> {
        if counts.len() != self.size {
            return Err(invalid(format!(
                "{what} counts has {} entries but there are {} ranks",
                counts.len(),
                self.size
            )));
        }
        if let Some(d) = displs {
            if d.len() != self.size {
                return Err(invalid(format!(
                    "{what} displacements has {} entries but there are {} ranks",
                    d.len(),
                    self.size
                )));
            }
        }
        let mut packed = 0usize;
        for (i, &count) in counts.iter().enumerate() {
            let start = displs.map_or(packed, |d| d[i]);
            let end = start
                .checked_add(count)
                .ok_or_else(|| invalid(format!("{what} rank {i}: displacement + count overflows")))?;
            if end > len {
                return Err(invalid(format!(
                    "{what} rank {i}: elements {start}..{end} lie outside the buffer of {len} elements"
                )));
            }
            packed = packed
                .checked_add(count)
                .ok_or_else(|| invalid(format!("{what}: counts overflow")))?;
        }
        Ok((c_counts(what, counts)?, displs.map(|d| c_counts(what, d)).transpose()?))
    }

    pub(crate) fn all_gatherv_impl<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: Option<&[usize]>,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let (c, d) = self.v_layout("all_gatherv recv", recv.len(), counts, displs)?;
        if send.len() != counts[self.rank] {
            return Err(invalid(format!(
                "all_gatherv: send has {} elements but counts[{}] is {}",
                send.len(),
                self.rank,
                counts[self.rank]
            )));
        }
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        let dp = d.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        // SAFETY: tensors describe live slices; counts/displs hold size() entries.
        self.call(work, |cm, w| unsafe {
            sys::occl_all_gatherv(s.ptr(), r.ptr(), c.as_ptr(), dp, cm, w)
        })
    }

    #[allow(clippy::too_many_arguments)] // the C call's own arguments, plus work
    pub(crate) fn all_to_allv_impl<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: Option<&[usize]>,
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: Option<&[usize]>,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let (sc, sd) = self.v_layout("all_to_allv send", send.len(), send_counts, send_displs)?;
        let (rc, rd) = self.v_layout("all_to_allv recv", recv.len(), recv_counts, recv_displs)?;
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        let sdp = sd.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        let rdp = rd.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        // SAFETY: tensors describe live slices; count arrays hold size() entries.
        self.call(work, |c, w| unsafe {
            sys::occl_all_to_allv(s.ptr(), sc.as_ptr(), sdp, r.ptr(), rc.as_ptr(), rdp, c, w)
        })
    }

    pub(crate) fn gatherv_impl<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        counts: &[usize],
        displs: Option<&[usize]>,
        root: usize,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let root_c = self.rank_arg("root", root)?;
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        if self.rank != root {
            // SAFETY: the tensor describes a live slice; root-only arguments are NULL.
            return self.call(work, |c, w| unsafe {
                sys::occl_gatherv(s.ptr(), ptr::null(), ptr::null(), ptr::null(), root_c, c, w)
            });
        }
        let recv = recv.ok_or_else(|| invalid(format!("gatherv: rank {root} is the root and needs a recv buffer")))?;
        let (c, d) = self.v_layout("gatherv recv", recv.len(), counts, displs)?;
        if send.len() != counts[self.rank] {
            return Err(invalid(format!(
                "gatherv: send has {} elements but counts[{}] is {}",
                send.len(),
                self.rank,
                counts[self.rank]
            )));
        }
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        let dp = d.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        // SAFETY: tensors describe live slices; count arrays hold size() entries.
        self.call(work, |cm, w| unsafe {
            sys::occl_gatherv(s.ptr(), r.ptr(), c.as_ptr(), dp, root_c, cm, w)
        })
    }

    pub(crate) fn scatterv_impl<T: Element>(
        &self,
        send: Option<&[T]>,
        counts: &[usize],
        displs: Option<&[usize]>,
        recv: &mut [T],
        root: usize,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let root_c = self.rank_arg("root", root)?;
        let (mut n1, mut n2) = (0, 0);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        if self.rank != root {
            // SAFETY: the tensor describes a live slice; root-only arguments are NULL.
            return self.call(work, |c, w| unsafe {
                sys::occl_scatterv(ptr::null(), ptr::null(), ptr::null(), r.ptr(), root_c, c, w)
            });
        }
        let send = send.ok_or_else(|| invalid(format!("scatterv: rank {root} is the root and needs a send buffer")))?;
        let (c, d) = self.v_layout("scatterv send", send.len(), counts, displs)?;
        if recv.len() != counts[self.rank] {
            return Err(invalid(format!(
                "scatterv: recv has {} elements but counts[{}] is {}",
                recv.len(),
                self.rank,
                counts[self.rank]
            )));
        }
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let dp = d.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        // SAFETY: tensors describe live slices; count arrays hold size() entries.
        self.call(work, |cm, w| unsafe {
            sys::occl_scatterv(s.ptr(), c.as_ptr(), dp, r.ptr(), root_c, cm, w)
        })
    }

    // ---- blocking operations ----

    /// Sends `buf` to rank `peer`; matched, in order, by [`recv`](Self::recv)
    /// on `peer` with the same length.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// if comm.rank() == 0 {
    ///     comm.send(&[1u32, 2, 3], 1)?;
    /// } else if comm.rank() == 1 {
    ///     let mut buf = [0u32; 3];
    ///     comm.recv(&mut buf, 0)?;
    ///     assert_eq!(buf, [1, 2, 3]);
    /// }
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn send<T: Element>(&self, buf: &[T], peer: usize) -> Result<()> {
        self.send_impl(buf, peer, ptr::null_mut())
    }

    /// Receives into `buf` from rank `peer` (see [`send`](Self::send)).
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// let mut buf = [0i64; 4];
    /// if comm.rank() == 1 {
    ///     comm.recv(&mut buf, 0)?;
    /// }
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn recv<T: Element>(&self, buf: &mut [T], peer: usize) -> Result<()> {
        self.recv_impl(buf, peer, ptr::null_mut())
    }

    /// Copies `root`'s `buf` into `buf` on every rank.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut weights = if comm.rank() == 0 { vec![0.5f64, 0.25] } else { vec![0.0; 2] };
    /// comm.broadcast(&mut weights, 0)?;
    /// assert_eq!(weights, [0.5, 0.25]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn broadcast<T: Element>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.broadcast_impl(buf, root, ptr::null_mut())
    }

    /// Reduces every rank's `send` with `op` into every rank's `recv` (same
    /// length); every rank gets bit-identical results.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [comm.rank() as i32 + 1; 3];
    /// let mut recv = [0i32; 3];
    /// comm.all_reduce(&send, &mut recv, omniccl::ReduceOp::Sum)?;
    /// let n = comm.size() as i32;
    /// assert_eq!(recv, [n * (n + 1) / 2; 3]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_reduce<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.all_reduce_impl(Some(send), recv, op, ptr::null_mut()).map(drop)
    }

    /// [`all_reduce`](Self::all_reduce) in place: `buf` is input and output.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [2.0f32, 4.0];
    /// comm.all_reduce_in_place(&mut buf, omniccl::ReduceOp::Max)?;
    /// assert_eq!(buf, [2.0, 4.0]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_reduce_in_place<T: Element>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        self.all_reduce_impl(None, buf, op, ptr::null_mut()).map(drop)
    }

    /// Inclusive prefix reduction (MPI's `Scan`): rank i's `recv` gets `op`
    /// over the `send` of ranks 0 to i (the same length on every rank).
    /// [`Avg`](ReduceOp::Avg) and [`PremulSum`](ReduceOp::PremulSum) have no
    /// prefix meaning: an `InvalidArgument` error.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [comm.rank() as u64 + 1; 2];
    /// let mut recv = [0u64; 2];
    /// comm.scan(&send, &mut recv, omniccl::ReduceOp::Sum)?;
    /// let r = comm.rank() as u64 + 1;
    /// assert_eq!(recv, [r * (r + 1) / 2; 2]); // 1 + 2 + ... + (rank + 1)
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn scan<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.scan_impl(Some(send), recv, op, false, ptr::null_mut()).map(drop)
    }

    /// [`scan`](Self::scan) in place: `buf` is input and output.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [3i32, 7];
    /// comm.scan_in_place(&mut buf, omniccl::ReduceOp::Max)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn scan_in_place<T: Element>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        self.scan_impl(None, buf, op, false, ptr::null_mut()).map(drop)
    }

    /// Exclusive prefix reduction (MPI's `Exscan`): rank i > 0's `recv` gets
    /// `op` over the `send` of ranks 0 to i - 1; rank 0's `recv` is left as
    /// it was. Ops as for [`scan`](Self::scan).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut offset = [0u64]; // where this rank's items start: the sum of the earlier ranks' counts
    /// comm.exscan(&[10u64], &mut offset, omniccl::ReduceOp::Sum)?;
    /// assert_eq!(offset, [10 * comm.rank() as u64]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn exscan<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.scan_impl(Some(send), recv, op, true, ptr::null_mut()).map(drop)
    }

    /// [`exscan`](Self::exscan) in place: `buf` is input and output (rank 0's
    /// keeps its input).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [5u8];
    /// comm.exscan_in_place(&mut buf, omniccl::ReduceOp::BitOr)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn exscan_in_place<T: Element>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        self.scan_impl(None, buf, op, true, ptr::null_mut()).map(drop)
    }

    /// Reduces every rank's `send` with `op` into `root`'s `recv` (same
    /// length; `None` and ignored on other ranks). Inputs are never modified.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [3u8, 5];
    /// let mut total = [0u8; 2];
    /// let recv = if comm.rank() == 0 { Some(&mut total[..]) } else { None };
    /// comm.reduce(&send, recv, omniccl::ReduceOp::Sum, 0)?;
    /// assert_eq!(total, [3, 5]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn reduce<T: Element>(&self, send: &[T], recv: Option<&mut [T]>, op: ReduceOp, root: usize) -> Result<()> {
        self.reduce_impl(send, recv, op, root, ptr::null_mut()).map(drop)
    }

    /// Splits `root`'s `send` (`size() * recv.len()` elements; `None` on other
    /// ranks) into `size()` parts; rank `i` receives part `i` in `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let all: Vec<u16> = (0..2 * comm.size() as u16).collect();
    /// let mut mine = [0u16; 2];
    /// comm.scatter(if comm.rank() == 0 { Some(&all[..]) } else { None }, &mut mine, 0)?;
    /// let r = comm.rank() as u16;
    /// assert_eq!(mine, [2 * r, 2 * r + 1]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn scatter<T: Element>(&self, send: Option<&[T]>, recv: &mut [T], root: usize) -> Result<()> {
        self.scatter_impl(send, recv, root, ptr::null_mut())
    }

    /// Collects every rank's `send` into `root`'s `recv` (`size() *
    /// send.len()` elements in rank order; `None` on other ranks).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut all = vec![0i16; comm.size()];
    /// let recv = if comm.rank() == 0 { Some(&mut all[..]) } else { None };
    /// comm.gather(&[comm.rank() as i16], recv, 0)?;
    /// assert_eq!(all, [0]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn gather<T: Element>(&self, send: &[T], recv: Option<&mut [T]>, root: usize) -> Result<()> {
        self.gather_impl(send, recv, root, ptr::null_mut())
    }

    /// Concatenates every rank's `send` into every rank's `recv` (`size() *
    /// send.len()` elements, rank order).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut all = vec![0u64; 2 * comm.size()];
    /// comm.all_gather(&[7, 8], &mut all)?;
    /// assert_eq!(&all[..2], &[7, 8]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_gather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.all_gather_impl(send, recv, ptr::null_mut())
    }

    /// Reduces `send` (`size() * recv.len()` elements) with `op`; rank `i`
    /// receives reduced part `i` in `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = vec![1i32; 2 * comm.size()];
    /// let mut part = [0i32; 2];
    /// comm.reduce_scatter(&send, &mut part, omniccl::ReduceOp::Sum)?;
    /// assert_eq!(part, [comm.size() as i32; 2]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn reduce_scatter<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.reduce_scatter_impl(send, recv, op, ptr::null_mut()).map(drop)
    }

    /// Part `j` of rank `i`'s `send` becomes part `i` of rank `j`'s `recv`
    /// (both the same length, a multiple of `size()`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send: Vec<i8> = (0..comm.size() as i8).collect();
    /// let mut recv = vec![0i8; comm.size()];
    /// comm.all_to_all(&send, &mut recv)?;
    /// assert_eq!(recv, [comm.rank() as i8; 1]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_to_all<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.all_to_all_impl(send, recv, ptr::null_mut())
    }

    /// Returns once every rank has entered the barrier.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.barrier()?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn barrier(&self) -> Result<()> {
        // SAFETY: live handle; NULL work blocks.
        self.call(ptr::null_mut(), |c, w| unsafe { sys::occl_barrier(c, w) })
    }

    /// [`all_gather`](Self::all_gather) with per-rank counts: rank `i`
    /// contributes `counts[i]` elements (its `send.len()`), placed at
    /// `displs[i]` of `recv` (`None`: packed in rank order).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// // rank r contributes r + 1 copies of r
    /// let counts: Vec<usize> = (1..=comm.size()).collect();
    /// let send = vec![comm.rank() as u32; comm.rank() + 1];
    /// let mut recv = vec![0u32; counts.iter().sum()];
    /// comm.all_gatherv(&send, &mut recv, &counts, None)?;
    /// assert_eq!(recv[0], 0);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_gatherv<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: Option<&[usize]>,
    ) -> Result<()> {
        self.all_gatherv_impl(send, recv, counts, displs, ptr::null_mut())
    }

    /// [`all_to_all`](Self::all_to_all) with per-peer counts and
    /// displacements (elements; `None`: packed). `send_counts[j]` on rank `i`
    /// must equal `recv_counts[i]` on rank `j`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let n = comm.size();
    /// let send = vec![comm.rank() as i64; n];
    /// let mut recv = vec![-1i64; n];
    /// let ones = vec![1usize; n];
    /// comm.all_to_allv(&send, &ones, None, &mut recv, &ones, None)?;
    /// assert_eq!(recv, (0..n as i64).collect::<Vec<_>>());
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_to_allv<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: Option<&[usize]>,
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: Option<&[usize]>,
    ) -> Result<()> {
        self.all_to_allv_impl(
            send,
            send_counts,
            send_displs,
            recv,
            recv_counts,
            recv_displs,
            ptr::null_mut(),
        )
    }

    /// [`gather`](Self::gather) with per-rank counts: on `root`, rank `i`'s
    /// `send` (`counts[i]` elements) lands at `displs[i]` of `recv` (`None`:
    /// packed). Other ranks pass `None` and may pass empty `counts`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let counts: Vec<usize> = (1..=comm.size()).collect();
    /// let mut all = vec![0u8; counts.iter().sum()];
    /// let send = vec![9u8; comm.rank() + 1];
    /// let root = comm.rank() == 0;
    /// comm.gatherv(&send, if root { Some(&mut all[..]) } else { None }, &counts, None, 0)?;
    /// assert_eq!(all[0], 9);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn gatherv<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        counts: &[usize],
        displs: Option<&[usize]>,
        root: usize,
    ) -> Result<()> {
        self.gatherv_impl(send, recv, counts, displs, root, ptr::null_mut())
    }

    /// [`scatter`](Self::scatter) with per-rank counts: `root` sends
    /// `counts[i]` elements at `displs[i]` of `send` (`None`: packed) to rank
    /// `i`'s `recv`. Other ranks pass `None` and may pass empty `counts`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let counts: Vec<usize> = (1..=comm.size()).collect();
    /// let all = vec![4.5f32; counts.iter().sum()];
    /// let mut mine = vec![0.0f32; comm.rank() + 1];
    /// let root = comm.rank() == 0;
    /// comm.scatterv(if root { Some(&all[..]) } else { None }, &counts, None, &mut mine, 0)?;
    /// assert_eq!(mine[0], 4.5);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn scatterv<T: Element>(
        &self,
        send: Option<&[T]>,
        counts: &[usize],
        displs: Option<&[usize]>,
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        self.scatterv_impl(send, counts, displs, recv, root, ptr::null_mut())
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // SAFETY: the handle is live and owned by self. Drop cannot report a
        // failure; call destroy() to see it.
        unsafe { sys::occl_comm_destroy(self.raw.as_ptr()) };
    }
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}
