//! Printing graph nodes as WGSL or Rust statements.
//!
//! Each needed node becomes one `let`, in graph order, so shared subexpressions are
//! computed once. Inputs, params and literals are printed inline.
use super::{Graph, Node, NodeId};
use std::collections::HashSet;
use std::fmt::Write;

/// The target language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// WGSL, f32.
    Wgsl,
    /// Rust, f32, calling `{path}::UnaryOp::X.eval(..)` for the op semantics.
    Rust {
        /// Path of the `volta_kernels` crate as seen from the generated code.
        path: &'static str,
    },
}

/// How to print the leaves and calls of a graph.
pub struct Names<'a> {
    /// The i-th tensor input.
    pub input: &'a dyn Fn(u16) -> String,
    /// The i-th scalar param.
    pub param: &'a dyn Fn(u16) -> String,
    /// The function computing callee `c` (`None`) or its partial `k` (`Some(k)`).
    pub callee: &'a dyn Fn(u16, Option<u16>) -> String,
}

/// The code computing some outputs of a graph.
pub struct Body {
    /// One `let` statement per line.
    pub code: String,
    /// The node each line of `code` computes.
    pub lines: Vec<NodeId>,
    /// The expression of each output.
    pub outputs: Vec<String>,
}

/// Statements computing `outputs`, and the expression of each output. `prefix` keeps
/// the generated `let` names apart when several bodies share a scope.
pub fn body(g: &Graph, outputs: &[NodeId], lang: Lang, prefix: &str, names: &Names) -> Body {
    let (input, param) = (names.input, names.param);
    let needed = needed(g, outputs);
    let mut code = String::new();
    let mut lines = Vec::new();
    let name = |id: NodeId| -> String {
        match g.node(id) {
            Node::Input(i) => input(i),
            Node::Param(i) => param(i),
            Node::Lit(bits) => literal(f32::from_bits(bits), lang),
            _ => format!("{prefix}{}", id.0),
        }
    };
    for (i, node) in g.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        if !needed.contains(&id) {
            continue;
        }
        let expr = match (*node, lang) {
            (Node::Input(_) | Node::Param(_) | Node::Lit(_), _) => continue,
            (Node::Unary(op, x), Lang::Wgsl) => op.wgsl(&name(x)),
            (Node::Binary(op, a, b), Lang::Wgsl) => op.wgsl(&name(a), &name(b)),
            (Node::Select(c, a, b), Lang::Wgsl) => {
                format!("select({}, {}, {} != 0.0)", name(b), name(a), name(c))
            }
            (Node::Unary(op, x), Lang::Rust { path }) => {
                format!("{path}::UnaryOp::{op:?}.eval::<f32>({})", name(x))
            }
            (Node::Binary(op, a, b), Lang::Rust { path }) => format!(
                "{path}::BinaryOp::{op:?}.eval::<f32>({}, {})",
                name(a),
                name(b)
            ),
            (Node::Select(c, a, b), Lang::Rust { .. }) => format!(
                "if {} != 0.0 {{ {} }} else {{ {} }}",
                name(c),
                name(a),
                name(b)
            ),
            (Node::Call(site) | Node::CallPartial(site, _), _) => {
                let s = g.call_site(site);
                let partial = if let Node::CallPartial(_, k) = *node {
                    Some(k)
                } else {
                    None
                };
                let args: Vec<String> = s.args.iter().map(|&a| name(a)).collect();
                format!("{}({})", (names.callee)(s.callee, partial), args.join(", "))
            }
        };
        lines.push(id);
        let ty = if lang == Lang::Wgsl { "" } else { ": f32" };
        writeln!(code, "let {prefix}{i}{ty} = {expr};").expect("writing to a String");
    }
    Body {
        code,
        lines,
        outputs: outputs.iter().map(|&o| name(o)).collect(),
    }
}

fn needed(g: &Graph, outputs: &[NodeId]) -> HashSet<NodeId> {
    let mut seen = HashSet::new();
    let mut stack = outputs.to_vec();
    while let Some(id) = stack.pop() {
        if seen.insert(id) {
            match g.node(id) {
                Node::Unary(_, x) => stack.push(x),
                Node::Binary(_, a, b) => stack.extend([a, b]),
                Node::Select(c, a, b) => stack.extend([c, a, b]),
                Node::Call(site) | Node::CallPartial(site, _) => {
                    stack.extend(g.call_site(site).args.iter().copied())
                }
                _ => {}
            }
        }
    }
    seen
}

/// An f32 literal that parses back to the same bits.
fn literal(v: f32, lang: Lang) -> String {
    match lang {
        Lang::Wgsl if !v.is_finite() => format!("bitcast<f32>({}u)", v.to_bits()),
        Lang::Rust { .. } if !v.is_finite() => format!("f32::from_bits({}u32)", v.to_bits()),
        Lang::Wgsl => {
            let s = format!("{v:?}");
            if v < 0.0 { format!("({s})") } else { s }
        }
        Lang::Rust { .. } => format!("({v:?}f32)"),
    }
}
