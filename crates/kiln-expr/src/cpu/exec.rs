//! Running a [`Program`] over one chunk of lanes.

use kiln_core::Error;

use super::io::{read_range_part, read_value, write_range, write_range_part, write_value, InView};
use super::num::{self, Buf, Src};
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

macro_rules! src_match {
    ($buf:expr, $v:ident => $e:expr, $else:expr) => {
        match $buf {
            Src::I32($v) => $e,
            Src::U32($v) => $e,
            Src::I64($v) => $e,
            Src::U64($v) => $e,
            Src::F32($v) => $e,
            Src::F64($v) => $e,
            Src::B(_) => $else,
        }
    };
}

/// Applies a same-lane-type operation `f(d, a, b)` over the numeric lane types.
macro_rules! same3 {
    ($d:expr, $a:expr, $b:expr, |$x:ident, $y:ident, $z:ident| $e:expr) => {
        match ($d, $a, $b) {
            (Buf::I32($x), Src::I32($y), Src::I32($z)) => $e,
            (Buf::U32($x), Src::U32($y), Src::U32($z)) => $e,
            (Buf::I64($x), Src::I64($y), Src::I64($z)) => $e,
            (Buf::U64($x), Src::U64($y), Src::U64($z)) => $e,
            (Buf::F32($x), Src::F32($y), Src::F32($z)) => $e,
            (Buf::F64($x), Src::F64($y), Src::F64($z)) => $e,
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

fn cast(d: &mut Buf, s: Src<'_>, n: usize) {
    match (d, s) {
        (Buf::B(d), Src::B(s)) => d[..n].copy_from_slice(&s[..n]),
        (Buf::B(d), s) => {
            src_match!(s, s => d[..n].iter_mut().zip(&s[..n]).for_each(|(d, &x)| *d = num::Num::nonzero(x)), {})
        }
        (d, Src::B(s)) => {
            num_match!(d, d => d[..n].iter_mut().zip(&s[..n]).for_each(|(d, &x)| *d = num::Num::from_i64(x as i64)), {})
        }
        (d, s) => {
            macro_rules! from {
                ($s:ident) => {
                    num_match!(d, d => num::convert(d, $s, n), {})
                };
            }
            src_match!(s, s => from!(s), {})
        }
    }
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
            Ins::LoadGroup(items) => load_group(items, regs, c)?,
            Ins::LoadOut { dst, param } => {
                let PData::Out { k, dtype, .. } = c.params[*param] else {
                    return Err(internal("output not bound"));
                };
                let at = c.start - c.out_shift;
                super::io::read_range(dtype, c.outs[k], at, n, &mut regs.bufs[*dst], 0);
            }
            Ins::StoreOut { src, param } => {
                let PData::Out { k, dtype, .. } = c.params[*param] else {
                    return Err(internal("output not bound"));
                };
                let at = c.start - c.out_shift;
                let v = view(regs, c.params, c.start, c.n, *src);
                write_range(dtype, c.outs[k], at, n, v);
                // The next chunk's lines of the output, requested now (see `touch_next`).
                let sz = dtype.size();
                let out: &[u8] = c.outs[k];
                touch(out, (at + n) * sz, ((at + 2 * n) * sz).min(out.len()));
            }
            Ins::LoadInPart { dst, param, part } => {
                let PData::In(v) = &c.params[*param] else {
                    return Err(internal("input not bound"));
                };
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                v.load_part(c.start, n, *part, &mut d, &mut regs.scratch);
                regs.bufs[*dst] = d;
            }
            Ins::LoadOutPart { dst, param, part } => {
                let PData::Out { k, dtype, .. } = c.params[*param] else {
                    return Err(internal("output not bound"));
                };
                let at = c.start - c.out_shift;
                read_range_part(dtype, c.outs[k], at, n, *part, &mut regs.bufs[*dst]);
            }
            Ins::StoreOutPart { src, param, part } => {
                let PData::Out { k, dtype, .. } = c.params[*param] else {
                    return Err(internal("output not bound"));
                };
                let at = c.start - c.out_shift;
                let v = view(regs, c.params, c.start, c.n, *src);
                write_range_part(dtype, c.outs[k], at, n, *part, v);
            }
            Ins::RawLoad {
                dst,
                param,
                idx,
                mask,
                part,
            } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let ix = idx_vec(regs, c, *idx);
                let r = raw_access(c, &ix, &regs.bufs, *param, *mask, |c, k, at, dtype, view| {
                    // one part of a complex element: element `2 * at + part` of its parts
                    let (t, scale, shift) = match part {
                        Some(p) => (dtype.part(), 2, *p as usize),
                        None => (dtype, 1, 0),
                    };
                    let at_out = scale * at + shift;
                    let v = match view {
                        Some(v) => read_value(t, v.bytes, scale * v.elem(at) as usize + shift),
                        None => {
                            let PData::Out { k: o, .. } = c.params[*param] else {
                                return;
                            };
                            read_value(t, c.outs[o], at_out)
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
                part,
            } => {
                let vals = std::mem::take(&mut regs.bufs[*val]);
                let ix = idx_vec(regs, c, *idx);
                let r = raw_access(c, &ix, &regs.bufs, *param, *mask, |c, k, at, dtype, _| {
                    let (t, at) = match part {
                        Some(p) => (dtype.part(), 2 * at + *p as usize),
                        None => (dtype, at),
                    };
                    if let PData::Out { k: o, .. } = c.params[*param] {
                        write_value(t, c.outs[o], at, vals.get(k));
                    }
                });
                regs.bufs[*val] = vals;
                r?;
            }
            Ins::Cast { dst, src, to } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                cast(&mut d, view(regs, c.params, c.start, c.n, *src), n);
                normalise(&mut d, *to, n);
                regs.bufs[*dst] = d;
            }
            Ins::Un { op, dst, a, f16 } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                match (&mut d, view(regs, c.params, c.start, c.n, *a)) {
                    (Buf::I32(d), Src::I32(a)) => num::unary(*op, d, a, n),
                    (Buf::U32(d), Src::U32(a)) => num::unary(*op, d, a, n),
                    (Buf::I64(d), Src::I64(a)) => num::unary(*op, d, a, n),
                    (Buf::U64(d), Src::U64(a)) => num::unary(*op, d, a, n),
                    (Buf::F32(d), Src::F32(a)) => num::unary(*op, d, a, n),
                    (Buf::F64(d), Src::F64(a)) => num::unary(*op, d, a, n),
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
            Ins::Bin {
                op,
                dst,
                a,
                b,
                f16,
                out,
            } => {
                if let Some(p) = out {
                    let (x, y) = (
                        view(regs, c.params, c.start, c.n, *a),
                        view(regs, c.params, c.start, c.n, *b),
                    );
                    if let Some(o) = out_slice(c, *p) {
                        match (o, x, y) {
                            (Dst::I32(d), Src::I32(x), Src::I32(y)) => num::bin(*op, d, x, y, n),
                            (Dst::U32(d), Src::U32(x), Src::U32(y)) => num::bin(*op, d, x, y, n),
                            (Dst::I64(d), Src::I64(x), Src::I64(y)) => num::bin(*op, d, x, y, n),
                            (Dst::U64(d), Src::U64(x), Src::U64(y)) => num::bin(*op, d, x, y, n),
                            (Dst::F32(d), Src::F32(x), Src::F32(y)) => num::bin(*op, d, x, y, n),
                            (Dst::F64(d), Src::F64(x), Src::F64(y)) => num::bin(*op, d, x, y, n),
                            _ => return Err(internal("direct output lane")),
                        }
                        continue;
                    }
                }
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                same3!(
                    &mut d,
                    view(regs, c.params, c.start, c.n, *a),
                    view(regs, c.params, c.start, c.n, *b),
                    |x, y, z| num::bin(*op, x, y, z, n)
                );
                if *f16 {
                    round16(&mut d, n);
                }
                regs.bufs[*dst] = d;
                if let Some(p) = out {
                    store_out(regs, c, *dst, *p)?;
                }
            }
            Ins::BinS {
                op,
                dst,
                a,
                v,
                swap,
                f16,
                out,
            } => {
                if let Some(p) = out {
                    let x = view(regs, c.params, c.start, c.n, *a);
                    if let Some(o) = out_slice(c, *p) {
                        match (o, x) {
                            (Dst::I32(d), Src::I32(x)) => {
                                num::bin_s(*op, d, x, num::lane_value(*v), *swap, n)
                            }
                            (Dst::U32(d), Src::U32(x)) => {
                                num::bin_s(*op, d, x, num::lane_value(*v), *swap, n)
                            }
                            (Dst::I64(d), Src::I64(x)) => {
                                num::bin_s(*op, d, x, num::lane_value(*v), *swap, n)
                            }
                            (Dst::U64(d), Src::U64(x)) => {
                                num::bin_s(*op, d, x, num::lane_value(*v), *swap, n)
                            }
                            (Dst::F32(d), Src::F32(x)) => {
                                num::bin_s(*op, d, x, num::lane_value(*v), *swap, n)
                            }
                            (Dst::F64(d), Src::F64(x)) => {
                                num::bin_s(*op, d, x, num::lane_value(*v), *swap, n)
                            }
                            _ => return Err(internal("direct output lane")),
                        }
                        continue;
                    }
                }
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                match (&mut d, view(regs, c.params, c.start, c.n, *a)) {
                    (Buf::I32(d), Src::I32(x)) => num::bin_s(*op, d, x, num::lane_value(*v), *swap, n),
                    (Buf::U32(d), Src::U32(x)) => num::bin_s(*op, d, x, num::lane_value(*v), *swap, n),
                    (Buf::I64(d), Src::I64(x)) => num::bin_s(*op, d, x, num::lane_value(*v), *swap, n),
                    (Buf::U64(d), Src::U64(x)) => num::bin_s(*op, d, x, num::lane_value(*v), *swap, n),
                    (Buf::F32(d), Src::F32(x)) => num::bin_s(*op, d, x, num::lane_value(*v), *swap, n),
                    (Buf::F64(d), Src::F64(x)) => num::bin_s(*op, d, x, num::lane_value(*v), *swap, n),
                    _ => return Err(internal("operand lane types differ")),
                }
                if *f16 {
                    round16(&mut d, n);
                }
                regs.bufs[*dst] = d;
                if let Some(p) = out {
                    store_out(regs, c, *dst, *p)?;
                }
            }
            Ins::Cmp { op, dst, a, b } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let Buf::B(dv) = &mut d else {
                    return Err(internal("comparison result lane"));
                };
                match (
                    view(regs, c.params, c.start, c.n, *a),
                    view(regs, c.params, c.start, c.n, *b),
                ) {
                    (Src::I32(x), Src::I32(y)) => num::cmp(*op, dv, x, y, n),
                    (Src::U32(x), Src::U32(y)) => num::cmp(*op, dv, x, y, n),
                    (Src::I64(x), Src::I64(y)) => num::cmp(*op, dv, x, y, n),
                    (Src::U64(x), Src::U64(y)) => num::cmp(*op, dv, x, y, n),
                    (Src::F32(x), Src::F32(y)) => num::cmp(*op, dv, x, y, n),
                    (Src::F64(x), Src::F64(y)) => num::cmp(*op, dv, x, y, n),
                    (Src::B(x), Src::B(y)) => {
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
                match (
                    &mut d,
                    view(regs, c.params, c.start, c.n, *a),
                    view(regs, c.params, c.start, c.n, *b),
                ) {
                    (Buf::B(x), Src::B(y), Src::B(z)) => num::select(x, cv, y, z, n),
                    (d, a, b) => same3!(d, a, b, |x, y, z| num::select(x, cv, y, z, n)),
                }
                regs.bufs[*dst] = d;
            }
            Ins::Call { f, dst, a, b, f16 } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let (av, bv) = (
                    view(regs, c.params, c.start, c.n, *a),
                    view(regs, c.params, c.start, c.n, *b),
                );
                match (&mut d, av, bv) {
                    (Buf::B(d), a, _) => src_match!(a, a => num::classify(*f, d, a, n), {}),
                    (Buf::F32(d), Src::F32(x), Src::F32(y)) => num::call_f32(*f, d, x, y, n),
                    (Buf::F64(d), Src::F64(x), Src::F64(y)) => num::call_f64(*f, d, x, y, n),
                    (d, x, y) => same3!(d, x, y, |p, q, r| num::call_num(*f, p, q, r, n)),
                }
                if *f16 && !matches!(f, Func::Isnan | Func::Isinf | Func::Isfinite) {
                    round16(&mut d, n);
                }
                regs.bufs[*dst] = d;
            }
            Ins::Copy { dst, src } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                d.copy_from_src(view(regs, c.params, c.start, c.n, *src), n);
                regs.bufs[*dst] = d;
            }
            Ins::Blend { dst, m, src } => {
                let mut d = std::mem::take(&mut regs.bufs[*dst]);
                let mv = regs.bufs[*m].as_bool();
                match (&mut d, view(regs, c.params, c.start, c.n, *src)) {
                    (Buf::B(x), Src::B(y)) => num::blend(x, mv, y, n),
                    (Buf::I32(x), Src::I32(y)) => num::blend(x, mv, y, n),
                    (Buf::U32(x), Src::U32(y)) => num::blend(x, mv, y, n),
                    (Buf::I64(x), Src::I64(y)) => num::blend(x, mv, y, n),
                    (Buf::U64(x), Src::U64(y)) => num::blend(x, mv, y, n),
                    (Buf::F32(x), Src::F32(y)) => num::blend(x, mv, y, n),
                    (Buf::F64(x), Src::F64(y)) => num::blend(x, mv, y, n),
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
    ix: &[i64],
    bufs: &[Buf],
    param: usize,
    mask: Option<usize>,
    mut f: impl FnMut(&mut Chunk<'a, 'o, '_>, usize, usize, ScalarType, Option<&InView<'a>>),
) -> Result<(), Error> {
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

/// Loads several inputs for the chunk. Contiguous ones are copied in interleaved blocks, so
/// their memory streams are read concurrently (one burst per input at a time leaves the
/// memory system idle between bursts).
fn load_group(items: &[(usize, usize)], regs: &mut Regs, c: &Chunk<'_, '_, '_>) -> Result<(), Error> {
    const BLOCK: usize = 256;
    let mut contiguous = Vec::with_capacity(items.len());
    for &(dst, param) in items {
        let PData::In(v) = &c.params[param] else {
            return Err(internal("input not bound"));
        };
        regs.alias[dst] = None;
        if v.contiguous {
            touch_next(v, c);
        }
        if v.contiguous && aliasable(v, c) {
            regs.alias[dst] = Some(param);
            continue;
        }
        if v.contiguous && items.len() > 1 {
            contiguous.push((dst, v));
        } else {
            let mut d = std::mem::take(&mut regs.bufs[dst]);
            v.load(c.start, c.n, &mut d, &mut regs.scratch);
            regs.bufs[dst] = d;
        }
    }
    let mut k = 0;
    while k < c.n {
        let m = BLOCK.min(c.n - k);
        for (dst, v) in &contiguous {
            let first = (v.offset + (c.start + k) as isize) as usize;
            super::io::read_range(v.dtype, v.bytes, first, m, &mut regs.bufs[*dst], k);
        }
        k += m;
    }
    Ok(())
}

/// The lanes of register `r`: an input's memory when the register aliases it.
fn view<'x>(regs: &'x Regs, params: &'x [PData<'_>], start: usize, n: usize, r: usize) -> Src<'x> {
    if let Some(p) = regs.alias[r] {
        if let PData::In(v) = &params[p] {
            let sz = v.dtype.size();
            let first = (v.offset + start as isize) as usize * sz;
            let b = &v.bytes[first..first + n * sz];
            let aliased = match v.dtype {
                ScalarType::I32 => bytemuck::try_cast_slice(b).ok().map(Src::I32),
                ScalarType::U32 => bytemuck::try_cast_slice(b).ok().map(Src::U32),
                ScalarType::I64 => bytemuck::try_cast_slice(b).ok().map(Src::I64),
                ScalarType::U64 => bytemuck::try_cast_slice(b).ok().map(Src::U64),
                ScalarType::F32 => bytemuck::try_cast_slice(b).ok().map(Src::F32),
                ScalarType::F64 => bytemuck::try_cast_slice(b).ok().map(Src::F64),
                _ => None,
            };
            if let Some(s) = aliased {
                return s;
            }
        }
    }
    regs.bufs[r].src()
}

/// A raw access's indices as `i64` lanes.
fn idx_vec(regs: &Regs, c: &Chunk<'_, '_, '_>, r: usize) -> Vec<i64> {
    match view(regs, c.params, c.start, c.n, r) {
        Src::I64(v) => v[..c.n].to_vec(),
        _ => Vec::new(),
    }
}

/// Whether a contiguous input can stand for its register: same lane type, aligned.
fn aliasable(v: &InView<'_>, c: &Chunk<'_, '_, '_>) -> bool {
    let sz = v.dtype.size();
    let first = (v.offset + c.start as isize) as usize * sz;
    let b = &v.bytes[first..first + c.n * sz];
    match v.dtype {
        ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => b.as_ptr().align_offset(4) == 0,
        ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => b.as_ptr().align_offset(8) == 0,
        _ => false,
    }
}

/// Reads one byte of every cache line of the input's next chunk, so those lines are on their
/// way from memory while this chunk computes: the loads are independent, so the core keeps
/// many in flight (a software prefetch without `unsafe`). Streams read one at a time, a
/// register at a time, otherwise leave the memory system idle between bursts.
fn touch_next(v: &InView<'_>, c: &Chunk<'_, '_, '_>) {
    let sz = v.dtype.size();
    let from = (v.offset + (c.start + c.n) as isize) as usize * sz;
    touch(v.bytes, from, (from + c.n * sz).min(v.bytes.len()));
}

/// Reads one byte per cache line of `b[from..to]`.
fn touch(b: &[u8], from: usize, to: usize) {
    let mut acc = 0u8;
    let mut k = from;
    while k < to {
        acc ^= b[k];
        k += 64;
    }
    std::hint::black_box(acc);
}

/// The chunk's piece of an output, typed, when its memory holds lanes as they are (aligned).
enum Dst<'x> {
    I32(&'x mut [i32]),
    U32(&'x mut [u32]),
    I64(&'x mut [i64]),
    U64(&'x mut [u64]),
    F32(&'x mut [f32]),
    F64(&'x mut [f64]),
}

fn out_slice<'x>(c: &'x mut Chunk<'_, '_, '_>, param: usize) -> Option<Dst<'x>> {
    let PData::Out { k, dtype, .. } = c.params[param] else {
        return None;
    };
    let sz = dtype.size();
    let at = c.start - c.out_shift;
    let b = &mut c.outs[k][at * sz..(at + c.n) * sz];
    match dtype {
        ScalarType::I32 => bytemuck::try_cast_slice_mut(b).ok().map(Dst::I32),
        ScalarType::U32 => bytemuck::try_cast_slice_mut(b).ok().map(Dst::U32),
        ScalarType::I64 => bytemuck::try_cast_slice_mut(b).ok().map(Dst::I64),
        ScalarType::U64 => bytemuck::try_cast_slice_mut(b).ok().map(Dst::U64),
        ScalarType::F32 => bytemuck::try_cast_slice_mut(b).ok().map(Dst::F32),
        ScalarType::F64 => bytemuck::try_cast_slice_mut(b).ok().map(Dst::F64),
        _ => None,
    }
}

/// Stores register `src` into output `param` (the fallback of a direct write).
fn store_out(regs: &Regs, c: &mut Chunk<'_, '_, '_>, src: usize, param: usize) -> Result<(), Error> {
    let PData::Out { k, dtype, .. } = c.params[param] else {
        return Err(internal("output not bound"));
    };
    let at = c.start - c.out_shift;
    let v = view(regs, c.params, c.start, c.n, src);
    write_range(dtype, c.outs[k], at, c.n, v);
    Ok(())
}
