//! Learns XOR with a 2 → 8 → 1 network (tanh, then sigmoid) and SGD with momentum;
//! exits with an error if it does not. Takes no options (`--help` says so).
use clap::Parser;
use std::process::ExitCode;
use volta::nn::loss::mse;
use volta::prelude::*;

const STEPS: usize = 400;

/// Learns XOR with a 2 → 8 → 1 network (tanh, then sigmoid) and SGD with momentum;
/// exits with an error if it does not.
#[derive(Debug, Parser)]
#[command(name = "xor")]
struct Args {}

#[derive(Module)]
struct XorNet {
    hidden: Linear<2, 8>,
    out: Linear<8, 1>,
}

impl XorNet {
    fn forward(&self, x: &Tensor<Rank2<4, 2>>) -> Tensor<Rank2<4, 1>> {
        self.out.forward(&self.hidden.forward(x).tanh()).sigmoid()
    }
}

/// Trains the network, printing the loss and the predictions; `Err` with the final
/// loss if it did not learn XOR.
fn train() -> Result<(), f32> {
    let mut rng = Rng::seed(0);
    let x = Tensor::<Rank2<4, 2>>::from_array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]);
    let y = Tensor::<Rank2<4, 1>>::from_array([[0.0], [1.0], [1.0], [0.0]]);
    let mut net = XorNet {
        hidden: Linear::new(&mut rng),
        out: Linear::new(&mut rng),
    };
    let mut opt = Sgd::new(0.5).with_momentum(0.9);
    let mut loss_value = f32::NAN;
    for step in 0..=STEPS {
        let loss = mse(&net.forward(&x), &y);
        loss_value = loss.item();
        if step % 40 == 0 {
            println!("step {step:>4}  loss {loss_value:.5}");
        }
        if step < STEPS {
            let grads = loss.backward();
            opt.step(&mut net, &grads);
        }
    }
    let predictions = net.forward(&x).to_vec();
    let mut learned = loss_value < 0.01;
    for (input, (p, target)) in [[0, 0], [0, 1], [1, 0], [1, 1]]
        .iter()
        .zip(predictions.iter().zip(y.to_vec()))
    {
        println!("{} xor {} -> {p:.3} (want {target})", input[0], input[1]);
        learned &= (p - target).abs() < 0.2;
    }
    if learned { Ok(()) } else { Err(loss_value) }
}

fn main() -> ExitCode {
    let Args {} = Args::parse();
    match train() {
        Ok(()) => ExitCode::SUCCESS,
        Err(loss) => {
            eprintln!("xor: the network did not learn XOR (final loss {loss:.5})");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_xor() {
        assert_eq!(train(), Ok(()));
    }

    #[test]
    fn takes_no_arguments_but_help() {
        volta_examples::cli::assert_documented::<Args>();
        assert!(Args::try_parse_from(["xor"]).is_ok());
        let help = Args::try_parse_from(["xor", "--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        assert!(Args::try_parse_from(["xor", "--steps", "3"]).is_err());
    }
}
