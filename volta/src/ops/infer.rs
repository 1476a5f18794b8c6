//! Inference ops over quantised weights and a KV cache (see
//! [`InferenceBackend`]). Their results are untracked: nothing here is trained.
use crate::backend::InferenceBackend;
use crate::backend::infer::QFusion;
use crate::layout::Layout;
use crate::tensor::{QMATMUL_GEMV_ROWS, QMatmulOptions, QTensor, RawTensor};
use volta_kernels::{BinaryOp, UnaryOp};

/// Weights (rows × columns) from which a product of a few rows (2 to
/// [`QMATMUL_GEMV_ROWS`]) takes the backend's quantised GEMM rather than its
/// GEMV: SmolLM2's 49,152 × 576 output matrix, not its layers' at most 1536 ×
/// 576.
const QMATMUL_WIDE: usize = 1 << 24;

impl<D: InferenceBackend> RawTensor<D, f32> {
    /// `self · wᵀ` for `self` of dims `(m, k)` and a quantised `w` of `(n, k)`, with
    /// the fused extras of `opts`; dims `(m, n)` (`(m, n/2)` with `glu`).
    ///
    /// # Panics
    /// When the dims do not fit (a programmer error: the model's shapes are known).
    #[track_caller]
    pub fn qmatmul(&self, w: &QTensor<D>, opts: QMatmulOptions<'_, D>) -> Self {
        let s = w.shape();
        let dims = self.dims();
        assert!(
            dims.len() == 2 && dims[1] == s.cols,
            "qmatmul: x is {dims:?}, the weight is ({}, {})",
            s.rows,
            s.cols
        );
        let m = dims[0];
        let n = if opts.glu { s.rows / 2 } else { s.rows };
        if let Some((scale, _)) = opts.norm {
            assert_eq!(
                scale.dims(),
                [s.cols],
                "qmatmul: the norm scale must be (k,)"
            );
        }
        if let Some(r) = opts.add {
            assert_eq!(
                r.dims(),
                [m, n],
                "qmatmul: the residual must have the result's dims"
            );
        }
        if m > QMATMUL_GEMV_ROWS {
            return self.qmatmul_dense(w, opts);
        }
        let fusion = || QFusion {
            norm: opts.norm.map(|(t, eps)| (t.view(), eps)),
            glu: opts.glu,
            add: opts.add.map(|t| t.view()),
            activations: opts.activations,
        };
        // A wide weight (a model's output matrix) times a batch's few rows: the
        // GEMV's workgroups each read a sliver of W for one row, so its time
        // grows with the rows; the quantised GEMM reads each block once for all
        // of them, on tensor cores, where the backend has it.
        if m > 1
            && s.rows * s.cols >= QMATMUL_WIDE
            && let Some(buf) = D::qgemm(self.view(), w.data(), s, fusion())
        {
            return RawTensor::leaf(buf, Layout::contiguous(&[m, n]));
        }
        let buf = D::qmatmul(self.view(), w.data(), s, fusion());
        RawTensor::leaf(buf, Layout::contiguous(&[m, n]))
    }

    /// The same for many rows: the backend's quantised GEMM with the norm, gate
    /// and residual where it has one ([`InferenceBackend::qgemm`]), else the
    /// dense GEMM by the dequantised weight (many rows amortise dequantising
    /// it) with the norm, gate and residual as composed ops.
    #[track_caller]
    fn qmatmul_dense(&self, w: &QTensor<D>, opts: QMatmulOptions<'_, D>) -> Self {
        let s = w.shape();
        let m = self.dims()[0];
        let fusion = QFusion {
            norm: opts.norm.map(|(t, eps)| (t.view(), eps)),
            glu: opts.glu,
            add: opts.add.map(|t| t.view()),
            activations: opts.activations,
        };
        if let Some(buf) = D::qgemm(self.view(), w.data(), s, fusion) {
            let n = if opts.glu { s.rows / 2 } else { s.rows };
            return RawTensor::leaf(buf, Layout::contiguous(&[m, n]));
        }
        let x = match opts.norm {
            Some((scale, eps)) => self.normalize(1, false, f64::from(eps)).binary(
                BinaryOp::Mul,
                &scale.reshape(&[1, scale.dims()[0]]).expand(self.dims()),
            ),
            None => self.clone(),
        };
        let mut y = x.matmul(&w.dequantize().transpose_last());
        if opts.glu {
            let half = w.shape().rows / 2;
            let gate = y.narrow(1, 0, half).unary(UnaryOp::Silu);
            y = gate.binary(BinaryOp::Mul, &y.narrow(1, half, half));
        }
        if let Some(r) = opts.add {
            y = y.binary(BinaryOp::Add, r);
        }
        y.detach()
    }
}
