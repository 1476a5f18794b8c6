//! Axis markers: `Axis<1>`, `Axes2<0, 2>`, … name the axes an op works along.

/// A set of axes, listed at run time by [`Axes::LIST`].
pub trait Axes: 'static + Copy + Default + Send + Sync {
    /// The axes, in the order the type names them.
    const LIST: &'static [usize];
}

/// A single axis.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axis<const I: usize>;
/// Two axes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes2<const I: usize, const J: usize>;
/// Three axes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes3<const I: usize, const J: usize, const K: usize>;
/// Four axes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes4<const I: usize, const J: usize, const K: usize, const L: usize>;
/// Five axes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes5<const I: usize, const J: usize, const K: usize, const L: usize, const M: usize>;
/// Six axes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Axes6<
    const I: usize,
    const J: usize,
    const K: usize,
    const L: usize,
    const M: usize,
    const N: usize,
>;

impl<const I: usize> Axes for Axis<I> {
    const LIST: &'static [usize] = &[I];
}
impl<const I: usize, const J: usize> Axes for Axes2<I, J> {
    const LIST: &'static [usize] = &[I, J];
}
impl<const I: usize, const J: usize, const K: usize> Axes for Axes3<I, J, K> {
    const LIST: &'static [usize] = &[I, J, K];
}
impl<const I: usize, const J: usize, const K: usize, const L: usize> Axes for Axes4<I, J, K, L> {
    const LIST: &'static [usize] = &[I, J, K, L];
}
impl<const I: usize, const J: usize, const K: usize, const L: usize, const M: usize> Axes
    for Axes5<I, J, K, L, M>
{
    const LIST: &'static [usize] = &[I, J, K, L, M];
}
impl<const I: usize, const J: usize, const K: usize, const L: usize, const M: usize, const N: usize>
    Axes for Axes6<I, J, K, L, M, N>
{
    const LIST: &'static [usize] = &[I, J, K, L, M, N];
}
