//! Shape inference and checking: walks the block from the declared input, computing
//! each layer's output shape (conv and pool arithmetic with `volta_kernels::Window2d`,
//! the formula the runtime uses) and choosing each field's type. A layer that does
//! not fit is an error at its tokens, naming both shapes.
//!
//! Dims are numbers, except after a nested model: its output is known only to
//! rustc (through `volta::nn::Model`), so later dims are const expressions and the
//! checks on them are [`Check`]s, which `cargo check` evaluates (see `check`).
use super::args::Args;
use super::check::{Check, Site, cast, last_dim, spans};
use super::parse::{BUILT_IN, DimSpec, FUNCTIONS, LayerSpec, ModelDef, Step};
use super::shape::{Dim, State, all, known_lits};
use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::Ident;
use volta_kernels::Window2d;

/// A step of the forward pass, with the field it needs.
pub struct Planned {
    /// The field: name, type (over `D`, `E`), initialiser (with `rng` in scope).
    pub field: Option<(Ident, TokenStream, TokenStream)>,
    /// Statements turning `x` into the step's output `x`.
    pub forward: TokenStream,
    /// The row of the summary: name and the layer as written.
    pub name: String,
    pub layer: String,
    /// The shape after the step.
    pub output: State,
    /// The step over a KV cache, where it differs from `forward` (attention
    /// layers take a cache each from `slots`; positions start at `start`), and
    /// how many caches it takes.
    pub cached: Option<TokenStream>,
    pub caches: usize,
    /// The step over a padded batch (each sequence's positions `keys[b]`), where
    /// it differs from `forward`: attention and pooling over positions.
    pub padded: Option<TokenStream>,
}

/// The result of planning: steps, checks for rustc, the final state.
pub struct Plan {
    pub steps: Vec<Planned>,
    pub checks: Vec<Check>,
    pub input: State,
    pub output: State,
    /// The statement that gives `x` the declared output type, when only rustc
    /// knows that the layers produce it.
    pub result: TokenStream,
    /// The input is token ids (`u32`): the first layer is an `Embedding`.
    pub ids: bool,
    /// A step can fail at run time (a sequence longer than a positional table):
    /// the model gets `try_forward`, and `forward` panics with its error.
    pub fallible: bool,
}

pub fn plan(def: &ModelDef) -> syn::Result<Plan> {
    let dims = |specs: &[DimSpec]| -> syn::Result<Vec<Dim>> {
        specs
            .iter()
            .map(|d| match d {
                DimSpec::Lit(n) => n.base10_parse().map(Dim::Lit),
                DimSpec::Run(t) => Ok(Dim::Run(t.clone())),
            })
            .collect()
    };
    let input = State::Known(dims(&def.input)?);
    let ids =
        matches!(def.steps.first(), Some(Step::Layer { spec, .. }) if spec.kind == "Embedding");
    let mut state = input.clone();
    let mut steps = Vec::new();
    let mut checks = Vec::new();
    let mut fallible = false;
    let mut embeddings = Vec::new();
    let batch = &def.batch;
    for (i, step) in def.steps.iter().enumerate() {
        let planned = match step {
            Step::Function(f) => function(f, &state, batch)?,
            Step::Layer { name, spec } => {
                let mut planner = Planner {
                    site: Site {
                        batch,
                        tokens: &spec.tokens,
                        checks: &mut checks,
                    },
                    embeddings: &mut embeddings,
                    spec,
                    state: state.clone(),
                    prelude: TokenStream::new(),
                    first: i == 0,
                    fallible: false,
                    cached: None,
                    padded: None,
                };
                let planned = planner.repeated(name)?;
                fallible |= planner.fallible;
                planned
            }
        };
        state = planned.output.clone();
        steps.push(planned);
    }
    let declared = dims(&def.output)?;
    for d in &declared {
        if let Dim::Run(t) = d
            && !def
                .input
                .iter()
                .any(|i| matches!(i, DimSpec::Run(u) if u == t))
        {
            return Err(syn::Error::new_spanned(
                t,
                format!(
                    "`{t}` is not a dim of the input; the output's run-time dims come from the input's"
                ),
            ));
        }
    }
    let output = State::Known(declared.clone());
    let declares = output.show(batch);
    let mut site = Site {
        batch,
        tokens: &def.output_tokens,
        checks: &mut checks,
    };
    let produce =
        |shape: &str| format!("the layers produce {shape}, but the block declares {declares}");
    let dims = site.open(&state, declared.len(), produce)?;
    let same = dims.iter().zip(&declared).map(|(d, n)| d.equals(n));
    site.require(all(same), |m| produce(&m.dims(&dims)))?;
    let result = match known_lits(&state) {
        Some(_) => TokenStream::new(),
        None => cast(output.batched(batch)),
    };
    Ok(Plan {
        steps,
        checks,
        input,
        output,
        result,
        ids,
        fallible,
    })
}

/// A stateless step written as a bare name.
fn function(f: &Ident, state: &State, batch: &Ident) -> syn::Result<Planned> {
    let name = f.to_string();
    let mut padded = None;
    let (forward, output) = match name.as_str() {
        "flatten" if state.has_run_dims() => {
            return Err(syn::Error::new_spanned(
                f,
                format!(
                    "flatten takes dims known at compile time, but {} reaches it",
                    state.show(batch)
                ),
            ));
        }
        "flatten" => flatten(state, batch),
        "to_sequence" => to_sequence(f, state, batch)?,
        "mean_pool" => {
            let (forward, output) = mean_pool(f, state, batch)?;
            padded = Some(quote!(let x = ::volta::nn::padded_mean_pool(&x, keys)?;));
            (forward, output)
        }
        "relu" | "gelu" | "silu" | "sigmoid" | "tanh" => {
            (quote_spanned!(f.span()=> let x = x.#f();), state.clone())
        }
        _ => {
            return Err(syn::Error::new_spanned(
                f,
                format!(
                    "unknown step `{name}`: a bare name is one of {}; a layer is `name: Layer<…>`",
                    FUNCTIONS.join(", ")
                ),
            ));
        }
    };
    Ok(Planned {
        field: None,
        forward,
        layer: name.clone(),
        name,
        output,
        cached: None,
        caches: 0,
        padded,
    })
}

/// The built-in layer that `kind` spells another way (`RMSNorm`: `RmsNorm`).
fn near_built_in(kind: &str) -> Option<&'static str> {
    let fold = |s: &str| s.to_lowercase().replace('_', "");
    BUILT_IN.iter().copied().find(|b| fold(b) == fold(kind))
}

/// `apply` (an expression of `rows`, `(B·T, c)`) at each position of a sequence
/// `(B, T, c)`, giving `(B, T, o)`.
fn per_position(batch: &Ident, t: &Dim, c: usize, o: usize, apply: TokenStream) -> TokenStream {
    let t = t.ty();
    quote! {
        let x: ::volta::Tensor<(#batch, #t, ::volta::Const<#o>), D, E> = {
            let (n, t) = (x.dims()[0], x.dims()[1]);
            // Not `[n * t, c]`: with every token at one span, clippy reads `*t` as
            // a dereference after a missing comma.
            let positions = n * t;
            let rows = ::volta::Tensor::<(usize, ::volta::Const<#c>), D, E>::try_from_raw(
                x.raw().reshape(&[positions, #c]),
            )
            .expect("model!: a sequence is rows of its width");
            let y = #apply;
            ::volta::Tensor::try_from_raw(y.raw().reshape(&[n, t, #o]))
                .expect("model!: rows back into a sequence")
        };
    }
}

/// `(B, C, H, W) → (B, H·W, C)`: a feature map as a sequence of its positions
/// (a vision transformer's patches after their convolution).
fn to_sequence(f: &Ident, state: &State, batch: &Ident) -> syn::Result<(TokenStream, State)> {
    let Some([c, h, w]) = known_lits(state)
        .filter(|_| !state.has_run_dims())
        .and_then(|d| <[usize; 3]>::try_from(d).ok())
    else {
        return Err(syn::Error::new_spanned(
            f,
            format!(
                "to_sequence takes images [B, C, H, W] known at compile time, but {} reaches it",
                state.show(batch)
            ),
        ));
    };
    let t = h * w;
    let forward = quote! {
        let x: ::volta::Tensor<(#batch, ::volta::Const<#t>, ::volta::Const<#c>), D, E> = {
            let n = x.dims()[0];
            let seq = x.raw().reshape(&[n, #c, #t]).permute(&[0, 2, 1]);
            ::volta::Tensor::try_from_raw(seq).expect("model!: C×H×W is H·W positions of C")
        };
    };
    Ok((forward, State::Known(vec![Dim::Lit(t), Dim::Lit(c)])))
}

/// `(B, T, C) → (B, C)`: the mean over the positions (a classifier's pooling, as
/// `x.mean(dim=1)`).
fn mean_pool(f: &Ident, state: &State, batch: &Ident) -> syn::Result<(TokenStream, State)> {
    let Some((_, c)) = state.sequence() else {
        return Err(syn::Error::new_spanned(
            f,
            format!(
                "mean_pool takes sequences [B, T, C], but {} reaches it",
                state.show(batch)
            ),
        ));
    };
    let forward = quote! {
        let x: ::volta::Tensor<(#batch, ::volta::Const<#c>), D, E> = {
            let n = x.dims()[0];
            let mean = x.raw().mean_axis(1).reshape(&[n, #c]);
            ::volta::Tensor::try_from_raw(mean).expect("model!: the mean over T keeps C")
        };
    };
    Ok((forward, State::Known(vec![Dim::Lit(c)])))
}

/// `(B, …) → (B, product)`.
fn flatten(state: &State, batch: &Ident) -> (TokenStream, State) {
    let n = match state {
        State::Known(dims) => match dims.iter().map(Dim::lit).collect::<Option<Vec<_>>>() {
            Some(l) => Dim::Lit(l.iter().product()),
            None => {
                let e = dims.iter().map(Dim::expr);
                Dim::Sym(quote!(1 #(* #e)*))
            }
        },
        State::Opaque(t) => Dim::Sym(quote!(<#t as ::volta::shape::ConstShape>::NUMEL)),
    };
    let out = State::Known(vec![n.clone()]);
    let t = n.ty();
    (
        quote!(let x: ::volta::Tensor<(#batch, #t), D, E> = ::volta::nn::Flatten.forward(&x);),
        out,
    )
}

struct Planner<'a> {
    site: Site<'a>,
    /// The block's `Embedding` fields so far: name, vocabulary, width (what
    /// `Tied<…>` may name).
    embeddings: &'a mut Vec<(Ident, usize, usize)>,
    spec: &'a LayerSpec,
    /// What reaches the layer.
    state: State,
    /// Statements before the layer's own (a cast of a nested model's output).
    prelude: TokenStream,
    /// Whether this is the block's first step (where token ids may come in).
    first: bool,
    /// Set when the layer can fail at run time (see [`Plan::fallible`]).
    fallible: bool,
    /// The layer's step over a KV cache and the caches it takes (see
    /// [`Planned::cached`]), when it differs from its plain step.
    cached: Option<(TokenStream, usize)>,
    /// The layer's step over a padded batch (see [`Planned::padded`]).
    padded: Option<TokenStream>,
}

impl Planner<'_> {
    fn err(&self, msg: impl std::fmt::Display) -> syn::Error {
        self.site.err(msg)
    }

    fn written(&self) -> String {
        // rustc's printer breaks long token streams over lines: one line here.
        let tokens = self.spec.tokens.to_string();
        tokens
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace(" < ", "<")
            .replace(" >", ">")
            .replace(" ,", ",")
    }

    /// The dims reaching this layer, which must have `rank` of them (`what` names
    /// the expected form in the error).
    fn dims(&mut self, rank: usize, what: &str) -> syn::Result<Vec<Dim>> {
        let kind = &self.spec.kind;
        if self.state.has_run_dims() {
            return Err(self.err(format!(
                "{kind} takes {what} known at compile time, but {} reaches it",
                self.state.show(self.site.batch)
            )));
        }
        let dims = self.site.open(&self.state, rank, |shape| {
            format!("{kind} takes {what}, but {shape} reaches it")
        })?;
        // A nested model's output, or a failed check's: its type is not `dims`'.
        if !matches!(&self.state, State::Known(d) if d.len() == rank) {
            self.take_as(dims.clone());
        }
        Ok(dims)
    }

    /// Gives `x` the type of `dims`, where only a check for rustc tells that they
    /// are its shape: a mismatch is then that check's error alone.
    fn take_as(&mut self, dims: Vec<Dim>) {
        self.state = State::Known(dims);
        self.prelude = cast(self.state.batched(self.site.batch));
    }

    /// The layer, or `[Layer; n]`: `n` of it in a row, which must keep the shape.
    fn repeated(&mut self, name: &Ident) -> syn::Result<Planned> {
        let Some(n) = self.spec.repeat else {
            return self.layer(name);
        };
        let kind = self.spec.kind.to_string();
        if !["TransformerBlock", "MultiHeadAttention"].contains(&kind.as_str()) {
            return Err(self.err(format!(
                "`[{kind}<…>; n]`: only TransformerBlock and MultiHeadAttention repeat"
            )));
        }
        let before = self.state.show(self.site.batch);
        let mut one = self.layer(name)?;
        let (f, ty, init) = one.field.take().expect("a built-in layer has a field");
        one.field = Some((
            f,
            quote!(::std::vec::Vec<#ty>),
            quote!((0..#n).map(|_| #init).collect()),
        ));
        one.forward = quote!(let x = self.#name.iter().fold(x, |x, layer| layer.forward(&x)););
        one.cached = Some(quote!(
            let x = self.#name.iter().fold(x, |x, layer| {
                layer.forward_cached(&x, slots.next().expect("model!: one cache per attention layer"))
            });
        ));
        one.caches = n;
        one.padded = Some(quote!(
            let x = self.#name.iter().try_fold(x, |x, layer| layer.forward_padded(&x, keys))?;
        ));
        debug_assert_eq!(before, one.output.show(self.site.batch));
        Ok(one)
    }

    /// `(T, C)` of a sequence `[B, T, C]` reaching the layer (`T` known at run time,
    /// or a number: a vision transformer's patches).
    fn sequence(&self) -> syn::Result<(Dim, usize)> {
        match self.state.sequence() {
            Some(seq) => Ok(seq),
            None => Err(self.err(format!(
                "{} takes sequences [B, T, C] (`T` a name in the block's input, as in \
                 `(B, T, 64)`, or a number after `to_sequence`), but {} reaches it",
                self.spec.kind,
                self.state.show(self.site.batch)
            ))),
        }
    }

    /// The option `name`, a probability (0 when not given).
    fn probability(&self, args: &Args, name: &str) -> syn::Result<f64> {
        let p = args.float(name, 0.0)?;
        if !(0.0..=1.0).contains(&p) {
            return Err(self.err(format!("{name} must be in [0, 1], got {p}")));
        }
        Ok(p)
    }

    /// The attention layers' checks: heads that split the width and group over
    /// the key/value heads, an even head width for RoPE.
    fn heads(&self, c: usize, heads: usize, kv: usize, rope: bool) -> syn::Result<()> {
        let kind = &self.spec.kind;
        if heads == 0 || !c.is_multiple_of(heads) {
            return Err(self.err(format!(
                "{kind}: {heads} heads do not split the width {c} (the width must be a multiple of the heads)"
            )));
        }
        if kv == 0 || !heads.is_multiple_of(kv) {
            return Err(self.err(format!(
                "{kind}: {heads} heads do not group over kv_heads = {kv} (heads must be a multiple of kv_heads)"
            )));
        }
        if rope && !(c / heads).is_multiple_of(2) {
            return Err(self.err(format!(
                "{kind}: RoPE rotates pairs of features, but the head width {c} / {heads} = {} is odd",
                c / heads
            )));
        }
        Ok(())
    }

    /// An attention layer's steps over a KV cache (a cache of its own) and
    /// over a padded batch.
    fn attends(&mut self, name: &Ident) {
        self.cached = Some((
            quote!(let x = self.#name.forward_cached(
                &x,
                slots.next().expect("model!: one cache per attention layer"),
            );),
            1,
        ));
        self.padded = Some(quote!(let x = self.#name.forward_padded(&x, keys)?;));
    }

    fn layer(&mut self, name: &Ident) -> syn::Result<Planned> {
        let kind = self.spec.kind.to_string();
        let b = self.site.batch;
        if kind == "Embedding" && !self.first {
            return Err(self.err(
                "Embedding reads token ids: it is the block's first layer (the input `(B, T)` is ids)",
            ));
        }
        let (ty, init, forward, output) = match kind.as_str() {
            "Embedding" => {
                let args = Args::take(self.spec, &[], &["num_embeddings", "embedding_dim"])?;
                let [v, c] = match args.positional[..] {
                    [v, c] => [v.int()?, c.int()?],
                    _ => return Err(self.err("Embedding<vocabulary, width>")),
                };
                let State::Known(mut dims) = self.state.clone() else {
                    unreachable!("the first layer sees the input")
                };
                dims.push(Dim::Lit(c));
                self.embeddings.push((name.clone(), v, c));
                (
                    quote!(::volta::nn::Embedding<#v, #c, D, E>),
                    quote!(::volta::nn::Embedding::new(rng)),
                    quote!(let x = self.#name.forward(&x);),
                    State::Known(dims),
                )
            }
            "PositionalEmbedding" => {
                let args = Args::take(self.spec, &[], &["max_positions"])?;
                let (t, c) = self.sequence()?;
                let max = match args.positional[..] {
                    [m] => m.int()?,
                    _ => return Err(self.err("PositionalEmbedding<max_positions>")),
                };
                // A length known now is checked now; one known at run time, when
                // the tensor arrives (`try_forward`'s error).
                if let Some(len) = t.lit()
                    && len > max
                {
                    return Err(self.err(format!(
                        "PositionalEmbedding<{max}> holds {max} positions, but {} reaches it",
                        self.state.show(b)
                    )));
                }
                self.fallible = true;
                self.cached = Some((quote!(let x = self.#name.try_forward(&x, start)?;), 0));
                (
                    quote!(::volta::nn::PositionalEmbedding<#max, #c, D, E>),
                    quote!(::volta::nn::PositionalEmbedding::new(rng)),
                    quote!(let x = self.#name.try_forward(&x, 0)?;),
                    self.state.clone(),
                )
            }
            "MultiHeadAttention" => {
                let args = Args::take(
                    self.spec,
                    &["heads", "kv_heads", "causal", "rope", "bias", "dropout"],
                    &["heads"],
                )?;
                let (_, c) = self.sequence()?;
                let heads = args.int("heads", 0)?;
                let kv = args.int("kv_heads", heads)?;
                let (causal, rope) = (args.bool("causal", true)?, args.bool("rope", false)?);
                let bias = args.bool("bias", true)?;
                let dropout = self.probability(&args, "dropout")?;
                self.heads(c, heads, kv, rope)?;
                self.attends(name);
                (
                    quote!(::volta::nn::MultiHeadAttention<#c, #heads, #kv, D, E>),
                    quote!({
                        let mut layer = ::volta::nn::MultiHeadAttention::new(rng);
                        layer.causal = #causal;
                        if #rope {
                            layer = layer.with_rope(10_000.0);
                        }
                        if !#bias {
                            layer = layer.without_bias();
                        }
                        if #dropout > 0.0 {
                            layer = layer.with_dropout(#dropout, rng);
                        }
                        layer
                    }),
                    quote!(let x = self.#name.forward(&x);),
                    self.state.clone(),
                )
            }
            "TransformerBlock" => {
                let options = [
                    "heads", "ff", "kv_heads", "causal", "rope", "rms", "swiglu", "dropout", "bias",
                ];
                let args = Args::take(self.spec, &options, &["heads"])?;
                let (_, c) = self.sequence()?;
                let heads = args.int("heads", 0)?;
                let kv = args.int("kv_heads", heads)?;
                let ff = args.int("ff", 4 * c)?;
                let (causal, rope) = (args.bool("causal", true)?, args.bool("rope", false)?);
                let (rms, swiglu) = (args.bool("rms", false)?, args.bool("swiglu", false)?);
                let dropout = self.probability(&args, "dropout")?;
                let bias = args.bool("bias", true)?;
                self.heads(c, heads, kv, rope)?;
                self.attends(name);
                let norm = if rms { quote!(Rms) } else { quote!(Layer) };
                let ffk = if swiglu { quote!(SwiGlu) } else { quote!(Gelu) };
                let rope = if rope {
                    quote!(Some(10_000.0))
                } else {
                    quote!(None)
                };
                (
                    quote!(::volta::nn::TransformerBlock<#c, #heads, #ff, #kv, D, E>),
                    quote!(::volta::nn::TransformerBlock::with_options(
                        ::volta::nn::BlockOptions {
                            norm: ::volta::nn::NormKind::#norm,
                            feed_forward: ::volta::nn::FeedForwardKind::#ffk,
                            dropout: #dropout,
                            causal: #causal,
                            rope: #rope,
                            bias: #bias,
                        },
                        rng,
                    )),
                    quote!(let x = self.#name.forward(&x);),
                    self.state.clone(),
                )
            }
            "Tied" => return self.tied(name),
            "Linear" if self.state.sequence().is_some() => {
                let args = Args::take(self.spec, &["bias"], &["in_features", "out_features"])?;
                let init = if args.bool("bias", true)? {
                    quote!(::volta::nn::Linear::new(rng))
                } else {
                    quote!(::volta::nn::Linear::without_bias(rng))
                };
                let (t, c) = self.sequence()?;
                let o = match args.positional[..] {
                    [o] => o.int()?,
                    [i, o] if i.int()? == c => o.int()?,
                    [i, o] => {
                        let (i, o) = (i.int()?, o.int()?);
                        return Err(self.err(format!(
                            "Linear<{i}, {o}> takes {i} features, but {} reaches it",
                            self.state.show(b)
                        )));
                    }
                    _ => return Err(self.err("Linear<out> or Linear<in, out>")),
                };
                let forward = per_position(b, &t, c, o, quote!(self.#name.forward(&rows)));
                (
                    quote!(::volta::nn::Linear<#c, #o, D, E>),
                    init,
                    forward,
                    State::Known(vec![t, Dim::Lit(o)]),
                )
            }
            "Linear" => {
                let args = Args::take(self.spec, &["bias"], &["in_features", "out_features"])?;
                let init = if args.bool("bias", true)? {
                    quote!(::volta::nn::Linear::new(rng))
                } else {
                    quote!(::volta::nn::Linear::without_bias(rng))
                };
                let f = self.dims(1, "flat features [B, features] (add `flatten` before it)")?;
                let (i, o) = match args.positional[..] {
                    [o] => (f[0].clone(), o.int()?),
                    [i, o] => {
                        let (i, o) = (i.int()?, o.int()?);
                        self.site.require(f[0].equals(&Dim::Lit(i)), |m| {
                            let reaching = m.state(&self.state);
                            format!(
                                "Linear<{i}, {o}> takes {i} features, but {reaching} reaches it"
                            )
                        })?;
                        if f[0].lit().is_none() {
                            self.take_as(vec![Dim::Lit(i)]);
                        }
                        (Dim::Lit(i), o)
                    }
                    _ => return Err(self.err("Linear<out> or Linear<in, out>")),
                };
                let ia = i.arg();
                let out = State::Known(vec![Dim::Lit(o)]);
                (
                    quote!(::volta::nn::Linear<#ia, #o, D, E>),
                    init,
                    typed_forward(name, b, &out),
                    out,
                )
            }
            "Conv2d" => {
                let args = Args::take(
                    self.spec,
                    &["kernel", "stride", "padding", "dilation", "groups", "bias"],
                    &["out_channels"],
                )?;
                let [c, h, w] = self.image_dims()?;
                let o = match &args.positional[..] {
                    [o] => o.int()?,
                    _ => return Err(self.err("Conv2d<out_channels, kernel = k, …>")),
                };
                let win = Window2d {
                    kernel: args.pair("kernel", None)?,
                    stride: args.pair("stride", Some(1))?,
                    padding: args.pair("padding", Some(0))?,
                    dilation: args.pair("dilation", Some(1))?,
                };
                let groups = args.int("groups", 1)?;
                let bias = args.bool("bias", true)?;
                if groups == 0 || !o.is_multiple_of(groups) {
                    return Err(self.err(format!(
                        "groups = {groups} must divide the {o} output channels"
                    )));
                }
                self.site.require(c.multiple_of(groups), |m| {
                    let (c, reaching) = (m.num(&c), m.state(&self.state));
                    format!("groups = {groups} must divide the {c} input channels of {reaching}")
                })?;
                let [oh, ow] = self.window(&win, [&h, &w], false)?;
                let (ca, [kh, kw]) = (c.arg(), win.kernel);
                let (stride, padding, dilation) = (win.stride, win.padding, win.dilation);
                let out = State::Known(vec![Dim::Lit(o), oh, ow]);
                (
                    quote!(::volta::nn::Conv2d<#ca, #o, #kh, #kw, D, E>),
                    quote!(::volta::nn::Conv2d::with_options(
                        ::volta::nn::Conv2dOptions {
                            stride: [#(#stride),*],
                            padding: [#(#padding),*],
                            dilation: [#(#dilation),*],
                            groups: #groups,
                            bias: #bias,
                        },
                        rng,
                    )),
                    typed_forward(name, b, &out),
                    out,
                )
            }
            "MaxPool2d" | "AvgPool2d" => {
                let args = Args::take(self.spec, &["kernel", "stride", "padding"], &["kernel"])?;
                let [c, h, w] = self.image_dims()?;
                let kernel = args.pair("kernel", None)?;
                let win = Window2d {
                    kernel,
                    stride: args.pair("stride", None).unwrap_or(kernel),
                    padding: args.pair("padding", Some(0))?,
                    dilation: [1, 1],
                };
                if win.padding[0] * 2 > kernel[0] || win.padding[1] * 2 > kernel[1] {
                    return Err(self.err(format!(
                        "padding {:?} is more than half the {kernel:?} window",
                        win.padding
                    )));
                }
                let [oh, ow] = self.window(&win, [&h, &w], true)?;
                let out = State::Known(vec![c, oh, ow]);
                let kind_ident = &self.spec.kind;
                let [(k0, k1), (s0, s1), (p0, p1)] = [
                    (win.kernel[0], win.kernel[1]),
                    (win.stride[0], win.stride[1]),
                    (win.padding[0], win.padding[1]),
                ];
                (
                    quote!(::volta::nn::#kind_ident),
                    quote!(::volta::nn::#kind_ident::from_window(::volta::nn::Window2d {
                        kernel: [#k0, #k1],
                        stride: [#s0, #s1],
                        padding: [#p0, #p1],
                        dilation: [1, 1],
                    })),
                    typed_forward(name, b, &out),
                    out,
                )
            }
            "GlobalAvgPool2d" => {
                Args::take(self.spec, &[], &[])?;
                let [c, _, _] = self.image_dims()?;
                let out = State::Known(vec![c]);
                (
                    quote!(::volta::nn::GlobalAvgPool2d),
                    quote!(::volta::nn::GlobalAvgPool2d),
                    typed_forward(name, b, &out),
                    out,
                )
            }
            "BatchNorm2d" => {
                let args = Args::take(self.spec, &["eps", "momentum"], &[])?;
                let [c, _, _] = self.image_dims()?;
                let eps = args.float("eps", 1e-5)?;
                let momentum = args.float("momentum", 0.1)?;
                let ca = c.arg();
                (
                    quote!(::volta::nn::BatchNorm2d<#ca, D, E>),
                    quote!({
                        let mut layer = ::volta::nn::BatchNorm2d::new();
                        layer.eps = #eps;
                        layer.momentum = #momentum;
                        layer
                    }),
                    quote!(let x = self.#name.forward(&x);),
                    self.state.clone(),
                )
            }
            "LayerNorm" | "RmsNorm" => {
                // RMSNorm has no shift to leave out.
                let options: &[&str] = if kind == "LayerNorm" {
                    &["eps", "bias"]
                } else {
                    &["eps"]
                };
                let args = Args::take(self.spec, options, &[])?;
                let last = match &self.state {
                    State::Known(d) if d.last().is_some_and(Dim::is_run) => {
                        return Err(self.err(format!(
                            "{kind} normalises the last dim, which must be known at compile time, \
                             but {} reaches it",
                            self.state.show(b)
                        )));
                    }
                    State::Known(d) if !d.is_empty() => d[d.len() - 1].clone(),
                    State::Known(_) => return Err(self.err("a norm needs at least one axis")),
                    State::Opaque(t) => last_dim(t),
                };
                let default = if kind == "LayerNorm" { 1e-5 } else { 1e-6 };
                let eps = args.float("eps", default)?;
                let (k, la) = (&self.spec.kind, last.arg());
                (
                    quote!(::volta::nn::#k<#la, D, E>),
                    if args.bool("bias", true)? {
                        quote!(::volta::nn::#k::new().with_eps(#eps))
                    } else {
                        quote!(::volta::nn::#k::without_bias().with_eps(#eps))
                    },
                    quote!(let x = self.#name.forward(&x);),
                    self.state.clone(),
                )
            }
            "Dropout" => {
                let args = Args::take(self.spec, &["p"], &["p"])?;
                let p = args.float("p", 0.5)?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(
                        self.err(format!("the drop probability must be in [0, 1], got {p}"))
                    );
                }
                (
                    quote!(::volta::nn::Dropout),
                    quote!(::volta::nn::Dropout::new(#p, rng)),
                    quote!(let x = self.#name.forward(&x);),
                    self.state.clone(),
                )
            }
            "Flatten" => {
                Args::take(self.spec, &[], &[])?;
                let (forward, out) = flatten(&self.state, b);
                (
                    quote!(::volta::nn::Flatten),
                    quote!(::volta::nn::Flatten),
                    forward,
                    out,
                )
            }
            "Relu" | "Gelu" | "Silu" | "Sigmoid" | "Tanh" => {
                Args::take(self.spec, &[], &[])?;
                let k = &self.spec.kind;
                (
                    quote!(::volta::nn::#k),
                    quote!(::volta::nn::#k),
                    quote!(let x = self.#name.forward(&x);),
                    self.state.clone(),
                )
            }
            _ => return self.nested(name),
        };
        let prelude = &self.prelude;
        let (cached, caches) = match self.cached.take() {
            Some((c, n)) => (Some(quote!(#prelude #c)), n),
            None => (None, 0),
        };
        let padded = self.padded.take().map(|p| quote!(#prelude #p));
        Ok(Planned {
            field: Some((name.clone(), ty, init)),
            forward: quote!(#prelude #forward),
            name: name.to_string(),
            layer: self.written(),
            output,
            cached,
            caches,
            padded,
        })
    }

    /// `Tied<wte>`: logits against the table of the block's `Embedding` `wte`, at
    /// each position (weight tying, as GPT-2's and nanoGPT's heads); no field.
    fn tied(&mut self, name: &Ident) -> syn::Result<Planned> {
        let args = Args::take(self.spec, &[], &["embedding"])?;
        let table = match args.positional[..] {
            [a] => a.name()?,
            _ => {
                return Err(
                    self.err("Tied<embedding>: the name of an Embedding field, e.g. `Tied<wte>`")
                );
            }
        };
        let Some((_, v, m)) = self.embeddings.iter().find(|(n, ..)| n == table).cloned() else {
            return Err(syn::Error::new_spanned(
                table,
                format!("`{table}` is not an Embedding of this block: Tied<…> names one before it"),
            ));
        };
        let (t, c) = self.sequence()?;
        if c != m {
            return Err(self.err(format!(
                "Tied<{table}> takes {table}'s width {m}, but {} reaches it",
                self.state.show(self.site.batch)
            )));
        }
        let forward = per_position(
            self.site.batch,
            &t,
            c,
            v,
            quote!(rows.matmul(&self.#table.weight.t())),
        );
        Ok(Planned {
            field: None,
            forward,
            name: name.to_string(),
            layer: self.written(),
            output: State::Known(vec![t, Dim::Lit(v)]),
            cached: None,
            caches: 0,
            padded: None,
        })
    }

    /// `[C, H, W]`, or an error naming what reaches the layer.
    fn image_dims(&mut self) -> syn::Result<[Dim; 3]> {
        let d = self.dims(3, "images [B, C, H, W]")?;
        Ok([d[0].clone(), d[1].clone(), d[2].clone()])
    }

    /// The output height and width of `win` over `hw`; `tile`: the windows must
    /// cover the padded input exactly (pooling must not drop rows).
    fn window(&mut self, win: &Window2d, hw: [&Dim; 2], tile: bool) -> syn::Result<[Dim; 2]> {
        if [win.kernel, win.stride, win.dilation].concat().contains(&0) {
            return Err(self.err("kernel, stride and dilation must be at least 1"));
        }
        let mut out = [Dim::Lit(0), Dim::Lit(0)];
        for axis in 0..2 {
            let (k, s, p) = (win.kernel[axis], win.stride[axis], win.padding[axis]);
            let extent = win.dilation[axis] * (k - 1) + 1;
            let padded = hw[axis].map(|n| n + 2 * p, |e| quote!(#e + 2 * #p));
            self.site.require(padded.at_least(extent), |m| {
                let (side, has) = (["height", "width"][axis], m.num(&padded));
                let reaching = m.state(&self.state);
                format!(
                    "the kernel spans {extent} along the {side}, but the padded input has only {has}: \
                     {reaching} reaches this layer (padding {p})"
                )
            })?;
            // The runtime's formula for numbers; for rustc, the same, kept from
            // overflowing where a check failed.
            let len = match hw[axis] {
                Dim::Lit(n) => win.output_len(axis, *n).map_or(Dim::unknown(), Dim::Lit),
                // `dims` turned run-time dims away.
                Dim::Sym(_) | Dim::Run(_) => {
                    let e = padded.expr();
                    Dim::Sym(quote!(#e.saturating_sub(#extent) / #s + 1))
                }
            };
            if tile {
                let covers = match hw[axis] {
                    Dim::Lit(n) => Ok(win.covers(axis, *n)),
                    Dim::Sym(_) | Dim::Run(_) => {
                        let e = padded.expr();
                        Err(quote!(#e.saturating_sub(#extent) % #s == 0))
                    }
                };
                let used = len.map(
                    |l| (l - 1) * s + k,
                    |l| quote!(#l.saturating_sub(1) * #s + #k),
                );
                self.site.require(covers, |m| {
                    let (used, padded) = (m.num(&used), m.num(&padded));
                    let reaching = m.state(&self.state);
                    let what = ["rows", "columns"][axis];
                    format!(
                        "the {}×{} windows (stride {s}) do not tile {reaching}: they cover {used} of its {padded} padded {what}; \
                         pad the input or pick a window that divides it",
                        win.kernel[0], win.kernel[1],
                    )
                })?;
            }
            out[axis] = len;
        }
        Ok(out)
    }

    /// Another model used as a layer: its declared input must be what reaches it
    /// (checked by rustc), and its declared output is what continues.
    fn nested(&mut self, name: &Ident) -> syn::Result<Planned> {
        let ty = self.spec.ty.clone().expect("a nested model has a type");
        if self.state.has_run_dims() {
            let shape = self.state.show(self.site.batch);
            let kind = &self.spec.kind;
            return Err(self.err(match near_built_in(&kind.to_string()) {
                Some(layer) => format!(
                    "`{kind}` is not one of model!'s layers: did you mean `{layer}`? (read \
                     as a nested model, it would need shapes known at compile time, but \
                     {shape} reaches it)"
                ),
                None => format!(
                    "a nested model takes shapes known at compile time, but {shape} reaches it"
                ),
            }));
        }
        let input = State::Opaque(quote!(<#ty as ::volta::nn::Model>::Input));
        let layer = self.written();
        self.site.fits(&self.state, &input.ty(), &layer)?;
        // `x` as the input type, so that a mismatch is the check's error alone.
        let cast = cast(input.batched(self.site.batch));
        let field_ty = with_device(&ty);
        let (span, _) = spans(&self.spec.tokens);
        Ok(Planned {
            field: Some((
                name.clone(),
                field_ty.clone(),
                quote!(<#field_ty as ::volta::nn::Model>::new(rng)),
            )),
            forward: quote_spanned!(span=>
                #cast
                let x = ::volta::nn::Forward::<_, D, E>::forward(&self.#name, &x);
            ),
            name: name.to_string(),
            layer,
            output: State::Opaque(quote!(<#ty as ::volta::nn::Model>::Output)),
            cached: None,
            caches: 0,
            padded: None,
        })
    }
}

/// `let x: Tensor<(B, …), D, E> = self.name.forward(&x);`: the annotation names
/// the output size that the layer's generic forward checks.
fn typed_forward(name: &Ident, batch: &Ident, out: &State) -> TokenStream {
    match out {
        State::Known(dims) => {
            let tys = dims.iter().map(Dim::ty);
            quote!(let x: ::volta::Tensor<(#batch, #(#tys),*), D, E> = self.#name.forward(&x);)
        }
        State::Opaque(_) => quote!(let x = self.#name.forward(&x);),
    }
}

/// A nested model's type over the outer model's device and float type: every path
/// type written without arguments (`Block`) gets `<D, E>`, inside wrappers too
/// (`Residual<Block>` → `Residual<Block<D, E>>`).
fn with_device(ty: &syn::Type) -> TokenStream {
    match ty {
        syn::Type::Path(p) => {
            let mut p = p.clone();
            let last = p.path.segments.last_mut().expect("a path has a segment");
            match &mut last.arguments {
                syn::PathArguments::None => {
                    last.arguments = syn::PathArguments::AngleBracketed(syn::parse_quote!(<D, E>));
                }
                syn::PathArguments::AngleBracketed(args) => {
                    for a in args.args.iter_mut() {
                        if let syn::GenericArgument::Type(t) = a {
                            let inner = with_device(t);
                            *t = syn::parse_quote!(#inner);
                        }
                    }
                }
                syn::PathArguments::Parenthesized(_) => {}
            }
            p.to_token_stream()
        }
        other => other.to_token_stream(),
    }
}
