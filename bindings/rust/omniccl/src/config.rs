//! How a communicator is created: [`InitMethod`], [`Config`], [`UniqueId`].

use std::ffi::CString;
use std::path::PathBuf;
use std::time::Duration;

use omniccl_sys as sys;

use crate::error::{Result, check, invalid};

/// Where the ranks of a new communicator meet (the rendezvous).
///
/// ```no_run
/// use omniccl::{Communicator, InitMethod};
/// // Under omniccl-run, torchrun, mpirun or srun:
/// let comm = Communicator::init(InitMethod::Env)?;
/// # Ok::<(), omniccl::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum InitMethod {
    /// `env://`: `MASTER_ADDR`/`MASTER_PORT`, rank and size from the
    /// launcher's variables (`RANK`/`WORLD_SIZE`, `OMPI_COMM_WORLD_*`,
    /// `PMI_*`, `SLURM_*`).
    Env,
    /// `tcp://addr`: rank 0 serves the rendezvous on `addr` (`host:port`,
    /// IPv6 as `[::1]:29500`).
    Tcp {
        /// `host:port` where rank 0 listens.
        addr: String,
        /// This process's rank, `0..world_size`.
        rank: usize,
        /// Number of ranks.
        world_size: usize,
    },
    /// `file://path`: a directory every rank can see (absolute path).
    File {
        /// The rendezvous directory (absolute).
        path: PathBuf,
        /// This process's rank, `0..world_size`.
        rank: usize,
        /// Number of ranks.
        world_size: usize,
    },
    /// An id made by [`UniqueId::new`] in one process and shared out of band.
    UniqueId {
        /// The shared id.
        id: UniqueId,
        /// This process's rank, `0..world_size`.
        rank: usize,
        /// Number of ranks.
        world_size: usize,
    },
}

/// Rendezvous information made by one process ([`UniqueId::new`]) and sent to
/// every rank out of band (NCCL's `ncclUniqueId`); 128 opaque bytes.
///
/// ```
/// let id = omniccl::UniqueId::new()?;
/// let bytes = *id.as_bytes();          // send these to the other ranks
/// let same = omniccl::UniqueId::from_bytes(bytes);
/// assert_eq!(same.as_bytes(), id.as_bytes());
/// # Ok::<(), omniccl::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId([u8; sys::OCCL_UNIQUE_ID_BYTES as usize]);

impl UniqueId {
    /// Creates an id. This process serves the rendezvous until it exits, so
    /// it must stay alive while the ranks initialise.
    ///
    /// ```
    /// let id = omniccl::UniqueId::new()?;
    /// assert_ne!(id.as_bytes(), &[0u8; 128]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn new() -> Result<UniqueId> {
        let mut raw = sys::occl_unique_id_t {
            internal: [0; sys::OCCL_UNIQUE_ID_BYTES as usize],
        };
        // SAFETY: raw is a valid, writable occl_unique_id_t.
        check(unsafe { sys::occl_get_unique_id(&mut raw) })?;
        Ok(UniqueId(raw.internal.map(|c| c as u8)))
    }

    /// The id received from another process.
    ///
    /// ```
    /// let id = omniccl::UniqueId::from_bytes([0; 128]);
    /// assert_eq!(id.as_bytes().len(), 128);
    /// ```
    pub fn from_bytes(bytes: [u8; sys::OCCL_UNIQUE_ID_BYTES as usize]) -> UniqueId {
        UniqueId(bytes)
    }

    /// The bytes to share with the other ranks.
    ///
    /// ```
    /// let id = omniccl::UniqueId::from_bytes([7; 128]);
    /// assert_eq!(id.as_bytes()[0], 7);
    /// ```
    pub fn as_bytes(&self) -> &[u8; sys::OCCL_UNIQUE_ID_BYTES as usize] {
        &self.0
    }

    pub(crate) fn to_raw(self) -> sys::occl_unique_id_t {
        sys::occl_unique_id_t {
            internal: self.0.map(|b| b as _),
        }
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The id carries the job's secret: never print it.
        f.write_str("UniqueId(..)")
    }
}

/// Communicator options; unset fields take the environment setting
/// (`OMNICCL_TIMEOUT`, `OMNICCL_TRANSPORT`, `OMNICCL_ALGO`), else the default.
///
/// ```
/// use std::time::Duration;
/// let config = omniccl::Config::new()
///     .timeout(Duration::from_secs(30))
///     .transport("shm")
///     .algorithm("all_reduce=ring");
/// # let _ = config;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Config {
    timeout: Option<Duration>,
    transport: Option<String>,
    algorithm: Option<String>,
}

impl Config {
    /// A configuration with every field unset.
    ///
    /// ```
    /// let config = omniccl::Config::new();
    /// # let _ = config;
    /// ```
    pub fn new() -> Config {
        Config::default()
    }

    /// The deadline of each blocking call (default 600 s). Whole milliseconds;
    /// at least 1 ms.
    ///
    /// ```
    /// let config = omniccl::Config::new().timeout(std::time::Duration::from_secs(5));
    /// # let _ = config;
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Config {
        self.timeout = Some(timeout);
        self
    }

    /// `"auto"`, `"shm"` or `"tcp"`.
    ///
    /// ```
    /// let config = omniccl::Config::new().transport("tcp");
    /// # let _ = config;
    /// ```
    pub fn transport(mut self, transport: impl Into<String>) -> Config {
        self.transport = Some(transport.into());
        self
    }

    /// Algorithm override: a name for every collective that has it
    /// (`"ring"`), or a list (`"all_reduce=ring,broadcast=tree"`).
    ///
    /// ```
    /// let config = omniccl::Config::new().algorithm("ring");
    /// # let _ = config;
    /// ```
    pub fn algorithm(mut self, algorithm: impl Into<String>) -> Config {
        self.algorithm = Some(algorithm.into());
        self
    }

    /// The C struct, with the strings it points to (keep both alive).
    pub(crate) fn to_raw(&self) -> Result<(sys::occl_config_t, Vec<CString>)> {
        let mut raw = sys::occl_config_init();
        let mut strings = Vec::new();
        if let Some(t) = self.timeout {
            let ms = i64::try_from(t.as_millis()).map_err(|_| invalid(format!("timeout {t:?} is too long")))?;
            if ms < 1 {
                return Err(invalid(format!("timeout {t:?} is shorter than 1 ms")));
            }
            raw.timeout_ms = ms;
        }
        for (value, field, name) in [
            (&self.transport, &mut raw.transport, "transport"),
            (&self.algorithm, &mut raw.algorithm, "algorithm"),
        ] {
            if let Some(v) = value {
                let c = CString::new(v.as_str()).map_err(|_| invalid(format!("{name} '{v}' contains a NUL byte")))?;
                *field = c.as_ptr();
                strings.push(c);
            }
        }
        Ok((raw, strings))
    }
}
