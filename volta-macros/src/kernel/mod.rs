//! `#[kernel]`: parse → lower to IR → differentiate → WGSL + naga → emit Rust.

mod emit;
mod lower;
mod parse;
mod validate;

use proc_macro2::TokenStream;

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let kernel = parse::parse(attr, item)?;
    let lowered = lower::lower(&kernel)?;
    let wgsl = emit::wgsl(&kernel, &lowered);
    validate::validate(&kernel, &lowered, &wgsl)?;
    Ok(emit::rust(&kernel, &lowered, &wgsl))
}
