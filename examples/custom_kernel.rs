//! Defines an activation with `#[kernel]`, prints the WGSL the macro generated (value
//! and derived partials), and trains the digits MLP with it — on the GPU when one is
//! present (`--device auto|cpu|gpu`). The gradient of the activation is derived by
//! the macro; nothing here writes a backward pass.
//!
//! ```text
//! cargo run --release --example custom_kernel [-- --device gpu] [--data PATH]
//! ```
use clap::Parser;
use std::process::ExitCode;
use volta::data::Labelled;
use volta::data::readers::digits::{self, CLASSES, PIXELS};
use volta::kernel;
use volta::kernel::KernelBackend;
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::cli::{DataArg, DeviceArg, DeviceChoice, resolve};

/// Defines an activation with `#[kernel]`, prints the WGSL the macro generated, and
/// trains the digits MLP with it; fails unless the test accuracy reaches 90%.
#[derive(Debug, Parser)]
#[command(name = "custom_kernel", args_override_self = true)]
struct Args {
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    data: DataArg,
}

/// Swish with a learnable-looking but fixed slope: x·σ(βx).
#[kernel]
fn swish(x: f32, #[scalar] beta: f32) -> f32 {
    x * sigmoid(beta * x)
}

const HIDDEN: usize = 64;
const BATCH: usize = 64;
const EPOCHS: usize = 15;
const BETA: f32 = 1.5;

#[derive(Module)]
struct Mlp<D: KernelBackend> {
    hidden: Linear<PIXELS, HIDDEN, D>,
    out: Linear<HIDDEN, CLASSES, D>,
}

impl<D: KernelBackend> Mlp<D> {
    fn forward<B: Dim>(&self, x: &Tensor<(B, Const<PIXELS>), D>) -> Tensor<(B, Const<CLASSES>), D> {
        self.out.forward(&swish(&self.hidden.forward(x), BETA))
    }
}

/// Trains for `epochs` on `D`; returns the test accuracy.
fn run<D: KernelBackend>(train: &Labelled, test: &Labelled, epochs: usize, rng: &mut Rng) -> f64 {
    let mut model = Mlp::<D> {
        hidden: Linear::new(rng),
        out: Linear::new(rng),
    };
    let mut opt = Adam::new(3e-3);
    let mut order: Vec<usize> = (0..train.len()).collect();
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        let mut total = Tensor::<(), D>::zeros();
        for chunk in order.chunks(BATCH) {
            let (pixels, _, labels, _) = train.select(chunk).into_parts();
            let n = chunk.len();
            let x = Tensor::<(usize, Const<PIXELS>), D>::from_vec_shaped(pixels, (n, Const))
                .expect("n × PIXELS pixels");
            let y = Tensor::<(usize,), D, u32>::from_vec_shaped(labels, (n,)).expect("n labels");
            let loss = cross_entropy(&model.forward(&x), &y);
            total = total + loss.detach();
            let grads = loss.backward();
            opt.step(&mut model, &grads);
        }
        if epoch % 5 == 0 {
            println!(
                "epoch {epoch:>2}  mean loss {:.4}",
                total.item() / order.len().div_ceil(BATCH) as f32
            );
        }
    }
    let _no_grad = no_grad();
    let n = test.len();
    let x =
        Tensor::<(usize, Const<PIXELS>), D>::from_vec_shaped(test.features().to_vec(), (n, Const))
            .expect("n × PIXELS pixels");
    let logits = model.forward(&x).to_vec();
    let correct = logits
        .chunks(CLASSES)
        .zip(test.labels())
        .filter(|(row, label)| {
            (0..CLASSES).max_by(|&a, &b| row[a].total_cmp(&row[b])) == Some(**label as usize)
        })
        .count();
    correct as f64 / n as f64
}

fn main() -> ExitCode {
    let args = Args::parse();
    let device = args.device.device;
    println!(
        "The WGSL #[kernel] generated for `swish` (value, ∂/∂x, ∂/∂beta):\n{}",
        swish::KERNEL.wgsl
    );
    let data = match args.data.path() {
        Ok(path) => digits::load(path).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let data = match data {
        Ok(d) => d,
        Err(e) => {
            eprintln!("custom_kernel: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rng = Rng::seed(1);
    let (train, test) = data.split(0.2, &mut rng);
    let acc = match resolve(device) {
        #[cfg(feature = "gpu")]
        DeviceChoice::Gpu => match Gpu::init() {
            Ok(info) => {
                println!("training on the GPU: {info}");
                run::<Gpu>(&train, &test, EPOCHS, &mut rng)
            }
            Err(e) => {
                eprintln!("custom_kernel: {e}");
                return ExitCode::from(3);
            }
        },
        _ => {
            println!("training on the CPU");
            run::<Cpu>(&train, &test, EPOCHS, &mut rng)
        }
    };
    println!("test accuracy with swish: {:.2}%", 100.0 * acc);
    if acc < 0.9 {
        eprintln!("custom_kernel: accuracy below 90%");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use volta_examples::find_digits;

    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &[&str]| Args::try_parse_from(argv.iter().copied());
        let a = parse(&["custom_kernel"]).unwrap();
        assert_eq!((a.device.device, a.data.data), (DeviceChoice::Auto, None));
        let a = parse(&["custom_kernel", "--device=gpu"]).unwrap();
        assert_eq!(a.device.device, DeviceChoice::Gpu);
        assert!(parse(&["custom_kernel", "--device", "tpu"]).is_err());
        assert!(parse(&["custom_kernel", "--epochs", "3"]).is_err());
    }

    #[test]
    fn trains_with_a_user_kernel_on_the_cpu() {
        let data = digits::load(find_digits().expect("the committed dataset")).expect("it loads");
        let mut rng = Rng::seed(1);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Cpu>(&train, &test, EPOCHS, &mut rng) >= 0.9);
    }

    #[cfg(feature = "gpu")]
    #[test]
    fn trains_with_a_user_kernel_on_the_gpu() {
        let data = digits::load(find_digits().expect("the committed dataset")).expect("it loads");
        let mut rng = Rng::seed(1);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Gpu>(&train, &test, 4, &mut rng) >= 0.9);
    }
}
