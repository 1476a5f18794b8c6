//! Parses and validates the generated WGSL with naga while compiling, reporting any
//! error at the Rust tokens that produced the offending WGSL.
use super::emit::Wgsl;
use super::lower::Lowered;
use super::parse::Kernel;
use proc_macro2::Span;

pub fn validate(k: &Kernel, l: &Lowered, wgsl: &Wgsl) -> syn::Result<()> {
    // Called kernels are validated where they are defined; stand-ins with their
    // signatures let this module type-check on its own.
    let mut stubs = String::new();
    for (name, arity) in &l.callees {
        let params: Vec<String> = (0..*arity).map(|i| format!("a{i}: f32")).collect();
        let params = params.join(", ");
        stubs.push_str(&format!(
            "fn volta_k_{name}({params}) -> f32 {{ return 0.0; }}\n"
        ));
        for d in 0..*arity {
            stubs.push_str(&format!(
                "fn volta_k_{name}_d{d}({params}) -> f32 {{ return 0.0; }}\n"
            ));
        }
    }
    if let Some(bw) = &k.backward {
        let params: Vec<String> = (0..k.args.len()).map(|i| format!("a{i}: f32")).collect();
        for p in bw {
            let n = &p.segments.last().expect("a path").ident;
            stubs.push_str(&format!(
                "fn volta_k_{n}({}) -> f32 {{ return 0.0; }}\n",
                params.join(", ")
            ));
        }
    }
    let offset = stubs.len();
    let source = format!("{stubs}{}", wgsl.source);
    let span_at = |byte: Option<usize>| -> Span {
        byte.and_then(|b| b.checked_sub(offset))
            .and_then(|b| {
                wgsl.segments
                    .iter()
                    .find(|(r, _)| r.contains(&b))
                    .map(|(_, s)| *s)
            })
            .unwrap_or_else(|| k.name.span())
    };
    let module = match naga::front::wgsl::parse_str(&source) {
        Ok(m) => m,
        Err(e) => {
            let byte = e
                .labels()
                .next()
                .and_then(|(s, _)| s.to_range())
                .map(|r| r.start);
            let msg = format!(
                "#[kernel] generated invalid WGSL:\n{}",
                e.emit_to_string(&source)
            );
            return Err(syn::Error::new(span_at(byte), msg));
        }
    };
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    );
    if let Err(e) = validator.validate(&module) {
        let byte = e
            .spans()
            .next()
            .and_then(|(s, _)| s.to_range())
            .map(|r| r.start);
        let msg = format!(
            "#[kernel] generated WGSL that does not validate:\n{}",
            e.emit_to_string(&source)
        );
        return Err(syn::Error::new(span_at(byte), msg));
    }
    Ok(())
}
