// Uniform numbers in [0, 1) from a counter-based hash: element i depends only on
// (seed, i). The runtime prepends counter_hash.wgsl, `volta::random::uniform_hash`'s
// integer operations (the index's high word is 0: a GPU buffer holds fewer than
// 2^32 elements), so every device returns the same values bit for bit.
//
// p: [0] outputs, [1] the seed's low word, [2] its high word.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * 256u + li;
    if (o >= p[0]) {
        return;
    }
    dst[o] = T(unit24(counter_hash(o, 0u, stream_keys(p[1], p[2]))));
}
