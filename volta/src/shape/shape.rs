//! The `Shape` trait: tuples of dims, rank 0 to 6.
use super::checks::ShapeError;
use super::dim::{Const, Dim};
use std::fmt::Debug;

/// The highest rank Volta supports.
pub const MAX_RANK: usize = 6;

/// Run-time sizes of a shape (at most [`MAX_RANK`] dims, no heap allocation).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dims {
    len: u8,
    dims: [usize; MAX_RANK],
}

impl Dims {
    /// Dims from a slice; panics above [`MAX_RANK`] (a programmer error).
    pub fn new(dims: &[usize]) -> Self {
        assert!(
            dims.len() <= MAX_RANK,
            "rank {} exceeds Volta's maximum rank {MAX_RANK}",
            dims.len()
        );
        let mut d = [0; MAX_RANK];
        d[..dims.len()].copy_from_slice(dims);
        Dims {
            len: dims.len() as u8,
            dims: d,
        }
    }
    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.iter().product()
    }
}

impl std::ops::Deref for Dims {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.dims[..self.len as usize]
    }
}
impl std::ops::DerefMut for Dims {
    fn deref_mut(&mut self) -> &mut [usize] {
        &mut self.dims[..self.len as usize]
    }
}
impl Debug for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", &**self)
    }
}

/// A tensor shape: a tuple of [`Dim`]s such as `(Const<3>, usize)`.
pub trait Shape: 'static + Copy + Debug + Send + Sync {
    /// Number of dims.
    const RANK: usize;
    /// Each dim's size where known at compile time.
    const STATIC_DIMS: &'static [Option<usize>];
    /// The run-time sizes.
    fn dims(&self) -> Dims;
    /// Builds the shape from run-time sizes, checking every static dim.
    fn from_dims(dims: &[usize]) -> Result<Self, ShapeError>;
    /// Number of elements.
    fn numel(&self) -> usize {
        self.dims().numel()
    }
}

/// A shape whose dims are all known at compile time.
pub trait ConstShape: Shape + Default {
    /// Number of elements.
    const NUMEL: usize;
}

macro_rules! tuple_shape {
    ($rank:literal; $($d:ident $i:tt),*) => {
        impl<$($d: Dim),*> Shape for ($($d,)*) {
            const RANK: usize = $rank;
            const STATIC_DIMS: &'static [Option<usize>] = &[$($d::STATIC),*];
            #[allow(clippy::unused_unit)]
            fn dims(&self) -> Dims {
                Dims::new(&[$(self.$i.size()),*])
            }
            fn from_dims(dims: &[usize]) -> Result<Self, ShapeError> {
                let mismatch = || ShapeError::Mismatch {
                    expected: Self::describe(),
                    found: dims.to_vec(),
                };
                if dims.len() != $rank {
                    return Err(mismatch());
                }
                Ok(($($d::from_size(dims[$i]).ok_or_else(mismatch)?,)*))
            }
        }
        impl<$($d: super::ConstDim),*> ConstShape for ($($d,)*) {
            const NUMEL: usize = 1 $(* $d::SIZE)*;
        }
    };
}

tuple_shape!(0;);
tuple_shape!(1; D0 0);
tuple_shape!(2; D0 0, D1 1);
tuple_shape!(3; D0 0, D1 1, D2 2);
tuple_shape!(4; D0 0, D1 1, D2 2, D3 3);
tuple_shape!(5; D0 0, D1 1, D2 2, D3 3, D4 4);
tuple_shape!(6; D0 0, D1 1, D2 2, D3 3, D4 4, D5 5);

/// Helpers shared by the tuple impls.
pub(crate) trait DescribeShape {
    fn describe() -> String;
}
impl<S: Shape> DescribeShape for S {
    /// `[3, ?, 4]`: static sizes, `?` for dynamic ones.
    fn describe() -> String {
        let parts: Vec<String> = S::STATIC_DIMS
            .iter()
            .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
            .collect();
        format!("[{}]", parts.join(", "))
    }
}

/// A scalar (rank 0).
pub type Rank0 = ();
/// A vector of `M`.
pub type Rank1<const M: usize> = (Const<M>,);
/// An `M × N` matrix.
pub type Rank2<const M: usize, const N: usize> = (Const<M>, Const<N>);
/// A rank-3 shape.
pub type Rank3<const M: usize, const N: usize, const O: usize> = (Const<M>, Const<N>, Const<O>);
/// A rank-4 shape (e.g. NCHW images).
pub type Rank4<const M: usize, const N: usize, const O: usize, const P: usize> =
    (Const<M>, Const<N>, Const<O>, Const<P>);
/// A rank-5 shape.
pub type Rank5<const M: usize, const N: usize, const O: usize, const P: usize, const Q: usize> =
    (Const<M>, Const<N>, Const<O>, Const<P>, Const<Q>);
/// A rank-6 shape.
pub type Rank6<
    const M: usize,
    const N: usize,
    const O: usize,
    const P: usize,
    const Q: usize,
    const R: usize,
> = (Const<M>, Const<N>, Const<O>, Const<P>, Const<Q>, Const<R>);
