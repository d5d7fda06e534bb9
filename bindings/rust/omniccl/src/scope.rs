//! Non-blocking operations: a [`Scope`] of [`Request`]s.
//!
//! Soundness. A request's buffers are borrowed for the whole scope (`'scope`),
//! and the scope waits for every request it started before
//! [`Communicator::scope`] returns, even for requests that were
//! `mem::forget`-ten (the scope, not the request, owns the C work handle). So
//! no safe code can touch a buffer while the library may still read or write
//! it, and no buffer can be freed before its operation ended: the same shape
//! as `std::thread::scope`.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::time::Duration;

use omniccl_sys as sys;

use crate::comm::Communicator;
use crate::element::Element;
use crate::error::{Error, Result, check};
use crate::op::{RawOp, ReduceOp};
use crate::p2p::RecvStatus;

/// One started operation: its work handle and the reduce op it uses (a
/// pre-multiplied sum must outlive the operation).
struct Slot {
    work: NonNull<sys::occl_work>,
    _op: Option<RawOp>,
}

impl Slot {
    /// Waits for the operation, reads its receive status (a PROC_NULL one
    /// for operations that are not receives), then frees the handle (and
    /// the op).
    fn finish(self) -> (Result<()>, sys::occl_recv_status_t) {
        // SAFETY: the handle is live (freed only here, once).
        let status = unsafe { sys::occl_work_wait(self.work.as_ptr()) };
        // Read the error message before any other call overwrites it.
        let result = check(status);
        let mut raw = RecvStatus::raw_empty();
        // SAFETY: the handle is live and its operation has ended; raw is a
        // valid place. The call cannot fail for a live handle and non-NULL
        // status; if it did, raw keeps the PROC_NULL status.
        unsafe { sys::occl_work_recv_status(self.work.as_ptr(), &mut raw) };
        // SAFETY: as above; the operation has ended.
        unsafe { sys::occl_work_free(self.work.as_ptr()) };
        (result, raw)
    }
}

/// The scope's list of started operations.
struct State {
    /// The communicator's handle, for cancelling (live for the scope).
    comm: sys::occl_comm_t,
    slots: RefCell<Vec<Option<Slot>>>,
    /// The first failure of a request nobody waited for.
    deferred: RefCell<Option<Error>>,
}

impl State {
    fn new(comm: sys::occl_comm_t) -> State {
        State {
            comm,
            slots: RefCell::new(Vec::new()),
            deferred: RefCell::new(None),
        }
    }

    fn finish(&self, index: usize) -> Result<()> {
        self.finish_status(index).0
    }

    /// Waits for operation `index` (if still pending); also its receive status.
    fn finish_status(&self, index: usize) -> (Result<()>, sys::occl_recv_status_t) {
        let slot = self.slots.borrow_mut()[index].take();
        slot.map_or((Ok(()), RecvStatus::raw_empty()), Slot::finish)
    }

    fn defer(&self, result: Result<()>) {
        if let Err(e) = result {
            self.deferred.borrow_mut().get_or_insert(e);
        }
    }

    /// Waits for every operation still pending (in start order).
    fn finish_all(&self) {
        let n = self.slots.borrow().len();
        for i in 0..n {
            let r = self.finish(i);
            self.defer(r);
        }
    }
}

/// Waits for everything when the scope ends, also when its closure panics.
struct WaitAll<'a>(&'a State);

impl Drop for WaitAll<'_> {
    fn drop(&mut self) {
        self.0.finish_all();
    }
}

/// Where non-blocking operations are started; see [`Communicator::scope`].
///
/// Buffers passed to a request stay borrowed until the scope ends; a
/// request's [`wait`](Request::wait) hands an output buffer back earlier.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// let mut a = [1u8; 4];
/// let mut b = [2u8; 4];
/// comm.scope(|s| {
///     let ra = s.ibroadcast(&mut a, 0)?;
///     let rb = s.ibroadcast(&mut b, 0)?;
///     ra.wait()?;
///     rb.wait()?;
///     Ok(())
/// })?;
/// assert_eq!((a, b), ([1; 4], [2; 4])); // usable again after the scope
/// # Ok::<(), omniccl::Error>(())
/// ```
pub struct Scope<'scope, 'env: 'scope> {
    comm: &'env Communicator,
    state: State,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// A started non-blocking operation. [`wait`](Request::wait) returns its
/// output buffer (`&mut [T]`, or `()`); dropping it unwaited waits (a failure
/// is then returned by [`Communicator::scope`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// let send = [1i32, 2];
/// let mut recv = [0i32; 2];
/// comm.scope(|s| {
///     let request: omniccl::Request<'_, &mut [i32]> = s.iall_reduce(&send, &mut recv, omniccl::ReduceOp::Sum)?;
///     let out = request.wait()?;
///     out[0] += 10; // the output buffer, handed back by wait()
///     Ok(())
/// })?;
/// assert_eq!(recv, [11, 2]);
/// # Ok::<(), omniccl::Error>(())
/// ```
#[must_use = "a request runs until waited; call wait() to see its result"]
pub struct Request<'scope, Out = ()> {
    state: &'scope State,
    index: usize,
    out: Option<Out>,
}

impl<'scope, Out> Request<'scope, Out> {
    /// Blocks until the operation ends; returns its output buffer.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [1u32, 2];
    /// comm.scope(|s| {
    ///     let req = s.ibroadcast(&mut buf, 0)?;
    ///     let result = req.wait()?;
    ///     assert_eq!(result, [1, 2]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn wait(self) -> Result<Out> {
        self.wait_status().map(|(out, _)| out)
    }

    /// Waits; also the operation's receive status.
    fn wait_status(mut self) -> Result<(Out, RecvStatus)> {
        let (result, raw) = self.state.finish_status(self.index);
        let out = self.out.take().expect("a request's output is taken only by wait()");
        result.map(|()| (out, RecvStatus::from_raw(&raw)))
    }

    /// Cancels the operation if it still can be (MPI_Cancel): a receive no
    /// message has matched yet, or a synchronous send to this rank itself
    /// no receive has matched yet. Returns whether it was cancelled
    /// (MPI_Test_cancelled); a cancelled operation then completes
    /// successfully having moved nothing (its buffer untouched). Otherwise
    /// (already matched or done, a send to another rank, a collective) the
    /// operation goes on as if not asked. Runs after the operations issued
    /// on the communicator before it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.scope(|s| {
    ///     let send = s.issend(&[1u8; 4], 0, 99)?; // to itself, not received yet
    ///     assert!(send.cancel()?);
    ///     send.wait()?;
    ///     assert!(s.comm().iprobe(0, 99)?.is_none()); // the message is gone
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn cancel(&self) -> Result<bool> {
        let slots = self.state.slots.borrow();
        let Some(slot) = slots[self.index].as_ref() else {
            return Ok(false);
        };
        let mut cancelled = 0;
        // SAFETY: the handle is live while its slot holds it; the
        // communicator outlives the scope; cancelled is a valid place.
        check(unsafe { sys::occl_work_cancel(slot.work.as_ptr(), self.state.comm, &mut cancelled) })?;
        Ok(cancelled != 0)
    }

    /// Whether the operation has ended (`Ok(true)`), is running (`Ok(false)`),
    /// or failed (`Err`). Never blocks.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.scope(|s| {
    ///     let req = s.ibarrier()?;
    ///     while !req.test()? {
    ///         std::thread::yield_now(); // or do other work
    ///     }
    ///     req.wait()
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn test(&self) -> Result<bool> {
        let slots = self.state.slots.borrow();
        let Some(slot) = slots[self.index].as_ref() else {
            return Ok(true);
        };
        // SAFETY: the handle is live while its slot holds it.
        match unsafe { sys::occl_work_test(slot.work.as_ptr()) } {
            sys::OCCL_ERR_IN_PROGRESS => Ok(false),
            status => check(status).map(|()| true),
        }
    }
}

impl<Out> Request<'_, Out> {
    /// Waits at most `timeout` for the operation: `Ok(true)` once it has
    /// ended (then [`wait`](Request::wait) returns at once), `Ok(false)` if
    /// it is still running (it goes on), `Err` if it failed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [0u8; 4];
    /// comm.scope(|s| {
    ///     let recv = s.irecv(&mut buf, 0)?; // nothing sent yet
    ///     assert!(!recv.wait_timeout(std::time::Duration::from_millis(10))?);
    ///     s.isend(&[1u8, 2, 3, 4], 0)?.wait()?;
    ///     assert!(recv.wait_timeout(std::time::Duration::from_secs(60))?);
    ///     assert_eq!(recv.wait()?, [1, 2, 3, 4]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        let slots = self.state.slots.borrow();
        let Some(slot) = slots[self.index].as_ref() else {
            return Ok(true);
        };
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: the handle is live while its slot holds it.
        match unsafe { sys::occl_work_wait_for(slot.work.as_ptr(), ms) } {
            sys::OCCL_ERR_IN_PROGRESS => Ok(false),
            status => check(status).map(|()| true),
        }
    }
}

impl<Out> Drop for Request<'_, Out> {
    fn drop(&mut self) {
        if self.out.is_some() {
            let result = self.state.finish(self.index);
            self.state.defer(result);
        }
    }
}

/// A started non-blocking receive ([`Scope::irecv_tagged`],
/// [`Scope::imrecv`]): a [`Request`] whose [`wait`](RecvRequest::wait) also
/// gives the [`RecvStatus`]. Dropping it unwaited waits, as for a `Request`.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// let mut buf = [0u32; 4];
/// comm.scope(|s| {
///     let got = s.irecv_tagged(&mut buf, omniccl::Source::Any, omniccl::Tag::Any)?;
///     s.isend_tagged(&[7u32, 8], 0, 3)?.wait()?;
///     let (data, status) = got.wait()?;
///     assert_eq!((&data[..2], status.tag, status.count), (&[7, 8][..], Some(3), 2));
///     Ok(())
/// })?;
/// # Ok::<(), omniccl::Error>(())
/// ```
#[must_use = "a request runs until waited; call wait() to see its result"]
pub struct RecvRequest<'scope, T>(pub(crate) Request<'scope, &'scope mut [T]>);

impl<'scope, T> RecvRequest<'scope, T> {
    /// Blocks until the receive ends; returns the buffer and what came.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [0i8; 2];
    /// comm.scope(|s| {
    ///     let (_, status) = s.irecv_tagged(&mut buf, omniccl::PROC_NULL, 0)?.wait()?;
    ///     assert!(status.is_proc_null());
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn wait(self) -> Result<(&'scope mut [T], RecvStatus)> {
        self.0.wait_status()
    }

    /// Waits at most `timeout`, as [`Request::wait_timeout`].
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.0.wait_timeout(timeout)
    }

    /// As [`Request::test`]: whether the receive has ended. Never blocks.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [0u8];
    /// comm.scope(|s| {
    ///     let req = s.irecv_tagged(&mut buf, 0, 1)?;
    ///     assert!(!req.test()?); // nothing sent yet
    ///     s.isend_tagged(&[1u8], 0, 1)?.wait()?;
    ///     req.wait().map(drop)
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn test(&self) -> Result<bool> {
        self.0.test()
    }

    /// As [`Request::cancel`]: cancels the receive if no message has matched
    /// it yet; returns whether it did.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [5u8];
    /// comm.scope(|s| {
    ///     let req = s.irecv_tagged(&mut buf, omniccl::Source::Any, omniccl::Tag::Any)?;
    ///     assert!(req.cancel()?);
    ///     let (data, _) = req.wait()?;
    ///     assert_eq!(data, [5]); // untouched
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn cancel(&self) -> Result<bool> {
        self.0.cancel()
    }
}

impl Communicator {
    /// Runs `f` with a [`Scope`] in which non-blocking operations
    /// (`i`-prefixed) start; waits for all of them before returning.
    ///
    /// Returns `f`'s result, or, if `f` succeeded, the first failure of a
    /// request that was dropped or forgotten instead of waited.
    ///
    /// ```
    /// use omniccl::ReduceOp;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let grads = vec![1.0f32; 4];
    /// let mut sum = vec![0.0f32; 4];
    /// let mut weights = vec![0.5f32; 2];
    /// comm.scope(|s| {
    ///     let r1 = s.iall_reduce(&grads, &mut sum, ReduceOp::Sum)?;
    ///     let r2 = s.ibroadcast(&mut weights, 0)?;
    ///     // ... compute while both run ...
    ///     let sum = r1.wait()?;
    ///     assert_eq!(sum[0], comm.size() as f32);
    ///     r2.wait()?;
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    ///
    /// A buffer lent to a request cannot be touched until the scope ends
    /// (read the output through [`Request::wait`]'s result instead):
    ///
    /// ```compile_fail,E0502
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = vec![1.0f32; 4];
    /// let mut recv = vec![0.0f32; 4];
    /// comm.scope(|s| {
    ///     let req = s.iall_reduce(&send, &mut recv, omniccl::ReduceOp::Sum)?;
    ///     println!("{}", recv[0]); // error: recv is lent to the request
    ///     req.wait()?;
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    ///
    /// Forgetting the request does not give the buffer back early either:
    ///
    /// ```compile_fail,E0499
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = vec![0u8; 1 << 20];
    /// comm.scope(|s| {
    ///     let req = s.ibroadcast(&mut buf, 0)?;
    ///     std::mem::forget(req);
    ///     buf[0] = 1; // error: buf is lent for the whole scope
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    ///
    /// and a buffer must outlive the scope, so it cannot be freed early:
    ///
    /// ```compile_fail,E0597
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.scope(|s| {
    ///     let mut local = vec![0u8; 16];
    ///     let req = s.ibroadcast(&mut local, 0)?; // error: local does not live long enough
    ///     std::mem::forget(req);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn scope<'env, R>(
        &'env self,
        f: impl for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> Result<R>,
    ) -> Result<R> {
        let scope = Scope {
            comm: self,
            state: State::new(self.as_raw()),
            _scope: PhantomData,
            _env: PhantomData,
        };
        let wait_all = WaitAll(&scope.state);
        let result = f(&scope);
        drop(wait_all);
        let deferred = scope.state.deferred.borrow_mut().take();
        match (result, deferred) {
            (Ok(_), Some(e)) => Err(e),
            (result, _) => result,
        }
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// The communicator the requests run on (for blocking calls in between).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.scope(|s| s.comm().barrier())?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn comm(&self) -> &'env Communicator {
        self.comm
    }

    /// Registers an operation started with `work`, keeping `op` alive until
    /// it ends; `out` is what `wait()` hands back.
    pub(crate) fn started<Out>(
        &'scope self,
        work: sys::occl_work_t,
        op: Option<RawOp>,
        out: Out,
    ) -> Result<Request<'scope, Out>> {
        let work = NonNull::new(work)
            .ok_or_else(|| Error::new(crate::ErrorKind::Internal, "the library returned no work handle"))?;
        let mut slots = self.state.slots.borrow_mut();
        slots.push(Some(Slot { work, _op: op }));
        Ok(Request {
            state: &self.state,
            index: slots.len() - 1,
            out: Some(out),
        })
    }

    /// Non-blocking [`Communicator::send`].
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// let (me, n) = (comm.rank(), comm.size());
    /// let mine = [me as u32];
    /// let mut from_left = [0u32];
    /// comm.scope(|s| {
    ///     let sent = s.isend(&mine, (me + 1) % n)?;
    ///     let got = s.irecv(&mut from_left, (me + n - 1) % n)?;
    ///     sent.wait()?;
    ///     assert_eq!(got.wait()?[0] as usize, (me + n - 1) % n);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn isend<T: Element>(&'scope self, buf: &'scope [T], peer: usize) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        self.comm.send_impl(buf, peer, &mut w)?;
        self.started(w, None, ())
    }

    /// Non-blocking [`Communicator::recv`]; `wait()` returns `buf`.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// let mut buf = [0u8; 8];
    /// comm.scope(|s| {
    ///     let got = s.irecv(&mut buf, 0)?.wait()?;
    ///     println!("{got:?}");
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn irecv<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        peer: usize,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.recv_impl(buf, peer, &mut w)?;
        self.started(w, None, buf)
    }

    /// Non-blocking [`Communicator::broadcast`]; `wait()` returns `buf`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [3i8; 2];
    /// comm.scope(|s| s.ibroadcast(&mut buf, 0)?.wait().map(drop))?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn ibroadcast<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.broadcast_impl(buf, root, &mut w)?;
        self.started(w, None, buf)
    }

    /// Non-blocking [`Communicator::scan`] (`exclusive` false) or
    /// [`Communicator::exscan`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [4u32, 5];
    /// let mut recv = [0u32; 2];
    /// comm.scope(|s| {
    ///     let req = s.iscan(&send, &mut recv, omniccl::ReduceOp::Sum, false)?;
    ///     assert_eq!(req.wait()?, [4, 5]); // one rank: its own input
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iscan<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
        exclusive: bool,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        let op = self.comm.scan_impl(Some(send), recv, op, exclusive, &mut w)?;
        self.started(w, Some(op), recv)
    }

    /// Non-blocking [`Communicator::all_reduce`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [1u64, 2];
    /// let mut recv = [0u64; 2];
    /// comm.scope(|s| {
    ///     let req = s.iall_reduce(&send, &mut recv, omniccl::ReduceOp::Sum)?;
    ///     assert_eq!(req.wait()?, [1, 2]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iall_reduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        let op = self.comm.all_reduce_impl(Some(send), recv, op, &mut w)?;
        self.started(w, Some(op), recv)
    }

    /// Non-blocking [`Communicator::all_reduce_in_place`]; `wait()` returns `buf`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [1.5f64];
    /// comm.scope(|s| s.iall_reduce_in_place(&mut buf, omniccl::ReduceOp::Min)?.wait().map(drop))?;
    /// assert_eq!(buf, [1.5]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iall_reduce_in_place<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        let op = self.comm.all_reduce_impl(None, buf, op, &mut w)?;
        self.started(w, Some(op), buf)
    }

    /// Non-blocking [`Communicator::reduce`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [2i32];
    /// let mut total = [0i32];
    /// comm.scope(|s| s.ireduce(&send, Some(&mut total), omniccl::ReduceOp::Prod, 0)?.wait())?;
    /// assert_eq!(total, [2]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn ireduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        op: ReduceOp,
        root: usize,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm.reduce_impl(send, recv, op, root, &mut w)?;
        self.started(w, Some(op), ())
    }

    /// Non-blocking [`Communicator::scatter`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let all = [5u16, 6];
    /// let mut mine = [0u16; 2];
    /// comm.scope(|s| s.iscatter(Some(&all), &mut mine, 0)?.wait().map(drop))?;
    /// assert_eq!(mine, [5, 6]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iscatter<T: Element>(
        &'scope self,
        send: Option<&'scope [T]>,
        recv: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.scatter_impl(send, recv, root, &mut w)?;
        self.started(w, None, recv)
    }

    /// Non-blocking [`Communicator::gather`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut all = [0u32; 1];
    /// comm.scope(|s| s.igather(&[4], Some(&mut all), 0)?.wait())?;
    /// assert_eq!(all, [4]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn igather<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        root: usize,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        self.comm.gather_impl(send, recv, root, &mut w)?;
        self.started(w, None, ())
    }

    /// Non-blocking [`Communicator::all_gather`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut all = vec![0i64; comm.size()];
    /// comm.scope(|s| s.iall_gather(&[1], &mut all)?.wait().map(drop))?;
    /// assert_eq!(all, [1]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iall_gather<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.all_gather_impl(send, recv, &mut w)?;
        self.started(w, None, recv)
    }

    /// Non-blocking [`Communicator::reduce_scatter`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let send = [1u8, 0];
    /// let mut part = [0u8; 2];
    /// comm.scope(|s| s.ireduce_scatter(&send, &mut part, omniccl::ReduceOp::BitOr)?.wait().map(drop))?;
    /// assert_eq!(part, [1, 0]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn ireduce_scatter<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        let op = self.comm.reduce_scatter_impl(send, recv, op, &mut w)?;
        self.started(w, Some(op), recv)
    }

    /// Non-blocking [`Communicator::all_to_all`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut recv = [0u32; 1];
    /// comm.scope(|s| s.iall_to_all(&[9], &mut recv)?.wait().map(drop))?;
    /// assert_eq!(recv, [9]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iall_to_all<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.all_to_all_impl(send, recv, &mut w)?;
        self.started(w, None, recv)
    }

    /// Non-blocking [`Communicator::barrier`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.scope(|s| s.ibarrier()?.wait())?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn ibarrier(&'scope self) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        // SAFETY: live handle (borrowed by the scope); w is a valid place.
        self.comm.call(&mut w, |c, w| unsafe { sys::occl_barrier(c, w) })?;
        self.started(w, None, ())
    }

    /// Non-blocking [`Communicator::all_gatherv`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let counts = vec![2usize; comm.size()];
    /// let mut all = vec![0u8; 2 * comm.size()];
    /// comm.scope(|s| s.iall_gatherv(&[1, 2], &mut all, &counts, None)?.wait().map(drop))?;
    /// assert_eq!(&all[..2], &[1, 2]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iall_gatherv<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        counts: &'scope [usize],
        displs: Option<&'scope [usize]>,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.all_gatherv_impl(send, recv, counts, displs, &mut w)?;
        self.started(w, None, recv)
    }

    /// Non-blocking [`Communicator::all_to_allv`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let ones = vec![1usize; comm.size()];
    /// let send = vec![7i32; comm.size()];
    /// let mut recv = vec![0i32; comm.size()];
    /// comm.scope(|s| s.iall_to_allv(&send, &ones, None, &mut recv, &ones, None)?.wait().map(drop))?;
    /// assert_eq!(recv[0], 7);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)] // all_to_allv's own arguments
    pub fn iall_to_allv<T: Element>(
        &'scope self,
        send: &'scope [T],
        send_counts: &'scope [usize],
        send_displs: Option<&'scope [usize]>,
        recv: &'scope mut [T],
        recv_counts: &'scope [usize],
        recv_displs: Option<&'scope [usize]>,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm
            .all_to_allv_impl(send, send_counts, send_displs, recv, recv_counts, recv_displs, &mut w)?;
        self.started(w, None, recv)
    }

    /// Non-blocking [`Communicator::gatherv`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let counts = vec![1usize; comm.size()];
    /// let mut all = vec![0u64; comm.size()];
    /// let root = comm.rank() == 0;
    /// comm.scope(|s| s.igatherv(&[5], root.then_some(&mut all[..]), &counts, None, 0)?.wait())?;
    /// assert_eq!(all[0], 5);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn igatherv<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        counts: &'scope [usize],
        displs: Option<&'scope [usize]>,
        root: usize,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        self.comm.gatherv_impl(send, recv, counts, displs, root, &mut w)?;
        self.started(w, None, ())
    }

    /// Non-blocking [`Communicator::scatterv`]; `wait()` returns `recv`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let counts = vec![1usize; comm.size()];
    /// let all = vec![3i8; comm.size()];
    /// let mut mine = [0i8];
    /// let root = comm.rank() == 0;
    /// comm.scope(|s| s.iscatterv(root.then_some(&all[..]), &counts, None, &mut mine, 0)?.wait().map(drop))?;
    /// assert_eq!(mine, [3]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iscatterv<T: Element>(
        &'scope self,
        send: Option<&'scope [T]>,
        counts: &'scope [usize],
        displs: Option<&'scope [usize]>,
        recv: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope, &'scope mut [T]>> {
        let mut w = ptr::null_mut();
        self.comm.scatterv_impl(send, counts, displs, recv, root, &mut w)?;
        self.started(w, None, recv)
    }
}
