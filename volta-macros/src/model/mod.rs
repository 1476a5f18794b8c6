//! `model!`: parse the block → plan its shapes (checking each layer) → emit the
//! struct and its impls. `shape` is the planner's picture of dims, `args` reads a
//! layer's arguments, and `check` words the errors and holds the checks left to
//! rustc (dims after a nested model).

mod args;
mod check;
mod emit;
mod parse;
mod plan;
mod shape;

use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let def: parse::ModelDef = syn::parse2(input)?;
    let plan = plan::plan(&def)?;
    Ok(emit::emit(&def, &plan))
}
