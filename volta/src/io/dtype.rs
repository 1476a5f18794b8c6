//! Element types as files store them.
use crate::dtype::Element;
use safetensors::Dtype;

/// An element type with a file encoding: its safetensors dtype and little-endian
/// bytes.
pub trait FileDtype: Element {
    /// The safetensors dtype.
    const DTYPE: Dtype;
    /// Appends `values` as little-endian bytes.
    fn put(values: &[Self], out: &mut Vec<u8>);
    /// Decodes little-endian bytes; `bytes.len()` is a multiple of the size.
    fn get(bytes: &[u8]) -> Vec<Self>;
}

macro_rules! file_dtype {
    ($t:ty, $dtype:ident) => {
        impl FileDtype for $t {
            const DTYPE: Dtype = Dtype::$dtype;
            fn put(values: &[Self], out: &mut Vec<u8>) {
                out.reserve(std::mem::size_of_val(values));
                for v in values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            fn get(bytes: &[u8]) -> Vec<Self> {
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("a chunk of the size")))
                    .collect()
            }
        }
    };
}
file_dtype!(f32, F32);
file_dtype!(f64, F64);
file_dtype!(u32, U32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let mut bytes = Vec::new();
        f32::put(&[1.5, -0.0, f32::MAX], &mut bytes);
        assert_eq!(bytes.len(), 12);
        assert_eq!(f32::get(&bytes), vec![1.5, -0.0, f32::MAX]);
        let mut bytes = Vec::new();
        f64::put(&[std::f64::consts::PI], &mut bytes);
        assert_eq!(f64::get(&bytes), vec![std::f64::consts::PI]);
    }
}
