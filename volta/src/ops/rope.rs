//! Rotary position embeddings (RoPE, Su et al.): each pair of features of a token
//! at position `p` is rotated by the angle `p·θ_i`, `θ_i = base^(−2i/d)`.
//!
//! The pairs are adjacent features `(x[2i], x[2i+1])`, the layout of GGUF Llama
//! checkpoints (llama.cpp's "normal" RoPE: its converter permutes the query and key
//! weights so that Hugging Face's half-split pairs become adjacent). Composed from
//! views, products and a concatenation, so autograd and both devices come for free.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::Shape;
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::BinaryOp;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// Rotates adjacent feature pairs of `x` (`[…, T, d]`, `d` even): the token at
    /// row `t` of the second-last axis is at position `start + t`.
    ///
    /// # Panics
    /// When `x` has fewer than 2 axes or an odd last dim, or `base` is not > 1.
    #[track_caller]
    pub fn rope(&self, start: usize, base: f64) -> Self {
        let dims = self.dims().to_vec();
        let rank = dims.len();
        assert!(
            rank >= 2 && dims[rank - 1].is_multiple_of(2),
            "rope: expected [.., T, d] with an even d, got {dims:?}"
        );
        assert!(base > 1.0, "rope: base must be > 1, got {base}");
        let (t, d) = (dims[rank - 2], dims[rank - 1]);
        let half = d / 2;
        // Angle tables in f64 on the host: [T, d/2, 1], broadcast over the batch axes.
        let (mut cos, mut sin) = (Vec::with_capacity(t * half), Vec::with_capacity(t * half));
        for row in 0..t {
            let p = (start + row) as f64;
            for i in 0..half {
                let angle = p * base.powf(-2.0 * i as f64 / d as f64);
                cos.push(E::from_f64(angle.cos()));
                sin.push(E::from_f64(angle.sin()));
            }
        }
        let mut pair_dims = dims.clone();
        pair_dims[rank - 1] = half;
        pair_dims.push(2);
        let mut one_dims = pair_dims.clone();
        one_dims[rank] = 1;
        let table = |v| {
            let mut table_dims = vec![1; rank - 2];
            table_dims.extend([t, half, 1]);
            RawTensor::from_vec(v, &table_dims).expand(&one_dims)
        };
        let (cos, sin) = (table(cos), table(sin));
        let pairs = self.reshape(&pair_dims);
        let x0 = pairs.narrow(rank, 0, 1);
        let x1 = pairs.narrow(rank, 1, 1);
        let y0 = x0
            .binary(BinaryOp::Mul, &cos)
            .binary(BinaryOp::Sub, &x1.binary(BinaryOp::Mul, &sin));
        let y1 = x0
            .binary(BinaryOp::Mul, &sin)
            .binary(BinaryOp::Add, &x1.binary(BinaryOp::Mul, &cos));
        RawTensor::cat(&[y0, y1], rank).reshape(&dims)
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Rotary position embedding over the last two axes (`[…, T, d]`, `d` even):
    /// the token at row `t` is at position `start + t` (`start` is the number of
    /// tokens already in a KV cache), rotated with frequencies `base^(−2i/d)` over
    /// adjacent feature pairs, as GGUF Llama checkpoints lay them out.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let q = Tensor::<Rank3<2, 3, 4>>::ones();
    /// let r = q.rope(0, 10_000.0);
    /// assert_eq!(&r.to_vec()[..4], &[1.0, 1.0, 1.0, 1.0]); // position 0: unrotated
    /// ```
    ///
    /// # Panics
    /// When the tensor has fewer than 2 axes or an odd last dim, or `base` ≤ 1.
    #[track_caller]
    pub fn rope(&self, start: usize, base: f64) -> Self {
        self.map_raw(|r| r.rope(start, base))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::cpu::Cpu;
    use crate::shape::Rank3;
    use crate::tensor::{RawTensor, Tensor};

    /// RoPE by its definition, in f64.
    #[track_caller]
    fn reference(x: &[f64], t: usize, d: usize, start: usize, base: f64) -> Vec<f64> {
        let mut out = x.to_vec();
        for (n, row) in out.chunks_mut(d).enumerate() {
            let p = (start + n % t) as f64;
            for i in 0..d / 2 {
                let a = p * base.powf(-2.0 * i as f64 / d as f64);
                let (x0, x1) = (row[2 * i], row[2 * i + 1]);
                row[2 * i] = x0 * a.cos() - x1 * a.sin();
                row[2 * i + 1] = x0 * a.sin() + x1 * a.cos();
            }
        }
        out
    }

    #[test]
    #[track_caller]
    fn matches_the_definition_at_an_offset() {
        let (t, d) = (5, 8);
        let x: Vec<f64> = (0..2 * t * d).map(|i| (i as f64 * 0.37).sin()).collect();
        let got = RawTensor::<Cpu, f64>::from_vec(x.clone(), &[2, t, d])
            .rope(7, 10_000.0)
            .to_vec();
        for (a, b) in got.iter().zip(reference(&x, t, d, 7, 10_000.0)) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    #[track_caller]
    fn preserves_norms_and_its_gradient_is_the_inverse_rotation() {
        let x = Tensor::<Rank3<1, 3, 4>, Cpu, f64>::from_vec((0..12).map(f64::from).collect())
            .unwrap()
            .requires_grad();
        let y = x.rope(2, 100.0);
        let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>();
        assert!((norm(&y.to_vec()) - norm(&x.to_vec())).abs() < 1e-9);
        // d(sum(y ⊙ w))/dx = Rᵀ w: rotating that back by R gives w.
        let w: Vec<f64> = (0..12).map(|i| 1.0 + i as f64 * 0.1).collect();
        let wt = Tensor::<Rank3<1, 3, 4>, Cpu, f64>::from_vec(w.clone()).unwrap();
        let g = y.mul(&wt).sum_all().backward().get(&x).unwrap();
        let back = reference(&g.to_vec(), 3, 4, 2, 100.0);
        for (a, b) in back.iter().zip(&w) {
            assert!((a - b).abs() < 1e-12, "{back:?}");
        }
    }
}
