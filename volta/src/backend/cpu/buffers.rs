//! How kernels get the buffers they write: without a second page fault when
//! they add into zeros, and without zeroing what they overwrite.

/// `len` zeros to add into, written now. `vec![0.0; len]` leaves a large
/// buffer's pages unmapped (calloc); the first `+=` then reads the kernel's
/// shared zero page and its write copies it, a second fault that flushes the
/// page from every thread's TLB. Writing the zeros first faults each page once.
pub(crate) fn zeros_to_add_into<A: Copy + Default>(len: usize) -> Vec<A> {
    let mut out = Vec::with_capacity(len);
    out.resize(len, A::default());
    out
}

/// A chunk of an output being written, each element once (see [`filled_by`]).
pub(crate) type Unwritten<'a, E> = &'a mut [std::mem::MaybeUninit<E>];

/// A buffer of `len` values that `write` fills, every element of it, without
/// zeroing it first (a reused heap block would be cleared by `calloc` only to
/// be overwritten).
///
/// # Safety
/// `write` must initialise every element of the slice it is given.
pub(crate) unsafe fn filled_by<E>(
    len: usize,
    write: impl FnOnce(&mut [std::mem::MaybeUninit<E>]),
) -> Vec<E> {
    let mut out = Vec::with_capacity(len);
    write(&mut out.spare_capacity_mut()[..len]);
    // SAFETY: the caller's `write` initialised all `len` elements.
    unsafe { out.set_len(len) };
    out
}
