//! Non-blocking forms of the [`device`](crate::device) collectives, started
//! in a [`Scope`]. Each returns a [`Request`] whose `wait()` returns once the
//! operation has ended: for CUDA buffers, once its results are on the device
//! (NCCL's work handle). Buffers a call writes are borrowed `mut` until the
//! scope ends, so two pending operations can never write the same
//! [`DeviceBuffer`].

use std::ptr;

use crate::device::{CallOptions, DeviceBuffer};
use crate::error::Result;
use crate::op::ReduceOp;
use crate::scope::{Request, Scope};

impl<'scope> Scope<'scope, '_> {
    /// Non-blocking [`all_reduce_device`](crate::Communicator::all_reduce_device).
    ///
    /// ```
    /// use omniccl::device::{CallOptions, DeviceBuffer};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let (mut a, mut b) = ([1u32, 2], [0u32; 2]);
    /// let (send, mut recv) = (DeviceBuffer::host(&mut a), DeviceBuffer::host(&mut b));
    /// comm.scope(|s| {
    ///     let req = s.iall_reduce_device(&send, &mut recv, omniccl::ReduceOp::Sum, &CallOptions::new())?;
    ///     req.wait() // for CUDA buffers: the results are on the device
    /// })?;
    /// # drop((send, recv));
    /// assert_eq!(b, [1, 2]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    ///
    /// Two pending operations cannot write one buffer:
    ///
    /// ```compile_fail,E0499
    /// use omniccl::device::{CallOptions, DeviceBuffer};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let (mut a, mut b) = ([1u32, 2], [0u32; 2]);
    /// let (send, mut recv) = (DeviceBuffer::host(&mut a), DeviceBuffer::host(&mut b));
    /// let o = CallOptions::new();
    /// comm.scope(|s| {
    ///     let first = s.iall_reduce_device(&send, &mut recv, omniccl::ReduceOp::Sum, &o)?;
    ///     let second = s.iall_reduce_device(&send, &mut recv, omniccl::ReduceOp::Max, &o)?; // error
    ///     first.wait()?;
    ///     second.wait()
    /// })?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn iall_reduce_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: &'scope mut DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().all_reduce_device_impl(send, recv, op, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking in-place [`all_reduce_device`](crate::Communicator::all_reduce_device).
    pub fn iall_reduce_device_in_place(
        &'scope self,
        buf: &'scope mut DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().all_reduce_device_impl(buf, buf, op, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`broadcast_device`](crate::Communicator::broadcast_device).
    pub fn ibroadcast_device(
        &'scope self,
        buf: &'scope mut DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().broadcast_device_impl(buf, root, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`reduce_device`](crate::Communicator::reduce_device).
    pub fn ireduce_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: Option<&'scope mut DeviceBuffer<'_>>,
        op: ReduceOp,
        root: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self
            .comm()
            .reduce_device_impl(send, recv.map(|r| &*r), op, root, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`scatter_device`](crate::Communicator::scatter_device).
    pub fn iscatter_device(
        &'scope self,
        send: Option<&'scope DeviceBuffer<'_>>,
        recv: &'scope mut DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().scatter_device_impl(send, recv, root, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`gather_device`](crate::Communicator::gather_device).
    pub fn igather_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: Option<&'scope mut DeviceBuffer<'_>>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self
            .comm()
            .gather_device_impl(send, recv.map(|r| &*r), root, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`all_gather_device`](crate::Communicator::all_gather_device).
    pub fn iall_gather_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: &'scope mut DeviceBuffer<'_>,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().all_gather_device_impl(send, recv, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`reduce_scatter_device`](crate::Communicator::reduce_scatter_device).
    pub fn ireduce_scatter_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: &'scope mut DeviceBuffer<'_>,
        op: ReduceOp,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().reduce_scatter_device_impl(send, recv, op, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`all_to_all_device`](crate::Communicator::all_to_all_device).
    pub fn iall_to_all_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: &'scope mut DeviceBuffer<'_>,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().all_to_all_device_impl(send, recv, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`barrier_with`](crate::Communicator::barrier_with).
    pub fn ibarrier_with(&'scope self, opts: &CallOptions) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().barrier_with_impl(opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`all_gatherv_device`](crate::Communicator::all_gatherv_device).
    pub fn iall_gatherv_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: &'scope mut DeviceBuffer<'_>,
        counts: &[usize],
        displs: Option<&[usize]>,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self
            .comm()
            .all_gatherv_device_impl(send, recv, counts, displs, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`all_to_allv_device`](crate::Communicator::all_to_allv_device).
    #[allow(clippy::too_many_arguments)] // the blocking call's arguments
    pub fn iall_to_allv_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        send_counts: &[usize],
        send_displs: Option<&[usize]>,
        recv: &'scope mut DeviceBuffer<'_>,
        recv_counts: &[usize],
        recv_displs: Option<&[usize]>,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().all_to_allv_device_impl(
            send,
            send_counts,
            send_displs,
            recv,
            recv_counts,
            recv_displs,
            opts,
            &mut w,
        )?;
        self.started(w, op, ())
    }

    /// Non-blocking [`gatherv_device`](crate::Communicator::gatherv_device).
    pub fn igatherv_device(
        &'scope self,
        send: &'scope DeviceBuffer<'_>,
        recv: Option<&'scope mut DeviceBuffer<'_>>,
        counts: &[usize],
        displs: Option<&[usize]>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self
            .comm()
            .gatherv_device_impl(send, recv.map(|r| &*r), counts, displs, root, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`scatterv_device`](crate::Communicator::scatterv_device).
    pub fn iscatterv_device(
        &'scope self,
        send: Option<&'scope DeviceBuffer<'_>>,
        counts: &[usize],
        displs: Option<&[usize]>,
        recv: &'scope mut DeviceBuffer<'_>,
        root: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self
            .comm()
            .scatterv_device_impl(send, counts, displs, recv, root, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`send_device`](crate::Communicator::send_device).
    pub fn isend_device(
        &'scope self,
        buf: &'scope DeviceBuffer<'_>,
        peer: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().send_device_impl(buf, peer, opts, &mut w)?;
        self.started(w, op, ())
    }

    /// Non-blocking [`recv_device`](crate::Communicator::recv_device).
    pub fn irecv_device(
        &'scope self,
        buf: &'scope mut DeviceBuffer<'_>,
        peer: usize,
        opts: &CallOptions,
    ) -> Result<Request<'scope>> {
        let mut w = ptr::null_mut();
        let op = self.comm().recv_device_impl(buf, peer, opts, &mut w)?;
        self.started(w, op, ())
    }
}
