//! Emits the WGSL of a kernel and the Rust items that `#[kernel]` expands to.
use super::lower::Lowered;
use super::parse::Kernel;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use std::ops::Range;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use volta_kernels::ir::emit::{Lang, Names, body};
use volta_kernels::ir::{Graph, NodeId};

/// Generated WGSL, with the Rust span behind each byte range (for naga's errors).
pub struct Wgsl {
    pub source: String,
    pub segments: Vec<(Range<usize>, Span)>,
}

const PREFIX: &str = "vk_";

fn wgsl_name(kernel: &str, partial: Option<usize>) -> String {
    match partial {
        None => format!("volta_k_{kernel}"),
        Some(k) => format!("volta_k_{kernel}_d{k}"),
    }
}

pub fn wgsl(k: &Kernel, l: &Lowered) -> Wgsl {
    let mut w = Wgsl {
        source: String::new(),
        segments: Vec::new(),
    };
    let mut outputs: Vec<(Option<usize>, Option<NodeId>)> = vec![(None, Some(l.value))];
    for (i, arg) in k.args.iter().enumerate() {
        // With a hand-written backward, tensor partials call it and scalars get none.
        let node = if k.backward.is_some() {
            None
        } else {
            Some(l.partials[i])
        };
        let _ = arg;
        outputs.push((Some(i), node));
    }
    let mut tensor_index = 0;
    for (partial, node) in outputs {
        let name = wgsl_name(&k.name.to_string(), partial);
        w.push(&format!("fn {name}("), k.name.span());
        for (i, arg) in k.args.iter().enumerate() {
            if i > 0 {
                w.push(", ", k.name.span());
            }
            w.push(&arg.name.to_string(), arg.name.span());
            w.push(": f32", arg.name.span());
        }
        w.push(") -> f32 {\n", k.name.span());
        let result = match node {
            Some(node) => {
                let names = wgsl_names(k, l);
                let b = body(&l.graph, &[node], Lang::Wgsl, PREFIX, &names.as_names());
                for (line, id) in b.code.lines().zip(&b.lines) {
                    w.push(&format!("    {line}\n"), l.spans[id.0 as usize]);
                }
                b.outputs[0].clone()
            }
            None => {
                let i = partial.expect("the value always has a node");
                if k.args[i].scalar {
                    "0.0".to_string()
                } else {
                    let bw = &k.backward.as_ref().expect("a hand-written backward")[tensor_index];
                    tensor_index += 1;
                    let bw_name = bw.segments.last().expect("a path").ident.to_string();
                    let args: Vec<String> = k.args.iter().map(|a| a.name.to_string()).collect();
                    format!("{}({})", wgsl_name(&bw_name, None), args.join(", "))
                }
            }
        };
        w.push(
            &format!("    return {result};\n}}\n"),
            k.body.brace_token.span.join(),
        );
    }
    w
}

impl Wgsl {
    fn push(&mut self, text: &str, span: Span) {
        let start = self.source.len();
        self.source.push_str(text);
        self.segments.push((start..self.source.len(), span));
    }
}

/// Owned closures behind [`Names`].
struct NameFns {
    input: Box<dyn Fn(u16) -> String>,
    callee: Box<dyn Fn(u16, Option<u16>) -> String>,
}
impl NameFns {
    fn as_names(&self) -> Names<'_> {
        Names {
            input: &*self.input,
            param: &|_| unreachable!("kernel args are all inputs in the IR"),
            callee: &*self.callee,
        }
    }
}

fn wgsl_names(k: &Kernel, l: &Lowered) -> NameFns {
    let args: Vec<String> = k.args.iter().map(|a| a.name.to_string()).collect();
    let callees: Vec<String> = l.callees.iter().map(|(n, _)| n.to_string()).collect();
    NameFns {
        input: Box::new(move |i| args[i as usize].clone()),
        callee: Box::new(move |c, p| wgsl_name(&callees[c as usize], p.map(usize::from))),
    }
}

fn rust_names(k: &Kernel, l: &Lowered) -> NameFns {
    let args: Vec<String> = k.args.iter().map(|a| a.name.to_string()).collect();
    let callees: Vec<String> = l.callees.iter().map(|(n, _)| n.to_string()).collect();
    NameFns {
        input: Box::new(move |i| args[i as usize].clone()),
        callee: Box::new(move |c, p| match p {
            None => format!("{}::forward", callees[c as usize]),
            Some(k) => format!("{}::d{k}", callees[c as usize]),
        }),
    }
}

/// Rust code computing one node of the graph.
fn rust_expr(graph: &Graph, node: NodeId, names: &NameFns) -> TokenStream {
    let b = body(
        graph,
        &[node],
        Lang::Rust {
            path: "::volta::kernel",
        },
        PREFIX,
        &names.as_names(),
    );
    let code = format!("{{ {} {} }}", b.code, b.outputs[0]);
    code.parse().expect("generated Rust parses")
}

/// Rewrites calls of other kernels `f(..)` in the body to their scalar `f::forward(..)`.
struct CallRewriter<'a>(&'a [(syn::Ident, usize)]);
impl VisitMut for CallRewriter<'_> {
    fn visit_expr_call_mut(&mut self, call: &mut syn::ExprCall) {
        syn::visit_mut::visit_expr_call_mut(self, call);
        if let syn::Expr::Path(p) = &mut *call.func
            && let Some(id) = p.path.get_ident().cloned()
            && self.0.iter().any(|(n, _)| *n == id)
        {
            p.path = syn::parse_quote_spanned!(id.span()=> #id::forward);
        }
    }
}

pub fn rust(k: &Kernel, l: &Lowered, wgsl: &Wgsl) -> TokenStream {
    let Kernel {
        attrs,
        vis,
        name,
        args,
        body: user_body,
        backward,
    } = k;
    let arg_names: Vec<&syn::Ident> = args.iter().map(|a| &a.name).collect();
    let mut cpu_body = user_body.clone();
    CallRewriter(&l.callees).visit_block_mut(&mut cpu_body);

    let names = rust_names(k, l);
    let mut tensor_index = 0;
    let partial_fns: Vec<TokenStream> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let fn_name = format_ident!("d{i}");
            let code = match backward {
                None => rust_expr(&l.graph, l.partials[i], &names),
                Some(_) if a.scalar => quote!({ 0.0 }),
                Some(bw) => {
                    let path = &bw[tensor_index];
                    tensor_index += 1;
                    quote_spanned!(path.span()=> { #path::forward(#(#arg_names),*) })
                }
            };
            let doc = format!("∂{name}/∂{}", a.name);
            quote! {
                #[doc = #doc]
                #[allow(unused_variables, clippy::all)]
                pub fn #fn_name(#(#arg_names: f32),*) -> f32 #code
            }
        })
        .collect();
    let slice_args: Vec<TokenStream> = (0..args.len()).map(|i| quote!(a[#i])).collect();
    let partial_slices: Vec<TokenStream> = (0..args.len())
        .map(|i| {
            let d = format_ident!("d{i}");
            quote!({ fn f(a: &[f32]) -> f32 { #d(#(#slice_args),*) } f })
        })
        .collect();
    let kinds: Vec<TokenStream> = args
        .iter()
        .map(|a| {
            if a.scalar {
                quote!(::volta::kernel::ArgKind::Scalar)
            } else {
                quote!(::volta::kernel::ArgKind::Tensor)
            }
        })
        .collect();
    let mut deps: Vec<TokenStream> = l
        .callees
        .iter()
        .map(|(n, _)| quote_spanned!(n.span()=> &#n::KERNEL))
        .collect();
    if let Some(bw) = backward {
        deps.extend(bw.iter().map(|p| quote_spanned!(p.span()=> &#p::KERNEL)));
    }
    let source = &wgsl.source;
    let name_str = name.to_string();

    // The tensor-level function: the first tensor argument fixes shape and device.
    let first = args
        .iter()
        .position(|a| !a.scalar)
        .expect("checked in parse");
    let mut generics = vec![
        quote!(S: ::volta::shape::Shape),
        quote!(D: ::volta::kernel::KernelBackend),
    ];
    let mut params = Vec::new();
    let mut tensors = Vec::new();
    let mut scalars = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let n = &a.name;
        if a.scalar {
            params.push(quote_spanned!(n.span()=> #n: f32));
            scalars.push(quote!(#n));
        } else if i == first {
            params.push(quote_spanned!(n.span()=> #n: &::volta::Tensor<S, D>));
            tensors.push(quote!(#n.raw().clone()));
        } else {
            let (r, d) = (format_ident!("R{i}"), format_ident!("D{i}"));
            generics.push(quote!(#r: ::volta::shape::SameShape<S>));
            generics.push(quote!(#d: ::volta::SameDevice<D> + ::volta::kernel::KernelBackend));
            params.push(quote_spanned!(n.span()=> #n: &::volta::Tensor<#r, #d>));
            tensors.push(quote!(<#d as ::volta::SameDevice<D>>::same_device(#n.raw())));
        }
    }
    let first_name = &args[first].name;
    let mod_doc = format!("Scalar functions, partial derivatives and WGSL of the `{name}` kernel.");

    quote! {
        #(#attrs)*
        #vis fn #name<#(#generics),*>(#(#params),*) -> ::volta::Tensor<S, D> {
            ::volta::kernel::apply(&#name::KERNEL, #first_name, &[#(#tensors),*], &[#(#scalars),*])
        }

        #[doc = #mod_doc]
        #[allow(non_snake_case)]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use ::volta::kernel::builtins::*;

            /// The kernel on one element: the body as written.
            #[allow(clippy::all)]
            pub fn forward(#(#arg_names: f32),*) -> f32 #cpu_body

            #(#partial_fns)*

            /// The kernel's definition for the runtime (its WGSL is `KERNEL.wgsl`).
            pub static KERNEL: ::volta::kernel::KernelDef = ::volta::kernel::KernelDef {
                name: #name_str,
                args: &[#(#kinds),*],
                wgsl: #source,
                deps: &[#(#deps),*],
                forward: { fn f(a: &[f32]) -> f32 { forward(#(#slice_args),*) } f },
                partials: &[#(#partial_slices),*],
            };
        }
    }
}
