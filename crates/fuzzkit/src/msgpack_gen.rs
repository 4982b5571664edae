//! Arbitrary MessagePack values for the structured output-decoder inputs: a well-formed value
//! of any shape, used where a generated batch puts a wrong-typed field, so the decoder sees
//! valid framing with the wrong contents (the case raw bytes rarely reach).

use arbitrary::{Arbitrary, Result, Unstructured};
use shardgate_wire::msgpack::Writer;

/// A MessagePack value, depth-bounded by construction.
#[derive(Debug, Clone)]
pub enum Value {
    Nil,
    Bool(bool),
    UInt(u64),
    Int(i64),
    F64(f64),
    F32(f32),
    Str(String),
    Bin(Vec<u8>),
    Ext(i8, Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

const DEPTH_MAX: usize = 4;
const ITEMS_MAX: usize = 6;

impl Value {
    pub fn arbitrary_depth(u: &mut Unstructured<'_>, depth: usize) -> Result<Self> {
        let leaf_kinds = 9;
        let kinds = if depth >= DEPTH_MAX { leaf_kinds } else { leaf_kinds + 2 };
        Ok(match u.int_in_range(0..=kinds - 1)? {
            0 => Value::Nil,
            1 => Value::Bool(u.arbitrary()?),
            2 => Value::UInt(interesting_u64(u)?),
            3 => Value::Int(u.arbitrary()?),
            4 => Value::F64(u.arbitrary()?),
            5 => Value::F32(u.arbitrary()?),
            6 => Value::Str(u.arbitrary()?),
            7 => Value::Bin(u.arbitrary()?),
            8 => Value::Ext(u.arbitrary()?, u.arbitrary()?),
            9 => {
                let n = u.int_in_range(0..=ITEMS_MAX)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(Value::arbitrary_depth(u, depth + 1)?);
                }
                Value::Array(items)
            }
            _ => {
                let n = u.int_in_range(0..=ITEMS_MAX)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push((Value::arbitrary_depth(u, depth + 1)?, Value::arbitrary_depth(u, depth + 1)?));
                }
                Value::Map(items)
            }
        })
    }

    pub fn write(&self, w: &mut Writer<'_>) {
        match self {
            Value::Nil => w.nil(),
            Value::Bool(b) => w.bool(*b),
            Value::UInt(v) => w.uint(*v),
            Value::Int(v) => w.int(*v),
            Value::F64(v) => w.f64(*v),
            Value::F32(v) => {
                w.out.push(0xca);
                w.out.extend_from_slice(&v.to_bits().to_be_bytes());
            }
            Value::Str(s) => w.str(s),
            Value::Bin(b) => w.bin(b),
            Value::Ext(code, payload) => w.ext(*code, payload),
            Value::Array(items) => {
                w.array(items.len());
                for v in items {
                    v.write(w);
                }
            }
            Value::Map(items) => {
                w.map(items.len());
                for (k, v) in items {
                    k.write(w);
                    v.write(w);
                }
            }
        }
    }
}

impl<'a> Arbitrary<'a> for Value {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Value::arbitrary_depth(u, 0)
    }
}

/// Mostly small numbers (counts, ids, indices), sometimes the edges of the integer widths.
pub fn interesting_u64(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0..=7u8)? {
        0..=4 => u.int_in_range(0..=300u64)?,
        5 => *u.choose(&[
            u8::MAX as u64,
            u16::MAX as u64,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            i64::MAX as u64,
            u64::MAX,
        ])?,
        _ => u.arbitrary()?,
    })
}

/// Either the well-typed value the decoder expects or, rarely, any value at all.
#[derive(Debug, Clone)]
pub enum Field<T> {
    Good(T),
    Wrong(Value),
}

impl<'a, T: Arbitrary<'a>> Arbitrary<'a> for Field<T> {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        // One field in sixteen is corrupted: deep enough to reach every decoder branch, rare
        // enough that whole valid batches are common.
        if u.ratio(1u8, 16u8)? {
            Ok(Field::Wrong(Value::arbitrary(u)?))
        } else {
            Ok(Field::Good(T::arbitrary(u)?))
        }
    }
}

impl<T> Field<T> {
    pub fn good(&self) -> Option<&T> {
        match self {
            Field::Good(v) => Some(v),
            Field::Wrong(_) => None,
        }
    }

    /// Writes the good value with `f`, or the wrong one as is.
    pub fn write(&self, w: &mut Writer<'_>, f: impl FnOnce(&T, &mut Writer<'_>)) {
        match self {
            Field::Good(v) => f(v, w),
            Field::Wrong(v) => v.write(w),
        }
    }
}
