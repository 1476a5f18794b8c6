// scatter_add's adjoint of `index_select` (an embedding's backward): out[t, c] =
// Σ_j [idx[j] == t] · src[j, c], every line c sharing one index vector. Each
// workgroup owns R output rows and 16 lines: it scans the indices in chunks of
// 1024, lists the chunk's hits on its rows in index order (a prefix sum over the
// threads, no atomics), and its 16 lane groups add the hits' source rows into
// their own sums in workgroup memory (group g takes hits g, g + 16, …), which are
// added up in group order at the end. Deterministic, and each source row is read
// by the workgroups owning its index only: O(N·lines) reads of the source, where
// scanning every index per output element would be O(V·N·lines).
// Out-of-range indices raise flag 0.
//
// p: [0] V (output rows), [1] lines, [2] N (indices), [3] idx offset, [4] idx
//    stride, [5] src offset, [6] src stride along j, [7] src stride along lines.
// The output is contiguous [V, lines]. The element type: f32, or f16 in the
// variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> idx: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<T>;
@group(0) @binding(3) var<storage, read_write> dst: array<T>;
@group(0) @binding(4) var<storage, read_write> flags: array<atomic<u32>>;

// Output rows per workgroup, lines per workgroup, lane groups.
const R: u32 = 8u;
const LINES: u32 = 16u;
const GROUPS: u32 = 16u;
// Indices scanned per chunk: four per thread.
const CHUNK: u32 = 1024u;

// Per lane group, its sums of the workgroup's R rows × 16 lines.
var<workgroup> sums: array<f32, GROUPS * R * LINES>;
// The chunk's hits in index order: j · R + (row − first row).
var<workgroup> hits: array<u32, CHUNK>;
var<workgroup> counts: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row0 = wid.x * R;
    let lane = li % LINES;
    let group = li / LINES;
    let line = wid.y * LINES + lane;
    for (var r = 0u; r < R; r++) {
        sums[(group * R + r) * LINES + lane] = 0.0;
    }
    for (var c0 = 0u; c0 < p[2]; c0 += CHUNK) {
        // This thread's four indices: which fall in the workgroup's rows.
        var mine: array<u32, 4>;
        var count = 0u;
        for (var i = 0u; i < 4u; i++) {
            let j = c0 + 4u * li + i;
            if (j < p[2]) {
                let t = idx[p[3] + j * p[4]];
                if (t >= p[0]) {
                    atomicOr(&flags[0], 1u);
                } else if (t >= row0 && t < row0 + R) {
                    mine[count] = j * R + (t - row0);
                    count += 1u;
                }
            }
        }
        // Inclusive prefix sum of the counts over the threads.
        counts[li] = count;
        workgroupBarrier();
        for (var o = 1u; o < 256u; o <<= 1u) {
            var v = 0u;
            if (li >= o) {
                v = counts[li - o];
            }
            workgroupBarrier();
            counts[li] += v;
            workgroupBarrier();
        }
        let first = counts[li] - count;
        for (var i = 0u; i < count; i++) {
            hits[first + i] = mine[i];
        }
        let total = counts[255];
        workgroupBarrier();
        if (line < p[1]) {
            for (var h = group; h < total; h += GROUPS) {
                let hit = hits[h];
                let j = hit / R;
                let s = (group * R + hit % R) * LINES + lane;
                sums[s] += f32(src[p[5] + j * p[6] + line * p[7]]);
            }
        }
        workgroupBarrier();
    }
    // Group 0 adds the groups' sums up, in group order.
    if (group == 0u && line < p[1]) {
        for (var r = 0u; r < R; r++) {
            if (row0 + r < p[0]) {
                var total = 0.0;
                for (var g = 0u; g < GROUPS; g++) {
                    total += sums[(g * R + r) * LINES + lane];
                }
                dst[(row0 + r) * p[1] + line] = T(total);
            }
        }
    }
}
