//! Checkpoints: safetensors round trips, one error listing every mismatch, corrupt
//! files, GPU models, exact resumption of a training run, and a file PyTorch wrote.
use std::path::{Path, PathBuf};
use volta::io::{self, CheckpointError, Metadata, Mismatch};
use volta::nn::loss::cross_entropy;
use volta::prelude::*;

model! {
    /// A small CNN with every kind of entry: weights, biases, batch-norm buffers,
    /// dropout counters.
    pub struct Net for (B, 1, 6, 6) -> (B, 3) {
        conv: Conv2d<4, kernel = 3, padding = 1>,
        bn: BatchNorm2d,
        relu,
        pool: MaxPool2d<2>,
        flatten,
        drop: Dropout<0.2>,
        fc: Linear<3>,
    }
}

model! {
    /// `Net` with another width: a checkpoint of one must not load into the other.
    pub struct Wider for (B, 1, 6, 6) -> (B, 3) {
        conv: Conv2d<5, kernel = 3, padding = 1>,
        relu,
        pool: MaxPool2d<2>,
        flatten,
        fc: Linear<3>,
        extra: Linear<3>,
    }
}

/// A fresh directory for one test.
fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("volta-ckpt-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn tensors<D: Backend<f32>, M: Module<D, f32>>(m: &mut M) -> Vec<(String, Vec<f32>)> {
    m.named_tensors()
        .into_iter()
        .map(|(n, t)| (n, t.to_vec()))
        .collect()
}

/// Eight 1×6×6 images.
type Images<D> = Tensor<(Const<8>, Const<1>, Const<6>, Const<6>), D>;

/// A batch of 8 images and labels, the same for every seed of the model.
fn batch<D: Backend<f32>>(step: u64) -> (Images<D>, Tensor<(Const<8>,), D, u32>) {
    let mut rng = Rng::seed(100 + step);
    let x = Tensor::randn(&mut rng);
    let y: Vec<u32> = (0..8).map(|i| ((i as u64 + step) % 3) as u32).collect();
    (x, Tensor::from_vec(y).expect("8 labels"))
}

fn train_steps<D: Backend<f32>, O: Optimizer<D, f32>>(
    net: &mut Net<D>,
    opt: &mut O,
    steps: std::ops::Range<u64>,
) {
    for step in steps {
        let (x, y) = batch::<D>(step);
        let grads = cross_entropy(&net.forward(&x), &y).backward();
        opt.step(net, &grads);
    }
}

#[test]
fn round_trip_restores_parameters_and_buffers() {
    let d = dir("round-trip");
    let path = d.join("net.safetensors");
    let mut net = Net::<Cpu>::new(&mut Rng::seed(1));
    // Move the running statistics off their initial values.
    train_steps(&mut net, &mut Sgd::new(0.1), 0..2);
    io::save(&path, &mut net).expect("save");

    let mut other = Net::<Cpu>::new(&mut Rng::seed(2));
    assert_ne!(tensors(&mut other), tensors(&mut net));
    let meta = io::load(&path, &mut other).expect("load");
    assert!(meta.is_empty());
    assert_eq!(tensors(&mut other), tensors(&mut net));
    // Parameters come back trainable, buffers not.
    assert!(other.conv.weight.is_tracked());
    let names: Vec<String> = other.named_tensors().into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"bn.running_mean".to_string()), "{names:?}");
    let (x, y) = batch::<Cpu>(0);
    let grads = cross_entropy(&other.forward(&x), &y).backward();
    assert!(grads.get(&other.fc.weight).is_some());
}

#[test]
fn a_file_that_does_not_fit_lists_every_mismatch_and_changes_nothing() {
    let d = dir("mismatch");
    let path = d.join("wider.safetensors");
    io::save(&path, &mut Wider::<Cpu>::new(&mut Rng::seed(3))).expect("save");

    let mut net = Net::<Cpu>::new(&mut Rng::seed(4));
    let before = tensors(&mut net);
    let err = io::load(&path, &mut net).expect_err("Wider does not fit Net");
    let CheckpointError::Mismatch { mismatches, .. } = &err else {
        panic!("expected a mismatch, got {err}");
    };
    let shape = |name: &str, expected: &[usize], found: &[usize]| Mismatch::Shape {
        name: name.into(),
        expected: expected.to_vec(),
        found: found.to_vec(),
    };
    assert!(mismatches.contains(&shape("conv.weight", &[4, 1, 3, 3], &[5, 1, 3, 3])));
    assert!(mismatches.contains(&shape("conv.bias", &[4], &[5])));
    assert!(mismatches.contains(&shape("fc.weight", &[3, 36], &[3, 45])));
    assert!(mismatches.contains(&Mismatch::Missing {
        name: "bn.running_var".into(),
        dims: vec![4]
    }));
    assert!(mismatches.contains(&Mismatch::Unexpected {
        name: "extra.weight".into(),
        dims: vec![3, 3]
    }));
    // bn.{weight, bias, running_mean, running_var} missing, extra.{weight, bias}
    // unexpected, conv.{weight, bias} and fc.weight reshaped.
    assert_eq!(mismatches.len(), 9, "{err}");
    let text = err.to_string();
    assert!(text.contains("9 mismatches"), "{text}");
    assert!(text.contains("`fc.weight`: the model has [3, 36], the file [3, 45]"));
    assert_eq!(tensors(&mut net), before, "a failed load changes nothing");
}

#[test]
fn another_element_type_is_a_dtype_mismatch() {
    let d = dir("dtype");
    let path = d.join("f64.safetensors");
    io::save(&path, &mut Net::<Cpu, f64>::new(&mut Rng::seed(5))).expect("save");
    let err = io::load(&path, &mut Net::<Cpu>::new(&mut Rng::seed(5))).unwrap_err();
    let CheckpointError::Mismatch { mismatches, .. } = &err else {
        panic!("{err}");
    };
    assert!(
        mismatches
            .iter()
            .all(|m| matches!(m, Mismatch::Dtype { .. }))
    );
    assert!(
        err.to_string()
            .contains("the model holds F32, the file F64"),
        "{err}"
    );
}

#[test]
fn missing_and_corrupt_files_are_typed_errors() {
    let d = dir("corrupt");
    let mut net = Net::<Cpu>::new(&mut Rng::seed(6));
    let err = io::load(d.join("absent.safetensors"), &mut net).unwrap_err();
    assert!(matches!(err, CheckpointError::Io { .. }), "{err}");
    assert!(err.to_string().contains("absent.safetensors"));

    let good = d.join("good.safetensors");
    io::save(&good, &mut net).expect("save");
    let bytes = std::fs::read(&good).expect("read");
    let cases: [(&str, Vec<u8>); 4] = [
        ("empty", Vec::new()),
        ("truncated", bytes[..bytes.len() - 7].to_vec()),
        ("header-cut", bytes[..20].to_vec()),
        (
            "garbage",
            b"\xff\xff\xff\xff\xff\xff\xff\x7fnot a header".to_vec(),
        ),
    ];
    for (name, content) in cases {
        let path = d.join(format!("{name}.safetensors"));
        std::fs::write(&path, content).expect("write");
        let err = io::load(&path, &mut net).unwrap_err();
        assert!(
            matches!(err, CheckpointError::Format { .. }),
            "{name}: {err}"
        );
        assert!(
            err.to_string().contains(&format!("{name}.safetensors")),
            "{err}"
        );
    }
}

/// A resumed run takes bit for bit the steps the uninterrupted run takes (the
/// resumed model is built from another seed: weights, moments and dropout's seed
/// and call count all come from the file).
fn resumes_exactly<O: Optimizer<Cpu, f32>>(name: &str, make: impl Fn() -> O) {
    let d = dir(name);
    let path = d.join("run.safetensors");
    let mut straight = Net::<Cpu>::new(&mut Rng::seed(7));
    let mut opt = make();
    train_steps(&mut straight, &mut opt, 0..6);

    let mut first = Net::<Cpu>::new(&mut Rng::seed(7));
    let mut opt = make();
    train_steps(&mut first, &mut opt, 0..3);
    let meta = Metadata::from([("epoch".to_string(), "3".to_string())]);
    io::save_training(&path, &mut first, &opt, &meta).expect("save");

    let mut resumed = Net::<Cpu>::new(&mut Rng::seed(8));
    let mut opt = make();
    let back = io::load_training(&path, &mut resumed, &mut opt).expect("load");
    assert_eq!(back, meta);
    assert_eq!(opt.state().step, 3);
    train_steps(&mut resumed, &mut opt, 3..6);
    let bits = |m: &mut Net<Cpu>| -> Vec<(String, Vec<u32>)> {
        tensors(m)
            .into_iter()
            .map(|(n, v)| (n, v.iter().map(|x| x.to_bits()).collect()))
            .collect()
    };
    assert_eq!(bits(&mut resumed), bits(&mut straight), "{name}");
}

#[test]
fn adam_runs_resume_bit_identically() {
    resumes_exactly("adam", || Adam::<Cpu>::adamw(1e-2, 1e-2));
}

#[test]
fn sgd_runs_resume_bit_identically() {
    resumes_exactly("sgd", || Sgd::<Cpu>::new(0.05).with_momentum(0.9));
}

/// Two seeded runs write byte-identical checkpoints: the metadata's keys (the
/// caller's, the optimiser's, the dropout counters) are written in one order,
/// however the caller's map was filled.
#[test]
fn equal_runs_write_byte_identical_files_that_load() {
    let d = dir("identical");
    let run = |file: &str, reverse: bool| -> PathBuf {
        let mut net = Net::<Cpu>::new(&mut Rng::seed(11));
        let mut opt = Adam::<Cpu>::adamw(1e-2, 1e-2);
        train_steps(&mut net, &mut opt, 0..2);
        let mut entries: Vec<(String, String)> = (0..12)
            .map(|i| (format!("key{i}"), format!("value {i}")))
            .collect();
        entries.push(("epoch".into(), "2".into()));
        if reverse {
            entries.reverse();
        }
        let mut caller = std::collections::HashMap::new();
        caller.extend(entries);
        let meta: Metadata = caller.into_iter().collect();
        let path = d.join(file);
        io::save_training(&path, &mut net, &opt, &meta).expect("save");
        path
    };
    let (a, b) = (run("a.safetensors", false), run("b.safetensors", true));
    let bytes = std::fs::read(&a).unwrap();
    assert!(bytes == std::fs::read(&b).unwrap(), "the two files differ");

    // The safetensors crate reads it, metadata included.
    let parsed = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
    assert!(parsed.names().iter().any(|n| n.starts_with("optim/")));
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let file_meta = header.metadata().as_ref().expect("metadata");
    assert_eq!(file_meta["epoch"], "2");
    assert!(file_meta.contains_key("volta.optim.kind"));

    // Volta's loader resumes from it.
    let mut net = Net::<Cpu>::new(&mut Rng::seed(12));
    let mut opt = Adam::<Cpu>::adamw(1e-2, 1e-2);
    let meta = io::load_training(&a, &mut net, &mut opt).expect("load");
    assert_eq!((meta.len(), meta["epoch"].as_str()), (13, "2"));
    assert_eq!(opt.state().step, 2);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn optimizer_state_is_checked_before_anything_changes() {
    let d = dir("optim");
    let mut net = Net::<Cpu>::new(&mut Rng::seed(9));
    let mut adam = Adam::<Cpu>::new(1e-3);
    train_steps(&mut net, &mut adam, 0..1);
    let with_adam = d.join("adam.safetensors");
    io::save_training(&with_adam, &mut net, &adam, &Metadata::new()).expect("save");

    // An Adam state does not load into SGD; the model stays as it was.
    let mut other = Net::<Cpu>::new(&mut Rng::seed(10));
    let before = tensors(&mut other);
    let mut sgd = Sgd::<Cpu>::new(0.1);
    let err = io::load_training(&with_adam, &mut other, &mut sgd).unwrap_err();
    assert!(matches!(err, CheckpointError::Optimizer { .. }), "{err}");
    assert_eq!(tensors(&mut other), before);

    // A model-only file has no state to resume from.
    let plain = d.join("plain.safetensors");
    io::save(&plain, &mut net).expect("save");
    let err = io::load_training(&plain, &mut other, &mut adam).unwrap_err();
    assert!(err.to_string().contains("save_training"), "{err}");

    // `load` of a training file takes the model and skips the optimiser tensors.
    io::load(&with_adam, &mut other).expect("the model part loads alone");
    assert_eq!(tensors(&mut other), tensors(&mut net));
}

#[cfg(feature = "gpu")]
#[test]
fn gpu_models_save_and_load_without_a_manual_move() {
    let _gpu = crate::support::gpu_shared();
    let d = dir("gpu");
    let path = d.join("gpu.safetensors");
    let mut cpu = Net::<Cpu>::new(&mut Rng::seed(11));
    let mut gpu: Net<Gpu> = cpu.to::<Gpu>();
    io::save(&path, &mut gpu).expect("save from the GPU");
    let mut back = Net::<Cpu>::new(&mut Rng::seed(12));
    io::load(&path, &mut back).expect("load on the CPU");
    assert_eq!(tensors(&mut back), tensors(&mut cpu));

    let mut gpu2 = Net::<Gpu>::new(&mut Rng::seed(13));
    io::load(&path, &mut gpu2).expect("load onto the GPU");
    assert_eq!(tensors(&mut gpu2), tensors(&mut cpu));
}

/// `tests/reference/pytorch_checkpoint.py` built this CNN in PyTorch, saved its
/// `state_dict()` with `safetensors.torch.save_file`, and saved an input batch
/// with PyTorch's logits for it.
#[test]
fn a_pytorch_file_loads_and_gives_pytorch_logits() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference");
    let mut net = Net::<Cpu>::new(&mut Rng::seed(14));
    io::load(root.join("pytorch_net.safetensors"), &mut net).expect("PyTorch's file fits Net");
    net.eval();

    let bytes = std::fs::read(root.join("pytorch_io.safetensors")).expect("reference io");
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("valid");
    let read = |name: &str| -> Vec<f32> {
        file.tensor(name)
            .expect(name)
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let x = Tensor::<(Const<5>, Const<1>, Const<6>, Const<6>)>::from_vec(read("input"))
        .expect("5 images");
    let got = net.forward(&x).to_vec();
    let want = read("logits");
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-5, "{got:?} vs {want:?}");
    }
}
