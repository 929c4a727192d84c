//! Running a [`Program`] over one chunk of lanes.

use kiln_core::Error;

use super::io::{read_value, write_range, write_value, InView};
use super::num::{self, Buf};
use super::program::{internal, Ins, Program, Regs};
use crate::parse::BinOp;
use crate::typed::{Func, Special};
use crate::types::{ScalarType, Value};

/// What a kernel parameter is bound to on the host.
#[derive(Clone, Debug)]
pub(crate) enum PData<'a> {
    /// A non-raw input array (seen through the loop shape) or a raw input (its own shape).
    In(InView<'a>),
    /// A scalar input (its value is baked into the program's setup).
    Scalar,
    /// An output: index into the outputs' byte slices, its dtype and element count.
    Out { k: usize, dtype: ScalarType, len: usize },
}

/// Where one chunk runs.
pub(crate) struct Chunk<'a, 'o, 'b> {
    /// First loop element of the chunk.
    pub start: usize,
    pub n: usize,
    pub params: &'b [PData<'a>],
    /// Output buffers, one per output parameter.
    pub outs: &'b mut [&'o mut [u8]],
    /// Subtracted from a loop element's index to address the output slices (0 when each
    /// output slice is the whole array, `start` when it is the chunk's own piece).
    pub out_shift: usize,
    pub kernel: &'b str,
    /// Parameter names, for errors.
    pub names: &'b [String],
}

/// Values of `Special`s fixed for the launch.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sizes {
    pub size: i64,
    pub in_size: i64,
    pub out_size: i64,
}

fn special_value(s: Special, sizes: &Sizes, params: &[PData<'_>]) -> i64 {
    match s {
        Special::Index => 0,
        Special::Size => sizes.size,
        Special::InSize => sizes.in_size,
        Special::OutSize => sizes.out_size,
        Special::RawSize(p) => match &params[p] {
            PData::In(v) => v.len as i64,
            PData::Out { len, .. } => *len as i64,
            PData::Scalar => 1,
        },
    }
}

/// Runs the setup part (once per worker).
pub(crate) fn setup(p: &Program, regs: &mut Regs, sizes: &Sizes, params: &[PData<'_>]) {
    let n = regs.scratch.capacity().max(1);
    for ins in &p.setup {
        match ins {
            Ins::Splat { dst, v } => {
                let len = buf_len(&regs.bufs[*dst]).min(n);
                regs.bufs[*dst].splat(*v, len)
            }
            Ins::Special { dst, s } => {
                let len = buf_len(&regs.bufs[*dst]);
                regs.bufs[*dst].splat(Value::I(special_value(*s, sizes, params)), len)
            }
            _ => {}
        }
    }
}

fn buf_len(b: &Buf) -> usize {
    match b {
        Buf::B(v) => v.len(),
        Buf::I32(v) => v.len(),
        Buf::U32(v) => v.len(),
        Buf::I64(v) => v.len(),
        Buf::U64(v) => v.len(),
        Buf::F32(v) => v.len(),
        Buf::F64(v) => v.len(),
    }
}

macro_rules! num_match {
    ($buf:expr, $v:ident => $e:expr, $else:expr) => {
        match $buf {
            Buf::I32($v) => $e,
            Buf::U32($v) => $e,
            Buf::I64($v) => $e,
            Buf::U64($v) => $e,
            Buf::F32($v) => $e,
            Buf::F64($v) => $e,
            Buf::B(_) => $else,
        }
    };
}

/// Applies a same-lane-type operation `f(d, a, b)` over the numeric lane types.
macro_rules! same3 {
    ($d:expr, $a:expr, $b:expr, |$x:ident, $y:ident, $z:ident| $e:expr) => {
        match ($d, $a, $b) {
            (Buf::I32($x), Buf::I32($y), Buf::I32($z)) => $e,
            (Buf::U32($x), Buf::U32($y), Buf::U32($z)) => $e,
            (Buf::I64($x), Buf::I64($y), Buf::I64($z)) => $e,
            (Buf::U64($x), Buf::U64($y), Buf::U64($z)) => $e,
            (Buf::F32($x), Buf::F32($y), Buf::F32($z)) => $e,
            (Buf::F64($x), Buf::F64($y), Buf::F64($z)) => $e,
            _ => return Err(internal("operand lane types differ")),
        }
    };
}

fn round16(d: &mut Buf, n: usize) {
    if let Buf::F32(v) = d {
        v[..n]
            .iter_mut()
            .for_each(|x| *x = half::f16::from_f32(*x).to_f32());
    }
}

fn cast(d: &mut Buf, s: &Buf, to: ScalarType, n: usize) {
    match (d, s) {
        (Buf::B(d), s) => {
            num_match!(s, s => d[..n].iter_mut().zip(&s[..n]).for_each(|(d, &x)| *d = num::Num::nonzero(x)), d[..n].copy_from_slice(&s.as_bool()[..n]))
        }
        (d, Buf::B(s)) => {
            num_match!(d, d => d[..n].iter_mut().zip(&s[..n]).for_each(|(d, &x)| *d = num::Num::from_i64(x as i64)), {})
        }
        (d, s) => {
            macro_rules! from {
                ($s:ident) => {
                    num_match!(d, d => num::convert(d, $s, n), {})
                };
            }
            num_match!(s, s => from!(s), {})
        }
    }
    let _ = to;
}

fn normalise(d: &mut Buf, to: ScalarType, n: usize) {
    match (to, d) {
        (ScalarType::I8, Buf::I32(v)) => v[..n].iter_mut().for_each(|x| *x = *x as i8 as i32),
        (ScalarType::I16, Buf::I32(v)) => v[..n].iter_mut().for_each(|x| *x = *x as i16 as i32),
        (ScalarType::U8, Buf::I32(v)) => v[..n].iter_mut().for_each(|x| *x = *x as u8 as i32),
        (ScalarType::U16, Buf::I32(v)) => v[..n].iter_mut().for_each(|x| *x = *x as u16 as i32),
        (ScalarType::F16, d) => round16(d, n),
        _ => {}
    }
}

fn any(m: &Buf, n: usize) -> bool {
    m.as_bool()[..n].iter().any(|&b| b)
}

/// Runs the per-chunk part of `p`.
pub(crate) fn run(p: &Program, regs: &mut Regs, c: &mut Chunk<'_, '_, '_>) -> Result<(), Error> {
    run_list(&p.body, regs, c)
}

fn run_list(list: &[Ins], regs: &mut Regs, c: &mut Chunk<'_, '_, '_>) -> Result<(), Error> {
    let n = c.n;
    for ins in list {
        match ins {
            Ins::Splat { .. } => {}
            Ins::Special { dst, s } => {
                if let (Special::Index, Buf::I64(d)) = (s, &mut regs.bufs[*dst]) {
                    for (k, d) in d[..n].iter_mut().enumerate() {
                        *d = (c.start + k) as i64;
                    }
                }
            }
            Ins::LoadIn { dst, param } => {
                let PData::In(v) = &c.params[*param] else {
                    return Err(internal("input not bound"));
                };
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                v.load(c.start, n, &mut d, &mut regs.scratch);
                regs.bufs[*dst] = d;
            }
            Ins::LoadOut { dst, param } => {
                let PData::Out { k, dtype, .. } = c.params[*param] else {
                    return Err(internal("output not bound"));
                };
                let at = c.start - c.out_shift;
                super::io::read_range(dtype, c.outs[k], at, n, &mut regs.bufs[*dst]);
            }
            Ins::StoreOut { src, param } => {
                let PData::Out { k, dtype, .. } = c.params[*param] else {
                    return Err(internal("output not bound"));
                };
                let at = c.start - c.out_shift;
                write_range(dtype, c.outs[k], at, n, &regs.bufs[*src]);
            }
            Ins::RawLoad {
                dst,
                param,
                idx,
                mask,
            } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let r = raw_access(c, &regs.bufs, *param, *idx, *mask, |c, k, at, dtype, view| {
                    let v = match view {
                        Some(v) => read_value(dtype, v.bytes, v.elem(at) as usize),
                        None => {
                            let PData::Out { k: o, .. } = c.params[*param] else {
                                return;
                            };
                            read_value(dtype, c.outs[o], at)
                        }
                    };
                    d.set(k, v);
                });
                regs.bufs[*dst] = d;
                r?;
            }
            Ins::RawStore {
                param,
                idx,
                val,
                mask,
            } => {
                let vals = std::mem::take(&mut regs.bufs[*val]);
                let r = raw_access(c, &regs.bufs, *param, *idx, *mask, |c, k, at, dtype, _| {
                    if let PData::Out { k: o, .. } = c.params[*param] {
                        write_value(dtype, c.outs[o], at, vals.get(k));
                    }
                });
                regs.bufs[*val] = vals;
                r?;
            }
            Ins::Cast { dst, src, to } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                cast(&mut d, &regs.bufs[*src], *to, n);
                normalise(&mut d, *to, n);
                regs.bufs[*dst] = d;
            }
            Ins::Un { op, dst, a, f16 } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                match (&mut d, &regs.bufs[*a]) {
                    (Buf::I32(d), Buf::I32(a)) => num::unary(*op, d, a, n),
                    (Buf::U32(d), Buf::U32(a)) => num::unary(*op, d, a, n),
                    (Buf::I64(d), Buf::I64(a)) => num::unary(*op, d, a, n),
                    (Buf::U64(d), Buf::U64(a)) => num::unary(*op, d, a, n),
                    (Buf::F32(d), Buf::F32(a)) => num::unary(*op, d, a, n),
                    (Buf::F64(d), Buf::F64(a)) => num::unary(*op, d, a, n),
                    _ => return Err(internal("unary operand lane")),
                }
                if *f16 {
                    round16(&mut d, n);
                }
                regs.bufs[*dst] = d;
            }
            Ins::Not { dst, a } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                if let (Buf::B(d), Buf::B(a)) = (&mut d, &regs.bufs[*a]) {
                    d[..n].iter_mut().zip(&a[..n]).for_each(|(d, &a)| *d = !a);
                }
                regs.bufs[*dst] = d;
            }
            Ins::Bin { op, dst, a, b, f16 } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                same3!(&mut d, &regs.bufs[*a], &regs.bufs[*b], |x, y, z| num::bin(
                    *op, x, y, z, n
                ));
                if *f16 {
                    round16(&mut d, n);
                }
                regs.bufs[*dst] = d;
            }
            Ins::Cmp { op, dst, a, b } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let Buf::B(dv) = &mut d else {
                    return Err(internal("comparison result lane"));
                };
                match (&regs.bufs[*a], &regs.bufs[*b]) {
                    (Buf::I32(x), Buf::I32(y)) => num::cmp(*op, dv, x, y, n),
                    (Buf::U32(x), Buf::U32(y)) => num::cmp(*op, dv, x, y, n),
                    (Buf::I64(x), Buf::I64(y)) => num::cmp(*op, dv, x, y, n),
                    (Buf::U64(x), Buf::U64(y)) => num::cmp(*op, dv, x, y, n),
                    (Buf::F32(x), Buf::F32(y)) => num::cmp(*op, dv, x, y, n),
                    (Buf::F64(x), Buf::F64(y)) => num::cmp(*op, dv, x, y, n),
                    (Buf::B(x), Buf::B(y)) => {
                        let (x, y): (Vec<i32>, Vec<i32>) = (
                            x[..n].iter().map(|&v| v as i32).collect(),
                            y[..n].iter().map(|&v| v as i32).collect(),
                        );
                        num::cmp(*op, dv, &x, &y, n)
                    }
                    _ => return Err(internal("comparison operand lanes")),
                }
                regs.bufs[*dst] = d;
            }
            Ins::Logic { op, dst, a, b } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                if let (Buf::B(d), Buf::B(x), Buf::B(y)) = (&mut d, &regs.bufs[*a], &regs.bufs[*b]) {
                    let it = d[..n].iter_mut().zip(&x[..n]).zip(&y[..n]);
                    if *op == BinOp::And {
                        it.for_each(|((d, &x), &y)| *d = x & y);
                    } else {
                        it.for_each(|((d, &x), &y)| *d = x | y);
                    }
                }
                regs.bufs[*dst] = d;
            }
            Ins::Select { dst, c: cr, a, b } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let cv = regs.bufs[*cr].as_bool();
                match (&mut d, &regs.bufs[*a], &regs.bufs[*b]) {
                    (Buf::B(x), Buf::B(y), Buf::B(z)) => num::select(x, cv, y, z, n),
                    (d, a, b) => same3!(d, a, b, |x, y, z| num::select(x, cv, y, z, n)),
                }
                regs.bufs[*dst] = d;
            }
            Ins::Call { f, dst, a, b, f16 } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let (av, bv) = (&regs.bufs[*a], &regs.bufs[*b]);
                match (&mut d, av, bv) {
                    (Buf::B(d), a, _) => num_match!(a, a => num::classify(*f, d, a, n), {}),
                    (Buf::F32(d), Buf::F32(x), Buf::F32(y)) => num::call_f32(*f, d, x, y, n),
                    (Buf::F64(d), Buf::F64(x), Buf::F64(y)) => num::call_f64(*f, d, x, y, n),
                    (d, x, y) => same3!(d, x, y, |p, q, r| num::call_num(*f, p, q, r, n)),
                }
                if *f16 && !matches!(f, Func::Isnan | Func::Isinf | Func::Isfinite) {
                    round16(&mut d, n);
                }
                regs.bufs[*dst] = d;
            }
            Ins::Copy { dst, src } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                d.copy_lanes(0, &regs.bufs[*src], 0, n);
                regs.bufs[*dst] = d;
            }
            Ins::Blend { dst, m, src } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let mv = regs.bufs[*m].as_bool();
                match (&mut d, &regs.bufs[*src]) {
                    (Buf::B(x), Buf::B(y)) => num::blend(x, mv, y, n),
                    (Buf::I32(x), Buf::I32(y)) => num::blend(x, mv, y, n),
                    (Buf::U32(x), Buf::U32(y)) => num::blend(x, mv, y, n),
                    (Buf::I64(x), Buf::I64(y)) => num::blend(x, mv, y, n),
                    (Buf::U64(x), Buf::U64(y)) => num::blend(x, mv, y, n),
                    (Buf::F32(x), Buf::F32(y)) => num::blend(x, mv, y, n),
                    (Buf::F64(x), Buf::F64(y)) => num::blend(x, mv, y, n),
                    _ => return Err(internal("blend lanes")),
                }
                regs.bufs[*dst] = d;
            }
            Ins::If { mt, me, then, els } => {
                if any(&regs.bufs[*mt], n) {
                    run_list(then, regs, c)?;
                }
                if any(&regs.bufs[*me], n) {
                    run_list(els, regs, c)?;
                }
            }
        }
    }
    Ok(())
}

/// Visits the active lanes of a raw access, bounds-checked: `f(chunk, lane, flat index,
/// dtype, input view or None for an output)`.
fn raw_access<'a, 'o>(
    c: &mut Chunk<'a, 'o, '_>,
    bufs: &[Buf],
    param: usize,
    idx: usize,
    mask: Option<usize>,
    mut f: impl FnMut(&mut Chunk<'a, 'o, '_>, usize, usize, ScalarType, Option<&InView<'a>>),
) -> Result<(), Error> {
    let Buf::I64(ix) = &bufs[idx] else {
        return Err(internal("raw index lane"));
    };
    let m = mask.map(|m| bufs[m].as_bool());
    let (len, dtype, view) = match &c.params[param] {
        PData::In(v) => (v.len, v.dtype, Some(v.clone())),
        PData::Out { len, dtype, .. } => (*len, *dtype, None),
        PData::Scalar => return Err(internal("raw scalar")),
    };
    for k in 0..c.n {
        if m.is_some_and(|m| !m[k]) {
            continue;
        }
        let j = ix[k];
        if j < 0 || j as usize >= len {
            return Err(Error::invalid(
                c.kernel,
                format!("index {j} is out of bounds for the raw parameter `{}` of {len} elements (at loop element {})", c.names[param], c.start + k),
            ));
        }
        f(c, k, j as usize, dtype, view.as_ref());
    }
    Ok(())
}
