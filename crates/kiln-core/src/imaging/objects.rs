//! scipy.ndimage.find_objects: the bounding box of every label of an n-D array.
//!
//! An element of value `v` belongs to object `v - 1` (0-based) when `0 <= v - 1 < max_label`,
//! with `v - 1` computed as scipy's C code computes it (`NI_FindObjects`: `*(T *)p - 1` in
//! `T`'s C arithmetic, converted to `npy_intp`), so that every dtype scipy takes gives scipy's
//! boxes: floats truncate toward zero after the subtraction (`0.5` is object 0, as is `1.9`;
//! NaN belongs to none), `uint64` wraps (`0` is no object), narrow integers subtract in `int`.
//!
//! Boxes are kept densely by object index when the largest index present is at most a few
//! times the element count, else in a map, so memory stays proportional to the input whatever
//! `max_label` is.

use std::collections::BTreeMap;

use super::rank_value::{values_from_bytes, NdDType};
use crate::error::{Error, Result};

/// An element type of find_objects' input, and the object its value names.
pub trait ObjectLabel: bytemuck::Pod + Send + Sync {
    /// `value - 1` as scipy's C code computes it, as an `npy_intp` (x86-64).
    fn object_index(self) -> i64;
}

macro_rules! narrow {
    ($($t:ty),*) => {$(
        impl ObjectLabel for $t {
            // promoted to int before the subtraction
            fn object_index(self) -> i64 {
                i64::from(self) - 1
            }
        }
    )*};
}
narrow!(u8, i8, u16, i16);

impl ObjectLabel for i32 {
    fn object_index(self) -> i64 {
        i64::from(self.wrapping_sub(1))
    }
}

impl ObjectLabel for u32 {
    // unsigned int arithmetic, then zero-extended: 0 - 1 is 2^32 - 1
    fn object_index(self) -> i64 {
        i64::from(self.wrapping_sub(1))
    }
}

impl ObjectLabel for i64 {
    fn object_index(self) -> i64 {
        self.wrapping_sub(1)
    }
}

impl ObjectLabel for u64 {
    fn object_index(self) -> i64 {
        self.wrapping_sub(1) as i64
    }
}

/// C's `(npy_intp)x` on x86-64 (cvttsd2si): truncation toward zero; NaN and values out of
/// range give `INT64_MIN`.
fn c_intp(x: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if !(-LIMIT..LIMIT).contains(&x) {
        // NaN is in no range
        i64::MIN
    } else {
        x as i64
    }
}

impl ObjectLabel for f32 {
    // the subtraction is float arithmetic
    fn object_index(self) -> i64 {
        c_intp(f64::from(self - 1.0))
    }
}

impl ObjectLabel for f64 {
    fn object_index(self) -> i64 {
        c_intp(self - 1.0)
    }
}

/// One object's box: its 0-based index (`label - 1`) and, per axis, the half-open range of
/// coordinates it spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectBox {
    /// `label - 1`.
    pub index: usize,
    /// `(start, stop)` per axis.
    pub bounds: Vec<(usize, usize)>,
}

/// Boxes being grown, per object index.
enum Boxes {
    Dense(Vec<Option<Vec<(usize, usize)>>>),
    Sparse(BTreeMap<usize, Option<Vec<(usize, usize)>>>),
}

impl Boxes {
    /// Grow object `k`'s box to hold coordinates `c`.
    fn grow(&mut self, k: usize, c: &[usize]) {
        let slot = match self {
            Boxes::Dense(v) => &mut v[k],
            Boxes::Sparse(m) => m.entry(k).or_insert(None),
        };
        match slot {
            Some(b) => {
                for (r, &x) in b.iter_mut().zip(c) {
                    r.0 = r.0.min(x);
                    r.1 = r.1.max(x + 1);
                }
            }
            None => *slot = Some(c.iter().map(|&x| (x, x + 1)).collect()),
        }
    }

    /// The boxes, in index order.
    fn into_boxes(self) -> Vec<ObjectBox> {
        let found =
            |(index, b): (usize, Option<Vec<(usize, usize)>>)| b.map(|bounds| ObjectBox { index, bounds });
        match self {
            Boxes::Dense(v) => v.into_iter().enumerate().filter_map(found).collect(),
            Boxes::Sparse(m) => m.into_iter().filter_map(found).collect(),
        }
    }
}

/// The boxes of objects `0..max_label` in `values` (row-major `shape`), in index order;
/// objects without an element are left out.
pub fn find_objects<T: ObjectLabel>(
    values: &[T],
    shape: &[usize],
    max_label: usize,
) -> Result<Vec<ObjectBox>> {
    let size: usize = shape.iter().product();
    if values.len() != size {
        return Err(Error::invalid(
            "find_objects",
            format!("shape {shape:?} has {size} elements, got {}", values.len()),
        ));
    }
    let index = |v: T| {
        let k = v.object_index();
        (k >= 0 && (k as u64) < max_label as u64).then_some(k as usize)
    };
    let top = values.iter().filter_map(|&v| index(v)).max();
    let Some(top) = top else {
        return Ok(Vec::new());
    };
    let mut boxes = if top <= size.saturating_mul(4).saturating_add(1024) {
        Boxes::Dense(vec![None; top + 1])
    } else {
        Boxes::Sparse(BTreeMap::new())
    };
    let ndim = shape.len();
    let mut c = vec![0usize; ndim];
    for &v in values {
        if let Some(k) = index(v) {
            boxes.grow(k, &c);
        }
        for a in (0..ndim).rev() {
            c[a] += 1;
            if c[a] < shape[a] {
                break;
            }
            c[a] = 0;
        }
    }
    Ok(boxes.into_boxes())
}

/// [`find_objects`] over native-endian bytes of `dtype` (bool runs as `uint8`).
pub fn find_objects_bytes(
    bytes: &[u8],
    dtype: NdDType,
    shape: &[usize],
    max_label: usize,
) -> Result<Vec<ObjectBox>> {
    fn run<T: ObjectLabel + super::rank_value::RankValue>(
        bytes: &[u8],
        shape: &[usize],
        max_label: usize,
    ) -> Result<Vec<ObjectBox>> {
        match bytemuck::try_cast_slice::<u8, T>(bytes) {
            Ok(v) => find_objects(v, shape, max_label),
            Err(_) => find_objects(&values_from_bytes::<T>("find_objects", bytes)?, shape, max_label),
        }
    }
    match dtype {
        NdDType::Bool | NdDType::U8 => run::<u8>(bytes, shape, max_label),
        NdDType::I8 => run::<i8>(bytes, shape, max_label),
        NdDType::I16 => run::<i16>(bytes, shape, max_label),
        NdDType::I32 => run::<i32>(bytes, shape, max_label),
        NdDType::I64 => run::<i64>(bytes, shape, max_label),
        NdDType::U16 => run::<u16>(bytes, shape, max_label),
        NdDType::U32 => run::<u32>(bytes, shape, max_label),
        NdDType::U64 => run::<u64>(bytes, shape, max_label),
        NdDType::F32 => run::<f32>(bytes, shape, max_label),
        NdDType::F64 => run::<f64>(bytes, shape, max_label),
    }
}
