//! Multimodal items as the engine takes them: each item's processed tensors (already
//! processed by the gateway), where its placeholder tokens sit in the prompt, and its hash.
//! Engine-neutral: the vLLM codec writes them as `MultiModalFeatureSpec`s (`vllm::mm`).

use std::sync::Arc;

/// Element type of a tensor, named as torch names it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    I64,
    /// Raw pixels, for an engine that rescales and normalises on its device (vLLM's
    /// `--mm-device-do-normalize`).
    U8,
    /// A placeholder range's `is_embed` mask.
    Bool,
}

impl DType {
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::I64 => 8,
            DType::U8 | DType::Bool => 1,
        }
    }
}

/// A C-contiguous little-endian tensor. The bytes are shared, not copied, between the side
/// thread that produced them, every sample of the request and the frames that carry them.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub data: Arc<[u8]>,
}

impl Tensor {
    pub fn f32(shape: Vec<u64>, values: &[f32]) -> Tensor {
        Tensor { dtype: DType::F32, shape, data: le_bytes(values, |v| v.to_le_bytes()) }
    }

    pub fn i64(shape: Vec<u64>, values: &[i64]) -> Tensor {
        Tensor { dtype: DType::I64, shape, data: le_bytes(values, |v| v.to_le_bytes()) }
    }

    /// Collected straight into the shared buffer (no intermediate vector).
    pub fn u8(shape: Vec<u64>, values: impl Iterator<Item = u8>) -> Tensor {
        Tensor { dtype: DType::U8, shape, data: values.collect() }
    }

    /// A one-dimensional mask.
    pub fn bool(values: &[bool]) -> Tensor {
        Tensor {
            dtype: DType::Bool,
            shape: vec![values.len() as u64],
            data: values.iter().map(|&b| u8::from(b)).collect(),
        }
    }
}

/// The values' little-endian bytes, written straight into the shared buffer (one pass, no
/// intermediate vector: a 1080p image's `pixel_values` are 50 MB).
fn le_bytes<T: Copy, const N: usize>(values: &[T], bytes: impl Fn(T) -> [u8; N]) -> Arc<[u8]> {
    let mut data: Arc<[std::mem::MaybeUninit<u8>]> = Arc::new_uninit_slice(values.len() * N);
    let out = Arc::get_mut(&mut data).expect("a new Arc is unique");
    for (chunk, &v) in out.chunks_exact_mut(N).zip(values) {
        for (o, b) in chunk.iter_mut().zip(bytes(v)) {
            o.write(b);
        }
    }
    // SAFETY: every byte was written above (`values.len()` chunks of `N`).
    unsafe { data.assume_init() }
}

/// How the engine batches a field across items (vLLM's `MultiModalFieldConfig` kinds).
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// Items concatenated along `dim`; `slices` are every item's `(start, stop)` in the
    /// request's concatenation (each item carries all of them, as vLLM's field factory does).
    Flat { slices: Vec<(u64, u64)>, dim: u32 },
    /// One entry per item along the first dimension.
    Batched,
}

/// A field's value: a tensor, or a plain list of numbers (Qwen3-VL's `timestamps`, which
/// vLLM keeps as the Python floats its processor computed).
#[derive(Debug, Clone, PartialEq)]
pub enum FieldData {
    Tensor(Tensor),
    Floats(Arc<[f64]>),
}

impl From<Tensor> for FieldData {
    fn from(tensor: Tensor) -> FieldData {
        FieldData::Tensor(tensor)
    }
}

/// One keyword argument of the model's encoder for one item (`pixel_values`, `image_grid_thw`).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub key: &'static str,
    pub data: FieldData,
    pub layout: Layout,
    /// Left on the CPU when the engine batches items (vLLM: `keep_on_cpu`).
    pub keep_on_cpu: bool,
}

/// The input modality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modality {
    Image,
    Video,
}

impl Modality {
    pub fn name(self) -> &'static str {
        match self {
            Modality::Image => "image",
            Modality::Video => "video",
        }
    }
}

/// One multimodal item of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Feature {
    pub modality: Modality,
    /// The item's processed tensors; `None` asks the engine to take them from its cache.
    pub fields: Option<Arc<[Field]>>,
    /// The item hash (vLLM's `mm_hash`, also its `identifier` without LoRA).
    pub hash: String,
    /// The first of the item's placeholder tokens in the prompt, and their count.
    pub offset: u32,
    pub length: u32,
    /// Which of those tokens take the item's embeddings (a `Bool` mask of `length`); `None`:
    /// all of them.
    pub is_embed: Option<Tensor>,
}
