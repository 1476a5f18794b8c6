// Writes T tokens' keys (rotated by RoPE) and values into a KV cache in place, at
// positions pos..pos+T, and their queries (rotated) into `qrot`, read from the
// fused qkv rows (queries, keys, values). The cache is (2, kv_heads, capacity,
// d): keys, then values; `qrot` is (T, heads, d). The RoPE table is (capacity,
// d/2, 2) of (cos, sin). One thread per (token, head of either kind, pair of
// features): query heads first, then key/value heads.
//
// p: [0] T, [1] heads, [2] kv heads, [3] d, [4] capacity, [5] qkv offset,
//    [6] qkv row stride, [7] pos offset, [8] rope offset.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> rope: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
@group(0) @binding(4) var<storage, read_write> cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> qrot: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let e = (wid.y * nwg.x + wid.x) * 256u + li;
    let heads = p[1];
    let kv = p[2];
    let d = p[3];
    let half = d / 2u;
    if e >= p[0] * (heads + kv) * half {
        return;
    }
    let i = e % half;
    let g = (e / half) % (heads + kv);
    let t = e / (half * (heads + kv));
    let at = pos[p[7]] + t;
    if at >= p[4] {
        return;
    }
    let row = p[5] + t * p[6];
    // Query heads, then key heads: head g's pair i in the fused row.
    let x = row + g * d + 2u * i;
    let cs = p[8] + (at * half + i) * 2u;
    let c = rope[cs];
    let s = rope[cs + 1u];
    let a = qkv[x];
    let b = qkv[x + 1u];
    if g < heads {
        let dst = (t * heads + g) * d + 2u * i;
        qrot[dst] = a * c - b * s;
        qrot[dst + 1u] = a * s + b * c;
        return;
    }
    let kh = g - heads;
    let vx = row + (heads + kv + kh) * d + 2u * i;
    let dst = (kh * p[4] + at) * d + 2u * i;
    let vals = kv * p[4] * d;
    cache[dst] = a * c - b * s;
    cache[dst + 1u] = a * s + b * c;
    cache[vals + dst] = qkv[vx];
    cache[vals + dst + 1u] = qkv[vx + 1u];
}
