//! Moving elements between host arrays (bytes of any supported dtype, any strides) and lane
//! buffers.

use bytemuck::Pod;
use half::f16;

use super::num::{Buf, Src};
use crate::types::{ScalarType, Value};

/// An input array seen through the loop's shape: broadcast axes have stride 0.
#[derive(Clone, Debug)]
pub(crate) struct InView<'a> {
    pub dtype: ScalarType,
    pub bytes: &'a [u8],
    /// Element index of the loop's first element.
    pub offset: isize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub contiguous: bool,
    /// Whether every element is the same one (all strides 0).
    pub uniform: bool,
    pub len: usize,
}

impl<'a> InView<'a> {
    pub(crate) fn new(
        dtype: ScalarType,
        bytes: &'a [u8],
        offset: isize,
        shape: Vec<usize>,
        strides: Vec<isize>,
    ) -> Self {
        let len = shape.iter().product();
        let c = crate::types::c_strides(&shape);
        let contiguous = shape
            .iter()
            .zip(&strides)
            .zip(&c)
            .all(|((&n, &s), &cs)| n <= 1 || s == cs);
        let uniform = shape.iter().zip(&strides).all(|(&n, &s)| n <= 1 || s == 0);
        InView {
            dtype,
            bytes,
            offset,
            shape,
            strides,
            contiguous,
            uniform,
            len,
        }
    }

    /// The element index (in `bytes`) of loop element `flat` (C order).
    pub(crate) fn elem(&self, flat: usize) -> isize {
        if self.contiguous {
            return self.offset + flat as isize;
        }
        let mut rem = flat;
        let mut off = self.offset;
        for k in (0..self.shape.len()).rev() {
            let n = self.shape[k].max(1);
            off += (rem % n) as isize * self.strides[k];
            rem /= n;
        }
        off
    }

    /// Loads loop elements `start..start+n` into `dst`.
    pub(crate) fn load(&self, start: usize, n: usize, dst: &mut Buf, scratch: &mut Vec<isize>) {
        if self.contiguous {
            read_range(
                self.dtype,
                self.bytes,
                (self.offset + start as isize) as usize,
                n,
                dst,
                0,
            );
            return;
        }
        if self.uniform {
            let v = read_value(self.dtype, self.bytes, self.offset as usize);
            dst.splat(v, n);
            return;
        }
        self.offsets(start, n, scratch);
        read_gather(self.dtype, self.bytes, scratch, dst);
    }

    /// The element indices of loop elements `start..start+n` into `scratch`.
    fn offsets(&self, start: usize, n: usize, scratch: &mut Vec<isize>) {
        // Walk the multi-index of `start` forward.
        scratch.clear();
        let nd = self.shape.len();
        let mut idx = vec![0usize; nd];
        let mut rem = start;
        for k in (0..nd).rev() {
            let e = self.shape[k].max(1);
            idx[k] = rem % e;
            rem /= e;
        }
        let mut off = self.offset
            + idx
                .iter()
                .zip(&self.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        for _ in 0..n {
            scratch.push(off);
            let mut k = nd;
            while k > 0 {
                k -= 1;
                idx[k] += 1;
                off += self.strides[k];
                if idx[k] < self.shape[k] {
                    break;
                }
                off -= self.strides[k] * self.shape[k] as isize;
                idx[k] = 0;
            }
        }
    }

    /// Loads one part (0 real, 1 imaginary) of the complex loop elements
    /// `start..start+n` into `dst` (lanes of the part type).
    pub(crate) fn load_part(
        &self,
        start: usize,
        n: usize,
        part: u8,
        dst: &mut Buf,
        scratch: &mut Vec<isize>,
    ) {
        let pt = self.dtype.part();
        let p = part as usize;
        if self.contiguous {
            read_range_part(
                self.dtype,
                self.bytes,
                (self.offset + start as isize) as usize,
                n,
                part,
                dst,
            );
            return;
        }
        if self.uniform {
            let v = read_value(pt, self.bytes, self.offset as usize * 2 + p);
            dst.splat(v, n);
            return;
        }
        self.offsets(start, n, scratch);
        for (k, &o) in scratch.iter().enumerate() {
            dst.set(k, read_value(pt, self.bytes, o as usize * 2 + p));
        }
    }
}

/// Part `part` of complex elements `start..start+n` (of type `t`) of a contiguous buffer
/// into lanes `0..n` of `dst`.
pub(crate) fn read_range_part(t: ScalarType, bytes: &[u8], start: usize, n: usize, part: u8, dst: &mut Buf) {
    let sz = t.size();
    let b = &bytes[start * sz..(start + n) * sz];
    let p = part as usize;
    match (t, dst) {
        (ScalarType::C64, Buf::F32(d)) => conv(b, &mut d[..n], |x: [f32; 2]| x[p]),
        (ScalarType::C128, Buf::F64(d)) => conv(b, &mut d[..n], |x: [f64; 2]| x[p]),
        _ => {}
    }
}

/// Writes lanes `0..n` of `src` as part `part` of complex elements `start..start+n` (of type
/// `t`) of a contiguous buffer.
pub(crate) fn write_range_part(
    t: ScalarType,
    bytes: &mut [u8],
    start: usize,
    n: usize,
    part: u8,
    src: Src<'_>,
) {
    let pt = t.part();
    let psz = pt.size();
    let p = part as usize;
    let b = &mut bytes[start * 2 * psz..(start + n) * 2 * psz];
    match src {
        Src::F32(s) if pt == ScalarType::F32 => b
            .chunks_exact_mut(2 * psz)
            .zip(&s[..n])
            .for_each(|(c, x)| c[p * psz..(p + 1) * psz].copy_from_slice(&x.to_ne_bytes())),
        Src::F64(s) if pt == ScalarType::F64 => b
            .chunks_exact_mut(2 * psz)
            .zip(&s[..n])
            .for_each(|(c, x)| c[p * psz..(p + 1) * psz].copy_from_slice(&x.to_ne_bytes())),
        _ => {}
    }
}

fn conv<S: Pod, D>(b: &[u8], d: &mut [D], f: impl Fn(S) -> D) {
    match bytemuck::try_cast_slice::<u8, S>(b) {
        Ok(s) => d.iter_mut().zip(s).for_each(|(d, &x)| *d = f(x)),
        Err(_) => d
            .iter_mut()
            .zip(b.chunks_exact(std::mem::size_of::<S>()))
            .for_each(|(d, c)| *d = f(bytemuck::pod_read_unaligned(c))),
    }
}

/// Elements `start..start+n` of a contiguous buffer into the lane buffer.
pub(crate) fn read_range(t: ScalarType, bytes: &[u8], start: usize, n: usize, dst: &mut Buf, at: usize) {
    use ScalarType as S;
    let sz = t.size();
    let b = &bytes[start * sz..(start + n) * sz];
    match (t, dst) {
        (S::Bool, Buf::B(d)) => d[at..at + n].iter_mut().zip(b).for_each(|(d, &x)| *d = x != 0),
        (S::I8, Buf::I32(d)) => conv(b, &mut d[at..at + n], |x: i8| x as i32),
        (S::I16, Buf::I32(d)) => conv(b, &mut d[at..at + n], |x: i16| x as i32),
        (S::I32, Buf::I32(d)) => conv(b, &mut d[at..at + n], |x: i32| x),
        (S::U8, Buf::I32(d)) => conv(b, &mut d[at..at + n], |x: u8| x as i32),
        (S::U16, Buf::I32(d)) => conv(b, &mut d[at..at + n], |x: u16| x as i32),
        (S::U32, Buf::U32(d)) => conv(b, &mut d[at..at + n], |x: u32| x),
        (S::I64, Buf::I64(d)) => conv(b, &mut d[at..at + n], |x: i64| x),
        (S::U64, Buf::U64(d)) => conv(b, &mut d[at..at + n], |x: u64| x),
        (S::F16, Buf::F32(d)) => conv(b, &mut d[at..at + n], |x: f16| x.to_f32()),
        (S::F32, Buf::F32(d)) => conv(b, &mut d[at..at + n], |x: f32| x),
        (S::F64, Buf::F64(d)) => conv(b, &mut d[at..at + n], |x: f64| x),
        _ => {}
    }
}

/// One element (index `at`) as a value of its type.
pub(crate) fn read_value(t: ScalarType, bytes: &[u8], at: usize) -> Value {
    use ScalarType as S;
    let sz = t.size();
    let c = &bytes[at * sz..(at + 1) * sz];
    match t {
        S::Bool => Value::B(c[0] != 0),
        S::I8 => Value::I(c[0] as i8 as i64),
        S::I16 => Value::I(bytemuck::pod_read_unaligned::<i16>(c) as i64),
        S::I32 => Value::I(bytemuck::pod_read_unaligned::<i32>(c) as i64),
        S::I64 => Value::I(bytemuck::pod_read_unaligned::<i64>(c)),
        S::U8 => Value::U(c[0] as u64),
        S::U16 => Value::U(bytemuck::pod_read_unaligned::<u16>(c) as u64),
        S::U32 => Value::U(bytemuck::pod_read_unaligned::<u32>(c) as u64),
        S::U64 => Value::U(bytemuck::pod_read_unaligned::<u64>(c)),
        S::F16 => Value::F(bytemuck::pod_read_unaligned::<f16>(c).to_f64()),
        S::F32 => Value::F(bytemuck::pod_read_unaligned::<f32>(c) as f64),
        S::F64 => Value::F(bytemuck::pod_read_unaligned::<f64>(c)),
        S::C64 => {
            let [re, im] = bytemuck::pod_read_unaligned::<[f32; 2]>(c);
            Value::C(re as f64, im as f64)
        }
        S::C128 => {
            let [re, im] = bytemuck::pod_read_unaligned::<[f64; 2]>(c);
            Value::C(re, im)
        }
    }
}

/// Writes one value (already of type `t`) at element index `at`.
pub(crate) fn write_value(t: ScalarType, bytes: &mut [u8], at: usize, v: Value) {
    use ScalarType as S;
    let sz = t.size();
    let c = &mut bytes[at * sz..(at + 1) * sz];
    match t {
        S::Bool => c[0] = v.as_bool() as u8,
        S::I8 => c[0] = v.as_i64() as i8 as u8,
        S::U8 => c[0] = v.as_u64() as u8,
        S::I16 => c.copy_from_slice(bytemuck::bytes_of(&(v.as_i64() as i16))),
        S::I32 => c.copy_from_slice(bytemuck::bytes_of(&(v.as_i64() as i32))),
        S::I64 => c.copy_from_slice(bytemuck::bytes_of(&v.as_i64())),
        S::U16 => c.copy_from_slice(bytemuck::bytes_of(&(v.as_u64() as u16))),
        S::U32 => c.copy_from_slice(bytemuck::bytes_of(&(v.as_u64() as u32))),
        S::U64 => c.copy_from_slice(bytemuck::bytes_of(&v.as_u64())),
        S::F16 => c.copy_from_slice(bytemuck::bytes_of(&f16::from_f64(v.as_f64()))),
        S::F32 => c.copy_from_slice(bytemuck::bytes_of(&(v.as_f64() as f32))),
        S::F64 => c.copy_from_slice(bytemuck::bytes_of(&v.as_f64())),
        S::C64 => {
            let (re, im) = v.parts();
            c.copy_from_slice(bytemuck::bytes_of(&[re as f32, im as f32]))
        }
        S::C128 => {
            let (re, im) = v.parts();
            c.copy_from_slice(bytemuck::bytes_of(&[re, im]))
        }
    }
}

fn read_gather(t: ScalarType, bytes: &[u8], offs: &[isize], dst: &mut Buf) {
    for (k, &o) in offs.iter().enumerate() {
        dst.set(k, read_value(t, bytes, o as usize));
    }
}

fn store<S: Pod, D: Copy>(b: &mut [u8], s: &[D], f: impl Fn(D) -> S) {
    match bytemuck::try_cast_slice_mut::<u8, S>(b) {
        Ok(d) => d.iter_mut().zip(s).for_each(|(d, &x)| *d = f(x)),
        Err(_) => b
            .chunks_exact_mut(std::mem::size_of::<S>())
            .zip(s)
            .for_each(|(c, &x)| c.copy_from_slice(bytemuck::bytes_of(&f(x)))),
    }
}

/// Writes lanes `0..n` of `src` to elements `start..start+n` of a contiguous buffer.
pub(crate) fn write_range(t: ScalarType, bytes: &mut [u8], start: usize, n: usize, src: Src<'_>) {
    use ScalarType as S;
    let sz = t.size();
    let b = &mut bytes[start * sz..(start + n) * sz];
    match (t, src) {
        (S::Bool, Src::B(s)) => b.iter_mut().zip(&s[..n]).for_each(|(d, &x)| *d = x as u8),
        (S::I8, Src::I32(s)) => store(b, &s[..n], |x| x as i8),
        (S::I16, Src::I32(s)) => store(b, &s[..n], |x| x as i16),
        (S::I32, Src::I32(s)) => store(b, &s[..n], |x| x),
        (S::U8, Src::I32(s)) => store(b, &s[..n], |x| x as u8),
        (S::U16, Src::I32(s)) => store(b, &s[..n], |x| x as u16),
        (S::U32, Src::U32(s)) => store(b, &s[..n], |x| x),
        (S::I64, Src::I64(s)) => store(b, &s[..n], |x| x),
        (S::U64, Src::U64(s)) => store(b, &s[..n], |x| x),
        (S::F16, Src::F32(s)) => store(b, &s[..n], f16::from_f32),
        (S::F32, Src::F32(s)) => store(b, &s[..n], |x| x),
        (S::F64, Src::F64(s)) => store(b, &s[..n], |x| x),
        _ => {}
    }
}

impl Buf {
    /// Sets lane `k` from a value of the lane's C type.
    pub(crate) fn set(&mut self, k: usize, v: Value) {
        match self {
            Buf::B(d) => d[k] = v.as_bool(),
            Buf::I32(d) => d[k] = v.as_i64() as i32,
            Buf::U32(d) => d[k] = v.as_u64() as u32,
            Buf::I64(d) => d[k] = v.as_i64(),
            Buf::U64(d) => d[k] = v.as_u64(),
            Buf::F32(d) => d[k] = v.as_f64() as f32,
            Buf::F64(d) => d[k] = v.as_f64(),
        }
    }
}
