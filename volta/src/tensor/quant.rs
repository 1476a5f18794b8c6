//! `QTensor`: a weight matrix kept quantised in device memory, for inference:
//! ggml's own blocks (Q4_0, Q4_1, Q8_0), or sub-blocks for the other block types
//! (Q5_0, Q5_1, the K-quants) and for mixes of types ([`QFormat`]). Matmuls read
//! it through [`RawTensor::qmatmul`], dequantising in their loads.
use super::RawTensor;
use crate::backend::InferenceBackend;
use crate::backend::infer::{Activations, QShape};
use crate::io::gguf::{Gguf, GgufError, GgufErrorKind};
use crate::io::quant::{BLOCK, GgmlType, QFormat, QuantError, check_len, repack_sub_blocks};
use crate::layout::Layout;

/// A quantised `(rows, cols)` matrix on device `D`, kept in ggml blocks.
/// Cloning shares the device memory. Not differentiable: quantised weights are
/// frozen.
pub struct QTensor<D: InferenceBackend> {
    data: D::Quantized,
    shape: QShape,
}

impl<D: InferenceBackend> Clone for QTensor<D> {
    fn clone(&self) -> Self {
        QTensor {
            data: self.data.clone(),
            shape: self.shape,
        }
    }
}

impl<D: InferenceBackend> std::fmt::Debug for QTensor<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.shape;
        write!(f, "QTensor<{}>({} × {} {})", D::NAME, s.rows, s.cols, s.ty)
    }
}

impl<D: InferenceBackend> QTensor<D> {
    /// A matrix of `rows × cols` elements of block type `ty` from ggml's bytes
    /// (rows one after another, as in a GGUF file). Every block type
    /// [`dequantize`](crate::io::quant::dequantize) decodes is taken, K-quants
    /// included; see [`QFormat`] for how each sits on the device.
    pub fn from_blocks(
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self, QuantError> {
        Self::from_parts(&[(ty, rows, bytes)], cols)
    }

    /// Matrices of `cols` columns stacked along the rows into one (a fused QKV
    /// projection), each `(type, rows, ggml's bytes)`; their types may differ.
    pub fn from_parts(parts: &[(GgmlType, usize, &[u8])], cols: usize) -> Result<Self, QuantError> {
        for &(ty, rows, bytes) in parts {
            if !ty.is_supported() || matches!(ty, GgmlType::F32 | GgmlType::F16) {
                return Err(QuantError::Unsupported(ty));
            }
            let n = (rows * cols) as u64;
            let block = ty.block().map_or(BLOCK, |(e, _)| e as usize);
            if !cols.is_multiple_of(block) {
                return Err(QuantError::PartialBlock { ty, n });
            }
            check_len(ty, bytes, n)?;
        }
        let types: Vec<GgmlType> = parts.iter().map(|p| p.0).collect();
        let format = QFormat::for_types(&types);
        let mut packed = Vec::new();
        for &(ty, _, bytes) in parts {
            match format {
                QFormat::Ggml(_) => packed.extend_from_slice(bytes),
                QFormat::SubBlocks => repack_sub_blocks(ty, bytes, &mut packed),
            }
        }
        let Some(&ty) = types.first() else {
            return Err(QuantError::PartialBlock {
                ty: GgmlType::Q8_0,
                n: 0,
            });
        };
        let shape = QShape {
            ty,
            format,
            rows: parts.iter().map(|p| p.1).sum(),
            cols,
        };
        Ok(QTensor {
            data: D::upload_quantized(&shape, &packed),
            shape,
        })
    }

    /// The 2-D tensor `name` of a GGUF file, kept quantised; its dims must be
    /// `(rows, cols)` (row-major).
    pub fn from_gguf(gguf: &Gguf, name: &str, rows: usize, cols: usize) -> Result<Self, GgufError> {
        Self::from_gguf_stacked(gguf, &[name], cols).and_then(|t| {
            if t.shape.rows == rows {
                Ok(t)
            } else {
                Err(dims_error(gguf, name))
            }
        })
    }

    /// The GGUF matrices `names`, of `cols` columns each, stacked along the rows
    /// into one matrix (a fused QKV or gate-up projection). Their block types may
    /// differ, as a K-quant mix's do (a layer's Q and K in Q5_0, its V in Q8_0).
    pub fn from_gguf_stacked(gguf: &Gguf, names: &[&str], cols: usize) -> Result<Self, GgufError> {
        let mut parts = Vec::with_capacity(names.len());
        let error = |kind| GgufError {
            path: gguf.path().to_path_buf(),
            kind,
        };
        for &name in names {
            let (info, data) = gguf.tensor(name)?;
            // An undecodable type is named first: it is what stops the load.
            if !info.ty.is_supported() {
                return Err(error(GgufErrorKind::UnsupportedType {
                    name: name.to_string(),
                    ty: info.ty,
                }));
            }
            let shape = info.shape();
            if shape.len() != 2 || shape[1] != cols {
                return Err(dims_error(gguf, name));
            }
            parts.push((info.ty, shape[0], data));
        }
        if parts.is_empty() {
            return Err(dims_error(gguf, "(no tensors)"));
        }
        let rows: usize = parts.iter().map(|p| p.1).sum();
        Self::from_parts(&parts, cols).map_err(|e| GgufError {
            path: gguf.path().to_path_buf(),
            kind: match e {
                QuantError::Unsupported(ty) => GgufErrorKind::UnsupportedType {
                    name: names.join("+"),
                    ty,
                },
                _ => GgufErrorKind::Dims {
                    name: names.join("+"),
                    dims: vec![cols as u64, rows as u64],
                },
            },
        })
    }

    /// Its geometry and block type.
    pub fn shape(&self) -> &QShape {
        &self.shape
    }

    /// The device blocks.
    pub fn data(&self) -> &D::Quantized {
        &self.data
    }

    /// The matrix dequantised to f32, `(rows, cols)`.
    pub fn dequantize(&self) -> RawTensor<D, f32> {
        let s = &self.shape;
        RawTensor::leaf(
            D::dequantize(&self.data, s),
            Layout::contiguous(&[s.rows, s.cols]),
        )
    }

    /// Rows `ids` dequantised, `(ids.len, cols)`: an embedding lookup.
    ///
    /// # Panics
    /// When `ids` is not rank 1. Ids past the last row read the last row: check
    /// them first.
    pub fn rows(&self, ids: &RawTensor<D, u32>) -> RawTensor<D, f32> {
        assert_eq!(ids.dims().len(), 1, "QTensor::rows: ids must be rank 1");
        let n = ids.dims()[0];
        RawTensor::leaf(
            D::dequantize_rows(&self.data, &self.shape, ids.view()),
            Layout::contiguous(&[n, self.shape.cols]),
        )
    }
}

fn dims_error(gguf: &Gguf, name: &str) -> GgufError {
    let dims = gguf
        .tensors()
        .iter()
        .find(|t| t.name == name)
        .map_or_else(Vec::new, |t| t.dims.clone());
    GgufError {
        path: gguf.path().to_path_buf(),
        kind: GgufErrorKind::Dims {
            name: name.to_string(),
            dims,
        },
    }
}

/// Rows of `x` above which a quantised matmul dequantises the whole weight and
/// runs the dense GEMM (prefill); at or below, it reads blocks in its loads.
pub const QMATMUL_GEMV_ROWS: usize = 8;

/// What [`RawTensor::qmatmul`] fuses around the product (see
/// [`QFusion`](crate::backend::infer::QFusion) for the order): an RMS-norm prologue, a SwiGLU and a residual
/// epilogue.
#[derive(Default)]
pub struct QMatmulOptions<'a, D: InferenceBackend> {
    /// RMS-normalise each row of `x` first and scale it by this `(k,)` tensor.
    pub norm: Option<(&'a RawTensor<D, f32>, f32)>,
    /// `silu(y[:, ..n/2]) · y[:, n/2..]`.
    pub glu: bool,
    /// Add this tensor (the result's dims) to the result.
    pub add: Option<&'a RawTensor<D, f32>>,
    /// The activations' precision on the CPU (8-bit by default; the GPU computes
    /// in f32 either way).
    pub activations: Activations,
}
