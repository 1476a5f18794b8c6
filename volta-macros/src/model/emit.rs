//! Emitting the struct, its constructor, forward pass, summary and trait impls.
use super::check::Check;
use super::parse::ModelDef;
use super::plan::Plan;
use super::shape::State;
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote};

pub fn emit(def: &ModelDef, plan: &Plan) -> TokenStream {
    let ModelDef {
        attrs,
        vis,
        name,
        batch,
        ..
    } = def;
    let fields: Vec<_> = plan.steps.iter().filter_map(|s| s.field.as_ref()).collect();
    let field_defs = plan.steps.iter().filter_map(|s| {
        let (f, ty, _) = s.field.as_ref()?;
        let doc = format!(
            "`{}`: {} out.",
            s.layer,
            s.output.show(batch).replace('…', "...")
        );
        Some(quote!(#[doc = #doc] pub #f: #ty))
    });
    let names: Vec<_> = fields.iter().map(|(f, _, _)| f).collect();
    let inits = fields.iter().map(|(_, _, init)| init);
    let forward = plan.steps.iter().map(|s| &s.forward);
    let in_ty = plan.input.ty();
    let out_ty = plan.output.ty();
    let in_dims = dims_of(&plan.input);
    let out_dims = dims_of(&plan.output);
    let checks = checks(&plan.checks);
    let batch_str = batch.to_string();
    let rows = plan.steps.iter().map(|s| {
        let (n, l) = (&s.name, &s.layer);
        let shape = s.output.ty();
        let params = match &s.field {
            Some((f, _, _)) => {
                quote!(::volta::nn::Module::<D, E>::param_count(&mut self.#f.clone()))
            }
            None => quote!(0),
        };
        // Run-time dims by their names (`[B, T, 64]`); others as rustc knows them.
        let output = if s.output.has_run_dims() {
            let shown = s.output.show(batch);
            quote!(#shown.to_string())
        } else {
            quote!(::volta::nn::sample_shape::<#shape>(#batch_str))
        };
        quote!(::volta::nn::SummaryRow {
            name: #n.to_string(),
            layer: #l.to_string(),
            output: #output,
            params: #params,
        })
    });
    let name_str = name.to_string();
    let input_shown = if plan.input.has_run_dims() {
        let shown = plan.input.show(batch);
        quote!(#shown.to_string())
    } else {
        quote!(::volta::nn::sample_shape::<#in_ty>(#batch_str))
    };
    let shapes_doc = format!(
        "`{}` → `{}`, for any batch dim (static or `usize`).",
        plan.input.show(batch),
        plan.output.show(batch)
    );
    let d2 = format_ident!("D2");
    let result = &plan.result;
    // Token ids in (an `Embedding` first), else values of the model's float type.
    let in_elem = if plan.ids { quote!(u32) } else { quote!(E) };
    // The forward passes' input, output and fallible output types.
    let input = quote!(::volta::Tensor<(#batch, #(#in_dims),*), D, #in_elem>);
    let output = quote!(::volta::Tensor<(#batch, #(#out_dims),*), D, E>);
    let fallible = quote!(::std::result::Result<#output, ::volta::shape::ShapeError>);
    let forward_fns = if plan.fallible {
        quote! {
            /// The forward pass, or the error of a sequence the model cannot take
            /// (longer than its positional table):
            #[doc = #shapes_doc]
            pub fn try_forward<#batch: ::volta::Dim>(
                &self,
                x: &#input,
            ) -> #fallible {
                let x = x.clone();
                #(#forward)*
                #result
                Ok(x)
            }

            /// The forward pass:
            #[doc = #shapes_doc]
            ///
            /// # Panics
            /// Where [`try_forward`](Self::try_forward) returns an error, with its text.
            #[track_caller]
            pub fn forward<#batch: ::volta::Dim>(
                &self,
                x: &#input,
            ) -> #output {
                self.try_forward(x).unwrap_or_else(|e| panic!("{}: {e}", #name_str))
            }
        }
    } else {
        quote! {
            /// The forward pass:
            #[doc = #shapes_doc]
            pub fn forward<#batch: ::volta::Dim>(
                &self,
                x: &#input,
            ) -> #output {
                let x = x.clone();
                #(#forward)*
                #result
                x
            }
        }
    };
    // Sampling: the same steps over one KV cache per attention layer.
    let slots: usize = plan.steps.iter().map(|s| s.caches).sum();
    let cached_fns = if slots > 0 {
        let steps = plan
            .steps
            .iter()
            .map(|s| s.cached.as_ref().unwrap_or(&s.forward));
        quote! {
            /// One empty KV cache per attention layer, for
            /// [`try_forward_cached`](Self::try_forward_cached).
            pub fn caches(&self) -> ::std::vec::Vec<::volta::nn::AttentionCache<D, E>> {
                ::std::vec![::volta::nn::AttentionCache::new(); #slots]
            }

            /// The forward pass over the positions after those in `caches` (from
            /// [`caches`](Self::caches)), which it extends: a sampler feeds the
            /// prompt, then one token at a time. Errors when the positions pass a
            /// positional table.
            ///
            /// # Panics
            /// When `caches` is not one cache per attention layer.
            #[allow(unused_variables, unused_mut)]
            pub fn try_forward_cached<#batch: ::volta::Dim>(
                &self,
                x: &#input,
                caches: &mut [::volta::nn::AttentionCache<D, E>],
            ) -> #fallible {
                assert_eq!(
                    caches.len(),
                    #slots,
                    "{}: one KV cache per attention layer (call `caches()`)",
                    #name_str
                );
                let start = caches[0].len();
                let mut slots = caches.iter_mut();
                let x = x.clone();
                #(#steps)*
                #result
                Ok(x)
            }
        }
    } else {
        TokenStream::new()
    };
    // Padded batches: the same steps, attention and pooling over each sequence's
    // own positions.
    let padded_fn = if slots > 0 {
        let steps = plan
            .steps
            .iter()
            .map(|s| s.padded.as_ref().unwrap_or(&s.forward));
        quote! {
            /// The forward pass over a padded batch: sequence `b` holds its
            /// tokens at positions `keys[b]` (e.g. `0..len` when padded on the
            /// right), which are all that its attention layers see and its
            /// `mean_pool` averages; a position that sees no key comes out of
            /// attention as zeros. Positions count from the start of the row.
            /// Errors when `keys` is not one range of `0..T` per sequence, or
            /// where [`try_forward`](Self::try_forward) does.
            pub fn try_forward_padded<#batch: ::volta::Dim>(
                &self,
                x: &#input,
                keys: &[::std::ops::Range<usize>],
            ) -> #fallible {
                let x = x.clone();
                #(#steps)*
                #result
                Ok(x)
            }
        }
    } else {
        TokenStream::new()
    };
    // A model over run-time dims or token ids is not a layer of another model.
    let nestable = !plan.ids && !plan.input.has_run_dims() && !plan.output.has_run_dims();
    let nesting = if nestable {
        quote! {
        impl<D: ::volta::Backend<E>, E: ::volta::dtype::Float> ::volta::nn::Model for #name<D, E> {
            type Input = #in_ty;
            type Output = #out_ty;
            fn new(rng: &mut ::volta::Rng) -> Self {
                #name::new(rng)
            }
        }

        impl<#batch: ::volta::Dim, D: ::volta::Backend<E>, E: ::volta::dtype::Float>
            ::volta::nn::Forward<(#batch, #(#in_dims),*), D, E> for #name<D, E>
        {
            type Output = (#batch, #(#out_dims),*);
            fn forward(
                &self,
                x: &::volta::Tensor<(#batch, #(#in_dims),*), D, E>,
            ) -> #output {
                #name::forward(self, x)
            }
        }

        }
    } else {
        TokenStream::new()
    };
    quote! {
        #(#attrs)*
        ///
        #[doc = #shapes_doc]
        #[derive(Clone, Debug)]
        #[allow(clippy::identity_op, clippy::erasing_op, clippy::modulo_one)]
        #vis struct #name<D: ::volta::Backend<E> = ::volta::Cpu, E: ::volta::dtype::Float = f32> {
            #(#field_defs,)*
            #[doc(hidden)]
            pub _types: ::std::marker::PhantomData<(D, E)>,
        }

        #[allow(clippy::identity_op, clippy::erasing_op, clippy::modulo_one)]
        impl<D: ::volta::Backend<E>, E: ::volta::dtype::Float> #name<D, E> {
            /// Builds every layer with its default initialisation (PyTorch's).
            pub fn new(rng: &mut ::volta::Rng) -> Self {
                #name {
                    #(#names: #inits,)*
                    _types: ::std::marker::PhantomData,
                }
            }

            #forward_fns

            #cached_fns
            #padded_fn

            /// One row per layer with its output shape and parameter count.
            pub fn summary(&self) -> ::volta::nn::Summary {
                ::volta::nn::Summary {
                    model: #name_str.to_string(),
                    input: #input_shown,
                    rows: ::std::vec![#(#rows),*],
                }
            }
        }

        #[allow(clippy::identity_op, clippy::erasing_op, clippy::modulo_one)]
        impl<D: ::volta::Backend<E>, E: ::volta::dtype::Float> ::volta::nn::Module<D, E> for #name<D, E> {
            fn visit(&mut self, v: &mut ::volta::nn::Visitor<'_, D, E>) {
                #(v.module(stringify!(#names), &mut self.#names);)*
            }
        }

        #[allow(clippy::identity_op, clippy::erasing_op, clippy::modulo_one)]
        impl<D: ::volta::Backend<E>, E: ::volta::dtype::Float> ::volta::nn::ToDevice<E> for #name<D, E> {
            type On<#d2: ::volta::Backend<E>> = #name<#d2, E>;
            fn to<#d2: ::volta::Backend<E>>(&self) -> #name<#d2, E> {
                #name {
                    #(#names: ::volta::nn::ToDevice::<E>::to::<#d2>(&self.#names),)*
                    _types: ::std::marker::PhantomData,
                }
            }
        }

        #nesting

        #checks
    }
}

/// The checks for rustc, in block order, as one item. Each is a trait implemented
/// only when the check holds, so a failed one is an unmet bound at the user's
/// tokens whose `on_unimplemented` message names the numbers (its const params
/// `V0`, …). A check counts only while those before it hold: after a failed one,
/// later dims mean nothing, and one mistake gives one error.
fn checks(checks: &[Check]) -> TokenStream {
    if checks.is_empty() {
        return TokenStream::new();
    }
    let items = checks.iter().enumerate().map(|(i, c)| {
        let (ok, next) = (format_ident!("OK{i}"), format_ident!("OK{}", i + 1));
        let vs: Vec<_> = (0..c.values.len()).map(|k| format_ident!("V{k}")).collect();
        let ts: Vec<_> = (0..c.types.len()).map(|k| format_ident!("T{k}")).collect();
        let Check {
            span,
            holds,
            message,
            values,
            types,
        } = c;
        // The error points at the `Self` type: spanned over the user's tokens.
        let at = spanned(quote!(::core::primitive::bool), *span);
        quote! {
            const #next: bool = #ok && (#holds);
            {
                #[diagnostic::on_unimplemented(message = #message, label = "")]
                trait ModelCheck<#(#ts,)* #(const #vs: usize,)* const HOLDS: bool> {
                    type Ok;
                }
                impl<S: ?Sized, #(#ts,)* #(const #vs: usize,)*> ModelCheck<#(#ts,)* #(#vs,)* true> for S {
                    type Ok = ();
                }
                let _: <#at as ModelCheck<#(#types,)* #({ #values },)* { !#ok || (#holds) }>>::Ok = ();
            }
        }
    });
    quote! {
        #[allow(unused_braces, dead_code, clippy::all)]
        const _: () = {
            const OK0: bool = true;
            #(#items)*
        };
    }
}

/// `tokens` spanning `first..last`: the first token at `first`, the others at
/// `last` (rustc spans a path from its first token to its last).
fn spanned(tokens: TokenStream, (first, last): (Span, Span)) -> TokenStream {
    tokens
        .into_iter()
        .enumerate()
        .map(|(i, mut t): (usize, TokenTree)| {
            t.set_span(if i == 0 { first } else { last });
            t
        })
        .collect()
}

/// The dim types of a known state.
fn dims_of(state: &State) -> Vec<TokenStream> {
    match state {
        State::Known(dims) => dims.iter().map(|d| d.ty()).collect(),
        State::Opaque(_) => unreachable!("declared shapes are numbers"),
    }
}
