//! Autograd from Python: `.grad` of leaf tensors, `backward()`, `no_grad()`.
//!
//! Volta's backward pass returns gradients keyed by tensor id; PyTorch users expect
//! them to appear in each leaf's `.grad`. Each leaf that requires grad owns a slot
//! and registers it here under its current id (an optimiser step gives the leaf a
//! new id; it registers again). The registry holds weak references, so a dropped
//! tensor's slot goes with it.
use super::data::{Data, zip};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use volta::TensorId;
use volta_kernels::BinaryOp;

/// Where a leaf's accumulated gradient lives.
pub type Slot = Arc<Mutex<Option<Data>>>;

/// Leaf id → its tensor's gradient slot.
type Registry = HashMap<TensorId, Weak<Mutex<Option<Data>>>>;

static LEAVES: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn leaves() -> std::sync::MutexGuard<'static, Registry> {
    LEAVES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes `slot` receive the gradients of tensor `id`.
pub fn register(id: TensorId, slot: &Slot) {
    leaves().insert(id, Arc::downgrade(slot));
}

/// Stops routing gradients of `id`.
pub fn unregister(id: TensorId) {
    leaves().remove(&id);
}

/// Runs the backward pass from `root` (one element) and adds each leaf's gradient
/// to its `.grad`, as PyTorch accumulates. With `retain`, the graph keeps the
/// values its ops saved for another pass (`retain_graph=True`); else they go.
pub fn backward(root: &Data, retain: bool) -> pyo3::PyResult<()> {
    fn run<D: volta::Backend<E>, E: volta::dtype::Float>(
        t: volta::RawTensor<D, E>,
        retain: bool,
    ) -> volta::Gradients<D, E> {
        if retain {
            t.backward_retain_graph()
        } else {
            t.backward()
        }
    }
    let grads: Vec<(TensorId, Data)> = match root.clone() {
        Data::CpuF32(t) => run(t, retain)
            .into_raw()
            .map(|(i, g)| (i, Data::CpuF32(g)))
            .collect(),
        Data::CpuF64(t) => run(t, retain)
            .into_raw()
            .map(|(i, g)| (i, Data::CpuF64(g)))
            .collect(),
        Data::CpuF16(t) => run(t, retain)
            .into_raw()
            .map(|(i, g)| (i, Data::CpuF16(g)))
            .collect(),
        Data::GpuF32(t) => run(t, retain)
            .into_raw()
            .map(|(i, g)| (i, Data::GpuF32(g)))
            .collect(),
        Data::GpuF16(t) => run(t, retain)
            .into_raw()
            .map(|(i, g)| (i, Data::GpuF16(g)))
            .collect(),
    };
    let _no_grad = volta::no_grad();
    let mut table = leaves();
    table.retain(|_, w| w.strong_count() > 0);
    for (id, g) in grads {
        let Some(slot) = table.get(&id).and_then(Weak::upgrade) else {
            continue;
        };
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Some(match slot.take() {
            Some(old) => zip!("backward", (&old, &g), |a, b| a.binary(BinaryOp::Add, b))?,
            None => g,
        });
    }
    Ok(())
}

thread_local! {
    /// The guards of the `no_grad()` blocks this thread is inside, innermost last.
    static NO_GRAD: RefCell<Vec<volta::NoGradGuard>> = const { RefCell::new(Vec::new()) };
}

/// `with volta.no_grad():` — ops inside record no graph (optimiser updates,
/// evaluation).
#[pyo3::pyclass(module = "volta._volta", name = "no_grad")]
pub struct NoGrad;

#[pyo3::pymethods]
impl NoGrad {
    #[new]
    fn new() -> Self {
        NoGrad
    }

    fn __enter__(&self) {
        NO_GRAD.with(|s| s.borrow_mut().push(volta::no_grad()));
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &pyo3::Bound<'_, pyo3::types::PyTuple>) -> bool {
        NO_GRAD.with(|s| drop(s.borrow_mut().pop()));
        false
    }
}

/// Whether ops record gradients on this thread (`False` inside `no_grad()`).
#[pyo3::pyfunction]
pub fn is_grad_enabled() -> bool {
    volta::grad_enabled()
}
