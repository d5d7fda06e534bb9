//! `ndarray` arrays as buffers (feature `ndarray`). Arrays must be in
//! standard (row-major, contiguous) layout; others are an `InvalidArgument`
//! error rather than a silent copy.

use ndarray::{ArrayBase, Data, DataMut, Dimension};

use crate::comm::Communicator;
use crate::element::Element;
use crate::error::{Result, invalid};
use crate::op::ReduceOp;

fn slice<'a, S: Data<Elem = T>, D: Dimension, T>(what: &str, a: &'a ArrayBase<S, D>) -> Result<&'a [T]> {
    a.as_slice()
        .ok_or_else(|| invalid(format!("{what}: the array is not contiguous in standard layout")))
}

fn slice_mut<'a, S: DataMut<Elem = T>, D: Dimension, T>(what: &str, a: &'a mut ArrayBase<S, D>) -> Result<&'a mut [T]> {
    a.as_slice_mut()
        .ok_or_else(|| invalid(format!("{what}: the array is not contiguous in standard layout")))
}

impl Communicator {
    /// [`all_reduce_in_place`](Communicator::all_reduce_in_place) on an
    /// `ndarray` array (standard layout).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut grads = ndarray::Array2::<f32>::ones((2, 3));
    /// comm.all_reduce_array(&mut grads, omniccl::ReduceOp::Avg)?;
    /// assert_eq!(grads, ndarray::Array2::<f32>::ones((2, 3)));
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_reduce_array<S, D, T>(&self, array: &mut ArrayBase<S, D>, op: ReduceOp) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        T: Element,
    {
        self.all_reduce_in_place(slice_mut("all_reduce_array", array)?, op)
    }

    /// [`broadcast`](Communicator::broadcast) of an `ndarray` array.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mut w = ndarray::arr1(&[1i64, 2, 3]);
    /// comm.broadcast_array(&mut w, 0)?;
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn broadcast_array<S, D, T>(&self, array: &mut ArrayBase<S, D>, root: usize) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        T: Element,
    {
        self.broadcast(slice_mut("broadcast_array", array)?, root)
    }

    /// [`all_gather`](Communicator::all_gather) from an array into an array
    /// with `size()` times as many elements.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let comm = omniccl::Communicator::init(omniccl::InitMethod::File { path: dir.path().into(), rank: 0, world_size: 1 })?;
    /// let mine = ndarray::arr1(&[1u8, 2]);
    /// let mut all = ndarray::Array2::<u8>::zeros((comm.size(), 2));
    /// comm.all_gather_array(&mine, &mut all)?;
    /// assert_eq!(all.row(0).to_vec(), [1, 2]);
    /// # Ok::<(), omniccl::Error>(())
    /// ```
    pub fn all_gather_array<S1, D1, S2, D2, T>(
        &self,
        send: &ArrayBase<S1, D1>,
        recv: &mut ArrayBase<S2, D2>,
    ) -> Result<()>
    where
        S1: Data<Elem = T>,
        D1: Dimension,
        S2: DataMut<Elem = T>,
        D2: Dimension,
        T: Element,
    {
        self.all_gather(
            slice("all_gather_array send", send)?,
            slice_mut("all_gather_array recv", recv)?,
        )
    }
}
