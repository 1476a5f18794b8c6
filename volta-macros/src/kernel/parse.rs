//! Reads the annotated function into a [`Kernel`], checking its signature.
use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Attribute, Block, FnArg, Ident, ItemFn, Pat, Path, ReturnType, Type, Visibility};

/// One argument of the kernel.
pub struct Arg {
    pub name: Ident,
    /// `#[scalar]`: one number for every element, rather than a tensor.
    pub scalar: bool,
}

/// The kernel function, as the later stages need it.
pub struct Kernel {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub args: Vec<Arg>,
    pub body: Block,
    /// Hand-written partials for the tensor arguments (`backward = [..]`).
    pub backward: Option<Vec<Path>>,
}

pub fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<Kernel> {
    let backward = parse_attr(attr)?;
    let f: ItemFn = syn::parse2(item)?;
    let sig = &f.sig;
    let mut errors: Vec<syn::Error> = Vec::new();
    let mut fail = |span: Span, msg: &str| errors.push(syn::Error::new(span, msg));
    if let Some(t) = &sig.constness {
        fail(t.span(), "#[kernel] functions cannot be `const`");
    }
    if let Some(t) = &sig.asyncness {
        fail(t.span(), "#[kernel] functions cannot be `async`");
    }
    if let Some(t) = &sig.unsafety {
        fail(t.span(), "#[kernel] functions cannot be `unsafe`");
    }
    if !sig.generics.params.is_empty() {
        fail(
            sig.generics.span(),
            "#[kernel] functions cannot be generic: arguments and result are `f32`",
        );
    }
    match &sig.output {
        ReturnType::Type(_, ty) if is_f32(ty) => {}
        other => fail(
            other.span(),
            "a #[kernel] function returns `f32` (one element of the output)",
        ),
    }
    let mut args = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            fail(input.span(), "#[kernel] functions take no `self`");
            continue;
        };
        let Pat::Ident(pi) = &*pt.pat else {
            fail(
                pt.pat.span(),
                "a #[kernel] argument must be a plain name, like `x: f32`",
            );
            continue;
        };
        if !is_f32(&pt.ty) {
            fail(
                pt.ty.span(),
                "#[kernel] arguments are `f32`: one element of a tensor, or a `#[scalar]`",
            );
        }
        let mut scalar = false;
        for a in &pt.attrs {
            if a.path().is_ident("scalar") {
                scalar = true;
            } else {
                fail(
                    a.span(),
                    "the only attribute allowed on a #[kernel] argument is `#[scalar]`",
                );
            }
        }
        args.push(Arg {
            name: pi.ident.clone(),
            scalar,
        });
    }
    if args.len() > 16 {
        fail(
            sig.inputs.span(),
            "#[kernel] functions take at most 16 arguments",
        );
    }
    if !args.iter().any(|a| !a.scalar) {
        fail(
            sig.ident.span(),
            "a #[kernel] function needs at least one tensor argument (one without `#[scalar]`)",
        );
    }
    if let Some(b) = &backward {
        let tensors = args.iter().filter(|a| !a.scalar).count();
        if b.len() != tensors {
            fail(
                sig.ident.span(),
                &format!(
                    "`backward` lists {} function(s) but the kernel has {tensors} tensor argument(s)",
                    b.len()
                ),
            );
        }
    }
    if let Some(e) = errors.into_iter().reduce(|mut a, b| {
        a.combine(b);
        a
    }) {
        return Err(e);
    }
    Ok(Kernel {
        attrs: f.attrs,
        vis: f.vis,
        name: sig.ident.clone(),
        args,
        body: *f.block,
        backward,
    })
}

fn is_f32(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("f32"))
}

/// `backward = [dx, dy]` or `backward = dx`.
fn parse_attr(attr: TokenStream) -> syn::Result<Option<Vec<Path>>> {
    if attr.is_empty() {
        return Ok(None);
    }
    let mut backward = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("backward") {
            let value = meta.value()?;
            let paths = if value.peek(syn::token::Bracket) {
                let content;
                syn::bracketed!(content in value);
                content
                    .parse_terminated(Path::parse_mod_style, syn::Token![,])?
                    .into_iter()
                    .collect()
            } else {
                vec![value.call(Path::parse_mod_style)?]
            };
            backward = Some(paths);
            Ok(())
        } else {
            Err(meta.error("unknown #[kernel] option; the only option is `backward = [..]`"))
        }
    });
    parser.parse2(attr)?;
    Ok(backward)
}
