//! The planner's picture of shapes: a per-sample dim is a number, a const
//! expression only rustc can evaluate (after a nested model), or a run-time dim;
//! a condition on dims holds now or is left to rustc ([`Holds`]).
use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;

/// Whether a condition holds: `Ok` when known now, else `Err` with a `bool` const
/// expression for rustc.
pub type Holds = Result<bool, TokenStream>;

/// One per-sample dim: a number, a `usize` const expression, or a dim known only
/// at run time (`T`: a sequence length, typed `usize`).
#[derive(Clone)]
pub enum Dim {
    Lit(usize),
    Sym(TokenStream),
    Run(Ident),
}

impl Dim {
    /// The value as a `usize` const expression (layers that take run-time dims
    /// never ask: `Planner::dims` turns those away first).
    pub fn expr(&self) -> TokenStream {
        match self {
            Dim::Lit(n) => quote!(#n),
            Dim::Sym(t) => quote!((#t)),
            Dim::Run(_) => unreachable!("a run-time dim in a const expression"),
        }
    }
    /// As a const generic argument.
    pub fn arg(&self) -> TokenStream {
        match self {
            Dim::Lit(n) => quote!(#n),
            Dim::Sym(t) => quote!({ #t }),
            Dim::Run(_) => unreachable!("a run-time dim as a const argument"),
        }
    }
    /// As a dim type.
    pub fn ty(&self) -> TokenStream {
        if let Dim::Run(_) = self {
            return quote!(usize);
        }
        let a = self.arg();
        quote!(::volta::Const<#a>)
    }
    pub fn show(&self) -> String {
        match self {
            Dim::Lit(n) => n.to_string(),
            Dim::Sym(_) => "?".into(),
            Dim::Run(t) => t.to_string(),
        }
    }
    pub fn lit(&self) -> Option<usize> {
        match self {
            Dim::Lit(n) => Some(*n),
            Dim::Sym(_) | Dim::Run(_) => None,
        }
    }
    pub fn is_run(&self) -> bool {
        matches!(self, Dim::Run(_))
    }
    /// A dim that a failed check leaves: any value will do, rustc reports the check.
    pub fn unknown() -> Dim {
        Dim::Sym(quote!(0usize))
    }
    /// `f` of the dim: a number, or a const expression (`sym` of its expression).
    pub fn map(
        &self,
        lit: impl Fn(usize) -> usize,
        sym: impl Fn(TokenStream) -> TokenStream,
    ) -> Dim {
        match self {
            Dim::Lit(n) => Dim::Lit(lit(*n)),
            Dim::Sym(_) | Dim::Run(_) => Dim::Sym(sym(self.expr())),
        }
    }
    /// Whether `n` divides the dim.
    pub fn multiple_of(&self, n: usize) -> Holds {
        match self {
            Dim::Lit(d) => Ok(d.is_multiple_of(n)),
            Dim::Sym(_) | Dim::Run(_) if n == 1 => Ok(true),
            Dim::Sym(_) | Dim::Run(_) => {
                let e = self.expr();
                Err(quote!(#e % #n == 0))
            }
        }
    }
    /// Whether the dim is at least `n`.
    pub fn at_least(&self, n: usize) -> Holds {
        match self {
            Dim::Lit(d) => Ok(*d >= n),
            Dim::Sym(_) | Dim::Run(_) => {
                let e = self.expr();
                Err(quote!(#e >= #n))
            }
        }
    }
    /// Whether the two are equal.
    pub fn equals(&self, other: &Dim) -> Holds {
        match (self, other) {
            (Dim::Lit(a), Dim::Lit(b)) => Ok(a == b),
            (Dim::Run(a), Dim::Run(b)) => Ok(a == b),
            (Dim::Run(_), _) | (_, Dim::Run(_)) => Ok(false),
            _ => {
                let (a, b) = (self.expr(), other.expr());
                Err(quote!(#a == #b))
            }
        }
    }
}

/// What reaches a layer (per sample, without the batch dim).
#[derive(Clone)]
pub enum State {
    Known(Vec<Dim>),
    /// The output of a nested model: its per-sample shape type.
    Opaque(TokenStream),
}

impl State {
    /// The per-sample shape type.
    pub fn ty(&self) -> TokenStream {
        match self {
            State::Known(dims) => {
                let tys = dims.iter().map(Dim::ty);
                quote!((#(#tys,)*))
            }
            State::Opaque(t) => t.clone(),
        }
    }
    /// The shape type with the batch dim in front.
    pub fn batched(&self, batch: &Ident) -> TokenStream {
        match self {
            State::Known(dims) => {
                let tys = dims.iter().map(Dim::ty);
                quote!((#batch, #(#tys,)*))
            }
            State::Opaque(t) => quote!(<#t as ::volta::shape::PrependDim<#batch>>::Output),
        }
    }
    /// `(T, C)` when this is a sequence `[B, T, C]`: `T` known at run time or a
    /// number, `C` a number.
    pub fn sequence(&self) -> Option<(Dim, usize)> {
        match self {
            State::Known(d) if d.len() == 2 && (d[0].is_run() || d[0].lit().is_some()) => {
                Some((d[0].clone(), d[1].lit()?))
            }
            _ => None,
        }
    }
    /// Whether a dim is known only at run time (a sequence length).
    pub fn has_run_dims(&self) -> bool {
        matches!(self, State::Known(d) if d.iter().any(Dim::is_run))
    }
    /// `[B, 32, 28, 28]` (`?` for dims only rustc knows).
    pub fn show(&self, batch: &Ident) -> String {
        match self {
            State::Known(dims) => {
                let mut parts = vec![batch.to_string()];
                parts.extend(dims.iter().map(Dim::show));
                format!("[{}]", parts.join(", "))
            }
            State::Opaque(_) => format!("[{batch}, …]"),
        }
    }
}

/// All dims as numbers (run-time dims as 0), when the macro knows them all.
pub fn known_lits(state: &State) -> Option<Vec<usize>> {
    match state {
        State::Known(dims) => dims
            .iter()
            .map(|d| if d.is_run() { Some(0) } else { d.lit() })
            .collect(),
        State::Opaque(_) => None,
    }
}

/// Whether all hold.
pub fn all(conds: impl IntoIterator<Item = Holds>) -> Holds {
    let mut exprs = Vec::new();
    for c in conds {
        match c {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => exprs.push(e),
        }
    }
    if exprs.is_empty() {
        Ok(true)
    } else {
        Err(quote!(#((#exprs))&&*))
    }
}
