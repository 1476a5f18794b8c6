//! `#[derive(Module)]`: parse the struct → find its device parameter → emit
//! `Module` (every field visited under its name) and, when the struct is generic
//! over a device `D: Backend<E>`, `ToDevice` (every field moved).
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::visit_mut::VisitMut;
use syn::{Data, DeriveInput, Fields, GenericParam, Ident, Type};

pub fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let input: DeriveInput = syn::parse2(input)?;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] is for structs whose fields are layers",
        ));
    };
    let fields: Vec<Field> = match &data.fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(Field::named)
            .collect::<syn::Result<_>>()?,
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| Field::unnamed(i, f))
            .collect::<syn::Result<_>>()?,
        Fields::Unit => Vec::new(),
    };
    let mut out = module_impl(&input, &fields);
    if let Some(device) = device_param(&input) {
        out.extend(to_device_impl(&input, &fields, &device));
    }
    Ok(out)
}

/// A field: how to name and reach it, its type, and whether it is skipped.
struct Field {
    member: TokenStream,
    name: String,
    ty: Type,
    skip: bool,
}

impl Field {
    fn named(f: &syn::Field) -> syn::Result<Self> {
        let ident = f.ident.as_ref().expect("named");
        Ok(Field {
            member: quote!(#ident),
            name: ident.to_string(),
            ty: f.ty.clone(),
            skip: skipped(f)?,
        })
    }
    fn unnamed(i: usize, f: &syn::Field) -> syn::Result<Self> {
        let index = syn::Index::from(i);
        Ok(Field {
            member: quote!(#index),
            name: i.to_string(),
            ty: f.ty.clone(),
            skip: skipped(f)?,
        })
    }
}

/// `#[module(skip)]`: a field that is not a layer (a config value, a cache).
fn skipped(f: &syn::Field) -> syn::Result<bool> {
    let mut skip = false;
    for attr in f.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|m| {
            if m.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else {
                Err(m.error("the only field option is `#[module(skip)]`"))
            }
        })?;
    }
    Ok(skip)
}

/// `impl Module<__D, __E>`, bounded by every visited field being a module: it
/// holds for exactly the device and float type the fields are on.
fn module_impl(input: &DeriveInput, fields: &[Field]) -> TokenStream {
    let name = &input.ident;
    let mut generics = input.generics.clone();
    generics
        .params
        .push(syn::parse_quote!(__D: ::volta::Backend<__E>));
    generics
        .params
        .push(syn::parse_quote!(__E: ::volta::dtype::Float));
    let (impl_generics, _, _) = generics.split_for_impl();
    let (_, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut predicates: Vec<TokenStream> = where_clause
        .map(|w| w.predicates.iter().map(|p| quote!(#p)).collect())
        .unwrap_or_default();
    let visited: Vec<&Field> = fields.iter().filter(|f| !f.skip).collect();
    predicates.extend(visited.iter().map(|f| {
        let ty = &f.ty;
        quote!(#ty: ::volta::nn::Module<__D, __E>)
    }));
    let visits = visited.iter().map(|f| {
        let (m, n) = (&f.member, &f.name);
        quote!(v.module(#n, &mut self.#m);)
    });
    quote! {
        impl #impl_generics ::volta::nn::Module<__D, __E> for #name #ty_generics
        where #(#predicates,)*
        {
            fn visit(&mut self, v: &mut ::volta::nn::Visitor<'_, __D, __E>) {
                #(#visits)*
            }
        }
    }
}

/// The type parameter bounded by `Backend<…>`, and that bound's float type.
struct Device {
    ident: Ident,
    elem: Type,
}

fn device_param(input: &DeriveInput) -> Option<Device> {
    let backend_elem = |b: &syn::TypeParamBound| -> Option<Type> {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let last = t.path.segments.last()?;
        if last.ident != "Backend" {
            return None;
        }
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        args.args.iter().find_map(|a| match a {
            syn::GenericArgument::Type(t) => Some(t.clone()),
            _ => None,
        })
    };
    for p in &input.generics.params {
        if let GenericParam::Type(t) = p
            && let Some(elem) = t.bounds.iter().find_map(backend_elem)
        {
            return Some(Device {
                ident: t.ident.clone(),
                elem,
            });
        }
    }
    let where_clause = input.generics.where_clause.as_ref()?;
    where_clause.predicates.iter().find_map(|p| {
        let syn::WherePredicate::Type(pt) = p else {
            return None;
        };
        let Type::Path(tp) = &pt.bounded_ty else {
            return None;
        };
        let ident = tp.path.get_ident()?.clone();
        let elem = pt.bounds.iter().find_map(backend_elem)?;
        Some(Device { ident, elem })
    })
}

/// Replaces one type parameter by another in a type.
struct Rename<'a> {
    from: &'a Ident,
    to: &'a Ident,
}

impl VisitMut for Rename<'_> {
    fn visit_ident_mut(&mut self, i: &mut Ident) {
        if i == self.from {
            *i = self.to.clone();
        }
    }
}

/// `impl ToDevice<E>`: `On<D2>` is the struct with `D2` for its device.
fn to_device_impl(input: &DeriveInput, fields: &[Field], device: &Device) -> TokenStream {
    let name = &input.ident;
    let d2 = format_ident!("__D2");
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut moved_generics = input.generics.clone();
    Rename {
        from: &device.ident,
        to: &d2,
    }
    .visit_generics_mut(&mut moved_generics);
    let (_, moved_ty_generics, _) = moved_generics.split_for_impl();
    let elem = &device.elem;
    let moves = fields.iter().map(|f| {
        let m = &f.member;
        if f.skip {
            quote!(#m: ::std::clone::Clone::clone(&self.#m))
        } else {
            quote!(#m: ::volta::nn::ToDevice::<#elem>::to::<#d2>(&self.#m))
        }
    });
    quote! {
        impl #impl_generics ::volta::nn::ToDevice<#elem> for #name #ty_generics #where_clause {
            type On<#d2: ::volta::Backend<#elem>> = #name #moved_ty_generics;
            fn to<#d2: ::volta::Backend<#elem>>(&self) -> Self::On<#d2> {
                #name { #(#moves,)* }
            }
        }
    }
}
