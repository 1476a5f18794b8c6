use volta::prelude::*;

model! {
    /// Forgets the classifier: the block ends at 64×7×7.
    pub struct LeNet for (B, 1, 28, 28) -> (B, 10) {
        conv1: Conv2d<32, kernel = 3, padding = 1>,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<64, kernel = 3, padding = 1>,
        relu,
        pool2: MaxPool2d<2>,
    }
}

fn main() {}
