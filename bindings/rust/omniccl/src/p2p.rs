//! MPI-style point-to-point: tags, receive statuses, any-source receives,
//! probes, synchronous sends and matched probes (C ABI 1.2).
//!
//! Words used here, as in MPI and the C header:
//! - a **message** is what one send transfers; it carries its sender's rank
//!   and a **tag** (`0..=`[`TAG_UB`]).
//! - a receive or probe **matches** the first message (in arrival order)
//!   whose source and tag fit its [`Source`] and [`Tag`]; messages from one
//!   rank are matched in the order it sent them (non-overtaking).
//! - a receive buffer is an **upper bound**: a shorter message succeeds and
//!   the [`RecvStatus`] says how much came; a longer one is an
//!   [`ErrorKind::Truncated`](crate::ErrorKind::Truncated) error (the buffer
//!   holds its first part; the communicator stays usable). A message of
//!   another element type is an [`ErrorKind::Mismatch`](crate::ErrorKind::Mismatch)
//!   error (the message is dropped).
//! - [`PROC_NULL`] as a peer: a send or receive that completes at once and
//!   moves nothing (MPI_PROC_NULL), handy at the edges of a ring or grid.

use std::ptr;

use omniccl_sys as sys;

use crate::comm::Communicator;
use crate::element::Element;
use crate::error::{Result, check, invalid};
use crate::scope::{RecvRequest, Request, Scope};
use crate::tensor::Tensor;

/// The largest tag: tags are `0..=TAG_UB` (`OCCL_TAG_UB`, `i32::MAX`).
pub const TAG_UB: u32 = sys::OCCL_TAG_UB;

/// `OCCL_MESSAGE_NULL`: no message (a C macro with a cast, which bindgen skips).
const MESSAGE_NULL: sys::occl_message_t = 0;
/// `OCCL_MESSAGE_NO_PROC`: the message of a matched probe of PROC_NULL.
const MESSAGE_NO_PROC: sys::occl_message_t = 1;

/// The null process (MPI_PROC_NULL), usable wherever a [`Source`] or a
/// [`Dest`] is: sends to it and receives from it complete at once and move
/// nothing; a receive from it gets a status with `source` and `tag` `None`.
///
/// ```
/// use omniccl::PROC_NULL;
/// # let dir = tempfile::tempdir().unwrap();
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// comm.send_tagged(&[1u8], PROC_NULL, 0)?;
/// let status = comm.recv_tagged(&mut [0u8; 4], PROC_NULL, 0)?;
/// assert!(status.is_proc_null());
/// assert_eq!(status.count, 0);
/// # Ok::<(), omniccl::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcNull;

/// The null process; see [`ProcNull`].
pub const PROC_NULL: ProcNull = ProcNull;

/// Where a receive or probe takes its message from (MPI's `source`
/// argument). A plain `usize` converts to [`Source::Rank`].
///
/// ```
/// use omniccl::{Source, PROC_NULL};
/// assert_eq!(Source::from(3), Source::Rank(3));
/// assert_eq!(Source::from(PROC_NULL), Source::ProcNull);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Only messages from this rank.
    Rank(usize),
    /// Messages from any rank (MPI_ANY_SOURCE); the status says which sent it.
    Any,
    /// The null process: completes at once with nothing (see [`ProcNull`]).
    ProcNull,
}

impl From<usize> for Source {
    fn from(rank: usize) -> Source {
        Source::Rank(rank)
    }
}

impl From<ProcNull> for Source {
    fn from(_: ProcNull) -> Source {
        Source::ProcNull
    }
}

/// Where a send goes: a rank (a plain `usize` converts) or [`PROC_NULL`].
///
/// ```
/// use omniccl::{Dest, PROC_NULL};
/// assert_eq!(Dest::from(1), Dest::Rank(1));
/// assert_eq!(Dest::from(PROC_NULL), Dest::ProcNull);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dest {
    /// This rank (itself allowed).
    Rank(usize),
    /// The null process: the send completes at once and moves nothing.
    ProcNull,
}

impl From<usize> for Dest {
    fn from(rank: usize) -> Dest {
        Dest::Rank(rank)
    }
}

impl From<ProcNull> for Dest {
    fn from(_: ProcNull) -> Dest {
        Dest::ProcNull
    }
}

/// Which tags a receive or probe matches (MPI's `tag` argument). A plain
/// `u32` converts to [`Tag::Is`]; it must be at most [`TAG_UB`].
///
/// ```
/// use omniccl::Tag;
/// assert_eq!(Tag::from(7), Tag::Is(7));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tag {
    /// Only messages with this tag (`0..=TAG_UB`).
    Is(u32),
    /// Any tag (MPI_ANY_TAG); the status says which.
    Any,
}

impl From<u32> for Tag {
    fn from(tag: u32) -> Tag {
        Tag::Is(tag)
    }
}

/// What a receive got, or what a probe found (MPI_Status).
///
/// For a receive, `bytes`/`count` are what was stored in the buffer; for a
/// probe they describe the whole message (`count` in the sender's element
/// type). A receive from [`PROC_NULL`] has `source` and `tag` `None` and
/// zero `bytes` and `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecvStatus {
    /// The sender's rank; `None` for [`PROC_NULL`].
    pub source: Option<usize>,
    /// The message's tag; `None` for [`PROC_NULL`].
    pub tag: Option<u32>,
    /// Bytes stored (a receive) or in the message (a probe).
    pub bytes: usize,
    /// Elements stored (a receive) or in the message (a probe).
    pub count: usize,
}

impl RecvStatus {
    /// Converts the C status.
    pub(crate) fn from_raw(raw: &sys::occl_recv_status_t) -> RecvStatus {
        RecvStatus {
            source: usize::try_from(raw.source).ok(),
            tag: u32::try_from(raw.tag).ok(),
            bytes: usize::try_from(raw.bytes).unwrap_or(0),
            count: usize::try_from(raw.count).unwrap_or(0),
        }
    }

    /// The status of an operation with PROC_NULL, before the C call fills it.
    pub(crate) fn raw_empty() -> sys::occl_recv_status_t {
        sys::occl_recv_status_t {
            source: sys::OCCL_PROC_NULL,
            tag: sys::OCCL_ANY_TAG,
            bytes: 0,
            count: 0,
        }
    }

    /// Whether this is the status of a receive or probe of [`PROC_NULL`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert!(comm.probe(omniccl::PROC_NULL, omniccl::Tag::Any)?.is_proc_null());
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn is_proc_null(&self) -> bool {
        self.source.is_none()
    }
}

/// A message taken out of matching by [`Communicator::mprobe`] or
/// [`Communicator::improbe`] (MPI_Message): no other receive or probe can
/// get it; [`Message::recv`] (or [`Scope::imrecv`](crate::Scope::imrecv))
/// receives exactly it, once: both take the `Message` by value.
///
/// **Dropped unreceived**, a message is discarded: `Drop` receives it into
/// an empty buffer, which frees the library's copy (otherwise it would stay
/// counted in `OMNICCL_P2P_UNEXPECTED_BYTES` until the communicator is
/// destroyed) and, as for any receive, completes the sender's synchronous
/// send. This never waits for a peer (the message is all there), but runs
/// after operations issued before it on the communicator, so it may wait for
/// a pending collective, within the communicator's deadline. Errors are
/// ignored; call [`Message::discard`] to see them.
///
/// ```no_run
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
/// use omniccl::{Source, Tag};
/// if comm.rank() == 1 {
///     let msg = comm.mprobe(Source::Any, Tag::Any)?; // blocks until one has come
///     let mut buf = vec![0f32; msg.status().count]; // exactly its size
///     let status = msg.recv(&mut buf)?;
///     println!("{} floats from rank {:?}", status.count, status.source);
/// }
/// # Ok::<(), omniccl::Error>(())
/// ```
#[must_use = "a message is received by recv() or irecv; dropping it discards it"]
pub struct Message<'c> {
    comm: &'c Communicator,
    handle: sys::occl_message_t,
    status: RecvStatus,
}

impl<'c> Message<'c> {
    /// What the probe found: the sender, tag and size of the whole message
    /// (`count` in the sender's element type).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.send_tagged(&[1u16, 2, 3], 0, 4)?; // to itself
    /// let msg = comm.mprobe(0, 4)?;
    /// assert_eq!((msg.status().count, msg.status().bytes), (3, 6));
    /// msg.recv(&mut [0u16; 3])?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn status(&self) -> RecvStatus {
        self.status
    }

    /// Receives the message into `buf` (an upper bound, as for
    /// [`Communicator::recv_tagged`]); never waits for a peer. The message is
    /// spent whatever the outcome (as MPI_Mrecv): a truncation or element
    /// type error drops it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.send_tagged(&[7i64], 0, 1)?;
    /// let mut buf = [0i64; 2];
    /// let status = comm.mprobe(0, 1)?.recv(&mut buf)?;
    /// assert_eq!((buf[0], status.count), (7, 1));
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn recv<T: Element>(mut self, buf: &mut [T]) -> Result<RecvStatus> {
        let mut raw = RecvStatus::raw_empty();
        self.comm.mrecv_impl(buf, &mut self.handle, &mut raw, ptr::null_mut())?;
        Ok(RecvStatus::from_raw(&raw))
    }

    /// Discards the message (what dropping it does), returning the library's
    /// answer: `Ok` if it was freed. Never waits for a peer.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.send_tagged(&[1u8], 0, 9)?;
    /// comm.mprobe(0, 9)?.discard()?;
    /// assert!(comm.iprobe(0, 9)?.is_none()); // gone
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn discard(mut self) -> Result<()> {
        self.discard_now()
    }

    fn discard_now(&mut self) -> Result<()> {
        if self.handle == MESSAGE_NULL || self.handle == MESSAGE_NO_PROC {
            self.handle = MESSAGE_NULL;
            return Ok(());
        }
        let mut nothing: [u8; 0] = [];
        let mut raw = RecvStatus::raw_empty();
        match self
            .comm
            .mrecv_impl(&mut nothing, &mut self.handle, &mut raw, ptr::null_mut())
        {
            // A non-empty message into an empty buffer is a truncation, one
            // of another element type a mismatch: either way it is freed.
            Err(e) if matches!(e.kind(), crate::ErrorKind::Truncated | crate::ErrorKind::Mismatch) => Ok(()),
            other => other,
        }
    }

    /// Hands the message number to a non-blocking receive (the `Message`
    /// is spent; its Drop does nothing afterwards).
    pub(crate) fn handle_mut(&mut self) -> &mut sys::occl_message_t {
        &mut self.handle
    }

    /// The communicator the message belongs to.
    pub(crate) fn comm(&self) -> &'c Communicator {
        self.comm
    }
}

impl Drop for Message<'_> {
    fn drop(&mut self) {
        // Errors cannot be reported here; discard() shows them.
        let _ = self.discard_now();
    }
}

impl std::fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("handle", &self.handle)
            .field("status", &self.status)
            .finish()
    }
}

impl Communicator {
    // ---- argument conversions ----

    /// A send's destination for C, checked against this communicator.
    fn dest_arg(&self, dest: Dest) -> Result<i32> {
        match dest {
            Dest::Rank(r) => self.rank_arg("dest", r),
            Dest::ProcNull => Ok(sys::OCCL_PROC_NULL),
        }
    }

    /// A receive's source for C, checked against this communicator.
    fn source_arg(&self, source: Source) -> Result<i32> {
        match source {
            Source::Rank(r) => self.rank_arg("source", r),
            Source::Any => Ok(sys::OCCL_ANY_SOURCE),
            Source::ProcNull => Ok(sys::OCCL_PROC_NULL),
        }
    }

    /// A send's tag for C: `0..=TAG_UB`.
    fn send_tag_arg(tag: u32) -> Result<i32> {
        i32::try_from(tag).map_err(|_| invalid(format!("tag {tag} is above TAG_UB ({TAG_UB}); tags are 0..={TAG_UB}")))
    }

    /// A receive's tag for C.
    fn tag_arg(tag: Tag) -> Result<i32> {
        match tag {
            Tag::Is(t) => Communicator::send_tag_arg(t),
            Tag::Any => Ok(sys::OCCL_ANY_TAG),
        }
    }

    // ---- C calls shared by blocking and non-blocking forms ----

    pub(crate) fn send_tagged_impl<T: Element>(
        &self,
        buf: &[T],
        dest: Dest,
        tag: u32,
        synchronous: bool,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let (dest, tag) = (self.dest_arg(dest)?, Communicator::send_tag_arg(tag)?);
        let mut n = 0;
        let t = Tensor::new(buf.as_ptr(), buf.len(), &mut n);
        // SAFETY: the tensor describes `buf`, valid for the call (blocking) or
        // borrowed until the request ends (non-blocking); NULL options.
        self.call(work, |c, w| unsafe {
            if synchronous {
                sys::occl_ssend_tagged(t.ptr(), dest, tag, c, ptr::null(), w)
            } else {
                sys::occl_send_tagged(t.ptr(), dest, tag, c, ptr::null(), w)
            }
        })
    }

    /// A tagged receive; `status` is filled only when blocking (work NULL).
    pub(crate) fn recv_tagged_impl<T: Element>(
        &self,
        buf: &mut [T],
        source: Source,
        tag: Tag,
        status: &mut sys::occl_recv_status_t,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let (source, tag) = (self.source_arg(source)?, Communicator::tag_arg(tag)?);
        let mut n = 0;
        let t = Tensor::new(buf.as_mut_ptr(), buf.len(), &mut n);
        // SAFETY: as in send_tagged_impl; `buf` is exclusively borrowed and
        // `status` is a valid place for the call.
        self.call(work, |c, w| unsafe {
            sys::occl_recv_tagged(t.ptr(), source, tag, c, ptr::null(), status, w)
        })
    }

    /// Receives message `*handle` (set to MESSAGE_NULL by the library).
    pub(crate) fn mrecv_impl<T: Element>(
        &self,
        buf: &mut [T],
        handle: &mut sys::occl_message_t,
        status: &mut sys::occl_recv_status_t,
        work: *mut sys::occl_work_t,
    ) -> Result<()> {
        let mut n = 0;
        let t = Tensor::new(buf.as_mut_ptr(), buf.len(), &mut n);
        // SAFETY: as in recv_tagged_impl; `handle` is a valid place.
        self.call(work, |c, w| unsafe {
            sys::occl_mrecv(t.ptr(), handle, c, ptr::null(), status, w)
        })
    }

    // ---- blocking point-to-point ----

    /// Sends `buf` to `dest` (a rank, itself allowed, or [`PROC_NULL`]) with
    /// `tag` (`0..=TAG_UB`); returns once `buf` may be reused. Matched by a
    /// [`recv_tagged`](Self::recv_tagged) on `dest` whose source and tag fit.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.send_tagged(&[1.0f32, 2.0], 0, 11)?; // to itself: kept until received
    /// let mut buf = [0.0f32; 8];
    /// let status = comm.recv_tagged(&mut buf, 0, 11)?;
    /// assert_eq!((status.source, status.tag, status.count), (Some(0), Some(11), 2));
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn send_tagged<T: Element>(&self, buf: &[T], dest: impl Into<Dest>, tag: u32) -> Result<()> {
        self.send_tagged_impl(buf, dest.into(), tag, false, ptr::null_mut())
    }

    /// Synchronous send (MPI_Ssend): as [`send_tagged`](Self::send_tagged),
    /// but returns only once a receive on `dest` has matched the message (a
    /// probe does not). To itself, with no receive already posted, it could
    /// never complete and is an [`ErrorKind::Mismatch`](crate::ErrorKind::Mismatch)
    /// error (use [`Scope::issend`](crate::Scope::issend)). The message must be
    /// matched before `dest` issues a collective operation.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// if comm.rank() == 0 {
    ///     comm.ssend(&[42u32], 1, 0)?; // returns once rank 1 has received it
    /// } else if comm.rank() == 1 {
    ///     comm.recv_tagged(&mut [0u32], 0, 0)?;
    /// }
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn ssend<T: Element>(&self, buf: &[T], dest: impl Into<Dest>, tag: u32) -> Result<()> {
        self.send_tagged_impl(buf, dest.into(), tag, true, ptr::null_mut())
    }

    /// Receives into `buf` the first message from `source` (a rank,
    /// [`Source::Any`] or [`PROC_NULL`]) whose tag fits `tag` ([`Tag::Any`]
    /// or a value); returns its [`RecvStatus`]. `buf` is an upper bound: a
    /// longer message is an [`ErrorKind::Truncated`](crate::ErrorKind::Truncated)
    /// error (`buf` holds its first part), another element type an
    /// [`ErrorKind::Mismatch`](crate::ErrorKind::Mismatch); the communicator
    /// stays usable after either.
    ///
    /// ```no_run
    /// use omniccl::{Source, Tag};
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// if comm.rank() == 0 {
    ///     let mut buf = [0i32; 16];
    ///     for _ in 1..comm.size() {
    ///         let st = comm.recv_tagged(&mut buf, Source::Any, Tag::Any)?;
    ///         println!("{} ints from rank {:?}, tag {:?}", st.count, st.source, st.tag);
    ///     }
    /// } else {
    ///     comm.send_tagged(&vec![1i32; comm.rank()], 0, comm.rank() as u32)?;
    /// }
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn recv_tagged<T: Element>(
        &self,
        buf: &mut [T],
        source: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<RecvStatus> {
        let mut raw = RecvStatus::raw_empty();
        self.recv_tagged_impl(buf, source.into(), tag.into(), &mut raw, ptr::null_mut())?;
        Ok(RecvStatus::from_raw(&raw))
    }

    /// Sends `send` to `dest` with `send_tag` and receives into `recv` from
    /// `source` with `recv_tag`, both in progress at once, so ranks that
    /// exchange never deadlock (MPI_Sendrecv); returns the receive's status.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// let (me, n) = (comm.rank(), comm.size());
    /// let mut from_left = [0usize as u64];
    /// let st = comm.sendrecv(&[me as u64], (me + 1) % n, 0, &mut from_left, (me + n - 1) % n, 0)?;
    /// assert_eq!(st.source, Some((me + n - 1) % n));
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn sendrecv<S: Element, R: Element>(
        &self,
        send: &[S],
        dest: impl Into<Dest>,
        send_tag: u32,
        recv: &mut [R],
        source: impl Into<Source>,
        recv_tag: impl Into<Tag>,
    ) -> Result<RecvStatus> {
        let dest = self.dest_arg(dest.into())?;
        let send_tag = Communicator::send_tag_arg(send_tag)?;
        let source = self.source_arg(source.into())?;
        let recv_tag = Communicator::tag_arg(recv_tag.into())?;
        let (mut n1, mut n2) = (0, 0);
        let s = Tensor::new(send.as_ptr(), send.len(), &mut n1);
        let r = Tensor::new(recv.as_mut_ptr(), recv.len(), &mut n2);
        let mut raw = RecvStatus::raw_empty();
        // SAFETY: both tensors describe live slices (recv exclusively
        // borrowed); raw is a valid place; blocking call, NULL options.
        self.call(ptr::null_mut(), |c, _| unsafe {
            sys::occl_sendrecv(
                s.ptr(),
                dest,
                send_tag,
                r.ptr(),
                source,
                recv_tag,
                c,
                ptr::null(),
                &mut raw,
            )
        })?;
        Ok(RecvStatus::from_raw(&raw))
    }

    /// Waits until a message from `source` with `tag` can be received,
    /// without receiving it (MPI_Probe); its status describes the whole
    /// message (`count` in the sender's element type), e.g. to size the
    /// buffer. A receive naming the status's source and tag then gets
    /// exactly that message. An [`ErrorKind::Mismatch`](crate::ErrorKind::Mismatch)
    /// error when every rank it could hear from moved on to a collective.
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// use omniccl::{Source, Tag};
    /// let st = comm.probe(Source::Any, Tag::Is(3))?;
    /// let mut buf = vec![0u8; st.count];
    /// comm.recv_tagged(&mut buf, st.source.unwrap(), 3)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn probe(&self, source: impl Into<Source>, tag: impl Into<Tag>) -> Result<RecvStatus> {
        let (source, tag) = (self.source_arg(source.into())?, Communicator::tag_arg(tag.into())?);
        let mut raw = RecvStatus::raw_empty();
        // SAFETY: live handle; raw is a valid place; NULL options.
        check(unsafe { sys::occl_probe(source, tag, self.as_raw(), ptr::null(), &mut raw) })?;
        Ok(RecvStatus::from_raw(&raw))
    }

    /// Whether a message from `source` with `tag` can be received now
    /// (MPI_Iprobe): `Some(status)` as [`probe`](Self::probe) gives, or
    /// `None`. Never waits.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// use omniccl::{Source, Tag};
    /// assert_eq!(comm.iprobe(Source::Any, Tag::Any)?, None);
    /// comm.send_tagged(&[5u8; 3], 0, 2)?;
    /// assert_eq!(comm.iprobe(Source::Any, Tag::Any)?.map(|s| s.count), Some(3));
    /// # comm.recv_tagged(&mut [0u8; 3], 0, 2)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iprobe(&self, source: impl Into<Source>, tag: impl Into<Tag>) -> Result<Option<RecvStatus>> {
        let (source, tag) = (self.source_arg(source.into())?, Communicator::tag_arg(tag.into())?);
        let mut raw = RecvStatus::raw_empty();
        let mut flag = 0;
        // SAFETY: live handle; flag and raw are valid places; NULL options.
        check(unsafe { sys::occl_iprobe(source, tag, self.as_raw(), ptr::null(), &mut flag, &mut raw) })?;
        Ok((flag != 0).then(|| RecvStatus::from_raw(&raw)))
    }

    /// Matched probe (MPI_Mprobe): waits for a message from `source` with
    /// `tag` and takes it out of matching; only the returned [`Message`]
    /// receives it (see there, also for what dropping it does).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.send_tagged(&[1i32], 0, 5)?;
    /// comm.send_tagged(&[2i32], 0, 5)?;
    /// let first = comm.mprobe(0, 5)?;            // the first [1], taken
    /// let mut buf = [0i32];
    /// comm.recv_tagged(&mut buf, 0, 5)?;         // so this gets [2]
    /// assert_eq!(buf, [2]);
    /// first.recv(&mut buf)?;
    /// assert_eq!(buf, [1]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn mprobe(&self, source: impl Into<Source>, tag: impl Into<Tag>) -> Result<Message<'_>> {
        let (source, tag) = (self.source_arg(source.into())?, Communicator::tag_arg(tag.into())?);
        let mut raw = RecvStatus::raw_empty();
        let mut handle = MESSAGE_NULL;
        // SAFETY: live handle; handle and raw are valid places; NULL options.
        check(unsafe { sys::occl_mprobe(source, tag, self.as_raw(), ptr::null(), &mut handle, &mut raw) })?;
        Ok(Message {
            comm: self,
            handle,
            status: RecvStatus::from_raw(&raw),
        })
    }

    /// Matched probe that does not wait (MPI_Improbe): `Some(message)` as
    /// [`mprobe`](Self::mprobe) gives, or `None` when no matching message
    /// has come.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// assert!(comm.improbe(omniccl::Source::Any, omniccl::Tag::Any)?.is_none());
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn improbe(&self, source: impl Into<Source>, tag: impl Into<Tag>) -> Result<Option<Message<'_>>> {
        let (source, tag) = (self.source_arg(source.into())?, Communicator::tag_arg(tag.into())?);
        let mut raw = RecvStatus::raw_empty();
        let mut handle = MESSAGE_NULL;
        let mut flag = 0;
        // SAFETY: live handle; flag, handle and raw are valid places.
        check(unsafe {
            sys::occl_improbe(
                source,
                tag,
                self.as_raw(),
                ptr::null(),
                &mut flag,
                &mut handle,
                &mut raw,
            )
        })?;
        Ok((flag != 0).then(|| Message {
            comm: self,
            handle,
            status: RecvStatus::from_raw(&raw),
        }))
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Non-blocking [`Communicator::send_tagged`] (MPI_Isend).
    ///
    /// ```no_run
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::Env)?;
    /// let (me, n) = (comm.rank(), comm.size());
    /// let mine = [me as u32];
    /// let mut from_left = [0u32];
    /// comm.scope(|s| {
    ///     let got = s.irecv_tagged(&mut from_left, (me + n - 1) % n, 7)?;
    ///     s.isend_tagged(&mine, (me + 1) % n, 7)?.wait()?;
    ///     let (_, status) = got.wait()?;
    ///     assert_eq!(status.tag, Some(7));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn isend_tagged<T: Element>(
        &'scope self,
        buf: &'scope [T],
        dest: impl Into<Dest>,
        tag: u32,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        self.comm().send_tagged_impl(buf, dest.into(), tag, false, &mut w)?;
        self.started(w, None, ())
    }

    /// Non-blocking [`Communicator::ssend`] (MPI_Issend): the request ends
    /// once a receive on `dest` has matched the message. To this rank
    /// itself it may be [cancelled](Request::cancel) while unmatched.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [0u8; 2];
    /// comm.scope(|s| {
    ///     let sent = s.issend(&[1u8, 2], 0, 0)?; // to itself
    ///     assert!(!sent.test()?);               // nobody has received it yet
    ///     s.comm().recv_tagged(&mut buf, 0, 0)?;
    ///     sent.wait()                            // now it completes
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn issend<T: Element>(
        &'scope self,
        buf: &'scope [T],
        dest: impl Into<Dest>,
        tag: u32,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        self.comm().send_tagged_impl(buf, dest.into(), tag, true, &mut w)?;
        self.started(w, None, ())
    }

    /// Non-blocking [`Communicator::recv_tagged`] (MPI_Irecv): its
    /// [`RecvRequest::wait`] returns `buf` and the [`RecvStatus`]; it can be
    /// [cancelled](RecvRequest::cancel) until a message matches it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut buf = [0f64; 3];
    /// comm.scope(|s| {
    ///     let req = s.irecv_tagged(&mut buf, omniccl::Source::Any, 4)?;
    ///     s.comm().send_tagged(&[0.5f64], 0, 4)?;
    ///     let (data, status) = req.wait()?;
    ///     assert_eq!((data[0], status.count, status.bytes), (0.5, 1, 8));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn irecv_tagged<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        source: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<RecvRequest<'scope, T>> {
        let mut w = ptr::null_mut();
        // With a handle the C call does not write the status; the request
        // reads it when it ends.
        let mut unused = RecvStatus::raw_empty();
        self.comm()
            .recv_tagged_impl(buf, source.into(), tag.into(), &mut unused, &mut w)?;
        self.started(w, None, buf).map(RecvRequest)
    }

    /// Non-blocking [`Message::recv`] (MPI_Imrecv): receives exactly
    /// `message` (which it takes; it must come from this scope's
    /// communicator) into `buf`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// comm.send_tagged(&[3u16, 4], 0, 6)?;
    /// let mut buf = [0u16; 2];
    /// comm.scope(|s| {
    ///     let msg = s.comm().mprobe(0, 6)?;
    ///     let (data, status) = s.imrecv(msg, &mut buf)?.wait()?;
    ///     assert_eq!((data, status.tag), (&mut [3u16, 4][..], Some(6)));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn imrecv<T: Element>(
        &'scope self,
        mut message: Message<'_>,
        buf: &'scope mut [T],
    ) -> Result<RecvRequest<'scope, T>> {
        if message.comm().as_raw() != self.comm().as_raw() {
            // Dropping it discards it on its own communicator.
            return Err(invalid(
                "imrecv: the message comes from a matched probe on another communicator than this scope's",
            ));
        }
        let mut w = ptr::null_mut();
        let mut unused = RecvStatus::raw_empty();
        self.comm().mrecv_impl(buf, message.handle_mut(), &mut unused, &mut w)?;
        self.started(w, None, buf).map(RecvRequest)
    }
}
