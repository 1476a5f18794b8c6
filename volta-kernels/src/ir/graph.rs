//! The node graph and its simplifying, hash-consing constructors.
use crate::{BinaryOp, UnaryOp};
use std::collections::HashMap;

/// Evaluates callee `c` (`None`) or its partial `k` (`Some(k)`) at some arguments.
pub type CallEval = dyn Fn(u16, Option<u16>, &[f64]) -> f64;

/// Index of a node in its [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// One scalar operation. Inputs are per-element tensor values; params are scalars
/// shared by every element (uniforms on the GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// The i-th tensor input.
    Input(u16),
    /// The i-th scalar parameter.
    Param(u16),
    /// An f32 literal, by bits (so nodes hash).
    Lit(u32),
    /// A unary op.
    Unary(UnaryOp, NodeId),
    /// A binary op.
    Binary(BinaryOp, NodeId, NodeId),
    /// `cond != 0 ? a : b`.
    Select(NodeId, NodeId, NodeId),
    /// A call of another kernel (a scalar function): `site` indexes [`Graph::call_site`].
    Call(u32),
    /// The partial derivative of the call at `site` with respect to its argument `arg`.
    CallPartial(u32, u16),
}

/// The callee and arguments of a [`Node::Call`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallSite {
    /// The callee, as an index into a table kept by whoever builds the graph.
    pub callee: u16,
    /// The arguments.
    pub args: Vec<NodeId>,
}

/// A graph of nodes, each stored once, in an order where inputs precede users.
#[derive(Clone, Debug)]
pub struct Graph {
    nodes: Vec<Node>,
    index: HashMap<Node, NodeId>,
    sites: Vec<CallSite>,
    site_index: HashMap<CallSite, u32>,
    /// Whether constructors fold literals and rewrite algebra (see [`Graph::exact`]).
    simplify: bool,
}

impl Default for Graph {
    fn default() -> Self {
        Graph {
            nodes: Vec::new(),
            index: HashMap::new(),
            sites: Vec::new(),
            site_index: HashMap::new(),
            simplify: true,
        }
    }
}

impl Graph {
    /// An empty graph whose constructors simplify (`x·1 → x`, `x − x → 0`, constant
    /// folding): right for derivatives, where such terms abound and the rules are
    /// documented, but not IEEE-exact (`x − x` is NaN for an infinite `x`).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty graph that only shares equal nodes (and orders the operands of
    /// commutative ops), so it computes exactly what was written: how the runtime
    /// lowers fused kernels, which must match unfused results.
    pub fn exact() -> Self {
        Graph {
            simplify: false,
            ..Self::default()
        }
    }

    /// The nodes, inputs before users.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node `id`.
    pub fn node(&self, id: NodeId) -> Node {
        self.nodes[id.0 as usize]
    }

    /// Adds `node` unless an equal node exists (hash-consing).
    fn intern(&mut self, node: Node) -> NodeId {
        if let Some(&id) = self.index.get(&node) {
            return id;
        }
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(node);
        self.index.insert(node, id);
        id
    }

    /// The callee and arguments of call `site`.
    pub fn call_site(&self, site: u32) -> &CallSite {
        &self.sites[site as usize]
    }

    /// A call of `callee` (a scalar function, e.g. another kernel) with `args`.
    pub fn call(&mut self, callee: u16, args: Vec<NodeId>) -> NodeId {
        let site = CallSite { callee, args };
        let next = self.sites.len() as u32;
        let id = *self.site_index.entry(site.clone()).or_insert(next);
        if id == next {
            self.sites.push(site);
        }
        self.intern(Node::Call(id))
    }

    /// ∂(call at `site`)/∂(argument `arg`).
    pub fn call_partial(&mut self, site: u32, arg: u16) -> NodeId {
        self.intern(Node::CallPartial(site, arg))
    }

    /// The i-th tensor input.
    pub fn input(&mut self, i: u16) -> NodeId {
        self.intern(Node::Input(i))
    }
    /// The i-th scalar parameter.
    pub fn param(&mut self, i: u16) -> NodeId {
        self.intern(Node::Param(i))
    }
    /// A literal.
    pub fn lit(&mut self, v: f32) -> NodeId {
        // One zero: -0.0 and 0.0 behave alike in every op here but `1/x`.
        let v = if v == 0.0 && self.simplify { 0.0 } else { v };
        self.intern(Node::Lit(v.to_bits()))
    }

    /// The literal value of `id`, if it is one.
    pub fn as_lit(&self, id: NodeId) -> Option<f32> {
        match self.node(id) {
            Node::Lit(bits) => Some(f32::from_bits(bits)),
            _ => None,
        }
    }

    /// `op(x)`, folded when `x` is a literal.
    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> NodeId {
        if !self.simplify {
            return self.intern(Node::Unary(op, x));
        }
        if let Some(v) = self.as_lit(x) {
            return self.lit(op.eval(v));
        }
        match (op, self.node(x)) {
            (UnaryOp::Neg, Node::Unary(UnaryOp::Neg, inner)) => inner,
            _ => self.intern(Node::Unary(op, x)),
        }
    }

    /// `op(a, b)` with algebraic simplification.
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> NodeId {
        let (la, lb) = (self.as_lit(a), self.as_lit(b));
        if let (Some(x), Some(y), true) = (la, lb, self.simplify) {
            return self.lit(op.eval(x, y));
        }
        match op {
            _ if !self.simplify => {}
            BinaryOp::Add if la == Some(0.0) => return b,
            BinaryOp::Add | BinaryOp::Sub if lb == Some(0.0) => return a,
            BinaryOp::Sub if la == Some(0.0) => return self.unary(UnaryOp::Neg, b),
            BinaryOp::Sub if a == b => return self.lit(0.0),
            BinaryOp::Mul if la == Some(0.0) || lb == Some(0.0) => return self.lit(0.0),
            BinaryOp::Mul if la == Some(1.0) => return b,
            BinaryOp::Mul | BinaryOp::Div if lb == Some(1.0) => return a,
            BinaryOp::Mul if la == Some(-1.0) => return self.unary(UnaryOp::Neg, b),
            BinaryOp::Mul if lb == Some(-1.0) => return self.unary(UnaryOp::Neg, a),
            BinaryOp::Div if la == Some(0.0) => return self.lit(0.0),
            BinaryOp::Pow if lb == Some(1.0) => return a,
            BinaryOp::Pow if lb == Some(0.0) => return self.lit(1.0),
            _ => {}
        }
        // Commutative ops get a canonical operand order, so `a·b` and `b·a` are one node.
        let commutative = matches!(
            op,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Max
                | BinaryOp::Min
                | BinaryOp::Eq
                | BinaryOp::Ne
        );
        let (a, b) = if commutative && b < a { (b, a) } else { (a, b) };
        self.intern(Node::Binary(op, a, b))
    }

    /// `cond != 0 ? a : b`, folded when the condition is a literal or both sides agree.
    pub fn select(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> NodeId {
        if !self.simplify {
            return self.intern(Node::Select(cond, a, b));
        }
        if a == b {
            return a;
        }
        match self.as_lit(cond) {
            Some(c) if c != 0.0 => a,
            Some(_) => b,
            None => self.intern(Node::Select(cond, a, b)),
        }
    }

    /// Shorthands.
    pub fn add(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(BinaryOp::Add, a, b)
    }
    /// a − b.
    pub fn sub(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(BinaryOp::Sub, a, b)
    }
    /// a · b.
    pub fn mul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(BinaryOp::Mul, a, b)
    }
    /// a / b.
    pub fn div(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(BinaryOp::Div, a, b)
    }
    /// −a.
    pub fn neg(&mut self, a: NodeId) -> NodeId {
        self.unary(UnaryOp::Neg, a)
    }
    /// a · c for a literal c.
    pub fn scale(&mut self, a: NodeId, c: f32) -> NodeId {
        let c = self.lit(c);
        self.mul(a, c)
    }

    /// Evaluates `outputs` for one element, given inputs and params (an interpreter:
    /// the reference semantics that tests compare generated code against). Graphs
    /// with calls need [`eval_with`](Self::eval_with).
    pub fn eval(&self, outputs: &[NodeId], inputs: &[f64], params: &[f64]) -> Vec<f64> {
        self.eval_with(outputs, inputs, params, &|_, _, _| {
            panic!("eval: the graph has calls; use eval_with")
        })
    }

    /// Like [`eval`](Self::eval); `call(callee, partial, args)` evaluates a callee
    /// (`partial = None`) or its partial derivative with respect to an argument.
    pub fn eval_with(
        &self,
        outputs: &[NodeId],
        inputs: &[f64],
        params: &[f64],
        call: &CallEval,
    ) -> Vec<f64> {
        let mut values = vec![0.0f64; self.nodes.len()];
        let last = outputs
            .iter()
            .map(|o| o.0 as usize)
            .max()
            .map_or(0, |m| m + 1);
        for (i, node) in self.nodes[..last].iter().enumerate() {
            let v = |id: NodeId| values[id.0 as usize];
            values[i] = match *node {
                Node::Input(k) => inputs[k as usize],
                Node::Param(k) => params[k as usize],
                Node::Lit(bits) => f32::from_bits(bits) as f64,
                Node::Unary(op, x) => op.eval(v(x)),
                Node::Binary(op, a, b) => op.eval(v(a), v(b)),
                Node::Select(c, a, b) => {
                    if v(c) != 0.0 {
                        v(a)
                    } else {
                        v(b)
                    }
                }
                Node::Call(site) | Node::CallPartial(site, _) => {
                    let s = &self.sites[site as usize];
                    let args: Vec<f64> = s.args.iter().map(|&a| v(a)).collect();
                    let partial = if let Node::CallPartial(_, k) = *node {
                        Some(k)
                    } else {
                        None
                    };
                    call(s.callee, partial, &args)
                }
            };
        }
        outputs.iter().map(|o| values[o.0 as usize]).collect()
    }
}
