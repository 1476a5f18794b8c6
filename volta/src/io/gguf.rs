//! GGUF files (llama.cpp's model format, versions 2 and 3): metadata, tensor infos
//! and tensor data, parsed from untrusted bytes. Every length and count is checked
//! against the bytes that remain before anything is allocated, so a corrupt header
//! is an error, never a panic or a huge allocation.
//!
//! The whole file is read into memory rather than memory-mapped: a 135M-parameter
//! model in Q4_1 is 98 MB, every weight is read once (dequantised or uploaded to a
//! device) right after opening, and an owned `Vec<u8>` keeps the reader free of
//! `unsafe` (a map's bytes may change under it if another process writes the file)
//! and of a platform-specific dependency. Tensors are borrowed slices of it.
//!
//! ```no_run
//! use volta::io::gguf::Gguf;
//! let g = Gguf::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! assert_eq!(g.get_str("general.architecture")?, "llama");
//! let layers = g.get_u32("llama.block_count")?;
//! let (info, raw) = g.tensor("blk.0.attn_q.weight")?; // raw Q4_1 blocks
//! println!("{layers} layers; {} is {} {:?}, {} bytes", info.name, info.ty, info.shape(), raw.len());
//! # Ok::<(), volta::io::gguf::GgufError>(())
//! ```
use super::quant::{GgmlType, QuantError, dequantize};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array of values of one type.
    Array(Vec<Value>),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl Value {
    /// The type's name in messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::F32(_) => "f32",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F64(_) => "f64",
        }
    }

    /// An integer value that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(x) => Some(x.into()),
            Value::I16(x) => Some(x.into()),
            Value::I32(x) => Some(x.into()),
            Value::I64(x) => Some(x),
            ref other => other.as_u64().and_then(|x| i64::try_from(x).ok()),
        }
    }

    /// An unsigned or non-negative integer value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
}

/// One tensor's entry in the header.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its dims in ggml's order: `dims[0]` is the contiguous (fastest) axis.
    pub dims: Vec<u64>,
    /// Its element type.
    pub ty: GgmlType,
    /// Offset of its data from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// The dims in row-major order (the reverse of ggml's): a `[576, 49152]` ggml
    /// embedding is `[49152, 576]`, one row per token.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// The number of elements (checked against overflow while parsing).
    pub fn len(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A parsed GGUF file.
#[derive(Debug)]
pub struct Gguf {
    path: PathBuf,
    version: u32,
    metadata: Vec<(String, Value)>,
    keys: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    names: HashMap<String, usize>,
    bytes: Vec<u8>,
    data_start: usize,
    alignment: u64,
}

/// Why a GGUF file could not be read, or a value not found.
#[derive(Debug)]
pub struct GgufError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: GgufErrorKind,
}

/// What is wrong with a GGUF file.
#[derive(Debug)]
pub enum GgufErrorKind {
    /// The file could not be read.
    Io(std::io::Error),
    /// The first four bytes are not `GGUF`.
    BadMagic([u8; 4]),
    /// A version other than 2 or 3.
    Version(u32),
    /// The file ends inside a field.
    Truncated {
        /// Where the field starts.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// The file's length.
        len: u64,
    },
    /// A length or count larger than the rest of the file could hold.
    TooLong {
        /// Where it was read.
        offset: u64,
        /// What it counts.
        what: &'static str,
        /// The value found.
        count: u64,
    },
    /// A string that is not UTF-8.
    Utf8 {
        /// Where the string starts.
        offset: u64,
    },
    /// A metadata value type id that GGUF does not define.
    ValueType {
        /// Where it was read.
        offset: u64,
        /// The id found.
        id: u32,
    },
    /// Arrays nested deeper than any model uses.
    TooDeep {
        /// Where the innermost array starts.
        offset: u64,
    },
    /// Two metadata keys or two tensors with one name.
    Duplicate(String),
    /// `general.alignment` is zero, not a power of two, or not an integer.
    Alignment(String),
    /// A tensor's dims multiply past 2⁶⁴ or its byte size is not whole blocks.
    Dims {
        /// The tensor.
        name: String,
        /// Its ggml dims.
        dims: Vec<u64>,
    },
    /// A tensor's data lies (partly) outside the file.
    OutOfBounds {
        /// The tensor.
        name: String,
        /// Its offset in the data section.
        offset: u64,
        /// Its size.
        bytes: u64,
        /// The data section's size.
        data_len: u64,
    },
    /// A tensor's offset is not a multiple of the alignment.
    Misaligned {
        /// The tensor.
        name: String,
        /// Its offset.
        offset: u64,
        /// The alignment.
        alignment: u64,
    },
    /// A tensor type id that ggml does not define (so its size is unknown).
    UnknownType {
        /// The tensor.
        name: String,
        /// Where the id was read.
        offset: u64,
        /// The id found.
        id: u32,
    },
    /// A tensor type this reader does not decode (its raw bytes can still be read).
    UnsupportedType {
        /// The tensor.
        name: String,
        /// Its type.
        ty: GgmlType,
    },
    /// A metadata key the caller needs is absent.
    MissingKey(String),
    /// A metadata value of another type than the caller needs.
    KeyType {
        /// The key.
        key: String,
        /// The type needed.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// No tensor of this name.
    MissingTensor(String),
    /// A model dim in the file differs from the one the Rust type it is loaded into
    /// fixes (see [`Llama`](crate::models::llama::Llama)).
    ModelDims {
        /// What the dim counts, plural (`layers`, `attention heads`, …).
        what: &'static str,
        /// Where the file gives it: a metadata key (the length of
        /// `tokenizer.ggml.tokens` for the vocabulary).
        key: &'static str,
        /// The file's value.
        found: u64,
        /// The type's value.
        expected: u64,
        /// The type loaded into, with its dims (`Llama<Cpu, 30, 576, …>`).
        ty: String,
        /// The same type with the file's dims: the one this file loads into.
        file_ty: String,
    },
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GGUF file {}: ", self.path.display())?;
        match &self.kind {
            GgufErrorKind::Io(e) => write!(f, "{e}"),
            GgufErrorKind::BadMagic(m) => write!(f, "starts with {m:?}, not \"GGUF\""),
            GgufErrorKind::Version(v) => write!(f, "version {v}; this reader reads 2 and 3"),
            GgufErrorKind::Truncated {
                offset,
                needed,
                len,
            } => write!(
                f,
                "truncated: {needed} bytes needed at offset {offset}, but the file has {len}"
            ),
            GgufErrorKind::TooLong {
                offset,
                what,
                count,
            } => write!(
                f,
                "at offset {offset}: {what} of {count} does not fit in the rest of the file"
            ),
            GgufErrorKind::Utf8 { offset } => {
                write!(f, "the string at offset {offset} is not UTF-8")
            }
            GgufErrorKind::ValueType { offset, id } => {
                write!(f, "at offset {offset}: unknown metadata value type {id}")
            }
            GgufErrorKind::TooDeep { offset } => {
                write!(f, "at offset {offset}: arrays nested too deeply")
            }
            GgufErrorKind::Duplicate(name) => write!(f, "`{name}` appears twice"),
            GgufErrorKind::Alignment(v) => {
                write!(f, "general.alignment is {v}: expected a power of two")
            }
            GgufErrorKind::Dims { name, dims } => {
                write!(f, "tensor `{name}` has invalid dims {dims:?} for its type")
            }
            GgufErrorKind::OutOfBounds {
                name,
                offset,
                bytes,
                data_len,
            } => write!(
                f,
                "tensor `{name}`: {bytes} bytes at data offset {offset} exceed the {data_len}-byte data section"
            ),
            GgufErrorKind::Misaligned {
                name,
                offset,
                alignment,
            } => write!(
                f,
                "tensor `{name}`: offset {offset} is not a multiple of the alignment {alignment}"
            ),
            GgufErrorKind::UnknownType { name, offset, id } => write!(
                f,
                "tensor `{name}`: unknown ggml type {id} at offset {offset}"
            ),
            GgufErrorKind::UnsupportedType { name, ty } => {
                write!(
                    f,
                    "tensor `{name}` has type {ty}, which this reader does not decode"
                )
            }
            GgufErrorKind::MissingKey(k) => write!(f, "no metadata key `{k}`"),
            GgufErrorKind::KeyType {
                key,
                expected,
                found,
            } => write!(f, "metadata `{key}` is {found}, expected {expected}"),
            GgufErrorKind::MissingTensor(n) => write!(f, "no tensor `{n}`"),
            GgufErrorKind::ModelDims {
                what,
                key,
                found,
                expected,
                ty,
                file_ty,
            } => write!(
                f,
                "the file has {found} {what} (`{key}`), but the type {ty} expects {expected}; \
                 the file's dims make {file_ty}"
            ),
        }
    }
}

impl std::error::Error for GgufError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            GgufErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Arrays inside arrays deeper than this are rejected (GGUF models use one level).
const MAX_DEPTH: usize = 4;
/// The default data alignment.
const DEFAULT_ALIGNMENT: u64 = 32;

/// A capacity to reserve for `n` parsed items. `n` was checked against the bytes
/// left, but a parsed item is larger than its smallest encoding (a `Value` is 32
/// bytes, a one-byte `u8` in the file), so larger counts grow as items are read
/// instead of reserving a multiple of the file up front.
fn capped(n: u64) -> usize {
    n.min(1 << 16) as usize
}

/// A cursor over the file's bytes that checks every read.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

type Parse<T> = Result<T, GgufErrorKind>;

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Parse<&'a [u8]> {
        let rest = (self.bytes.len() - self.pos) as u64;
        if n > rest {
            return Err(GgufErrorKind::Truncated {
                offset: self.pos as u64,
                needed: n,
                len: self.bytes.len() as u64,
            });
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Parse<[u8; N]> {
        Ok(self.take(N as u64)?.try_into().expect("N bytes taken"))
    }

    fn u32(&mut self) -> Parse<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Parse<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of items needing at least `min_bytes` each, checked against the rest.
    fn count(&mut self, what: &'static str, min_bytes: u64) -> Parse<u64> {
        let offset = self.pos as u64;
        let count = self.u64()?;
        let rest = (self.bytes.len() - self.pos) as u64;
        if count.saturating_mul(min_bytes) > rest {
            return Err(GgufErrorKind::TooLong {
                offset,
                what,
                count,
            });
        }
        Ok(count)
    }

    fn string(&mut self) -> Parse<String> {
        let len = self.count("a string length", 1)?;
        let offset = self.pos as u64;
        let raw = self.take(len)?;
        String::from_utf8(raw.to_vec()).map_err(|_| GgufErrorKind::Utf8 { offset })
    }

    /// The smallest encoding of a value of type `id` (for count checks).
    fn min_size(id: u32) -> u64 {
        match id {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 => 8,
            9 => 12,
            _ => 8,
        }
    }

    fn value(&mut self, id: u32, depth: usize) -> Parse<Value> {
        let offset = self.pos as u64;
        Ok(match id {
            0 => Value::U8(self.array::<1>()?[0]),
            1 => Value::I8(self.array::<1>()?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array()?)),
            3 => Value::I16(i16::from_le_bytes(self.array()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.array()?)),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => Value::Bool(self.array::<1>()?[0] != 0),
            8 => Value::String(self.string()?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(GgufErrorKind::TooDeep { offset });
                }
                let inner = self.u32()?;
                if inner > 12 {
                    return Err(GgufErrorKind::ValueType { offset, id: inner });
                }
                let n = self.count("an array length", Self::min_size(inner))?;
                let mut items = Vec::with_capacity(capped(n));
                for _ in 0..n {
                    items.push(self.value(inner, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.array()?)),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            other => return Err(GgufErrorKind::ValueType { offset, id: other }),
        })
    }
}

impl Gguf {
    /// Reads and parses the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf, GgufError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| GgufError {
            path: path.to_path_buf(),
            kind: GgufErrorKind::Io(e),
        })?;
        Gguf::parse(path, bytes)
    }

    /// Parses `bytes` (named `path` in errors).
    pub fn parse(path: impl AsRef<Path>, bytes: Vec<u8>) -> Result<Gguf, GgufError> {
        let path = path.as_ref().to_path_buf();
        let fail = |kind| GgufError {
            path: path.clone(),
            kind,
        };
        let (version, metadata, tensors, header_end) = Self::header(&bytes).map_err(fail)?;
        let mut keys = HashMap::new();
        for (i, (k, _)) in metadata.iter().enumerate() {
            if keys.insert(k.clone(), i).is_some() {
                return Err(fail(GgufErrorKind::Duplicate(k.clone())));
            }
        }
        let alignment = match keys.get("general.alignment").map(|&i| &metadata[i].1) {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a.is_power_of_two() => a,
                _ => return Err(fail(GgufErrorKind::Alignment(format!("{v:?}")))),
            },
        };
        // A huge alignment can put the data past the end: then only empty tensors
        // fit, and they are empty slices at the end.
        let data_start = (header_end as u64)
            .checked_next_multiple_of(alignment)
            .unwrap_or(u64::MAX)
            .min(bytes.len() as u64);
        let data_len = (bytes.len() as u64).saturating_sub(data_start);
        let mut names = HashMap::new();
        for (i, t) in tensors.iter().enumerate() {
            if names.insert(t.name.clone(), i).is_some() {
                return Err(fail(GgufErrorKind::Duplicate(t.name.clone())));
            }
            let dims_err = || {
                fail(GgufErrorKind::Dims {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                })
            };
            let n = t
                .dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(dims_err)?;
            if !t.offset.is_multiple_of(alignment) {
                return Err(fail(GgufErrorKind::Misaligned {
                    name: t.name.clone(),
                    offset: t.offset,
                    alignment,
                }));
            }
            // Every type ggml defines has a known size, so types this reader does
            // not decode get their bounds checked too.
            let size = t.ty.bytes_for(n).ok_or_else(dims_err)?;
            if t.offset.checked_add(size).is_none_or(|end| end > data_len) {
                return Err(fail(GgufErrorKind::OutOfBounds {
                    name: t.name.clone(),
                    offset: t.offset,
                    bytes: size,
                    data_len,
                }));
            }
        }
        Ok(Gguf {
            path,
            version,
            metadata,
            keys,
            tensors,
            names,
            bytes,
            data_start: data_start as usize,
            alignment,
        })
    }

    /// Version, metadata, tensor infos and the end of the header.
    #[allow(clippy::type_complexity)]
    fn header(bytes: &[u8]) -> Parse<(u32, Vec<(String, Value)>, Vec<TensorInfo>, usize)> {
        let mut r = Reader { bytes, pos: 0 };
        let magic = r.array::<4>()?;
        if &magic != b"GGUF" {
            return Err(GgufErrorKind::BadMagic(magic));
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(GgufErrorKind::Version(version));
        }
        // A tensor info needs at least 8 + 4 + 4 + 8 bytes, a key-value pair 8 + 4 + 1.
        let tensor_count = r.count("a tensor count", 24)?;
        let kv_count = r.count("a metadata count", 13)?;
        let mut metadata = Vec::with_capacity(capped(kv_count));
        for _ in 0..kv_count {
            let key = r.string()?;
            let id = r.u32()?;
            let value = r.value(id, 0)?;
            metadata.push((key, value));
        }
        let mut tensors = Vec::with_capacity(capped(tensor_count));
        for _ in 0..tensor_count {
            let name = r.string()?;
            let n_dims = r.u32()?;
            let offset = r.pos as u64;
            if n_dims > 8 {
                return Err(GgufErrorKind::TooLong {
                    offset,
                    what: "a dim count",
                    count: n_dims.into(),
                });
            }
            let dims = (0..n_dims).map(|_| r.u64()).collect::<Parse<Vec<u64>>>()?;
            let ty_offset = r.pos as u64;
            let id = r.u32()?;
            let ty = GgmlType::from_id(id).ok_or_else(|| GgufErrorKind::UnknownType {
                name: name.clone(),
                offset: ty_offset,
                id,
            })?;
            let offset = r.u64()?;
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                offset,
            });
        }
        Ok((version, metadata, tensors, r.pos))
    }

    fn error(&self, kind: GgufErrorKind) -> GgufError {
        GgufError {
            path: self.path.clone(),
            kind,
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Every metadata entry, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        f: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<T, GgufError> {
        let v = self
            .get(key)
            .ok_or_else(|| self.error(GgufErrorKind::MissingKey(key.to_string())))?;
        f(v).ok_or_else(|| {
            self.error(GgufErrorKind::KeyType {
                key: key.to_string(),
                expected,
                found: v.type_name(),
            })
        })
    }

    /// An integer value that fits a `u64` (any integer type).
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }

    /// An integer value that fits a `u32` (any integer type: writers differ on
    /// `u32` and `u64` for counts).
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        self.typed(key, "an integer in 0..2^32", |v| {
            v.as_u64().and_then(|x| u32::try_from(x).ok())
        })
    }

    /// An integer value that fits an `i64` (any integer type).
    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        self.typed(key, "an integer in i64's range", Value::as_i64)
    }

    /// An `f32` value (an `f64` is a type error: it would lose precision).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        self.typed(key, "f32", |v| match *v {
            Value::F32(x) => Some(x),
            _ => None,
        })
    }

    /// A `bool` value.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        self.typed(key, "bool", |v| match *v {
            Value::Bool(x) => Some(x),
            _ => None,
        })
    }

    /// An array of values of any one type.
    pub fn get_array(&self, key: &str) -> Result<&[Value], GgufError> {
        self.typed(key, "an array", |v| match v {
            Value::Array(items) => Some(items.as_slice()),
            _ => None,
        })
    }

    /// A float value (`f32` or `f64`).
    pub fn get_f64(&self, key: &str) -> Result<f64, GgufError> {
        self.typed(key, "a float", |v| match *v {
            Value::F32(x) => Some(x.into()),
            Value::F64(x) => Some(x),
            _ => None,
        })
    }

    /// A string value.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        self.typed(key, "a string", |v| match v {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// An array of strings.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        self.typed(key, "an array of strings", |v| match v {
            Value::Array(items) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Some(s.as_str()),
                    _ => None,
                })
                .collect(),
            _ => None,
        })
    }

    /// An array of integers that fit an `i64`.
    pub fn get_i64_array(&self, key: &str) -> Result<Vec<i64>, GgufError> {
        self.typed(key, "an array of integers", |v| match v {
            Value::Array(items) => items.iter().map(Value::as_i64).collect(),
            _ => None,
        })
    }

    /// Every tensor's entry, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Whether a tensor of this name exists.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// A tensor's entry and raw bytes (blocks as the file stores them, for any type
    /// ggml defines: decoded or not, see [`crate::io::quant`]'s block structs).
    pub fn tensor(&self, name: &str) -> Result<(&TensorInfo, &[u8]), GgufError> {
        let info = self
            .names
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| self.error(GgufErrorKind::MissingTensor(name.to_string())))?;
        let dims = || {
            self.error(GgufErrorKind::Dims {
                name: name.to_string(),
                dims: info.dims.clone(),
            })
        };
        // Size and bounds were checked while parsing; `get` keeps this panic-free.
        let size = info.ty.bytes_for(info.len()).ok_or_else(dims)?;
        let start = self.data_start as u64 + info.offset;
        let bytes = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start + size).ok())
            .and_then(|(a, b)| self.bytes.get(a..b))
            .ok_or_else(|| {
                self.error(GgufErrorKind::OutOfBounds {
                    name: name.to_string(),
                    offset: info.offset,
                    bytes: size,
                    data_len: (self.bytes.len() - self.data_start) as u64,
                })
            })?;
        Ok((info, bytes))
    }

    /// A tensor decoded to f32, with its row-major shape. Types other than F32,
    /// F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K are an
    /// [`GgufErrorKind::UnsupportedType`] error.
    pub fn dequantize(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>), GgufError> {
        let (info, bytes) = self.tensor(name)?;
        let values = dequantize(info.ty, bytes, info.len()).map_err(|e| match e {
            QuantError::Unsupported(ty) => self.error(GgufErrorKind::UnsupportedType {
                name: name.to_string(),
                ty,
            }),
            // The size was checked against the dims while parsing.
            _ => self.error(GgufErrorKind::Dims {
                name: name.to_string(),
                dims: info.dims.clone(),
            }),
        })?;
        Ok((info.shape(), values))
    }
}
