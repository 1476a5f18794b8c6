//! Checks on dims: the macro's own errors when the dims are numbers, and checks
//! that rustc evaluates ([`Check`]) when they follow a nested model, whose output
//! only rustc knows. Both word the error the same way: a number only rustc knows is
//! a placeholder in the message (`{V0}`), filled in by rustc (see `emit::checks`).
use super::shape::{Dim, Holds, State};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::Ident;

/// The largest per-sample rank (Volta's shapes have up to 6 dims, with the batch).
const MAX_RANK: usize = 5;

/// A condition that rustc checks, and the error it gives when false.
pub struct Check {
    /// The first and last token of what the error points at.
    pub span: (Span, Span),
    /// A `bool` const expression.
    pub holds: TokenStream,
    /// The message; `{V0}`, `{V1}`, … show `values` (`usize` const expressions),
    /// `{T0}`, … show `types`.
    pub message: String,
    pub values: Vec<TokenStream>,
    pub types: Vec<TokenStream>,
}

/// A message under construction: what only rustc knows becomes a placeholder.
pub struct Shown<'a> {
    batch: &'a Ident,
    values: Vec<TokenStream>,
    types: Vec<TokenStream>,
}

impl Shown<'_> {
    /// A dim: its number, or a placeholder.
    pub fn num(&mut self, d: &Dim) -> String {
        match d {
            Dim::Lit(n) => n.to_string(),
            Dim::Run(t) => t.to_string(),
            Dim::Sym(_) => {
                self.values.push(d.expr());
                format!("{{V{}}}", self.values.len() - 1)
            }
        }
    }

    /// `[B, 8, 8]`.
    pub fn dims(&mut self, dims: &[Dim]) -> String {
        let mut parts = vec![self.batch.to_string()];
        parts.extend(dims.iter().map(|d| self.num(d)));
        format!("[{}]", parts.join(", "))
    }

    /// A shape; a nested model's output is shown as its type.
    pub fn state(&mut self, state: &State) -> String {
        match state {
            State::Known(dims) => self.dims(dims),
            State::Opaque(t) => {
                self.types.push(t.clone());
                format!("`{{T{}}}` per sample", self.types.len() - 1)
            }
        }
    }
}

/// Where errors point (a layer's tokens, or the declared output) and where the
/// checks for rustc go.
pub struct Site<'a> {
    pub batch: &'a Ident,
    pub tokens: &'a TokenStream,
    pub checks: &'a mut Vec<Check>,
}

impl Site<'_> {
    pub fn err(&self, msg: impl std::fmt::Display) -> syn::Error {
        syn::Error::new_spanned(self.tokens, msg)
    }

    /// Requires `holds`. When it fails, or rustc must tell, the error is `message`,
    /// written with `Shown`: a macro error if it names no placeholder.
    pub fn require(
        &mut self,
        holds: Holds,
        message: impl FnOnce(&mut Shown) -> String,
    ) -> syn::Result<()> {
        if matches!(holds, Ok(true)) {
            return Ok(());
        }
        let mut shown = Shown {
            batch: self.batch,
            values: Vec::new(),
            types: Vec::new(),
        };
        let message = message(&mut shown);
        let known = shown.values.is_empty() && shown.types.is_empty();
        let holds = match holds {
            Ok(_) if known => return Err(self.err(message)),
            Ok(_) => quote!(false),
            Err(h) => h,
        };
        self.checks.push(Check {
            span: spans(self.tokens),
            holds,
            message,
            values: shown.values,
            types: shown.types,
        });
        Ok(())
    }

    /// The `rank` dims of `state`; else the error `mismatch(shape)`. A nested
    /// model's output is read as `rank` dims, with a check for each other rank
    /// that it may have, so that the error can list its dims.
    pub fn open(
        &mut self,
        state: &State,
        rank: usize,
        mismatch: impl Fn(&str) -> String,
    ) -> syn::Result<Vec<Dim>> {
        match state {
            State::Known(dims) => {
                self.require(Ok(dims.len() == rank), |m| mismatch(&m.dims(dims)))?;
                // After a failed check for rustc, later dims mean nothing.
                Ok(if dims.len() == rank {
                    dims.clone()
                } else {
                    vec![Dim::unknown(); rank]
                })
            }
            State::Opaque(t) => {
                for other in (0..=MAX_RANK).filter(|&r| r != rank) {
                    self.require(
                        Err(quote!(<#t as ::volta::shape::Shape>::RANK != #other)),
                        |m| mismatch(&m.dims(&read(t, other))),
                    )?;
                }
                Ok(read(t, rank))
            }
        }
    }

    /// What reaches a nested model (`state`) must be the input it declares (`input`,
    /// a shape type), as [`Site::open`] checks it: one check per rank it may have.
    pub fn fits(&mut self, state: &State, input: &TokenStream, layer: &str) -> syn::Result<()> {
        let reaching = state.ty();
        for rank in 0..=MAX_RANK {
            let (want, have) = (read(input, rank), read(&reaching, rank));
            let same = want.iter().zip(&have).map(|(a, b)| {
                let (a, b) = (a.expr(), b.expr());
                quote!(&& #a == #b)
            });
            self.require(
                Err(quote!(
                    <#input as ::volta::shape::Shape>::RANK != #rank
                        || (<#reaching as ::volta::shape::Shape>::RANK == #rank #(#same)*)
                )),
                |m| {
                    let want = m.dims(&want);
                    format!("{layer} takes {want}, but {} reaches it", m.state(state))
                },
            )?;
        }
        Ok(())
    }
}

/// The dims of the shape type `t`, read as `rank` of them (0 past its own rank,
/// where a check has failed, so that the types built from them stay valid).
fn read(t: &TokenStream, rank: usize) -> Vec<Dim> {
    (0..rank)
        .map(|i| {
            Dim::Sym(quote!({
                let dims = <#t as ::volta::shape::Shape>::STATIC_DIMS;
                match if #i < dims.len() { dims[#i] } else { None } {
                    Some(n) => n,
                    None => 0,
                }
            }))
        })
        .collect()
}

/// The last dim of the shape type `t` (0 for none: a norm's type check reports it).
pub fn last_dim(t: &TokenStream) -> Dim {
    Dim::Sym(
        quote!(match <#t as ::volta::shape::Shape>::STATIC_DIMS.last() {
            Some(Some(n)) => *n,
            _ => 0,
        }),
    )
}

/// `let x: Tensor<ty, D, E> = x;` where rustc cannot tell the two types equal
/// but a check has (the same dims: a no-op at run time).
pub fn cast(ty: TokenStream) -> TokenStream {
    quote! {
        let x: ::volta::Tensor<#ty, D, E> = ::volta::Tensor::try_from_raw(x.raw().clone())
            .expect("model!: shapes checked at compile time");
    }
}

/// The first and last token's spans (an error spanning both underlines all).
pub fn spans(tokens: &impl ToTokens) -> (Span, Span) {
    let mut tokens = tokens.to_token_stream().into_iter();
    let first = tokens.next().map_or_else(Span::call_site, |t| t.span());
    (first, tokens.last().map_or(first, |t| t.span()))
}
