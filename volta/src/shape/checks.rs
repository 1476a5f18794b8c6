//! Size checks shared by compile time (`const fn`s used in `const { assert!(..) }`)
//! and run time (the typed [`ShapeError`]).
use std::fmt;

/// A shape check that failed at run time: dynamic dims, data of the wrong length,
/// a checkpoint with other shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// The run-time dims do not fit the shape type.
    Mismatch {
        /// The shape the type asks for (`?` for dynamic dims).
        expected: String,
        /// The dims that were given.
        found: Vec<usize>,
    },
    /// A buffer holds the wrong number of elements for the shape.
    DataLength {
        /// Elements the shape needs.
        expected: usize,
        /// Elements the buffer holds.
        found: usize,
    },
    /// An attention mask's ranges of keys (padding) do not fit the batch: it
    /// needs one range per batch element, each inside `0..keys`.
    KeyRanges {
        /// Batch elements.
        batch: usize,
        /// Keys per batch element.
        keys: usize,
        /// The ranges that were given.
        found: Vec<std::ops::Range<usize>>,
    },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::Mismatch { expected, found } => {
                write!(
                    f,
                    "shape mismatch: the type expects {expected} but the dims are {found:?}"
                )
            }
            ShapeError::DataLength { expected, found } => write!(
                f,
                "data length mismatch: the shape holds {expected} elements but {found} were given"
            ),
            ShapeError::KeyRanges { batch, keys, found } => write!(
                f,
                "key ranges mismatch: a batch of {batch} over {keys} keys needs one range of \
                 keys per batch element, each inside 0..{keys}, but the ranges are {found:?}"
            ),
        }
    }
}
impl std::error::Error for ShapeError {}

/// Whether two element counts can be equal (unknown counts pass; run time checks them).
pub(crate) const fn numel_ok(a: &[Option<usize>], b: &[Option<usize>]) -> bool {
    match (static_numel(a), static_numel(b)) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

const fn static_numel(dims: &[Option<usize>]) -> Option<usize> {
    let mut n = 1;
    let mut i = 0;
    while i < dims.len() {
        match dims[i] {
            Some(d) => n *= d,
            None => return None,
        }
        i += 1;
    }
    Some(n)
}

/// Whether every dim of `src` can expand to the dim of `dst`: equal, or 1.
pub(crate) const fn expand_ok(src: &[Option<usize>], dst: &[Option<usize>]) -> bool {
    if src.len() != dst.len() {
        return false;
    }
    let mut i = 0;
    while i < src.len() {
        if let (Some(s), Some(d)) = (src[i], dst[i])
            && s != d
            && s != 1
        {
            return false;
        }
        i += 1;
    }
    true
}
