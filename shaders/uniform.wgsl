// Uniform numbers in [0, 1) from a counter-based hash: element i depends only on
// (seed, i). The same integer operations as `volta::random::uniform_hash` (with the
// index's high word 0: a GPU buffer holds fewer than 2^32 elements), so every device
// returns the same values bit for bit.
//
// p: [0] outputs, [1] the seed's low word, [2] its high word.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<T>;

// lowbias32 (Chris Wellons): a bijection of u32 with good avalanche.
fn mix(v: u32) -> u32 {
    var h = v;
    h ^= h >> 16u;
    h *= 0x7feb352du;
    h ^= h >> 15u;
    h *= 0x846ca68bu;
    h ^= h >> 16u;
    return h;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * 256u + li;
    if (o >= p[0]) {
        return;
    }
    let k0 = mix(p[1] ^ 0x9e3779b9u);
    let k1 = mix(p[2] ^ k0 ^ 0x7f4a7c15u);
    var h = mix(o ^ k0);
    h = mix(h ^ k1);
    h = mix(h ^ k0);
    // 24 bits times 2^-24: exact in f32.
    dst[o] = T(f32(h >> 8u) * bitcast<f32>(0x33800000u));
}
