// Reduction of one axis (keep-dim). The host substitutes IDENTITY and COMBINE(a, b)
// for the op (sum, max, min).
//
// p: [0] outputs, [1] rank, [2] n = axis length, [3] axis stride, [4] input offset,
//    [5..11] input dims with the axis set to 1, [11..17] input strides.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

const WG: u32 = 256u;
var<workgroup> partial: array<f32, WG>;

fn combine(a: f32, b: f32) -> f32 {
    return COMBINE;
}

// Offset of the first element that output `o` reduces.
fn base(o: u32) -> u32 {
    var rem = o;
    var at = p[4];
    for (var a = i32(p[1]) - 1; a >= 0; a--) {
        let d = p[5u + u32(a)];
        at += (rem % d) * p[11u + u32(a)];
        rem /= d;
    }
    return at;
}

// One workgroup per output: threads stride over the axis, then a shared-memory tree.
@compute @workgroup_size(256)
fn tree(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = wid.y * nwg.x + wid.x;
    if (o >= p[0]) {
        return;
    }
    let b = base(o);
    let n = p[2];
    let s = p[3];
    var acc = IDENTITY;
    for (var k = li; k < n; k += WG) {
        acc = combine(acc, src[b + k * s]);
    }
    partial[li] = acc;
    workgroupBarrier();
    for (var w = WG / 2u; w > 0u; w >>= 1u) {
        if (li < w) {
            partial[li] = combine(partial[li], partial[li + w]);
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        dst[o] = partial[0];
    }
}

// One thread per output, walking the axis: adjacent threads read adjacent elements
// when the axis is not the innermost one.
@compute @workgroup_size(256)
fn serial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * WG + li;
    if (o >= p[0]) {
        return;
    }
    let b = base(o);
    let s = p[3];
    var acc = IDENTITY;
    for (var k = 0u; k < p[2]; k++) {
        acc = combine(acc, src[b + k * s]);
    }
    dst[o] = acc;
}
