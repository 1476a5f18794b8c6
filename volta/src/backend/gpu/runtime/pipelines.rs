//! Pipeline cache: each kernel (generated or hand-written variant) is compiled once.
use super::hash::FxHashMap;
use std::sync::{Arc, Mutex};
use volta_kernels::wgsl::{ElementwiseKernel, Expr, RowKernel, RowOp};

/// What identifies a compiled kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// A generated elementwise kernel (its structure determines its source).
    Elementwise(ElementwiseKernel),
    /// A generated row kernel: reduction, softmax or normalisation (its structure
    /// determines its source).
    Row(RowKernel),
    /// A hand-written or generated kernel: a name and the variant's parameters.
    Named(&'static str, Vec<u32>),
}

/// A compiled kernel and the layout its bind groups must follow.
pub(crate) struct Kernel {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    /// The buffers after the parameter block (binding 0), which `layout` follows.
    pub bindings: Bindings,
    /// What profiles call it (`Gpu::profile`).
    pub name: Arc<str>,
    /// The kernel needs the `shader-f16` feature, which the device lacks: the
    /// pipeline is an empty placeholder, and launching it reports
    /// [`GpuError::Unsupported`](super::error::GpuError::Unsupported) instead.
    pub missing_f16: bool,
}

/// Binding 0 is always the read-only `u32` parameter block, bound at a dynamic
/// offset (one bind group serves every dispatch over the same buffers, see
/// `bind_groups`); then `reads` read-only storage buffers, then `writes`
/// read-write ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bindings {
    pub reads: usize,
    pub writes: usize,
}

#[derive(Default)]
pub(crate) struct Pipelines {
    kernels: Mutex<FxHashMap<Key, Arc<Kernel>>>,
    layouts: Mutex<FxHashMap<Bindings, wgpu::BindGroupLayout>>,
}

impl Pipelines {
    /// The kernel for `key` (entry point `entry`), compiling `source()` on first use.
    pub fn get(
        &self,
        device: &wgpu::Device,
        key: &Key,
        bindings: Bindings,
        entry: &str,
        source: impl FnOnce() -> String,
    ) -> Arc<Kernel> {
        if let Some(k) = self.lock().get(key) {
            return k.clone();
        }
        let layout = self.layout(device, bindings);
        let mut src = source();
        dump(key, &src, self.lock().len());
        let missing_f16 = src.starts_with("enable f16;")
            && !device.features().contains(wgpu::Features::SHADER_F16);
        if missing_f16 {
            // The device would reject the module: compile an empty kernel with the
            // same bindings, never launched.
            src = format!("@compute @workgroup_size(1) fn {entry}() {{}}");
        }
        // SAFETY: Volta's kernels bound every buffer access by the sizes in their
        // parameter blocks, which the host computes from layouts that address only
        // elements of the bound buffers; the GPU parity tests exercise every kernel
        // and addressing mode (strided, broadcast, edges). Runtime checks cost up to
        // 1.5× on matmul.
        let module = unsafe {
            device.create_shader_module_trusted(
                wgpu::ShaderModuleDescriptor {
                    label: Some(key_label(key)),
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                },
                wgpu::ShaderRuntimeChecks::unchecked(),
            )
        };
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key_label(key)),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[],
                // Kernels write shared memory before reading it.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        let kernel = Arc::new(Kernel {
            pipeline,
            layout,
            bindings,
            name: describe(key).into(),
            missing_f16,
        });
        self.lock().insert(key.clone(), kernel.clone());
        kernel
    }

    /// Number of kernels compiled so far.
    pub fn compiled(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<Key, Arc<Kernel>>> {
        self.kernels.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn layout(&self, device: &wgpu::Device, b: Bindings) -> wgpu::BindGroupLayout {
        let mut layouts = self.layouts.lock().unwrap_or_else(|p| p.into_inner());
        layouts
            .entry(b)
            .or_insert_with(|| {
                let entry = |binding: usize, read_only: bool| wgpu::BindGroupLayoutEntry {
                    binding: binding as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only },
                        has_dynamic_offset: binding == 0,
                        min_binding_size: None,
                    },
                    count: None,
                };
                let entries: Vec<_> = (0..1 + b.reads + b.writes)
                    .map(|i| entry(i, i <= b.reads))
                    .collect();
                device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: None,
                    entries: &entries,
                })
            })
            .clone()
    }
}

/// With `VOLTA_DUMP_WGSL=DIR`, each kernel's source is written to `DIR` as it is
/// compiled (`examples/shader_stats.rs` reads them to ask the driver for register
/// counts). A failed write is reported on stderr: dumping is a debugging aid.
fn dump(key: &Key, src: &str, index: usize) {
    let Some(dir) = std::env::var_os("VOLTA_DUMP_WGSL") else {
        return;
    };
    let params = match key {
        Key::Named(_, p) => p.iter().map(|v| format!("-{v}")).collect(),
        _ => String::new(),
    };
    // Runs of other characters become one `_`: `matmul-128-128-8`, `softmax_rows_of_relu_x0`.
    let mut name = String::new();
    for c in format!("{index:03}-{}{params}", describe_with(key, false)).chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            name.push(c);
        } else if !name.ends_with('_') {
            name.push('_');
        }
    }
    name.truncate(120);
    let path = std::path::Path::new(&dir).join(format!("{name}.wgsl"));
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, src));
    if let Err(e) = written {
        eprintln!(
            "volta: VOLTA_DUMP_WGSL: cannot write {}: {e}",
            path.display()
        );
    }
}

fn key_label(key: &Key) -> &'static str {
    match key {
        Key::Elementwise(_) => "volta elementwise",
        Key::Row(_) => "volta row kernel",
        Key::Named(name, _) => name,
    }
}

/// A kernel's name in profiles: the op and, for generated kernels, the expression
/// (with the variant's parameters under `VOLTA_PROFILE_DETAIL`).
fn describe(key: &Key) -> String {
    describe_with(key, super::profile::detail())
}

/// [`describe`], with the variant's parameters when `detail` is set: a named
/// kernel's key (tiles, operand layouts), a row kernel's variant; names are then
/// never cut short.
fn describe_with(key: &Key, detail: bool) -> String {
    let mut name = match key {
        // Drawn inputs (uniform numbers hashed in place) read as `u{i}`.
        Key::Elementwise(k) => format!("elementwise {}", k.expr.display_with(&|i| k.drawn.name(i))),
        Key::Row(k) => {
            let op = match k.op {
                RowOp::Reduce(op) => format!("{op:?}").to_lowercase(),
                RowOp::Softmax => "softmax".into(),
                RowOp::LogSoftmax => "log_softmax".into(),
                RowOp::Normalize { center: true } => "normalize".into(),
                RowOp::Normalize { center: false } => "rms_normalize".into(),
                RowOp::NormalizeGrad { center: true } => "normalize_grad".into(),
                RowOp::NormalizeGrad { center: false } => "rms_normalize_grad".into(),
            };
            let name = match k.expr {
                Expr::Input(0) if k.drawn.seed(0).is_none() => format!("{op} rows"),
                _ => format!("{op} rows of {}", k.expr.display_with(&|i| k.drawn.name(i))),
            };
            if detail {
                format!("{name} [{:?}]", k.variant)
            } else {
                name
            }
        }
        Key::Named(name, p) if detail => {
            let params: Vec<String> = p.iter().map(u32::to_string).collect();
            format!(
                "{} [{}]",
                name.trim_start_matches("volta "),
                params.join(",")
            )
        }
        Key::Named(name, _) => name.trim_start_matches("volta ").to_string(),
    };
    if name.len() > 72 && !detail {
        let cut = (0..=69)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        name.truncate(cut);
        name.push_str("...");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::{Key, describe_with};

    #[test]
    fn detailed_names_carry_the_variant() {
        let key = Key::Named("volta matmul tensor-core", vec![2, 2, 4, 4, 32]);
        assert_eq!(describe_with(&key, false), "matmul tensor-core");
        assert_eq!(describe_with(&key, true), "matmul tensor-core [2,2,4,4,32]");
    }

    #[test]
    fn drawn_inputs_are_named_apart() {
        use volta_kernels::BinaryOp;
        use volta_kernels::wgsl::{Access, Draws, Elem, ElementwiseKernel, Expr, Launch};
        // Dropout: x0 · (u1 ≥ s0), the uniform numbers drawn.
        let key = Key::Elementwise(ElementwiseKernel {
            rank: 1,
            elem: Elem::F32,
            out_elem: Elem::F32,
            inputs: vec![Access::Contiguous; 2],
            output: Access::Contiguous,
            expr: Expr::input(0).binary(
                BinaryOp::Mul,
                Expr::input(1).binary(BinaryOp::Ge, Expr::scalar(0)),
            ),
            vector: false,
            launch: Launch::DEFAULT,
            drawn: Draws(vec![(1, 1)]),
        });
        assert_eq!(describe_with(&key, false), "elementwise (x0 * ge(u1, s0))");
    }
}
