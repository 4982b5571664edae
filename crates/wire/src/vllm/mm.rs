//! `mm_features` of `EngineCoreRequest`: a list of `MultiModalFeatureSpec`s as vLLM's
//! `MsgpackEncoder` writes them (the same bytes in every release from 0.27.1 to 0.33:
//! `tools/goldens/mm_features.py`). Dataclasses are maps with every field; each item is a map
//! of field elements `{"data": tensor, "field": [kind, factory kwargs]}`; a tensor is
//! `[dtype, shape, data]` with the data inline as ext type 3 below
//! `limits::vllm_inline_tensor_bytes_max`, else the index of an aux frame that carries its
//! bytes as they are (zero-copy: the frame is the tensor's own buffer). A range's `is_embed`
//! mask is such a tensor (`bool`); a field that is a plain list of floats (Qwen3-VL's
//! `timestamps`) is a msgpack array of float64, as msgspec writes Python floats.

use std::sync::Arc;

use crate::limits;
use crate::mm::{Feature, Field, FieldData, Layout, Tensor};
use crate::msgpack::Writer;

/// msgpack ext type of a raw byte view (vLLM's `CUSTOM_TYPE_RAW_VIEW`).
const EXT_RAW_VIEW: i8 = 3;

/// Writes the `mm_features` field (nil when there are none); the tensors too large to inline
/// are appended to `aux` and referenced by their frame index (the main frame is index 0).
pub fn write_features(w: &mut Writer<'_>, features: &[Feature], aux: &mut Vec<Arc<[u8]>>) {
    if features.is_empty() {
        w.nil();
        return;
    }
    w.array(features.len());
    for f in features {
        w.map(5);
        w.str("data");
        match &f.fields {
            Some(fields) => write_item(w, fields, aux),
            None => w.nil(),
        }
        w.str("modality");
        w.str(f.modality.name());
        w.str("identifier");
        w.str(&f.hash);
        w.str("mm_position");
        w.map(3);
        w.str("offset");
        w.uint(f.offset.into());
        w.str("length");
        w.uint(f.length.into());
        w.str("is_embed");
        match &f.is_embed {
            Some(mask) => write_tensor(w, mask, aux),
            None => w.nil(),
        }
        w.str("mm_hash");
        w.str(&f.hash);
    }
}

fn write_item(w: &mut Writer<'_>, fields: &[Field], aux: &mut Vec<Arc<[u8]>>) {
    w.map(fields.len());
    for field in fields {
        w.str(field.key);
        w.map(2);
        w.str("data");
        match &field.data {
            FieldData::Tensor(t) => write_tensor(w, t, aux),
            FieldData::Floats(values) => {
                w.array(values.len());
                for &v in values.iter() {
                    w.f64(v);
                }
            }
        }
        w.str("field");
        w.array(2);
        match &field.layout {
            Layout::Flat { slices, dim } => {
                w.str("flat");
                w.map(3);
                w.str("keep_on_cpu");
                w.bool(field.keep_on_cpu);
                w.str("slices");
                w.array(slices.len());
                for &(start, stop) in slices {
                    // One slice per dimension up to `dim`: the leading ones take everything.
                    w.array(*dim as usize + 1);
                    for _ in 0..*dim {
                        w.array(3);
                        w.nil();
                        w.nil();
                        w.nil();
                    }
                    w.array(3);
                    w.uint(start);
                    w.uint(stop);
                    w.nil();
                }
                w.str("dim");
                w.uint((*dim).into());
            }
            Layout::Batched => {
                w.str("batched");
                w.map(1);
                w.str("keep_on_cpu");
                w.bool(field.keep_on_cpu);
            }
        }
    }
}

fn write_tensor(w: &mut Writer<'_>, t: &Tensor, aux: &mut Vec<Arc<[u8]>>) {
    w.array(3);
    w.str(t.dtype.name());
    w.array(t.shape.len());
    for &d in &t.shape {
        w.uint(d);
    }
    if t.data.len() < limits::vllm_inline_tensor_bytes_max {
        w.ext(EXT_RAW_VIEW, &t.data);
    } else {
        aux.push(t.data.clone());
        w.uint(aux.len() as u64);
    }
}
