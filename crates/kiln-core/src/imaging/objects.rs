//! scipy.ndimage.find_objects: the bounding box of every label of an n-D array.
//!
//! An element of value `v` belongs to object `v - 1` (0-based) when `0 <= v - 1 < max_label`,
//! with `v - 1` computed as scipy's C code computes it (`NI_FindObjects`: `*(T *)p - 1` in
//! `T`'s C arithmetic, converted to `npy_intp`), so that every dtype scipy takes gives scipy's
//! boxes: floats truncate toward zero after the subtraction (`0.5` is object 0, as is `1.9`;
//! NaN belongs to none), `uint64` wraps (`0` is no object), narrow integers subtract in `int`.
//!
//! Boxes are kept densely by object index when `max_label` is at most the element count (and
//! a little), else in a map of the objects present, so memory stays proportional to the input
//! whatever `max_label` is.

use std::collections::BTreeMap;
use std::ops::Range;

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

/// Boxes being grown, per object index: flat per-axis bounds where `max_label` is within
/// the element count, else a map of the objects present.
enum Boxes {
    Dense {
        found: Vec<bool>,
        lo: Vec<usize>,
        hi: Vec<usize>,
    },
    Sparse(BTreeMap<usize, Vec<(usize, usize)>>),
}

impl Boxes {
    /// Grow object `k`'s box to hold the elements `last` of the line at `outer`.
    fn grow(&mut self, k: usize, outer: &[usize], last: Range<usize>) {
        let ndim = outer.len() + 1;
        let span = outer.iter().map(|&x| (x, x + 1)).chain([(last.start, last.end)]);
        match self {
            Boxes::Dense { found, lo, hi } => {
                found[k] = true;
                for (a, (s, e)) in span.enumerate() {
                    lo[k * ndim + a] = lo[k * ndim + a].min(s);
                    hi[k * ndim + a] = hi[k * ndim + a].max(e);
                }
            }
            Boxes::Sparse(m) => {
                let b = m.entry(k).or_insert_with(|| vec![(usize::MAX, 0); ndim]);
                for (r, (s, e)) in b.iter_mut().zip(span) {
                    r.0 = r.0.min(s);
                    r.1 = r.1.max(e);
                }
            }
        }
    }

    /// The boxes, in index order.
    fn into_boxes(self, ndim: usize) -> Vec<ObjectBox> {
        match self {
            Boxes::Dense { found, lo, hi } => found
                .iter()
                .enumerate()
                .filter(|(_, &f)| f)
                .map(|(index, _)| ObjectBox {
                    index,
                    bounds: (0..ndim)
                        .map(|a| (lo[index * ndim + a], hi[index * ndim + a]))
                        .collect(),
                })
                .collect(),
            Boxes::Sparse(m) => m
                .into_iter()
                .map(|(index, bounds)| ObjectBox { index, bounds })
                .collect(),
        }
    }
}

/// The boxes of objects `0..max_label` in `values` (row-major `shape`), in index order;
/// objects without an element are left out. Runs of one object along the last axis grow its
/// box once.
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
    let Some((&len, outer_shape)) = shape.split_last() else {
        // 0-D: one element, an empty box
        return Ok(index(values[0])
            .map(|index| ObjectBox {
                index,
                bounds: vec![],
            })
            .into_iter()
            .collect());
    };
    if size == 0 {
        return Ok(Vec::new());
    }
    let ndim = shape.len();
    let mut boxes = if max_label <= size.saturating_add(1024) {
        Boxes::Dense {
            found: vec![false; max_label],
            lo: vec![usize::MAX; max_label * ndim],
            hi: vec![0; max_label * ndim],
        }
    } else {
        Boxes::Sparse(BTreeMap::new())
    };
    let mut c = vec![0usize; ndim - 1];
    for line in values.chunks_exact(len) {
        let mut i = 0;
        let mut k = index(line[0]);
        while i < len {
            let mut j = i + 1;
            let mut next = None;
            while j < len {
                next = index(line[j]);
                if next != k {
                    break;
                }
                j += 1;
            }
            if let Some(k) = k {
                boxes.grow(k, &c, i..j);
            }
            k = next;
            i = j;
        }
        for a in (0..c.len()).rev() {
            c[a] += 1;
            if c[a] < outer_shape[a] {
                break;
            }
            c[a] = 0;
        }
    }
    Ok(boxes.into_boxes(ndim))
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
