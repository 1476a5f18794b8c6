//! Lowers the body to the kernel IR, remembering which Rust tokens made each node.
use super::parse::Kernel;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Ident, Lit, Pat, Stmt, UnOp};
use volta_kernels::ir::{Graph, NodeId, diff::derivatives};
use volta_kernels::{BinaryOp, UnaryOp};

const SUPPORTED: &str = "supported in #[kernel]: `let`, float literals, `+ - * / %`, unary `-`, \
comparisons and `&& || !` in `if` conditions, `if/else`, the built-ins (exp ln exp2 log2 sqrt recip relu sigmoid \
tanh sin cos abs gelu silu floor erf max min powf, also as methods), `std::f32::consts::*`, and calls of other #[kernel] functions";

/// The lowered kernel: the graph, its value and partials, and where nodes came from.
pub struct Lowered {
    pub graph: Graph,
    pub value: NodeId,
    /// ∂value/∂argument k, for every argument (declaration order).
    pub partials: Vec<NodeId>,
    /// The Rust span that created each node.
    pub spans: Vec<Span>,
    /// Called kernels: (name, arity), indexed by the graph's callee ids.
    pub callees: Vec<(Ident, usize)>,
}

/// A value in the body: a number, or a condition (0 or 1) usable only in `if`.
#[derive(Clone, Copy)]
enum Value {
    Num(NodeId),
    Cond(NodeId),
}

struct Lowerer {
    graph: Graph,
    spans: Vec<Span>,
    scopes: Vec<Vec<(Ident, Value)>>,
    callees: Vec<(Ident, usize)>,
}

pub fn lower(k: &Kernel) -> syn::Result<Lowered> {
    let mut l = Lowerer {
        graph: Graph::new(),
        spans: Vec::new(),
        scopes: vec![Vec::new()],
        callees: Vec::new(),
    };
    for (i, arg) in k.args.iter().enumerate() {
        let id = l.graph.input(i as u16);
        l.track(id, arg.name.span());
        l.scopes[0].push((arg.name.clone(), Value::Num(id)));
    }
    let value = match l.block(&k.body)? {
        Value::Num(v) => v,
        Value::Cond(_) => {
            return Err(syn::Error::new(
                k.body.span(),
                "a #[kernel] returns a number, not a condition",
            ));
        }
    };
    let one = l.graph.lit(1.0);
    let partials = derivatives(&mut l.graph, value, one, k.args.len() as u16);
    let end = l.graph.nodes().len();
    // Derivative nodes point back at the whole body.
    while l.spans.len() < end {
        l.spans.push(k.body.span());
    }
    Ok(Lowered {
        graph: l.graph,
        value,
        partials,
        spans: l.spans,
        callees: l.callees,
    })
}

impl Lowerer {
    /// Records `span` for every node created since the last call.
    fn track(&mut self, id: NodeId, span: Span) -> NodeId {
        while self.spans.len() < self.graph.nodes().len() {
            self.spans.push(span);
        }
        id
    }

    fn num(&mut self, e: &Expr) -> syn::Result<NodeId> {
        match self.expr(e)? {
            Value::Num(n) => Ok(n),
            Value::Cond(_) => Err(syn::Error::new(
                e.span(),
                "a condition cannot be used as a number here; write `if cond { a } else { b }`",
            )),
        }
    }

    fn cond(&mut self, e: &Expr) -> syn::Result<NodeId> {
        match self.expr(e)? {
            Value::Cond(c) => Ok(c),
            Value::Num(_) => Err(syn::Error::new(
                e.span(),
                "expected a condition such as `x > 0.0`",
            )),
        }
    }

    fn block(&mut self, b: &Block) -> syn::Result<Value> {
        self.scopes.push(Vec::new());
        let mut result = None;
        for (i, stmt) in b.stmts.iter().enumerate() {
            let last = i + 1 == b.stmts.len();
            match stmt {
                Stmt::Local(local) => {
                    let pat = match &local.pat {
                        Pat::Type(t) => &*t.pat,
                        p => p,
                    };
                    let name = match pat {
                        Pat::Ident(p) if p.mutability.is_some() => {
                            return Err(syn::Error::new(
                                p.mutability.span(),
                                "a #[kernel] binds each value once: write `let name = ...;` without `mut`",
                            ));
                        }
                        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                            p.ident.clone()
                        }
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "only `let name = ...;` bindings are allowed in #[kernel]",
                            ));
                        }
                    };
                    let Some(init) = &local.init else {
                        return Err(syn::Error::new(
                            local.span(),
                            "a `let` in a #[kernel] needs a value",
                        ));
                    };
                    if let Some((_, diverge)) = &init.diverge {
                        return Err(syn::Error::new(
                            diverge.span(),
                            "`let ... else` is not supported in #[kernel]",
                        ));
                    }
                    let v = self.expr(&init.expr)?;
                    self.scopes.last_mut().expect("a scope").push((name, v));
                }
                Stmt::Expr(e, None) if last => result = Some(self.expr(e)?),
                Stmt::Expr(Expr::Return(r), _) => {
                    return Err(syn::Error::new(
                        r.span(),
                        "`return` is not supported in #[kernel]: end the body with the result expression",
                    ));
                }
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        format!("unsupported statement; {SUPPORTED}"),
                    ));
                }
            }
        }
        self.scopes.pop();
        result.ok_or_else(|| {
            syn::Error::new(
                b.span(),
                "the block must end with a value (an expression without `;`)",
            )
        })
    }

    fn lookup(&self, name: &Ident) -> Option<Value> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    fn expr(&mut self, e: &Expr) -> syn::Result<Value> {
        let span = e.span();
        let v = match e {
            Expr::Lit(l) => Value::Num(self.literal(&l.lit)?),
            Expr::Paren(p) => return self.expr(&p.expr),
            Expr::Group(g) => return self.expr(&g.expr),
            Expr::Block(b) if b.label.is_none() => return self.block(&b.block),
            Expr::Cast(c) => return self.expr(&c.expr),
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident() {
                    return self.lookup(id).ok_or_else(|| {
                        syn::Error::new(id.span(), format!("unknown name `{id}` in #[kernel]"))
                    });
                }
                Value::Num(self.constant(&p.path)?)
            }
            Expr::Unary(u) => match u.op {
                UnOp::Neg(_) => {
                    let x = self.num(&u.expr)?;
                    Value::Num(self.graph.neg(x))
                }
                UnOp::Not(_) => {
                    let c = self.cond(&u.expr)?;
                    let one = self.graph.lit(1.0);
                    Value::Cond(self.graph.sub(one, c))
                }
                _ => return Err(unsupported(e)),
            },
            Expr::Binary(b) => self.binary(b)?,
            Expr::If(i) => {
                let c = self.cond(&i.cond)?;
                let a = self.block(&i.then_branch)?;
                let Some((_, else_branch)) = &i.else_branch else {
                    return Err(syn::Error::new(
                        i.span(),
                        "an `if` in a #[kernel] needs an `else` (both branches give a value)",
                    ));
                };
                let b = self.expr(else_branch)?;
                match (a, b) {
                    (Value::Num(a), Value::Num(b)) => Value::Num(self.graph.select(c, a, b)),
                    (Value::Cond(a), Value::Cond(b)) => Value::Cond(self.graph.select(c, a, b)),
                    _ => {
                        return Err(syn::Error::new(
                            i.span(),
                            "both branches of an `if` must be numbers",
                        ));
                    }
                }
            }
            Expr::MethodCall(m) => {
                let recv = self.num(&m.receiver)?;
                let args = m
                    .args
                    .iter()
                    .map(|a| self.num(a))
                    .collect::<syn::Result<Vec<_>>>()?;
                let name = m.method.to_string();
                match (name.as_str(), args.as_slice()) {
                    ("powi", [_]) => {
                        let n = &m.args[0];
                        let Expr::Lit(syn::ExprLit {
                            lit: Lit::Int(i), ..
                        }) = n
                        else {
                            return Err(syn::Error::new(
                                n.span(),
                                "`powi` takes an integer literal in #[kernel]",
                            ));
                        };
                        let p = self.graph.lit(i.base10_parse::<i32>()? as f32);
                        Value::Num(self.graph.binary(BinaryOp::Pow, recv, p))
                    }
                    ("clamp", [lo, hi]) => {
                        let m = self.graph.binary(BinaryOp::Max, recv, *lo);
                        Value::Num(self.graph.binary(BinaryOp::Min, m, *hi))
                    }
                    _ => {
                        let mut all = vec![recv];
                        all.extend(args);
                        Value::Num(self.builtin(&name, &all, m.method.span()).ok_or_else(
                            || {
                                syn::Error::new(
                                    m.method.span(),
                                    format!("unknown method `{name}` in #[kernel]; {SUPPORTED}"),
                                )
                            },
                        )??)
                    }
                }
            }
            Expr::Call(c) => {
                let Expr::Path(p) = &*c.func else {
                    return Err(unsupported(e));
                };
                let Some(name) = p.path.get_ident() else {
                    return Err(syn::Error::new(
                        p.span(),
                        "call kernels and built-ins by their plain name in #[kernel]",
                    ));
                };
                let args = c
                    .args
                    .iter()
                    .map(|a| self.num(a))
                    .collect::<syn::Result<Vec<_>>>()?;
                match self.builtin(&name.to_string(), &args, c.span()) {
                    Some(r) => Value::Num(r?),
                    None => Value::Num(self.call(name, args)),
                }
            }
            _ => return Err(unsupported(e)),
        };
        let id = match v {
            Value::Num(n) | Value::Cond(n) => n,
        };
        self.track(id, span);
        Ok(v)
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> syn::Result<Value> {
        let arith = |op: &BinOp| match op {
            BinOp::Add(_) => Some(BinaryOp::Add),
            BinOp::Sub(_) => Some(BinaryOp::Sub),
            BinOp::Mul(_) => Some(BinaryOp::Mul),
            BinOp::Div(_) => Some(BinaryOp::Div),
            BinOp::Rem(_) => Some(BinaryOp::Mod),
            _ => None,
        };
        let compare = |op: &BinOp| match op {
            BinOp::Lt(_) => Some(BinaryOp::Lt),
            BinOp::Le(_) => Some(BinaryOp::Le),
            BinOp::Gt(_) => Some(BinaryOp::Gt),
            BinOp::Ge(_) => Some(BinaryOp::Ge),
            BinOp::Eq(_) => Some(BinaryOp::Eq),
            BinOp::Ne(_) => Some(BinaryOp::Ne),
            _ => None,
        };
        if let Some(op) = arith(&b.op) {
            let (l, r) = (self.num(&b.left)?, self.num(&b.right)?);
            return Ok(Value::Num(self.graph.binary(op, l, r)));
        }
        if let Some(op) = compare(&b.op) {
            let (l, r) = (self.num(&b.left)?, self.num(&b.right)?);
            return Ok(Value::Cond(self.graph.binary(op, l, r)));
        }
        match b.op {
            BinOp::And(_) => {
                let (l, r) = (self.cond(&b.left)?, self.cond(&b.right)?);
                Ok(Value::Cond(self.graph.mul(l, r)))
            }
            BinOp::Or(_) => {
                let (l, r) = (self.cond(&b.left)?, self.cond(&b.right)?);
                Ok(Value::Cond(self.graph.binary(BinaryOp::Max, l, r)))
            }
            _ => Err(syn::Error::new(
                b.op.span(),
                format!(
                    "unsupported operator (compound assignment and bit operators are not kernel ops); {SUPPORTED}"
                ),
            )),
        }
    }

    fn literal(&mut self, lit: &Lit) -> syn::Result<NodeId> {
        let v = match lit {
            Lit::Float(f) => f.base10_parse::<f32>()?,
            Lit::Int(i) => i.base10_parse::<i64>()? as f32,
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "only number literals are allowed in #[kernel]",
                ));
            }
        };
        Ok(self.graph.lit(v))
    }

    /// `f32::consts::PI`, `std::f32::consts::E`, …
    fn constant(&mut self, path: &syn::Path) -> syn::Result<NodeId> {
        use std::f32::consts::*;
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let is_consts =
            segs.len() >= 3 && segs[segs.len() - 2] == "consts" && segs[segs.len() - 3] == "f32";
        let v = match segs.last().map(String::as_str) {
            Some("PI") if is_consts => PI,
            Some("E") if is_consts => E,
            Some("TAU") if is_consts => TAU,
            Some("LN_2") if is_consts => LN_2,
            Some("LN_10") if is_consts => LN_10,
            Some("SQRT_2") if is_consts => SQRT_2,
            Some("FRAC_1_SQRT_2") if is_consts => FRAC_1_SQRT_2,
            Some("FRAC_PI_2") if is_consts => FRAC_PI_2,
            _ => {
                return Err(syn::Error::new(
                    path.span(),
                    format!("unknown path in #[kernel]; {SUPPORTED}"),
                ));
            }
        };
        Ok(self.graph.lit(v))
    }

    /// A built-in by name: `None` if the name is not one.
    fn builtin(&mut self, name: &str, args: &[NodeId], span: Span) -> Option<syn::Result<NodeId>> {
        let unary = match name {
            "exp" => Some(UnaryOp::Exp),
            "ln" => Some(UnaryOp::Log),
            "exp2" => Some(UnaryOp::Exp2),
            "log2" => Some(UnaryOp::Log2),
            "sqrt" => Some(UnaryOp::Sqrt),
            "recip" => Some(UnaryOp::Recip),
            "relu" => Some(UnaryOp::Relu),
            "sigmoid" => Some(UnaryOp::Sigmoid),
            "tanh" => Some(UnaryOp::Tanh),
            "sin" => Some(UnaryOp::Sin),
            "cos" => Some(UnaryOp::Cos),
            "abs" => Some(UnaryOp::Abs),
            "gelu" => Some(UnaryOp::Gelu),
            "silu" => Some(UnaryOp::Silu),
            "floor" => Some(UnaryOp::Floor),
            "erf" => Some(UnaryOp::Erf),
            _ => None,
        };
        let binary = match name {
            "max" => Some(BinaryOp::Max),
            "min" => Some(BinaryOp::Min),
            "powf" => Some(BinaryOp::Pow),
            _ => None,
        };
        let arity_error = |n: usize| {
            Some(Err(syn::Error::new(
                span,
                format!("`{name}` takes {n} argument(s)"),
            )))
        };
        if let Some(op) = unary {
            let [x] = args else { return arity_error(1) };
            return Some(Ok(self.graph.unary(op, *x)));
        }
        if let Some(op) = binary {
            let [a, b] = args else { return arity_error(2) };
            return Some(Ok(self.graph.binary(op, *a, *b)));
        }
        None
    }

    /// A call of another #[kernel] function.
    fn call(&mut self, name: &Ident, args: Vec<NodeId>) -> NodeId {
        let idx = match self
            .callees
            .iter()
            .position(|(n, a)| n == name && *a == args.len())
        {
            Some(i) => i,
            None => {
                self.callees.push((name.clone(), args.len()));
                self.callees.len() - 1
            }
        };
        self.graph.call(idx as u16, args)
    }
}

fn unsupported(e: &Expr) -> syn::Error {
    syn::Error::new(e.span(), format!("unsupported expression; {SUPPORTED}"))
}
