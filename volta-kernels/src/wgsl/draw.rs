//! Inputs drawn rather than loaded: uniform numbers from the counter-based hash
//! (`shaders/counter_hash.wgsl`, `volta::random::uniform_hash`), computed where a
//! kernel would read them. Element `e` of the stream with seed words `(lo, hi)`
//! is `unit24(counter_hash(e, 0, stream_keys(lo, hi)))`, the value a buffer of
//! uniform numbers would hold at `e`, so a tensor of them (dropout's) need never
//! be written: each kernel that reads it draws its elements at the addresses it
//! would load.
use super::elementwise::Elem;
use std::fmt::Write;

/// The inputs of a kernel that are drawn: `(input, seed)` pairs, `seed` the
/// index, among the expression's scalars, of the seed's low word (its high
/// word follows). The input keeps its binding (a placeholder buffer is bound)
/// and its addressing; only its loads change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Draws(pub Vec<(usize, usize)>);

impl Draws {
    /// The seed's scalar index if input `i` is drawn.
    pub fn seed(&self, i: usize) -> Option<usize> {
        self.0
            .iter()
            .find(|&&(input, _)| input == i)
            .map(|&(_, s)| s)
    }

    /// Input `i`'s name in a profile: `u{i}` when drawn, else `x{i}`.
    pub fn name(&self, i: usize) -> String {
        match self.seed(i) {
            Some(_) => format!("u{i}"),
            None => format!("x{i}"),
        }
    }

    /// The functions drawing needs (none without drawn inputs).
    pub(crate) fn preamble(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        format!(
            "{}{DRAW}",
            include_str!("../../../shaders/counter_hash.wgsl")
        )
    }

    /// One `let k{i} = stream_keys(..)` per drawn input, `param(j)` being the
    /// WGSL of the expression's raw scalar word `j`.
    pub(crate) fn keys(&self, w: &mut String, param: &dyn Fn(usize) -> String) {
        for &(i, s) in &self.0 {
            writeln!(
                w,
                "    let k{i} = stream_keys({}, {});",
                param(s),
                param(s + 1)
            )
            .unwrap();
        }
    }

    /// Input `i`'s value at element `index` in the compute type, or, when
    /// `wide`, the four at `4·index ..` (a `vec4` load's), each rounded as a
    /// buffer of `elem` would hold it. `None` when `i` is not drawn.
    pub(crate) fn load(&self, i: usize, elem: Elem, index: &str, wide: bool) -> Option<String> {
        self.seed(i)?;
        let v = if wide {
            format!("volta_draw4(({index}) * 4u, k{i})")
        } else {
            format!("volta_draw({index}, k{i})")
        };
        Some(elem.load(&elem.store(&v, wide), wide))
    }
}

/// `volta_draw(e, k)`: element `e` of the stream with keys `k`; `volta_draw4`,
/// the four from `e`.
const DRAW: &str = "
fn volta_draw(e: u32, k: vec2<u32>) -> f32 {
    return unit24(counter_hash(e, 0u, k));
}
fn volta_draw4(e: u32, k: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(volta_draw(e, k), volta_draw(e + 1u, k), volta_draw(e + 2u, k), volta_draw(e + 3u, k));
}
";
