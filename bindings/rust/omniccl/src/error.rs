//! [`Error`]: a status kind from the C ABI plus the library's message.

use std::ffi::CStr;
use std::fmt;

use omniccl_sys as sys;

/// What kind of failure an [`Error`] is: one variant per `occl_status_t`.
///
/// ```
/// use omniccl::{Communicator, ErrorKind, InitMethod};
/// let err = Communicator::init(InitMethod::Tcp { addr: "no-port".into(), rank: 0, world_size: 1 })
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument is wrong (bad length, rank, root, NULL, non-contiguous...).
    InvalidArgument,
    /// Well-formed but not supported (e.g. a device the library cannot use).
    Unsupported,
    /// A deadline passed; the message names the ranks that did not arrive.
    Timeout,
    /// A peer exited, was killed or disconnected.
    PeerFailure,
    /// Ranks called different operations; the message names ranks and fields.
    Mismatch,
    /// An operating-system call failed; the message carries the OS error.
    System,
    /// A bug in OmniCCL; please report it with the message.
    Internal,
    /// The communicator was aborted.
    Aborted,
    /// The operation has not completed yet.
    InProgress,
    /// Header and library versions do not fit.
    Version,
    /// Memory could not be allocated.
    OutOfMemory,
    /// The communicator is unusable after an earlier error.
    CommFailed,
    /// A blocking call was ended by its interrupt callback.
    Interrupted,
    /// A received message was longer than the receive buffer (which holds
    /// its first part); the communicator stays usable.
    Truncated,
    /// A status this crate does not know (from a newer library).
    Unknown(i32),
}

impl ErrorKind {
    /// The kind of a non-success `occl_status_t`.
    ///
    /// ```
    /// use omniccl::ErrorKind;
    /// assert_eq!(ErrorKind::from_status(omniccl::sys::OCCL_ERR_TIMEOUT), ErrorKind::Timeout);
    /// ```
    pub fn from_status(status: sys::occl_status_t) -> ErrorKind {
        match status {
            sys::OCCL_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::OCCL_ERR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::OCCL_ERR_TIMEOUT => ErrorKind::Timeout,
            sys::OCCL_ERR_PEER_FAILURE => ErrorKind::PeerFailure,
            sys::OCCL_ERR_MISMATCH => ErrorKind::Mismatch,
            sys::OCCL_ERR_SYSTEM => ErrorKind::System,
            sys::OCCL_ERR_INTERNAL => ErrorKind::Internal,
            sys::OCCL_ERR_ABORTED => ErrorKind::Aborted,
            sys::OCCL_ERR_IN_PROGRESS => ErrorKind::InProgress,
            sys::OCCL_ERR_VERSION => ErrorKind::Version,
            sys::OCCL_ERR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::OCCL_ERR_COMM_FAILED => ErrorKind::CommFailed,
            sys::OCCL_ERR_INTERRUPTED => ErrorKind::Interrupted,
            sys::OCCL_ERR_TRUNCATED => ErrorKind::Truncated,
            other => ErrorKind::Unknown(other as i32),
        }
    }
}

/// A failed OmniCCL call: its [`ErrorKind`] and a message naming what was
/// wrong (argument, rank, peer, operation, sequence number, OS error, hint).
///
/// ```
/// use omniccl::{Communicator, ErrorKind, InitMethod};
/// let err = Communicator::init(InitMethod::File { path: "relative/dir".into(), rank: 0, world_size: 1 })
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// assert!(err.message().contains("absolute path"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with `message` (used for checks made in Rust).
    ///
    /// ```
    /// let e = omniccl::Error::new(omniccl::ErrorKind::InvalidArgument, "bad length");
    /// assert_eq!(e.to_string(), "invalid argument: bad length");
    /// ```
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    ///
    /// ```
    /// let e = omniccl::Error::new(omniccl::ErrorKind::Timeout, "late");
    /// assert_eq!(e.kind(), omniccl::ErrorKind::Timeout);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The library's (or this crate's) description of what was wrong.
    ///
    /// ```
    /// let e = omniccl::Error::new(omniccl::ErrorKind::Timeout, "rank 3 did not arrive");
    /// assert_eq!(e.message(), "rank 3 did not arrive");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Timeout => "timeout",
            ErrorKind::PeerFailure => "peer failure",
            ErrorKind::Mismatch => "mismatched calls",
            ErrorKind::System => "system error",
            ErrorKind::Internal => "internal error",
            ErrorKind::Aborted => "aborted",
            ErrorKind::InProgress => "in progress",
            ErrorKind::Version => "version mismatch",
            ErrorKind::OutOfMemory => "out of memory",
            ErrorKind::CommFailed => "communicator failed",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Truncated => "message truncated",
            ErrorKind::Unknown(_) => "unknown status",
        };
        write!(f, "{kind}: {}", self.message)
    }
}

impl std::error::Error for Error {}

/// `Result<T, omniccl::Error>`.
///
/// ```
/// fn ranks(comm: &omniccl::Communicator) -> omniccl::Result<usize> {
///     comm.barrier()?;
///     Ok(comm.size())
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
/// assert_eq!(ranks(&comm)?, 1);
/// # Ok::<(), omniccl::Error>(())
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a status into a `Result`, reading this thread's `occl_last_error()`
/// right away (the next call would overwrite it).
pub(crate) fn check(status: sys::occl_status_t) -> Result<()> {
    if status == sys::OCCL_SUCCESS {
        return Ok(());
    }
    // SAFETY: occl_last_error returns a valid NUL-terminated string owned by
    // the library, valid until the next occl_* call on this thread; it is
    // copied before any other call.
    let message = unsafe { CStr::from_ptr(sys::occl_last_error()) }
        .to_string_lossy()
        .into_owned();
    let message = if message.is_empty() {
        // SAFETY: occl_status_string never returns NULL and its strings are static.
        unsafe { CStr::from_ptr(sys::occl_status_string(status)) }
            .to_string_lossy()
            .into_owned()
    } else {
        message
    };
    Err(Error::new(ErrorKind::from_status(status), message))
}

/// An `InvalidArgument` error made in Rust.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}
