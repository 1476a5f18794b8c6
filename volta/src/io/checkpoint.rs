//! Saving and loading a model (and an optimiser's state) as one safetensors file.
//!
//! The file holds every parameter and buffer under its [`Module`] name, each
//! optimiser tensor under `optim/{position}.{slot}` (a `/` no field path contains),
//! and string metadata: the optimiser's kind and step, the model's counters
//! (dropout seeds and call counts), and the caller's own keys.
//! Loading skips PyTorch's batch-norm `num_batches_tracked` counters.
use super::dtype::FileDtype;
use super::error::{CheckpointError, Mismatch};
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Entry, Module, Visitor};
use crate::optim::{Optimizer, OptimizerState};
use crate::tensor::RawTensor;
use safetensors::{SafeTensorError, SafeTensors, tensor::TensorView};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// String metadata saved beside the tensors (epoch, seed, metrics…).
pub type Metadata = BTreeMap<String, String>;

/// Prefix of optimiser tensors in a file.
const OPTIM: &str = "optim/";
/// Metadata keys Volta writes; the caller's keys must not start with `volta.`.
const KIND_KEY: &str = "volta.optim.kind";
const STEP_KEY: &str = "volta.optim.step";
/// The one per-parameter optimiser slot that holds a single value, not a tensor of
/// the parameter's dims: its step count (PyTorch's name, which Adam uses).
const STEP_SLOT: &str = "step";
/// Metadata prefix of the model's counters (`volta.counter.drop.calls`).
const COUNTER: &str = "volta.counter.";

/// Writes `model`'s parameters and buffers to `path` (replacing it atomically: a
/// crash mid-write leaves the old file). GPU tensors are read back, which waits for
/// the work recorded so far.
pub fn save<M, D, E>(path: impl AsRef<Path>, model: &mut M) -> Result<(), CheckpointError>
where
    M: Module<D, E> + ?Sized,
    D: Backend<E>,
    E: Float + FileDtype,
{
    let metadata = counters(model);
    write(path.as_ref(), model.named_tensors(), metadata)
}

/// The model's counters as metadata entries.
fn counters<M, D, E>(model: &mut M) -> Metadata
where
    M: Module<D, E> + ?Sized,
    D: Backend<E>,
    E: Float,
{
    let mut out = Metadata::new();
    model.visit(&mut Visitor::new(&mut |name, e| {
        if let Entry::Counter(c) = e {
            out.insert(format!("{COUNTER}{name}"), c.to_string());
        }
    }));
    out
}

/// Writes `model`, `optimizer`'s state (moments, step count) and `metadata` to
/// `path`, so that [`load_training`] resumes the run exactly.
///
/// # Panics
/// When a `metadata` key starts with `volta.` (reserved).
pub fn save_training<M, O, D, E>(
    path: impl AsRef<Path>,
    model: &mut M,
    optimizer: &O,
    metadata: &Metadata,
) -> Result<(), CheckpointError>
where
    M: Module<D, E> + ?Sized,
    O: Optimizer<D, E>,
    D: Backend<E>,
    E: Float + FileDtype,
{
    if let Some(key) = metadata.keys().find(|k| k.starts_with("volta.")) {
        panic!("checkpoint metadata key `{key}`: keys starting with `volta.` are reserved");
    }
    let state = optimizer.state();
    let mut tensors = model.named_tensors();
    tensors.extend(
        state
            .tensors
            .into_iter()
            .map(|(name, t)| (format!("{OPTIM}{name}"), t)),
    );
    let mut metadata = metadata.clone();
    metadata.extend(counters(model));
    metadata.insert(KIND_KEY.into(), state.kind);
    metadata.insert(STEP_KEY.into(), state.step.to_string());
    write(path.as_ref(), tensors, metadata)
}

/// Loads `path` into `model`, checking every name, shape and dtype first: a file
/// that does not fit returns [`CheckpointError::Mismatch`] listing every difference,
/// and the model is left unchanged. Optimiser state in the file is ignored.
/// Returns the file's metadata (without Volta's own keys).
pub fn load<M, D, E>(path: impl AsRef<Path>, model: &mut M) -> Result<Metadata, CheckpointError>
where
    M: Module<D, E> + ?Sized,
    D: Backend<E>,
    E: Float + FileDtype,
{
    let path = path.as_ref();
    load_bytes(path, &read(path)?, model)
}

/// [`load`] from a file's bytes already in memory: a web page has no file system
/// (it fetches the checkpoint, or the user picks it). `name` stands for the file in
/// errors.
pub fn load_bytes<M, D, E>(
    name: impl AsRef<Path>,
    bytes: &[u8],
    model: &mut M,
) -> Result<Metadata, CheckpointError>
where
    M: Module<D, E> + ?Sized,
    D: Backend<E>,
    E: Float + FileDtype,
{
    let file = File::parse(name.as_ref(), bytes)?;
    let tensors = file.model_tensors(model)?;
    assign(model, tensors, &file.counters());
    Ok(file.user_metadata())
}

/// Loads a file [`save_training`] wrote into `model` and `optimizer`, so that the
/// next step is the one the saved run would have taken. Everything is checked
/// before anything changes. Returns the caller's metadata.
pub fn load_training<M, O, D, E>(
    path: impl AsRef<Path>,
    model: &mut M,
    optimizer: &mut O,
) -> Result<Metadata, CheckpointError>
where
    M: Module<D, E> + ?Sized,
    O: Optimizer<D, E>,
    D: Backend<E>,
    E: Float + FileDtype,
{
    let path = path.as_ref();
    let bytes = read(path)?;
    let file = File::parse(path, &bytes)?;
    let tensors = file.model_tensors(model)?;
    let state = file.optimizer_state(model)?;
    optimizer
        .load_state(state)
        .map_err(|e| CheckpointError::optimizer(path.to_path_buf(), e))?;
    assign(model, tensors, &file.counters());
    Ok(file.user_metadata())
}

/// Reads every tensor back to the host and writes the file.
fn write<D: Backend<E>, E: Float + FileDtype>(
    path: &Path,
    tensors: Vec<(String, RawTensor<D, E>)>,
    metadata: Metadata,
) -> Result<(), CheckpointError> {
    let host: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, t)| {
            let mut bytes = Vec::new();
            E::put(&t.to_vec(), &mut bytes);
            (name, t.dims().to_vec(), bytes)
        })
        .collect();
    let views = host.iter().map(|(name, dims, bytes)| {
        let view = TensorView::new(E::DTYPE, dims.clone(), bytes)
            .expect("the bytes of a tensor fit its dims and dtype");
        (name.as_str(), view)
    });
    let views = in_file_order(views);
    let header = header(&views, &metadata).map_err(|message| CheckpointError::Format {
        path: path.to_path_buf(),
        message,
    })?;
    replace(path, |out| {
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        for (_, view) in &views {
            out.write_all(view.data())?;
        }
        Ok(())
    })
    .map_err(|source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Tensors in the order `safetensors::serialize` stores them: by descending dtype
/// alignment, then by name.
fn in_file_order<'a>(
    tensors: impl IntoIterator<Item = (&'a str, TensorView<'a>)>,
) -> Vec<(&'a str, TensorView<'a>)> {
    let mut tensors: Vec<_> = tensors.into_iter().collect();
    tensors.sort_by(|(a, x), (b, y)| y.dtype().cmp(&x.dtype()).then(a.cmp(b)));
    tensors
}

/// The largest header safetensors reads.
const MAX_HEADER: usize = 100_000_000;

/// The safetensors header of `tensors` (in file order) and `metadata`, written here
/// rather than by `safetensors::serialize`, which takes the metadata as a `HashMap`
/// and writes it in that map's order, different from run to run: here equal
/// contents give equal bytes. The JSON is the one `safetensors::serialize` writes,
/// but for the metadata's order: `__metadata__` first, its keys sorted, then each
/// tensor's dtype, shape and data offsets; spaces pad it to a multiple of 8 bytes.
fn header(tensors: &[(&str, TensorView<'_>)], metadata: &Metadata) -> Result<Vec<u8>, String> {
    let mut json = String::from("{\"__metadata__\":{");
    for (i, (key, value)) in metadata.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json_string(&mut json, key);
        json.push(':');
        json_string(&mut json, value);
    }
    json.push('}');
    let mut offset = 0;
    for (name, view) in tensors {
        let end = offset + view.data().len();
        json.push(',');
        json_string(&mut json, name);
        let dims: Vec<String> = view.shape().iter().map(usize::to_string).collect();
        json.push_str(&format!(
            ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            view.dtype(),
            dims.join(",")
        ));
        offset = end;
    }
    json.push('}');
    let mut bytes = json.into_bytes();
    bytes.resize(bytes.len().next_multiple_of(8), b' ');
    if bytes.len() > MAX_HEADER {
        return Err(format!(
            "the header would be {} bytes; safetensors reads at most {MAX_HEADER}",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// Appends `s` as a JSON string, escaped as `serde_json` escapes it.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes `path` through `fill` into a sibling temporary file, then renames it over
/// `path`: a crash mid-write leaves the old file (and a reader of it undisturbed).
fn replace(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = path.with_file_name(temp_name);
    let result = (|| {
        let file = std::fs::File::create(&temp)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
        fill(&mut out)?;
        out.flush()?;
        drop(out);
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn read(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    std::fs::read(path).map_err(|source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn file_error(path: PathBuf, e: SafeTensorError) -> CheckpointError {
    match e {
        SafeTensorError::IoError(source) => CheckpointError::Io { path, source },
        other => CheckpointError::Format {
            path,
            message: other.to_string(),
        },
    }
}

/// A parsed file, borrowing its bytes.
struct File<'a> {
    path: &'a Path,
    tensors: SafeTensors<'a>,
    metadata: Metadata,
}

impl<'a> File<'a> {
    fn parse(path: &'a Path, bytes: &'a [u8]) -> Result<Self, CheckpointError> {
        let fail = |e| file_error(path.to_path_buf(), e);
        let tensors = SafeTensors::deserialize(bytes).map_err(fail)?;
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(fail)?;
        let metadata = header
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        Ok(File {
            path,
            tensors,
            metadata,
        })
    }

    /// The counters the file holds, by metadata key.
    fn counters(&self) -> HashMap<String, u64> {
        self.metadata
            .iter()
            .filter(|(k, _)| k.starts_with(COUNTER))
            .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
            .collect()
    }

    fn user_metadata(&self) -> Metadata {
        let mut m = self.metadata.clone();
        m.retain(|k, _| !k.starts_with("volta."));
        m
    }

    /// A tensor of the file on device `D`, or why it cannot be one of `dims`.
    fn tensor<D: Backend<E>, E: Float + FileDtype>(
        &self,
        name: &str,
        dims: &[usize],
    ) -> Result<RawTensor<D, E>, Mismatch> {
        let view = self
            .tensors
            .tensor(name)
            .expect("names come from the file's own list");
        if view.dtype() != E::DTYPE {
            return Err(Mismatch::Dtype {
                name: name.to_string(),
                expected: E::DTYPE.to_string(),
                found: view.dtype().to_string(),
            });
        }
        if view.shape() != dims {
            return Err(Mismatch::Shape {
                name: name.to_string(),
                expected: dims.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        Ok(RawTensor::from_vec(E::get(view.data()), dims))
    }

    /// The model's tensors from the file, by name, or every mismatch.
    fn model_tensors<M, D, E>(
        &self,
        model: &mut M,
    ) -> Result<HashMap<String, RawTensor<D, E>>, CheckpointError>
    where
        M: Module<D, E> + ?Sized,
        D: Backend<E>,
        E: Float + FileDtype,
    {
        let expected = model.named_tensors();
        let mut mismatches = Vec::new();
        let mut found = HashMap::new();
        for (name, t) in &expected {
            if self.tensors.tensor(name).is_err() {
                mismatches.push(Mismatch::Missing {
                    name: name.clone(),
                    dims: t.dims().to_vec(),
                });
                continue;
            }
            match self.tensor(name, t.dims()) {
                Ok(value) => {
                    found.insert(name.clone(), value);
                }
                Err(m) => mismatches.push(m),
            }
        }
        let known: std::collections::HashSet<&str> =
            expected.iter().map(|(n, _)| n.as_str()).collect();
        for (name, view) in self.tensors.iter() {
            if !name.starts_with(OPTIM) && !known.contains(name) && !pytorch_counter(name, &known) {
                mismatches.push(Mismatch::Unexpected {
                    name: name.to_string(),
                    dims: view.shape().to_vec(),
                });
            }
        }
        self.fail_on(mismatches)?;
        Ok(found)
    }

    /// The optimiser state in the file, each tensor checked against the parameter
    /// it belongs to (its dims, or a single value such as a step count).
    fn optimizer_state<M, D, E>(
        &self,
        model: &mut M,
    ) -> Result<OptimizerState<D, E>, CheckpointError>
    where
        M: Module<D, E> + ?Sized,
        D: Backend<E>,
        E: Float + FileDtype,
    {
        let missing = |what: &str| CheckpointError::Optimizer {
            path: self.path.to_path_buf(),
            message: format!("the file holds no {what} (was it written by `save_training`?)"),
        };
        let kind = self
            .metadata
            .get(KIND_KEY)
            .ok_or_else(|| missing("optimiser kind"))?;
        let step = self
            .metadata
            .get(STEP_KEY)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| missing("step count"))?;
        let params: Vec<Vec<usize>> = model
            .named_params()
            .into_iter()
            .map(|(_, t)| t.dims().to_vec())
            .collect();
        let mut tensors = Vec::new();
        let mut mismatches = Vec::new();
        let mut names: Vec<&str> = self.tensors.names();
        names.sort_unstable();
        for name in names {
            let Some(short) = name.strip_prefix(OPTIM) else {
                continue;
            };
            let view = self.tensors.tensor(name).expect("a listed name");
            let (position, slot) = short.split_once('.').unzip();
            let position = position.and_then(|p| p.parse::<usize>().ok());
            let Some(param) = position.and_then(|p| params.get(p)) else {
                mismatches.push(Mismatch::Unexpected {
                    name: name.to_string(),
                    dims: view.shape().to_vec(),
                });
                continue;
            };
            // A parameter's state has its dims, but for a step count (`0.step`, a
            // single value as in PyTorch's files). Another one-element tensor in
            // place of a larger parameter's state would load, then fail the
            // optimiser's next step.
            let scalar = view.shape().iter().product::<usize>() == 1;
            let dims = if scalar && slot == Some(STEP_SLOT) {
                view.shape()
            } else {
                param.as_slice()
            };
            match self.tensor(name, dims) {
                Ok(t) => tensors.push((short.to_string(), t)),
                Err(m) => mismatches.push(m),
            }
        }
        self.fail_on(mismatches)?;
        Ok(OptimizerState {
            kind: kind.clone(),
            step,
            tensors,
        })
    }

    fn fail_on(&self, mut mismatches: Vec<Mismatch>) -> Result<(), CheckpointError> {
        if mismatches.is_empty() {
            return Ok(());
        }
        mismatches.sort_by(|a, b| a.name().cmp(b.name()));
        Err(CheckpointError::Mismatch {
            path: self.path.to_path_buf(),
            mismatches,
        })
    }
}

/// Whether `name` is PyTorch's batch-norm step counter (`bn.num_batches_tracked`,
/// beside a `bn.running_mean` of the model): Volta's batch norm uses a fixed
/// momentum and keeps no counter, so files PyTorch wrote load with it skipped.
fn pytorch_counter(name: &str, known: &std::collections::HashSet<&str>) -> bool {
    name.strip_suffix("num_batches_tracked")
        .is_some_and(|prefix| known.contains(format!("{prefix}running_mean").as_str()))
}

/// Puts checked tensors into the model (parameters as tracked leaves, buffers
/// untracked) and sets the counters the file has.
fn assign<M, D, E>(
    model: &mut M,
    mut tensors: HashMap<String, RawTensor<D, E>>,
    counters: &HashMap<String, u64>,
) where
    M: Module<D, E> + ?Sized,
    D: Backend<E>,
    E: Float,
{
    model.visit(&mut Visitor::new(&mut |name, entry| {
        let (slot, tracked) = match entry {
            Entry::Param(p) => (p, true),
            Entry::Buffer(b) => (b, false),
            Entry::Counter(c) => {
                if let Some(v) = counters.get(&format!("{COUNTER}{name}")) {
                    *c = *v;
                }
                return;
            }
            Entry::Training(_) => return,
        };
        let value = tensors
            .remove(name)
            .expect("every model tensor was found and checked before assigning");
        let done = if tracked {
            slot.update(value)
        } else {
            slot.set(value)
        };
        done.expect("dims were checked against the model");
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Cpu;

    /// `name` in a fresh folder of the test `test`.
    fn temp(test: &str, name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("volta-ckpt-unit-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn tensors() -> Vec<(String, RawTensor<Cpu, f32>)> {
        vec![
            (
                "fc.weight".into(),
                RawTensor::from_vec(vec![1.0, -2.0, 3.5, 0.25, 5.0, 6.0], &[2, 3]),
            ),
            ("fc.bias".into(), RawTensor::from_vec(vec![0.5, -0.5], &[2])),
            (
                "optim/0.exp_avg".into(),
                RawTensor::from_vec(vec![0.0; 6], &[2, 3]),
            ),
        ]
    }

    /// Keys that JSON must escape, and enough of them that a hash map's order would
    /// differ between two maps.
    fn entries() -> Vec<(String, String)> {
        let mut e: Vec<(String, String)> = (0..24)
            .map(|i| (format!("key{i:02}"), format!("value {i}")))
            .collect();
        e.push((
            "quote\"back\\slash".into(),
            "line\nfeed\ttab\u{1}\u{7f}é∑".into(),
        ));
        e.push(("".into(), "empty key".into()));
        e
    }

    /// Metadata from a `HashMap` filled in the given order, as a caller might build it.
    fn metadata(reverse: bool) -> Metadata {
        let mut entries = entries();
        if reverse {
            entries.reverse();
        }
        let mut map = HashMap::new();
        for (k, v) in entries {
            map.insert(k, v);
        }
        map.into_iter().collect()
    }

    #[test]
    fn equal_contents_give_identical_bytes_that_both_readers_load() {
        let (a, b) = (
            temp("equal", "a.safetensors"),
            temp("equal", "b.safetensors"),
        );
        write(&a, tensors(), metadata(false)).unwrap();
        write(&b, tensors(), metadata(true)).unwrap();
        let bytes = std::fs::read(&a).unwrap();
        assert_eq!(bytes, std::fs::read(&b).unwrap());
        // Writing again over the file gives the same bytes, and leaves no temporary file.
        write(&a, tensors(), metadata(true)).unwrap();
        assert_eq!(bytes, std::fs::read(&a).unwrap());
        let dir = a.parent().unwrap();
        let leftovers: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        // The safetensors crate reads it: the header is 8-aligned, metadata and tensors
        // are intact.
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n % 8, 0);
        let parsed = SafeTensors::deserialize(&bytes).unwrap();
        let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
        let expected: HashMap<String, String> = entries().into_iter().collect();
        assert_eq!(header.metadata().as_ref(), Some(&expected));
        for (name, t) in tensors() {
            let view = parsed.tensor(&name).unwrap();
            assert_eq!(view.shape(), t.dims());
            assert_eq!(f32::get(view.data()), t.to_vec(), "{name}");
        }

        // Volta's reader too.
        let file = File::parse(&a, &bytes).unwrap();
        assert_eq!(file.user_metadata(), metadata(false));
        let bias: RawTensor<Cpu, f32> = file.tensor("fc.bias", &[2]).unwrap();
        assert_eq!(bias.to_vec(), vec![0.5, -0.5]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// With at most one metadata key (no order to choose), the file is byte for byte
    /// the one `safetensors::serialize` writes.
    #[test]
    fn the_header_is_the_one_safetensors_writes() {
        for meta in [
            Metadata::new(),
            Metadata::from([("note \"x\"\n".to_string(), "\\ ü \u{0}".to_string())]),
        ] {
            let path = temp("same", &format!("{}.safetensors", meta.len()));
            write(&path, tensors(), meta.clone()).unwrap();
            let host: Vec<(String, Vec<usize>, Vec<u8>)> = tensors()
                .into_iter()
                .map(|(name, t)| {
                    let mut bytes = Vec::new();
                    f32::put(&t.to_vec(), &mut bytes);
                    (name, t.dims().to_vec(), bytes)
                })
                .collect();
            let views = host.iter().map(|(name, dims, bytes)| {
                (
                    name.as_str(),
                    TensorView::new(f32::DTYPE, dims.clone(), bytes).unwrap(),
                )
            });
            let theirs = safetensors::serialize(views, Some(meta.into_iter().collect())).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), theirs);
            std::fs::remove_file(&path).unwrap();
        }
    }
}
