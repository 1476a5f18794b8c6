//! Quantised weights larger than one binding, passed as a user would pass them:
//! the dequantisation (whole, and rows by id, including more ids than one binding
//! of output holds) and the quantised matmul (the GEMV path, m ≤ 8, with each fused
//! extra, and the dense path, m > 8, which dequantises the whole weight) run in
//! slices of the weight's rows and match the CPU. Each weight here is just over
//! one binding of repacked words (Q8_0: 9 words per 32 values, Q4_0: 5), under
//! the binary `gpu_bindings`'s cap (`crate::limit`).
#![cfg(feature = "gpu")]

use half::f16;
use std::time::Instant;
use volta::backend::{InferenceBackend, Memory};
use volta::io::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType};
use volta::layout::Layout;
use volta::shape::Dims;
use volta::tensor::{Activations, QMATMUL_GEMV_ROWS, QMatmulOptions, QTensor, RawTensor};
use volta::{Cpu, Gpu};

/// Input features of every weight here.
const COLS: usize = 4096;

/// Bytes of the GPU's repacked words for a `rows × COLS` weight of `ty`.
fn repacked_bytes(ty: GgmlType, rows: usize) -> u64 {
    let words = if ty == GgmlType::Q8_0 { 9 } else { 5 };
    (rows * COLS / 32 * words * 4) as u64
}

/// A cheap deterministic stream (a 64-bit LCG's high bits): 130 MB of blocks in
/// well under a second.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 32) as u32
    }
    /// In [-0.5, 0.5).
    fn uniform(&mut self) -> f32 {
        (self.next() >> 8) as f32 / (1 << 24) as f32 - 0.5
    }
}

/// ggml blocks of `ty` (Q4_0, Q4_1 or Q8_0) for a `rows × COLS` matrix.
fn blocks(ty: GgmlType, rows: usize, seed: u64) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let (size, quants) = match ty {
        GgmlType::Q4_0 => (BlockQ4_0::BYTES, 16),
        GgmlType::Q4_1 => (BlockQ4_1::BYTES, 16),
        _ => (BlockQ8_0::BYTES, 32),
    };
    let mut bytes = Vec::with_capacity(rows * COLS / 32 * size);
    for _ in 0..rows * COLS / 32 {
        bytes.extend(f16::from_f32(rng.uniform() * 0.2).to_le_bytes());
        if ty == GgmlType::Q4_1 {
            bytes.extend(f16::from_f32(rng.uniform() * 0.2).to_le_bytes());
        }
        for _ in 0..quants / 4 {
            bytes.extend(rng.next().to_le_bytes());
        }
    }
    assert_eq!(bytes.len(), rows * COLS / 32 * size);
    bytes
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Lcg(seed);
    (0..n).map(|_| rng.uniform() * 2.0).collect()
}

fn both(data: Vec<f32>, dims: &[usize]) -> (RawTensor<Cpu, f32>, RawTensor<Gpu, f32>) {
    (
        RawTensor::from_vec(data.clone(), dims),
        RawTensor::from_vec(data, dims),
    )
}

/// Checks every `step`-th element (about 100,000 of them, every one of a short
/// result) and the last one, within `tol` of the largest magnitude in `want`
/// (long dot products cancel).
fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let top = want.iter().fold(1.0f32, |m, w| m.max(w.abs()));
    let step = (got.len() / 100_003).max(1);
    for i in (0..got.len()).step_by(step).chain([got.len() - 1]) {
        let (g, w) = (got[i], want[i]);
        assert!((g - w).abs() <= tol * top, "{what}[{i}]: {g} vs {w}");
    }
}

/// Times `f`, printing the time under `what` (`--nocapture` shows it).
fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    eprintln!("{what}: {:.2} s", t.elapsed().as_secs_f64());
    out
}

/// The weight on both devices.
fn weight(ty: GgmlType, rows: usize, seed: u64) -> (QTensor<Cpu>, QTensor<Gpu>) {
    let bytes = blocks(ty, rows, seed);
    (
        QTensor::from_blocks(ty, rows, COLS, &bytes).unwrap(),
        QTensor::from_blocks(ty, rows, COLS, &bytes).unwrap(),
    )
}

/// Ids at the table's first and last rows, around the slice boundaries of a
/// binding, and one past the table (read as its last row).
fn edge_ids(ty: GgmlType, rows: usize) -> Vec<u32> {
    let per = crate::limit() as usize / (repacked_bytes(ty, 1) as usize);
    let mut ids = vec![0, rows as u32 - 1, 1, (rows / 2) as u32, rows as u32 + 5];
    for b in [per - 64, per - 1, per, per + 1] {
        ids.push(b.min(rows - 1) as u32);
    }
    ids.push(rows as u32 - 2);
    ids
}

fn dequantize_matches(cw: &QTensor<Cpu>, gw: &QTensor<Gpu>, ty: GgmlType) {
    let rows = cw.shape().rows;
    let want = cw.dequantize().to_vec();
    let got = timed(&format!("{ty} dequantize ({rows} rows)"), || {
        gw.dequantize().to_vec()
    });
    // Every element, exactly (the slices of W and of the output meet inside rows;
    // a zero's sign may differ).
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{ty} dequantize[{i}]: {} vs {}", got[i], want[i]);
    }
    drop((got, want));

    let ids = edge_ids(ty, rows);
    let n = ids.len();
    let (ci, gi) = (
        RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[n]),
        RawTensor::<Gpu, u32>::from_vec(ids.clone(), &[n]),
    );
    let got = timed(&format!("{ty} rows by id ({n} ids)"), || {
        gw.rows(&gi).to_vec()
    });
    assert_eq!(got, cw.rows(&ci).to_vec(), "{ty} rows by id");
    // The ids as a view: from an offset (read in place), and strided (copied first).
    let spread: Vec<u32> = ids.iter().flat_map(|&i| [7, i]).collect();
    let views = [
        (ids, Layout::contiguous(&[n - 1]), 1),
        (spread, Layout::contiguous(&[n]), 2),
    ];
    for (data, dims, stride) in views {
        let layout = Layout {
            offset: 1,
            strides: Dims::new(&[stride]),
            ..dims
        };
        let cv = RawTensor::<Cpu, u32>::leaf(Cpu::from_vec(data.clone()), layout);
        let gv = RawTensor::<Gpu, u32>::leaf(Gpu::from_vec(data), layout);
        assert_eq!(
            gw.rows(&gv).to_vec(),
            cw.rows(&cv).to_vec(),
            "{ty} rows by an id view of stride {stride}"
        );
    }
}

/// The fused extras of a qmatmul case: norm, glu, add.
type Case = (bool, bool, bool);
const PLAIN: Case = (false, false, false);
const NORM_ADD: Case = (true, false, true);
const NORM_GLU_ADD: Case = (true, true, true);
const GLU: Case = (false, true, false);
const ALL: [Case; 4] = [PLAIN, NORM_ADD, NORM_GLU_ADD, GLU];

/// `x·Wᵀ` on both devices for m rows of x, with the fused extras of `cases`.
fn qmatmul_matches(cw: &QTensor<Cpu>, gw: &QTensor<Gpu>, ty: GgmlType, m: usize, cases: &[Case]) {
    let rows = cw.shape().rows;
    let (cx, gx) = both(values(m * COLS, 7 + m as u64), &[m, COLS]);
    let (cs, gs) = both(values(COLS, 11), &[COLS]);
    let (cr, gr) = both(values(m * rows / 2, 13), &[m, rows / 2]);
    let (cr2, gr2) = both(values(m * rows, 17), &[m, rows]);
    let path = if m > QMATMUL_GEMV_ROWS {
        "dense"
    } else {
        "gemv"
    };
    for &(norm, glu, add) in cases {
        let names = [(norm, "norm"), (glu, "glu"), (add, "add")];
        let case: Vec<&str> = names.iter().filter(|n| n.0).map(|n| n.1).collect();
        let what = format!("{ty} qmatmul m={m} ({path}) [{}]", case.join(" "));
        let (cr, gr) = if glu { (&cr, &gr) } else { (&cr2, &gr2) };
        let got = timed(&what, || {
            let o = opts(norm.then_some(&gs), glu, add.then_some(gr));
            gx.qmatmul(gw, o).to_vec()
        });
        let o = opts(norm.then_some(&cs), glu, add.then_some(cr));
        close(&got, &cx.qmatmul(cw, o).to_vec(), 1e-5, &what);
    }
}

fn opts<'a, D: InferenceBackend>(
    norm: Option<&'a RawTensor<D, f32>>,
    glu: bool,
    add: Option<&'a RawTensor<D, f32>>,
) -> QMatmulOptions<'a, D> {
    QMatmulOptions {
        norm: norm.map(|s| (s, 1e-5)),
        glu,
        add,
        // The CPU side is the reference: f32, as the GPU computes.
        activations: Activations::F32,
    }
}

/// Rows of a `ty` weight just past the binding limit (even, for glu, and not a
/// multiple of 64, so that the last slice is ragged).
fn rows_past_the_limit(ty: GgmlType) -> usize {
    let limit = crate::limit();
    let row = repacked_bytes(ty, 1);
    let rows = ((limit / row) as usize + 130) & !1;
    assert!(!rows.is_multiple_of(64), "a ragged last slice");
    assert!(
        repacked_bytes(ty, rows) > limit,
        "the weight must pass the limit"
    );
    rows
}

#[test]
fn q8_0_past_the_binding_limit() {
    let _one = crate::alone();
    let ty = GgmlType::Q8_0;
    let rows = rows_past_the_limit(ty);
    let (cw, gw) = timed(&format!("{ty} weight {rows} × {COLS}"), || {
        weight(ty, rows, 1)
    });
    dequantize_matches(&cw, &gw, ty);
    qmatmul_matches(&cw, &gw, ty, 1, &ALL);
    // Rows of the product past the first are copied into place.
    qmatmul_matches(&cw, &gw, ty, 2, &[NORM_ADD, NORM_GLU_ADD]);
    // Past QMATMUL_GEMV_ROWS: the whole weight dequantised (in slices), then the
    // dense GEMM (in slices of its columns) and composed extras.
    qmatmul_matches(&cw, &gw, ty, QMATMUL_GEMV_ROWS + 1, &[NORM_GLU_ADD]);
}

/// Q4_0 (5 words a block, so more rows per slice); the dense path after the
/// dequantisation is the Q8_0 test's.
#[test]
fn q4_0_past_the_binding_limit() {
    let _one = crate::alone();
    let ty = GgmlType::Q4_0;
    let rows = rows_past_the_limit(ty);
    let (cw, gw) = timed(&format!("{ty} weight {rows} × {COLS}"), || {
        weight(ty, rows, 2)
    });
    dequantize_matches(&cw, &gw, ty);
    qmatmul_matches(&cw, &gw, ty, 1, &[PLAIN, NORM_GLU_ADD]);
}

/// More ids than one binding of output holds, from a table that is itself past
/// the limit: slices of the ids meet slices of the table.
#[test]
fn rows_by_id_past_the_binding_limit() {
    let _one = crate::alone();
    let ty = GgmlType::Q8_0;
    let rows = rows_past_the_limit(ty);
    let (cw, gw) = weight(ty, rows, 3);
    let limit = crate::limit();
    let n = (limit as usize / (COLS * 4)).min(1 << 13) + 300;
    let ids: Vec<u32> = (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) % rows as u32)
        .chain([0, rows as u32 - 1])
        .collect();
    let n = ids.len();
    let (ci, gi) = (
        RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[n]),
        RawTensor::<Gpu, u32>::from_vec(ids, &[n]),
    );
    assert!(
        (n * COLS * 4) as u64 > limit,
        "the output must pass the limit"
    );
    let got = timed(&format!("{ty} rows by id ({n} ids)"), || {
        gw.rows(&gi).to_vec()
    });
    assert!(got == cw.rows(&ci).to_vec(), "{ty} rows by {n} ids");
}

/// Weights within the limit take the unsliced launches: a quick check that
/// they still match the CPU (tests/inference.rs covers them fully).
#[test]
fn small_weights_match_as_before() {
    let _one = crate::alone();
    crate::limit();
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
        let rows = 200;
        let (cw, gw) = weight(ty, rows, 4);
        assert_eq!(gw.dequantize().to_vec(), cw.dequantize().to_vec());
        let ids = vec![3, 0, 199, 250];
        let (ci, gi) = (
            RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[4]),
            RawTensor::<Gpu, u32>::from_vec(ids, &[4]),
        );
        assert_eq!(gw.rows(&gi).to_vec(), cw.rows(&ci).to_vec());
        for m in [1, 2, 12] {
            qmatmul_matches(&cw, &gw, ty, m, &ALL);
        }
    }
}
