// Dequantised rows of a quantised matrix: out[i, c] = W[ids[i], c] (an embedding
// lookup, or with ids = 0..rows the whole matrix). The host prepends WORDS and
// QTYPE as for qmatmul.wgsl (same repacked blocks). One thread per element; an id
// past the last row reads the last row (the host checks ids).
//
// p: [0] output rows, [1] k, [2] ids offset, [3] W rows, [4] 1: read ids, 0: row
//    i is W's row i (the whole matrix; ids is not read).
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let e = (wid.y * nwg.x + wid.x) * 256u + li;
    let k = p[1];
    if e >= p[0] * k {
        return;
    }
    var r = e / k;
    if p[4] != 0u {
        r = min(ids[p[2] + r], p[3] - 1u);
    }
    let c = e % k;
    let at = (r * (k / 32u) + c / 32u) * WORDS;
    let i = c % 32u;
    if QTYPE == 8u {
        let q = bitcast<i32>(w[at + 1u + i / 4u]);
        out[e] = bitcast<f32>(w[at]) * f32(extractBits(q, 8u * (i % 4u), 8u));
        return;
    }
    // Weight i < 16 is the low nibble of byte i, weight i ≥ 16 the high one of byte i − 16.
    let byte = i % 16u;
    let q = f32(extractBits(w[at + 1u + byte / 4u], 8u * (byte % 4u) + 4u * (i / 16u), 4u));
    if QTYPE == 3u {
        let dm = unpack2x16float(w[at]);
        out[e] = q * dm.x + dm.y;
    } else {
        out[e] = (q - 8.0) * bitcast<f32>(w[at]);
    }
}
