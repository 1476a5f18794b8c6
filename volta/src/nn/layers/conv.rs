//! 2-D convolution over NCHW images.
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::random::Rng;
use crate::shape::{Const, Dim, Rank1};
use crate::tensor::Tensor;
use volta_kernels::Window2d;

/// Stride, padding, dilation, groups and bias of a [`Conv2d`] (PyTorch's defaults:
/// 1, 0, 1, 1, with bias). Set fields with the builder methods:
/// `Conv2dOptions::default().stride(2).padding(1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between window positions, `[height, width]`.
    pub stride: [usize; 2],
    /// Zeros added on both sides of the input, `[height, width]`.
    pub padding: [usize; 2],
    /// Spacing between kernel taps, `[height, width]`.
    pub dilation: [usize; 2],
    /// Channel groups: each output channel sees `I / groups` input channels.
    pub groups: usize,
    /// Whether a bias is added to each output channel.
    pub bias: bool,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
            bias: true,
        }
    }
}

impl Conv2dOptions {
    /// The same stride along both axes.
    pub fn stride(mut self, s: usize) -> Self {
        self.stride = [s, s];
        self
    }
    /// The same padding along both axes.
    pub fn padding(mut self, p: usize) -> Self {
        self.padding = [p, p];
        self
    }
    /// The same dilation along both axes.
    pub fn dilation(mut self, d: usize) -> Self {
        self.dilation = [d, d];
        self
    }
    /// Channel groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    /// With or without a bias.
    pub fn bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
}

/// A 2-D convolution from `I` to `O` channels with a `KH × KW` kernel:
/// `(B, I, H, W) → (B, O, OH, OW)` with `OH = ⌊(H + 2p − d(KH − 1) − 1)/s⌋ + 1`
/// (likewise `OW`), as PyTorch's `nn.Conv2d`.
///
/// Computed as im2col (an unfold kernel) feeding the matrix product, so the GPU
/// runs its tiled matmul; the backward pass is two products and a fold. Channel
/// counts and kernel size are in the type; the output size is named by the
/// caller's result type (a `model!` block computes it), checked at run time.
///
/// ```
/// use volta::prelude::*;
/// let mut rng = Rng::seed(0);
/// let conv = Conv2d::<3, 8, 3, 3>::with_options(Conv2dOptions::default().padding(1), &mut rng);
/// let x = Tensor::<Rank4<2, 3, 5, 5>>::randn(&mut rng);
/// let y: Tensor<Rank4<2, 8, 5, 5>> = conv.forward(&x);
/// assert_eq!(conv.weight.dims(), &[8, 3, 3, 3]);
/// # let _ = y;
/// ```
#[derive(Clone, Debug)]
pub struct Conv2d<
    const I: usize,
    const O: usize,
    const KH: usize,
    const KW: usize,
    D: Backend<E> = Cpu,
    E: Float = f32,
> {
    /// The `(O, I / groups, KH, KW)` kernel, PyTorch's layout.
    pub weight: Tensor<(Const<O>, usize, Const<KH>, Const<KW>), D, E>,
    /// One bias per output channel, when the layer has them.
    pub bias: Option<Tensor<Rank1<O>, D, E>>,
    options: Conv2dOptions,
}

impl<const I: usize, const O: usize, const KH: usize, const KW: usize, D: Backend<E>, E: Float>
    Conv2d<I, O, KH, KW, D, E>
{
    /// A layer with stride 1, no padding, bias, and PyTorch's initialisation.
    pub fn new(rng: &mut Rng) -> Self {
        Self::with_options(Conv2dOptions::default(), rng)
    }

    /// A layer with `options`, initialised as PyTorch does (weight and bias uniform
    /// in `±1/√fan_in`, `fan_in = I / groups · KH · KW`).
    ///
    /// # Panics
    /// When `groups` does not divide `I` and `O`, or a stride or dilation is 0.
    pub fn with_options(options: Conv2dOptions, rng: &mut Rng) -> Self {
        let g = options.groups;
        assert!(
            g > 0 && I.is_multiple_of(g) && O.is_multiple_of(g),
            "Conv2d<{I}, {O}, …>: groups = {g} must divide both channel counts"
        );
        assert!(
            options
                .stride
                .iter()
                .chain(&options.dilation)
                .all(|&v| v > 0),
            "Conv2d: stride and dilation must be at least 1, got {options:?}"
        );
        let fan_in = I / g * KH * KW;
        let bound = 1.0 / (fan_in as f64).sqrt();
        let (lo, hi) = (E::from_f64(-bound), E::from_f64(bound));
        let weight = Tensor::uniform_shaped((Const, I / g, Const, Const), lo, hi, rng);
        let bias = options
            .bias
            .then(|| Tensor::uniform(lo, hi, rng).requires_grad());
        Conv2d {
            weight: weight.requires_grad(),
            bias,
            options,
        }
    }

    /// A layer with the given kernel and bias (tracked as given; `options.bias` is
    /// taken from whether `bias` is given). The kernel's second dim must be
    /// `I / options.groups`.
    ///
    /// # Panics
    /// When the kernel's dims do not fit `I` and `options.groups`.
    pub fn from_tensors(
        weight: Tensor<(Const<O>, usize, Const<KH>, Const<KW>), D, E>,
        bias: Option<Tensor<Rank1<O>, D, E>>,
        options: Conv2dOptions,
    ) -> Self {
        assert!(
            options.groups > 0 && weight.dims()[1] * options.groups == I,
            "Conv2d<{I}, {O}, …>: a kernel of dims {:?} does not fit {} groups",
            weight.dims(),
            options.groups
        );
        Conv2d {
            weight,
            options: Conv2dOptions {
                bias: bias.is_some(),
                ..options
            },
            bias,
        }
    }

    /// The options the layer was built with.
    pub fn options(&self) -> Conv2dOptions {
        self.options
    }

    /// The sliding window this layer applies.
    pub fn window(&self) -> Window2d {
        Window2d {
            kernel: [KH, KW],
            stride: self.options.stride,
            padding: self.options.padding,
            dilation: self.options.dilation,
        }
    }

    /// Convolves a batch of images. `OH`/`OW` are the output height and width named
    /// by the result type (static or `usize`).
    ///
    /// # Panics
    /// When the kernel does not fit the padded input, or the result type names
    /// another output size than the input and options give.
    pub fn forward<B: Dim, H: Dim, W: Dim, OH: Dim, OW: Dim>(
        &self,
        x: &Tensor<(B, Const<I>, H, W), D, E>,
    ) -> Tensor<(B, Const<O>, OH, OW), D, E> {
        let (b, _, h, w) = x.shape();
        let win = self.window();
        let (oh, ow) = output_dims::<OH, OW>(&win, [h.size(), w.size()], || {
            format!("Conv2d<{I}, {O}, {KH}, {KW}>")
        });
        let raw = crate::nn::functional::conv2d(
            x.raw(),
            self.weight.raw(),
            self.bias.as_ref().map(Tensor::raw),
            &win,
            self.options.groups,
        );
        Tensor::from_raw((b, Const, oh, ow), raw)
    }
}

/// The output dims of a window over `input`, as the result type names them;
/// `layer` names the layer in a panic (formatted only then: this runs every step).
pub(crate) fn output_dims<OH: Dim, OW: Dim>(
    win: &Window2d,
    input: [usize; 2],
    layer: impl Fn() -> String,
) -> (OH, OW) {
    let [oh, ow] = win
        .output(input)
        .unwrap_or_else(|e| panic!("{} on a {}×{} input: {e}", layer(), input[0], input[1]));
    match (OH::from_size(oh), OW::from_size(ow)) {
        (Some(a), Some(b)) => (a, b),
        _ => panic!(
            "{}: a {}×{} input gives a {oh}×{ow} output, but the result type says {}×{}",
            layer(),
            input[0],
            input[1],
            OH::STATIC.map_or("?".into(), |n| n.to_string()),
            OW::STATIC.map_or("?".into(), |n| n.to_string()),
        ),
    }
}

impl<const I: usize, const O: usize, const KH: usize, const KW: usize, D: Backend<E>, E: Float>
    Module<D, E> for Conv2d<I, O, KH, KW, D, E>
{
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
        if let Some(b) = &mut self.bias {
            v.param("bias", b);
        }
    }
}

impl<const I: usize, const O: usize, const KH: usize, const KW: usize, D: Backend<E>, E: Float>
    ToDevice<E> for Conv2d<I, O, KH, KW, D, E>
{
    type On<D2: Backend<E>> = Conv2d<I, O, KH, KW, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Conv2d<I, O, KH, KW, D2, E> {
        Conv2d {
            weight: self.weight.to::<D2>(),
            bias: self.bias.as_ref().map(|b| b.to::<D2>()),
            options: self.options,
        }
    }
}
