//! Parsing a `model!` block into a small model with spans:
//!
//! ```text
//! /// docs
//! pub struct Name for (B, 1, 28, 28) -> (B, 10) {
//!     conv1: Conv2d<32, kernel = 3, padding = 1>,   // a layer: a field of the struct
//!     relu,                                           // a stateless step
//!     block: Residual<Block>,                         // another model! struct
//! }
//!
//! pub struct Gpt for (B, T) -> (B, T, 10) {           // `T`: a run-time dim; token ids in
//!     wte: Embedding<10, 64>,
//!     h: [TransformerBlock<4>; 2],                    // a layer repeated
//!     lm_head: Tied<wte>,                             // another field named
//! }
//! ```
use proc_macro2::{Span, TokenStream};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, LitInt, Token, Visibility};

/// The whole block.
pub struct ModelDef {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    /// The batch dim's name (`B`).
    pub batch: Ident,
    /// The per-sample input dims (after the batch).
    pub input: Vec<DimSpec>,
    /// The declared per-sample output dims, and the tokens to point errors at.
    pub output: Vec<DimSpec>,
    pub output_tokens: TokenStream,
    pub steps: Vec<Step>,
}

/// A dim as written in a shape: a number, or a name for a dim known only at run
/// time (`T`, a sequence length).
pub enum DimSpec {
    Lit(LitInt),
    Run(Ident),
}

/// One line of the block.
pub enum Step {
    /// A stateless function (`relu`, `flatten`).
    Function(Ident),
    /// A field holding a layer (`conv1: Conv2d<32, kernel = 3>`).
    Layer { name: Ident, spec: Box<LayerSpec> },
}

/// A layer as written: `Kind<args>`, or any other type (a nested model).
pub struct LayerSpec {
    /// The last path segment (`Conv2d`).
    pub kind: Ident,
    /// For built-in layers: positional and named arguments.
    pub args: Vec<Arg>,
    /// The type exactly as written (a nested model's type; error spans).
    pub tokens: TokenStream,
    /// For other types: the type as written.
    pub ty: Option<syn::Type>,
    /// `[Layer<…>; n]`: the layer `n` times in a row, each with its own weights.
    pub repeat: Option<usize>,
}

/// One argument of a built-in layer: `32`, `kernel = 3`, `kernel = (3, 5)`.
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Value,
    pub span: Span,
}

/// An argument's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(usize),
    Pair(usize, usize),
    Float(f64),
    Bool(bool),
    /// Another field of the block (`Tied<wte>`).
    Name(Ident),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Pair(a, b) => write!(f, "({a}, {b})"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Name(n) => write!(f, "{n}"),
        }
    }
}

/// The layers `model!` knows (everything else is a nested model type).
pub const BUILT_IN: &[&str] = &[
    "Linear",
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "GlobalAvgPool2d",
    "BatchNorm2d",
    "LayerNorm",
    "RmsNorm",
    "Dropout",
    "Flatten",
    "Embedding",
    "PositionalEmbedding",
    "MultiHeadAttention",
    "TransformerBlock",
    "Tied",
    "Relu",
    "Gelu",
    "Silu",
    "Sigmoid",
    "Tanh",
];

/// The stateless steps written as a bare name.
pub const FUNCTIONS: &[&str] = &[
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "flatten",
    "to_sequence",
    "mean_pool",
];

impl Parse for ModelDef {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        input.parse::<Token![struct]>()?;
        let name: Ident = input.parse()?;
        input.parse::<Token![for]>()?;
        let (batch, in_tokens, input_dims) = shape(input, "input")?;
        let batch = batch.ok_or_else(|| {
            syn::Error::new_spanned(
                &in_tokens,
                "the input shape starts with the batch dim's name, e.g. `(B, 1, 28, 28)`",
            )
        })?;
        for reserved in ["D", "E"] {
            if batch == reserved {
                return Err(syn::Error::new_spanned(
                    &batch,
                    "`D` and `E` name the model's device and float type; call the batch dim `B`",
                ));
            }
        }
        input.parse::<Token![->]>()?;
        let (out_batch, output_tokens, output) = shape(input, "output")?;
        match out_batch {
            Some(b) if b == batch => {}
            _ => {
                return Err(syn::Error::new_spanned(
                    &output_tokens,
                    format!("the output shape starts with the batch dim `{batch}`, like the input"),
                ));
            }
        }
        let body;
        syn::braced!(body in input);
        let steps = Punctuated::<Step, Token![,]>::parse_terminated(&body)?;
        Ok(ModelDef {
            attrs,
            vis,
            name,
            batch,
            input: input_dims,
            output,
            output_tokens,
            steps: steps.into_iter().collect(),
        })
    }
}

/// `(B, 1, 28, 28)` or `(B, T, 64)`: an optional leading name (the batch dim),
/// then dims: integers, or names of dims known at run time.
fn shape(
    input: ParseStream,
    what: &str,
) -> syn::Result<(Option<Ident>, TokenStream, Vec<DimSpec>)> {
    let content;
    let parens = syn::parenthesized!(content in input);
    let inner: TokenStream = content.fork().parse()?;
    let mut tokens = TokenStream::new();
    parens.surround(&mut tokens, |t| t.extend(inner));
    let batch = if content.peek(Ident) {
        let b: Ident = content.parse()?;
        if !content.is_empty() {
            content.parse::<Token![,]>()?;
        }
        Some(b)
    } else {
        None
    };
    let dims = Punctuated::<DimSpec, Token![,]>::parse_terminated(&content).map_err(|e| {
        syn::Error::new(
            e.span(),
            format!(
                "the {what} shape lists dims after the batch dim: integers, or a name for a \
                 dim known at run time, e.g. `(B, 1, 28, 28)` or `(B, T, 64)`"
            ),
        )
    })?;
    Ok((batch, tokens, dims.into_iter().collect()))
}

impl Parse for DimSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(Ident) {
            Ok(DimSpec::Run(input.parse()?))
        } else {
            Ok(DimSpec::Lit(input.parse()?))
        }
    }
}

impl Parse for Step {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        if !input.peek(Token![:]) {
            return Ok(Step::Function(name));
        }
        input.parse::<Token![:]>()?;
        let spec: LayerSpec = input.parse()?;
        if let Some(ty) = &spec.ty {
            nested_type(ty, &name, 0)?;
        }
        Ok(Step::Layer {
            name,
            spec: Box::new(spec),
        })
    }
}

/// A nested model is written bare (`Block`), or wrapped (`Residual<Block>`):
/// `model!` gives it the outer model's device and float type, so arguments written
/// on it would clash with those (rustc's E0107 would not say so). `depth`: how many
/// `Residual`s enclose it.
fn nested_type(ty: &syn::Type, field: &Ident, depth: usize) -> syn::Result<()> {
    let syn::Type::Path(path) = ty else {
        return Ok(());
    };
    let last = path.path.segments.last().expect("a path has a segment");
    let (name, args) = match &last.arguments {
        syn::PathArguments::None => return Ok(()),
        syn::PathArguments::AngleBracketed(args) => (&last.ident, args),
        other => return Err(syn::Error::new_spanned(other, "expected a model type")),
    };
    if name != "Residual" {
        let (open, close) = ("Residual<".repeat(depth), ">".repeat(depth));
        return Err(syn::Error::new_spanned(
            args,
            format!(
                "write `{field}: {open}{name}{close}`: `model!` gives a nested model the device and float type of the one around it"
            ),
        ));
    }
    match Vec::from_iter(&args.args)[..] {
        [syn::GenericArgument::Type(inner)] if is_built_in(inner) => Err(syn::Error::new_spanned(
            inner,
            format!(
                "`Residual` wraps a `model!` struct, not a built-in layer: \
                 put this layer in a `model!` block of its own, say `Block`, and write `{field}: Residual<Block>`"
            ),
        )),
        [syn::GenericArgument::Type(inner)] => nested_type(inner, field, depth + 1),
        _ => Err(syn::Error::new_spanned(
            args,
            "`Residual` takes one `model!` struct: `Residual<Block>`",
        )),
    }
}

/// Whether `ty` names one of the built-in layers.
fn is_built_in(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| BUILT_IN.contains(&s.ident.to_string().as_str())),
        _ => false,
    }
}

impl Parse for LayerSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        // The layer's tokens run to the next comma outside `<…>`.
        let tokens = input.step(|cursor| {
            let mut rest = *cursor;
            let mut depth = 0usize;
            let mut out = TokenStream::new();
            while let Some((tt, next)) = rest.token_tree() {
                if let proc_macro2::TokenTree::Punct(p) = &tt {
                    match p.as_char() {
                        '<' => depth += 1,
                        '>' => depth = depth.saturating_sub(1),
                        ',' if depth == 0 => break,
                        _ => {}
                    }
                }
                out.extend([tt]);
                rest = next;
            }
            Ok((out, rest))
        })?;
        if let Some(proc_macro2::TokenTree::Group(g)) = tokens.clone().into_iter().next()
            && g.delimiter() == proc_macro2::Delimiter::Bracket
        {
            return repeated(g.stream(), tokens);
        }
        syn::parse::Parser::parse2(
            |input: ParseStream| {
                let path = syn::Path::parse_mod_style(&input.fork())?;
                let kind = path
                    .segments
                    .last()
                    .expect("a path has a segment")
                    .ident
                    .clone();
                if !BUILT_IN.contains(&kind.to_string().as_str()) {
                    let ty: syn::Type = input.parse()?;
                    return Ok(LayerSpec {
                        kind,
                        args: Vec::new(),
                        tokens: tokens.clone(),
                        ty: Some(ty),
                        repeat: None,
                    });
                }
                syn::Path::parse_mod_style(input)?;
                let mut args = Vec::new();
                if input.peek(Token![<]) {
                    input.parse::<Token![<]>()?;
                    while !input.peek(Token![>]) {
                        args.push(input.parse()?);
                        if !input.peek(Token![,]) {
                            break;
                        }
                        input.parse::<Token![,]>()?;
                    }
                    input.parse::<Token![>]>()?;
                }
                Ok(LayerSpec {
                    kind,
                    args,
                    tokens: tokens.clone(),
                    ty: None,
                    repeat: None,
                })
            },
            tokens.clone(),
        )
    }
}

/// `[Layer<…>; n]` (`inner` holds what is between the brackets; `tokens` the
/// whole, for errors).
fn repeated(inner: TokenStream, tokens: TokenStream) -> syn::Result<LayerSpec> {
    let parts: Vec<_> = inner.clone().into_iter().collect();
    let semi = parts
        .iter()
        .rposition(|t| matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ';'))
        .ok_or_else(|| {
            syn::Error::new_spanned(&tokens, "write a repeated layer as `[Layer<…>; n]`")
        })?;
    let layer: TokenStream = parts[..semi].iter().cloned().collect();
    let count: TokenStream = parts[semi + 1..].iter().cloned().collect();
    let n: LitInt = syn::parse2(count.clone()).map_err(|_| {
        syn::Error::new_spanned(&count, "the repeat count is an integer: `[Layer<…>; 6]`")
    })?;
    let n: usize = n.base10_parse()?;
    if n == 0 {
        return Err(syn::Error::new_spanned(
            &count,
            "a layer repeated 0 times does nothing; drop the line",
        ));
    }
    let mut spec: LayerSpec = syn::parse2(layer)?;
    if spec.ty.is_some() || spec.repeat.is_some() {
        return Err(syn::Error::new_spanned(
            &tokens,
            "`[Layer<…>; n]` repeats a built-in layer (TransformerBlock, MultiHeadAttention)",
        ));
    }
    spec.repeat = Some(n);
    spec.tokens = tokens;
    Ok(spec)
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let span = input.span();
        let name = if input.peek(Ident) && input.peek2(Token![=]) {
            let n: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            Some(n)
        } else {
            None
        };
        let value = if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            let a: LitInt = content.parse()?;
            content.parse::<Token![,]>()?;
            let b: LitInt = content.parse()?;
            Value::Pair(a.base10_parse()?, b.base10_parse()?)
        } else if input.peek(Ident) && !input.peek(syn::Lit) {
            Value::Name(input.parse()?)
        } else {
            match input.parse::<syn::Lit>()? {
                syn::Lit::Int(i) => Value::Int(i.base10_parse()?),
                syn::Lit::Float(f) => Value::Float(f.base10_parse()?),
                syn::Lit::Bool(b) => Value::Bool(b.value),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "expected an integer, a pair `(h, w)`, a float, a bool or a field's name",
                    ));
                }
            }
        };
        Ok(Arg { name, value, span })
    }
}
