//! Loading a safetensors checkpoint from bytes into a model: the browser has no
//! file system, and `volta::io::load` reads a path. Same checks as Volta's loader
//! (every model tensor present with its dims and dtype, nothing unexpected but
//! optimiser state), done with the public `Module`/`Visitor` API.
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use volta::nn::{Entry, Module, Visitor};
use volta::{Backend, RawTensor};

/// Metadata prefix under which `volta::io::save` stores a model's counters.
const COUNTER: &str = "volta.counter.";
/// Prefix of optimiser tensors in a training checkpoint (ignored here).
const OPTIM: &str = "optim/";

/// Loads the safetensors `bytes` into `model`: parameters as trainable leaves,
/// buffers (batch-norm running statistics) untracked, counters from the metadata.
/// Everything is checked first; on error the model is unchanged and the message
/// lists every difference.
pub fn load_safetensors<M, D>(model: &mut M, bytes: &[u8]) -> Result<(), String>
where
    M: Module<D, f32> + ?Sized,
    D: Backend<f32>,
{
    let file = SafeTensors::deserialize(bytes)
        .map_err(|e| format!("not a safetensors checkpoint: {e}"))?;
    let (_, header) = SafeTensors::read_metadata(bytes)
        .map_err(|e| format!("not a safetensors checkpoint: {e}"))?;
    let mut problems = Vec::new();
    let mut found: HashMap<String, RawTensor<D, f32>> = HashMap::new();
    let expected = model.named_tensors();
    for (name, t) in &expected {
        let Ok(view) = file.tensor(name) else {
            problems.push(format!("`{name}` {:?} is missing", t.dims()));
            continue;
        };
        if view.dtype() != Dtype::F32 {
            problems.push(format!("`{name}` is {}, not F32", view.dtype()));
        } else if view.shape() != t.dims() {
            problems.push(format!(
                "`{name}` has dims {:?}, the model's are {:?}",
                view.shape(),
                t.dims()
            ));
        } else {
            let values = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            found.insert(name.clone(), RawTensor::from_vec(values, t.dims()));
        }
    }
    for name in file.names() {
        if !name.starts_with(OPTIM) && !expected.iter().any(|(n, _)| n == name) {
            problems.push(format!("`{name}` is not a tensor of this model"));
        }
    }
    if !problems.is_empty() {
        problems.sort();
        return Err(format!(
            "the checkpoint does not fit the model: {}",
            problems.join("; ")
        ));
    }
    let counters: HashMap<String, u64> = header
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(COUNTER)?.to_string(), v.parse().ok()?)))
        .collect();
    let mut failed = None;
    model.visit(&mut Visitor::new(&mut |name, entry| {
        let (slot, tracked) = match entry {
            Entry::Param(p) => (p, true),
            Entry::Buffer(b) => (b, false),
            Entry::Counter(c) => {
                if let Some(v) = counters.get(name) {
                    *c = *v;
                }
                return;
            }
            Entry::Training(_) => return,
        };
        let Some(value) = found.remove(name) else {
            return;
        };
        let done = if tracked {
            slot.update(value)
        } else {
            slot.set(value)
        };
        if let Err(e) = done {
            failed.get_or_insert(format!("`{name}`: {e}"));
        }
    }));
    failed.map_or(Ok(()), Err)
}
