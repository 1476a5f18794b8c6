//! Transformer-inference kernels on the CPU: a quantised matmul (by default on
//! 8-bit activations and integer dot products, see [`q8`](super::q8); in the exact
//! mode each 32-weight block dequantised in registers, in f32), its rows in
//! parallel on the warm helpers of [`pool`](super::pool); and attention over a KV
//! cache (heads in parallel on rayon).
use super::copy::strided_to_vec;
use super::pool;
use super::q8::{self, Q8Rows};
use super::quantized::{CpuQuantized, Q5_0_QUANT_BYTES, WRow, k_sub_block, q5_0_quants};
use crate::backend::infer::{Activations, AttnShape, QShape, swiglu};
use crate::io::quant::{BLOCK, GgmlType, QFormat, SUPER_BLOCK};
use crate::layout::Layout;
use rayon::prelude::*;
use std::sync::Arc;

/// The 32 weights of block `b`.
fn dequantize_block(w: &CpuQuantized, b: usize) -> [f32; BLOCK] {
    let mut out = [0.0; BLOCK];
    if let QFormat::Ggml(GgmlType::Q4_K | GgmlType::Q6_K) = w.format {
        let (d, m, q) = w.k_sub_block_at(b);
        for (i, o) in out.iter_mut().enumerate() {
            *o = f32::from(q[i]) * d[i / 16] + m;
        }
        return out;
    }
    let spb = w.scales_per_block();
    let q = &w.quants[b * w.quant_bytes()..];
    if w.format == QFormat::SubBlocks {
        let s = &w.scales[b * spb..];
        for (i, o) in out.iter_mut().enumerate() {
            *o = f32::from(q[i] as i8) * s[i / 16] + s[2];
        }
        return out;
    }
    if w.format == QFormat::Ggml(GgmlType::Q5_0) {
        let d = w.halves[b].to_f32();
        for (o, q) in out.iter_mut().zip(q5_0_quants(q)) {
            // `+ 0.0` as the sub-blocks' `q·d + m` (−0 becomes 0).
            *o = f32::from(q) * d + 0.0;
        }
        return out;
    }
    let mut s = [0.0f32; 2];
    for (s, h) in s.iter_mut().zip(&w.halves[b * spb..(b + 1) * spb]) {
        *s = h.to_f32();
    }
    match w.format {
        QFormat::Ggml(GgmlType::Q8_0) => {
            for (o, &q) in out.iter_mut().zip(&q[..BLOCK]) {
                *o = f32::from(q as i8) * s[0];
            }
        }
        format => {
            let (d, m) = match format {
                QFormat::Ggml(GgmlType::Q4_1) => (s[0], s[1]),
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

/// `Σ w·x` over weight row `j` and the row `x` (with its per-block sums `x_sums`).
/// Per block, the quants become f32 in a 16- or 32-lane vector that is scaled into
/// a running vector sum; written so that LLVM vectorises it (fixed-size arrays, no
/// bounds checks), and compiled twice: for AVX2+FMA when the CPU has them.
#[inline(always)]
fn row_dot(w: &CpuQuantized, j: usize, x: &[f32], x_sums: &[f32]) -> f32 {
    let WRow {
        quants,
        scales,
        halves,
    } = w.row(j);
    let spb = w.scales_per_block();
    let blocks = x
        .chunks_exact(BLOCK)
        .map(|b| -> &[f32; BLOCK] { b.try_into().unwrap() });
    match w.format {
        QFormat::SubBlocks => {
            const H: usize = BLOCK / 2;
            let (mut low, mut high) = ([0.0f32; H], [0.0f32; H]);
            let mut offset = 0.0;
            for (((q, xb), s), xs) in quants
                .chunks_exact(BLOCK)
                .zip(blocks)
                .zip(scales.chunks_exact(3))
                .zip(x_sums)
            {
                let q: &[u8; BLOCK] = q.try_into().unwrap();
                for i in 0..H {
                    low[i] += s[0] * (f32::from(q[i] as i8) * xb[i]);
                    high[i] += s[1] * (f32::from(q[i + H] as i8) * xb[i + H]);
                }
                offset += s[2] * xs;
            }
            low.iter().sum::<f32>() + high.iter().sum::<f32>() + offset
        }
        // The sub-blocks' sums in their order (a Q5_0 block recovered from a
        // sub-block gives the same values to the bit).
        QFormat::Ggml(GgmlType::Q5_0) => {
            const H: usize = BLOCK / 2;
            let (mut low, mut high) = ([0.0f32; H], [0.0f32; H]);
            for ((q, xb), d) in quants
                .chunks_exact(Q5_0_QUANT_BYTES)
                .zip(blocks)
                .zip(halves)
            {
                let (q, d) = (q5_0_quants(q), d.to_f32());
                for i in 0..H {
                    low[i] += d * (f32::from(q[i]) * xb[i]);
                    high[i] += d * (f32::from(q[i + H]) * xb[i + H]);
                }
            }
            // The sub-blocks' offset term: 0 (as `0.0 + 0·Σx`).
            low.iter().sum::<f32>() + high.iter().sum::<f32>() + 0.0
        }
        // The sub-blocks' sums in their order, super-block by super-block.
        format @ QFormat::Ggml(GgmlType::Q4_K | GgmlType::Q6_K) => {
            const H: usize = BLOCK / 2;
            let supers = x.len() / SUPER_BLOCK;
            let (mut low, mut high) = ([0.0f32; H], [0.0f32; H]);
            let mut offset = 0.0;
            for ((q, h), (xs, sums)) in quants
                .chunks_exact(quants.len() / supers)
                .zip(halves.chunks_exact(halves.len() / supers))
                .zip(x.chunks_exact(SUPER_BLOCK).zip(x_sums.chunks_exact(8)))
            {
                for (j, (xb, xsum)) in xs.chunks_exact(BLOCK).zip(sums).enumerate() {
                    let (s, m, q) = k_sub_block(format, q, h, j);
                    let xb: &[f32; BLOCK] = xb.try_into().unwrap();
                    for i in 0..H {
                        low[i] += s[0] * (f32::from(q[i]) * xb[i]);
                        high[i] += s[1] * (f32::from(q[i + H]) * xb[i + H]);
                    }
                    offset += m * xsum;
                }
            }
            low.iter().sum::<f32>() + high.iter().sum::<f32>() + offset
        }
        QFormat::Ggml(GgmlType::Q8_0) => {
            let mut total = [0.0f32; BLOCK];
            for ((q, xb), d) in quants.chunks_exact(BLOCK).zip(blocks).zip(halves) {
                let (q, d): (&[u8; BLOCK], f32) = (q.try_into().unwrap(), d.to_f32());
                for i in 0..BLOCK {
                    total[i] += d * (f32::from(q[i] as i8) * xb[i]);
                }
            }
            total.iter().sum()
        }
        format => {
            const H: usize = BLOCK / 2;
            let mut total = [0.0f32; H];
            let mut offset = 0.0;
            for (((q, xb), s), xs) in quants
                .chunks_exact(H)
                .zip(blocks)
                .zip(halves.chunks_exact(spb))
                .zip(x_sums)
            {
                let q: &[u8; H] = q.try_into().unwrap();
                let s = [s[0].to_f32(), s[spb - 1].to_f32()];
                let mut acc = [0.0f32; H];
                for i in 0..H {
                    acc[i] = f32::from(q[i] & 15) * xb[i] + f32::from(q[i] >> 4) * xb[i + H];
                }
                for i in 0..H {
                    total[i] += s[0] * acc[i];
                }
                // q·d + m (Q4_1) or (q − 8)·d (Q4_0): the offset times Σx.
                offset += if format == QFormat::Ggml(GgmlType::Q4_1) {
                    s[1]
                } else {
                    -8.0 * s[0]
                } * xs;
            }
            total.iter().sum::<f32>() + offset
        }
    }
}

/// `out[r·m + i] = row_dot(row j0 + r, x row i)` for the rows of a chunk.
#[inline(always)]
fn dot_rows(w: &CpuQuantized, j0: usize, x: &[f32], sums: &[f32], k: usize, out: &mut [f32]) {
    let m = x.len() / k;
    for (r, col) in out.chunks_exact_mut(m).enumerate() {
        for (i, o) in col.iter_mut().enumerate() {
            let per_row = k / BLOCK;
            *o = row_dot(
                w,
                j0 + r,
                &x[i * k..(i + 1) * k],
                &sums[i * per_row..(i + 1) * per_row],
            );
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_rows_avx2(w: &CpuQuantized, j0: usize, x: &[f32], sums: &[f32], k: usize, out: &mut [f32]) {
    dot_rows(w, j0, x, sums, k, out);
}

fn dot_rows_best(w: &CpuQuantized, j0: usize, x: &[f32], sums: &[f32], k: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function was compiled for.
        return unsafe { dot_rows_avx2(w, j0, x, sums, k, out) };
    }
    dot_rows(w, j0, x, sums, k, out);
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
    w: &Arc<CpuQuantized>,
    shape: &QShape,
    norm: Option<((&[f32], &Layout), f32)>,
    glu: bool,
    add: Option<(&[f32], &Layout)>,
    activations: Activations,
) -> Vec<f32> {
    let (m, k, n) = (x.1.dims[0], shape.cols, shape.rows);
    let mut x = strided_to_vec(x.0, x.1);
    if let Some((nw, eps)) = norm {
        let nw = strided_to_vec(nw.0, nw.1);
        for row in x.chunks_exact_mut(k) {
            let ms = row
                .iter()
                .map(|v| f64::from(*v) * f64::from(*v))
                .sum::<f64>()
                / k as f64;
            let inv = (1.0 / (ms + f64::from(eps)).sqrt()) as f32;
            for (v, w) in row.iter_mut().zip(&nw) {
                *v = *v * inv * w;
            }
        }
    }
    // Transposed while computing: `cols[j]` holds column j of the product, in
    // chunks of rows that run in parallel.
    let parallel = n * k * m >= 1 << 16;
    let chunk = (n / (4 * rayon::current_num_threads())).max(16);
    let rows = move |c: usize| c * chunk..((c + 1) * chunk).min(n);
    let w = Arc::clone(w);
    let task: Box<dyn Fn(usize) -> Vec<f32> + Send + Sync> = match activations {
        Activations::Int8 => {
            let x = Q8Rows::quantize(&x, k, w.kind);
            Box::new(move |c| {
                let mut out = vec![0.0; rows(c).len() * m];
                q8::dot_rows(&w, rows(c).start, &x, &mut out);
                out
            })
        }
        Activations::F32 => {
            let sums: Vec<f32> = x.chunks_exact(BLOCK).map(|b| b.iter().sum()).collect();
            Box::new(move |c| {
                let mut out = vec![0.0; rows(c).len() * m];
                dot_rows_best(&w, rows(c).start, &x, &sums, k, &mut out);
                out
            })
        }
    };
    let cols = pool::run(n.div_ceil(chunk), parallel, task).concat();
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

/// Which sequence of the cache each query row belongs to, and its position.
pub(crate) struct Rows {
    /// `(sequence, position)` per row of `qkv`.
    rows: Vec<(usize, usize)>,
    /// Sequences the cache holds: `(2, sequences, kv_heads, capacity, d)`.
    sequences: usize,
}

impl Rows {
    /// The rows of `t` queries with the positions in `pos` (see
    /// [`InferenceBackend::attend`](crate::backend::InferenceBackend::attend)):
    /// one position, `t` consecutive tokens of one sequence; `t` positions, one
    /// token of each of `t` sequences.
    pub(crate) fn of(pos: (&[u32], &Layout), t: usize) -> Self {
        let pos = strided_to_vec(pos.0, pos.1);
        assert!(
            pos.len() == 1 || pos.len() == t,
            "attend: {} positions for {t} rows (one, or one per row)",
            pos.len()
        );
        if pos.len() == 1 {
            let p0 = pos[0] as usize;
            return Rows {
                rows: (0..t).map(|i| (0, p0 + i)).collect(),
                sequences: 1,
            };
        }
        Rows {
            rows: pos
                .iter()
                .enumerate()
                .map(|(b, &p)| (b, p as usize))
                .collect(),
            sequences: t,
        }
    }
}

/// Writes the rows' keys and values into the cache, then attends (see
/// [`InferenceBackend::attend`](crate::backend::InferenceBackend::attend)).
pub(crate) fn attend(
    qkv: (&[f32], &Layout),
    rope: (&[f32], &Layout),
    rows: &Rows,
    cache: &mut Arc<Vec<f32>>,
    s: &AttnShape,
) -> Vec<f32> {
    kv_write(qkv, rope, rows, &mut Arc::make_mut(cache)[..], s);
    cached_attention(qkv, rope, rows, cache, s)
}

fn kv_write(
    qkv: (&[f32], &Layout),
    rope: (&[f32], &Layout),
    rows: &Rows,
    cache: &mut [f32],
    s: &AttnShape,
) {
    let d = s.head_dim;
    assert!(
        rows.rows.iter().all(|&(_, p)| p < s.capacity),
        "kv_write: past the cache's capacity"
    );
    let qkv = strided_to_vec(qkv.0, qkv.1);
    let rope = &rope.0[rope.1.offset..];
    let width = (s.heads + 2 * s.kv_heads) * d;
    let per_seq = s.kv_heads * s.capacity * d;
    let (keys, values) = cache.split_at_mut(rows.sequences * per_seq);
    for (ti, &(seq, p)) in rows.rows.iter().enumerate() {
        let row = &qkv[ti * width..(ti + 1) * width];
        for g in 0..s.kv_heads {
            let k = &row[(s.heads + g) * d..(s.heads + g + 1) * d];
            let v = &row[(s.heads + s.kv_heads + g) * d..(s.heads + s.kv_heads + g + 1) * d];
            let at = seq * per_seq + (g * s.capacity + p) * d;
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

fn cached_attention(
    qkv: (&[f32], &Layout),
    rope: (&[f32], &Layout),
    rows: &Rows,
    cache: &[f32],
    s: &AttnShape,
) -> Vec<f32> {
    let (t, d) = (qkv.1.dims[0], s.head_dim);
    let qkv = strided_to_vec(qkv.0, qkv.1);
    let rope = &rope.0[rope.1.offset..];
    let width = (s.heads + 2 * s.kv_heads) * d;
    let group = s.heads / s.kv_heads;
    let per_seq = s.kv_heads * s.capacity * d;
    let (keys, values) = cache.split_at(rows.sequences * per_seq);
    let scale = 1.0 / (d as f32).sqrt();
    let longest = rows.rows.iter().map(|r| r.1 + 1).max().unwrap_or(0);
    let mut out = vec![0.0; t * s.heads * d];
    let head = |(i, o): (usize, &mut [f32])| {
        let (ti, h) = (i / s.heads, i % s.heads);
        let (seq, p) = rows.rows[ti];
        let mut q = vec![0.0; d];
        rotate(
            &qkv[ti * width + h * d..ti * width + (h + 1) * d],
            &rope[p * d..(p + 1) * d],
            &mut q,
        );
        let base = seq * per_seq + (h / group) * s.capacity * d;
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
    if t * s.heads > 1 && longest * t * d >= 1 << 14 {
        out.par_chunks_mut(d).enumerate().for_each(head);
    } else {
        out.chunks_mut(d).enumerate().for_each(head);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::quantized::tests::{NATIVE, native_and_sub_blocks};

    /// ggml's blocks held natively give the values that their sub-blocks give,
    /// to the bit: dequantised, and in the exact matmul's dot products (with and
    /// without AVX2), rows of odd numbers of blocks included.
    #[test]
    fn native_blocks_equal_their_sub_blocks_in_f32() {
        let (n, m) = (5, 3);
        let mut seed = 11;
        for (ty, k) in NATIVE {
            let (native, reference) = native_and_sub_blocks(ty, (n, k), &mut seed);
            for b in 0..n * k / BLOCK {
                let bits = |w| dequantize_block(w, b).map(f32::to_bits);
                assert_eq!(bits(&native), bits(&reference), "{ty}: block {b}");
            }
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 250.0)
                .collect();
            let sums: Vec<f32> = x.chunks_exact(BLOCK).map(|b| b.iter().sum()).collect();
            let run = |w: &CpuQuantized, best: bool| {
                let mut out = vec![0.0; n * m];
                if best {
                    dot_rows_best(w, 0, &x, &sums, k, &mut out);
                } else {
                    dot_rows(w, 0, &x, &sums, k, &mut out);
                }
                out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            for best in [false, true] {
                assert_eq!(
                    run(&native, best),
                    run(&reference, best),
                    "{ty}, best: {best}"
                );
            }
        }
    }
}
