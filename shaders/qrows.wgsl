// Dequantised rows of a quantised matrix: out[i, c] = W[ids[i], c] (an embedding
// lookup, or with ids = 0..rows the whole matrix). The host prepends WORDS and
// QTYPE as for qmatmul.wgsl (same repacked blocks). One thread per four
// consecutive elements (one word of quants: k is a multiple of 32); an id past
// the last row reads the last row (the host checks ids).
//
// A matrix larger than one binding runs in slices of its rows, each launch binding
// a window of W (and of the output): without ids, output row i is the window's row
// i; with ids, a launch writes only the outputs whose id falls in its rows.
//
// p: [0] output rows, [1] k, [2] ids offset, [3] W rows, [4] 1: read ids, 0: row
//    i is the bound rows' row i (the whole matrix; ids is not read), [5] word
//    offset of the first bound row in w, [6] output offset, [7] the first bound
//    row (W's row index), [8] rows bound (with ids, outputs whose id falls
//    outside [p[7], p[7] + p[8]) are left alone).
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let t = (wid.y * nwg.x + wid.x) * 256u + li;
    let k = p[1];
    let quads = k / 4u;
    if t >= p[0] * quads {
        return;
    }
    var r = t / quads;
    if p[4] != 0u {
        r = min(ids[p[2] + r], p[3] - 1u);
        if r < p[7] || r - p[7] >= p[8] {
            return;
        }
        r -= p[7];
    }
    // Elements c..c + 4 of the row: weights i..i + 4 of one block.
    let c = (t % quads) * 4u;
    let at = p[5] + (r * (k / 32u) + c / 32u) * WORDS;
    let i = c % 32u;
    let o = p[6] + 4u * t;
    var v: vec4<f32>;
    if QTYPE == 255u {
        // [d0, d1, m, 8 words of i8]: weights i..i + 4 lie in one half.
        let q = vec4<f32>(unpack4xI8(w[at + 3u + i / 4u]));
        v = q * bitcast<f32>(w[at + i / 16u]) + bitcast<f32>(w[at + 2u]);
    } else if QTYPE == 8u {
        v = bitcast<f32>(w[at]) * vec4<f32>(unpack4xI8(w[at + 1u + i / 4u]));
    } else {
        // Weight i < 16 is the low nibble of byte i, weight i ≥ 16 the high one of
        // byte i − 16: four consecutive weights are the nibbles of one word.
        let word = w[at + 1u + (i % 16u) / 4u] >> (4u * (i / 16u));
        let q = vec4<f32>(unpack4xU8(word & 0x0F0F0F0Fu));
        if QTYPE == 3u {
            let dm = unpack2x16float(w[at]);
            v = q * dm.x + dm.y;
        } else {
            v = (q - 8.0) * bitcast<f32>(w[at]);
        }
    }
    out[o] = v.x;
    out[o + 1u] = v.y;
    out[o + 2u] = v.z;
    out[o + 3u] = v.w;
}
