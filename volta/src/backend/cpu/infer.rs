//! Transformer-inference kernels on the CPU: a quantised matmul that dequantises
//! each 32-weight block in registers (the scales converted to f32 once, at load),
//! and attention over a KV cache. Rows run in parallel on rayon.
use super::copy::strided_to_vec;
use crate::backend::infer::{AttnShape, QShape, swiglu};
use crate::io::quant::{BLOCK, BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType};
use crate::layout::Layout;
use rayon::prelude::*;
use std::sync::Arc;

/// Quantised weights on the CPU: per block, its scales as f32 (`d`, and `m` for
/// Q4_1) and its packed quants (16 bytes of nibbles or 32 signed bytes).
#[derive(Debug)]
pub struct CpuQuantized {
    ty: GgmlType,
    scales: Vec<f32>,
    quants: Vec<u8>,
}

impl CpuQuantized {
    fn scales_per_block(&self) -> usize {
        if self.ty == GgmlType::Q4_1 { 2 } else { 1 }
    }
    fn quant_bytes(&self) -> usize {
        if self.ty == GgmlType::Q8_0 { BLOCK } else { BLOCK / 2 }
    }
}

pub(crate) fn upload(shape: &QShape, bytes: &[u8]) -> Arc<CpuQuantized> {
    let blocks = shape.rows * shape.cols / BLOCK;
    let (mut scales, mut quants) = (Vec::new(), Vec::new());
    match shape.ty {
        GgmlType::Q4_0 => {
            for b in bytes.chunks_exact(BlockQ4_0::BYTES).take(blocks) {
                let b = BlockQ4_0::from_bytes(b.try_into().expect("a block"));
                scales.push(b.d.to_f32());
                quants.extend_from_slice(&b.qs);
            }
        }
        GgmlType::Q4_1 => {
            for b in bytes.chunks_exact(BlockQ4_1::BYTES).take(blocks) {
                let b = BlockQ4_1::from_bytes(b.try_into().expect("a block"));
                scales.extend([b.d.to_f32(), b.m.to_f32()]);
                quants.extend_from_slice(&b.qs);
            }
        }
        GgmlType::Q8_0 => {
            for b in bytes.chunks_exact(BlockQ8_0::BYTES).take(blocks) {
                let b = BlockQ8_0::from_bytes(b.try_into().expect("a block"));
                scales.push(b.d.to_f32());
                quants.extend(b.qs.iter().map(|&q| q as u8));
            }
        }
        other => panic!("upload_quantized: {other} is not a block type (Q4_0, Q4_1, Q8_0)"),
    }
    assert_eq!(scales.len(), blocks * if shape.ty == GgmlType::Q4_1 { 2 } else { 1 });
    Arc::new(CpuQuantized {
        ty: shape.ty,
        scales,
        quants,
    })
}

/// The 32 weights of block `b`.
fn dequantize_block(w: &CpuQuantized, b: usize) -> [f32; BLOCK] {
    let s = &w.scales[b * w.scales_per_block()..];
    let q = &w.quants[b * w.quant_bytes()..];
    let mut out = [0.0; BLOCK];
    match w.ty {
        GgmlType::Q8_0 => {
            for (o, &q) in out.iter_mut().zip(&q[..BLOCK]) {
                *o = f32::from(q as i8) * s[0];
            }
        }
        ty => {
            let (d, m) = match ty {
                GgmlType::Q4_1 => (s[0], s[1]),
                _ => (s[0], -8.0 * s[0]),
            };
            for j in 0..BLOCK / 2 {
                out[j] = f32::from(q[j] & 15) * d + m;
                out[j + BLOCK / 2] = f32::from(q[j] >> 4) * d + m;
            }
        }
    }
    out
}

/// `Σ w·x` over block `b` of `w` and the 32 values of `x`, whose sum is `x_sum`.
#[inline]
fn block_dot(w: &CpuQuantized, b: usize, x: &[f32], x_sum: f32) -> f32 {
    let s = &w.scales[b * w.scales_per_block()..];
    let q = &w.quants[b * w.quant_bytes()..];
    match w.ty {
        GgmlType::Q8_0 => {
            let mut acc = [0.0f32; 8];
            for (q, x) in q[..BLOCK].chunks_exact(8).zip(x.chunks_exact(8)) {
                for i in 0..8 {
                    acc[i] += f32::from(q[i] as i8) * x[i];
                }
            }
            acc.iter().sum::<f32>() * s[0]
        }
        ty => {
            // q·d + m (Q4_1) or (q − 8)·d (Q4_0): d·Σq·x plus the offset times Σx.
            let (lo, hi) = x.split_at(BLOCK / 2);
            let mut acc = [0.0f32; 16];
            for j in 0..BLOCK / 2 {
                acc[j] = f32::from(q[j] & 15) * lo[j] + f32::from(q[j] >> 4) * hi[j];
            }
            let dot: f32 = acc.iter().sum();
            match ty {
                GgmlType::Q4_1 => dot * s[0] + s[1] * x_sum,
                _ => (dot - 8.0 * x_sum) * s[0],
            }
        }
    }
}

pub(crate) fn dequantize_rows(
    w: &CpuQuantized,
    shape: &QShape,
    ids: (&[u32], &Layout),
) -> Vec<f32> {
    let ids = strided_to_vec(ids.0, ids.1);
    let per_row = shape.cols / BLOCK;
    let mut out = vec![0.0; ids.len() * shape.cols];
    for (row, &id) in out.chunks_exact_mut(shape.cols).zip(&ids) {
        let id = (id as usize).min(shape.rows - 1);
        for (b, dst) in row.chunks_exact_mut(BLOCK).enumerate() {
            dst.copy_from_slice(&dequantize_block(w, id * per_row + b));
        }
    }
    out
}

/// See [`InferenceBackend::qmatmul`](crate::backend::InferenceBackend::qmatmul).
pub(crate) fn qmatmul(
    x: (&[f32], &Layout),
    w: &CpuQuantized,
    shape: &QShape,
    norm: Option<((&[f32], &Layout), f32)>,
    glu: bool,
    add: Option<(&[f32], &Layout)>,
) -> Vec<f32> {
    let (m, k, n) = (x.1.dims[0], shape.cols, shape.rows);
    let mut x = strided_to_vec(x.0, x.1);
    if let Some((nw, eps)) = norm {
        let nw = strided_to_vec(nw.0, nw.1);
        for row in x.chunks_exact_mut(k) {
            let ms = row.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / k as f64;
            let inv = (1.0 / (ms + f64::from(eps)).sqrt()) as f32;
            for (v, w) in row.iter_mut().zip(&nw) {
                *v = *v * inv * w;
            }
        }
    }
    let sums: Vec<f32> = x.chunks_exact(BLOCK).map(|b| b.iter().sum()).collect();
    let per_row = k / BLOCK;
    // out[i, j] for every x row i, one weight row j at a time: each block is read
    // once for all m rows.
    let dot_row = |j: usize, out: &mut [f32]| {
        for (i, o) in out.iter_mut().enumerate() {
            let xs = &x[i * k..(i + 1) * k];
            let ss = &sums[i * per_row..(i + 1) * per_row];
            *o = (0..per_row)
                .map(|b| block_dot(w, j * per_row + b, &xs[b * BLOCK..(b + 1) * BLOCK], ss[b]))
                .sum();
        }
    };
    // Transposed while computing: `cols[j]` holds column j of the product.
    let mut cols = vec![0.0f32; n * m];
    if n * k * m >= 1 << 16 {
        let chunk = (n / (4 * rayon::current_num_threads())).max(16);
        cols.par_chunks_mut(chunk * m)
            .enumerate()
            .for_each(|(c, dst)| {
                for (r, col) in dst.chunks_exact_mut(m).enumerate() {
                    dot_row(c * chunk + r, col);
                }
            });
    } else {
        for (j, col) in cols.chunks_exact_mut(m).enumerate() {
            dot_row(j, col);
        }
    }
    let width = if glu { n / 2 } else { n };
    let mut out = vec![0.0; m * width];
    for i in 0..m {
        for j in 0..width {
            out[i * width + j] = if glu {
                swiglu(cols[j * m + i], cols[(j + width) * m + i])
            } else {
                cols[j * m + i]
            };
        }
    }
    if let Some(r) = add {
        for (o, r) in out.iter_mut().zip(strided_to_vec(r.0, r.1)) {
            *o += r;
        }
    }
    out
}

/// The position in a one-element `u32` view.
fn position(pos: (&[u32], &Layout)) -> usize {
    pos.0[pos.1.offset] as usize
}

pub(crate) fn kv_write(
    qkv: (&[f32], &Layout),
    rope: (&[f32], &Layout),
    pos: (&[u32], &Layout),
    keys: &mut Arc<Vec<f32>>,
    values: &mut Arc<Vec<f32>>,
    s: &AttnShape,
) {
    let (t, d, p0) = (qkv.1.dims[0], s.head_dim, position(pos));
    assert!(p0 + t <= s.capacity, "kv_write: past the cache's capacity");
    let qkv = strided_to_vec(qkv.0, qkv.1);
    let rope = &rope.0[rope.1.offset..];
    let width = (s.heads + 2 * s.kv_heads) * d;
    let (keys, values) = (Arc::make_mut(keys), Arc::make_mut(values));
    for ti in 0..t {
        let p = p0 + ti;
        let row = &qkv[ti * width..(ti + 1) * width];
        for g in 0..s.kv_heads {
            let k = &row[(s.heads + g) * d..(s.heads + g + 1) * d];
            let v = &row[(s.heads + s.kv_heads + g) * d..(s.heads + s.kv_heads + g + 1) * d];
            let at = (g * s.capacity + p) * d;
            rotate(k, &rope[p * d..(p + 1) * d], &mut keys[at..at + d]);
            values[at..at + d].copy_from_slice(v);
        }
    }
}

/// `x`'s adjacent pairs turned by the `(cos, sin)` pairs of `table`.
fn rotate(x: &[f32], table: &[f32], out: &mut [f32]) {
    for i in 0..x.len() / 2 {
        let (c, s) = (table[2 * i], table[2 * i + 1]);
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        out[2 * i] = a * c - b * s;
        out[2 * i + 1] = a * s + b * c;
    }
}

pub(crate) fn cached_attention(
    qkv: (&[f32], &Layout),
    rope: (&[f32], &Layout),
    pos: (&[u32], &Layout),
    keys: &[f32],
    values: &[f32],
    s: &AttnShape,
) -> Vec<f32> {
    let (t, d, p0) = (qkv.1.dims[0], s.head_dim, position(pos));
    let qkv = strided_to_vec(qkv.0, qkv.1);
    let rope = &rope.0[rope.1.offset..];
    let width = (s.heads + 2 * s.kv_heads) * d;
    let group = s.heads / s.kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0.0; t * s.heads * d];
    let head = |(i, o): (usize, &mut [f32])| {
        let (ti, h) = (i / s.heads, i % s.heads);
        let p = p0 + ti;
        let mut q = vec![0.0; d];
        rotate(
            &qkv[ti * width + h * d..ti * width + (h + 1) * d],
            &rope[p * d..(p + 1) * d],
            &mut q,
        );
        let base = (h / group) * s.capacity * d;
        let scores: Vec<f32> = (0..=p)
            .map(|j| {
                let k = &keys[base + j * d..base + (j + 1) * d];
                q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
            })
            .collect();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for (j, sc) in scores.iter().enumerate() {
            let e = (sc - max).exp();
            sum += e;
            let v = &values[base + j * d..base + (j + 1) * d];
            for (o, v) in o.iter_mut().zip(v) {
                *o += e * v;
            }
        }
        for o in o.iter_mut() {
            *o /= sum;
        }
    };
    if t * s.heads > 1 && (p0 + t) * t * d >= 1 << 14 {
        out.par_chunks_mut(d).enumerate().for_each(head);
    } else {
        out.chunks_mut(d).enumerate().for_each(head);
    }
    out
}
