//! Complex values in the register program: every complex value is two registers of its
//! part type (real, imaginary), and every complex operation is lowered to the real
//! instructions the generated CUDA's helpers (`cuda_complex`) execute, in the same order, so
//! both devices round alike. Selects stand for the helpers' `?:` (both sides are computed;
//! the operations cannot fail).

use super::num::lane_of;
use super::program::{Ins, Lower, Reg};
use crate::parse::{BinOp, UnOp};
use crate::typed::{Func, VarKind, TE, TX};
use crate::types::{ScalarType, Value};

/// A complex value's registers: (real, imaginary).
type C = (Reg, Reg);

impl Lower<'_> {
    /// The registers of complex variable `id` (created, and its loads or splats queued, on
    /// first use).
    pub(super) fn cvar(&mut self, id: usize) -> C {
        if let Some(r) = self.cvar_regs[id] {
            return r;
        }
        let v = &self.vars[id];
        let (pt, kind) = (v.ty.part(), v.kind.clone());
        let r = (self.reg(pt), self.reg(pt));
        self.cvar_regs[id] = Some(r);
        match kind {
            VarKind::In(param) => {
                for (part, dst) in [(0, r.0), (1, r.1)] {
                    self.prologue.push(Ins::LoadInPart { dst, param, part });
                }
            }
            VarKind::Scalar(p) => {
                let (re, im) = self
                    .scalars
                    .get(p)
                    .copied()
                    .flatten()
                    .unwrap_or(Value::I(0))
                    .parts();
                for (dst, v) in [(r.0, re), (r.1, im)] {
                    self.p.setup.push(Ins::Splat { dst, v: Value::F(v) });
                    self.uniform.insert(dst, Value::F(v));
                }
            }
            VarKind::Acc(_) | VarKind::Local | VarKind::Out(_) => {}
        }
        r
    }

    /// `var = x` for a complex variable (blended under `mask`).
    pub(super) fn assign_complex(&mut self, id: usize, x: &TX, mask: Option<Reg>, out: &mut Vec<Ins>) {
        let src = self.cexpr(x, mask, out);
        if let VarKind::Out(_) = self.vars[id].kind {
            self.out_store[id] = true;
            if mask.is_some() {
                self.out_load[id] = true;
            }
        }
        let dst = self.cvar(id);
        let mut src = src;
        if src.1 == dst.0 && src.0 != dst.0 {
            // the real part's copy would overwrite the imaginary part's source
            // (`z = complex<float>(imag(z), real(z))`): take it first
            let t = self.reg(self.vars[id].ty.part());
            out.push(Ins::Copy { dst: t, src: src.1 });
            src.1 = t;
        }
        for (d, s) in [(dst.0, src.0), (dst.1, src.1)] {
            if d == s {
                continue;
            }
            match mask {
                None => out.push(Ins::Copy { dst: d, src: s }),
                Some(m) => out.push(Ins::Blend { dst: d, m, src: s }),
            }
        }
    }

    /// The registers of a complex-typed expression.
    pub(super) fn cexpr(&mut self, x: &TX, mask: Option<Reg>, out: &mut Vec<Ins>) -> C {
        let t = x.ty;
        let pt = t.part();
        match &x.e {
            TE::Const(v) => {
                let (re, im) = v.parts();
                (self.konst(re, pt), self.konst(im, pt))
            }
            TE::Var(id) => {
                if let VarKind::Out(_) = self.vars[*id].kind {
                    self.out_load[*id] = true;
                }
                self.cvar(*id)
            }
            TE::RawLoad(p, idx) => {
                let idx = self.expr(idx, mask, out);
                let r = (self.reg(pt), self.reg(pt));
                for (part, dst) in [(0, r.0), (1, r.1)] {
                    out.push(Ins::RawLoad {
                        dst,
                        param: *p,
                        idx,
                        mask,
                        part: Some(part),
                    });
                }
                r
            }
            TE::Unary(_, a) => {
                let a = self.cexpr(a, mask, out);
                (self.neg(a.0, pt, out), self.neg(a.1, pt, out))
            }
            TE::Bin(op, a, b) => {
                let ra = self.operand(a, mask, out);
                let rb = self.operand(b, mask, out);
                self.arith(*op, pt, ra, rb, out)
            }
            TE::Select(c, a, b) => {
                let rc = self.expr(c, mask, out);
                let (ma, mb) = self.arm_masks(mask, rc, a, b, out);
                let ra = self.cexpr(a, ma, out);
                let rb = self.cexpr(b, mb, out);
                (
                    self.select(rc, ra.0, rb.0, pt, out),
                    self.select(rc, ra.1, rb.1, pt, out),
                )
            }
            TE::Cast(a) if a.ty.is_complex() => {
                let r = self.cexpr(a, mask, out);
                (
                    self.convert(r.0, a.ty.part(), pt, out),
                    self.convert(r.1, a.ty.part(), pt, out),
                )
            }
            TE::Cast(a) => {
                let r = self.expr(a, mask, out);
                (self.convert(r, a.ty, pt, out), self.konst(0.0, pt))
            }
            TE::Complex(re, im) => (self.expr(re, mask, out), self.expr(im, mask, out)),
            TE::Call(f, args) => {
                let a = self.cexpr(&args[0], mask, out);
                match f {
                    Func::Conj => (a.0, self.neg(a.1, pt, out)),
                    Func::Exp => self.exp(a, pt, out),
                    Func::Log => self.log(a, pt, out),
                    Func::Sqrt => self.sqrt(a, pt, out),
                    Func::Sin | Func::Cos => self.sin_cos(*f, a, pt, out),
                    Func::Pow => {
                        let b = self.operand(&args[1], mask, out);
                        self.pow(a, b, pt, out)
                    }
                    _ => a,
                }
            }
            // no other node has a complex type
            TE::Special(_) | TE::Not(_) | TE::Cmp(..) | TE::Logic(..) => {
                let z = self.konst(0.0, pt);
                (z, z)
            }
        }
    }

    /// `a == b` / `a != b` of complex operands, as a bool register.
    pub(super) fn complex_cmp(
        &mut self,
        op: BinOp,
        a: &TX,
        b: &TX,
        mask: Option<Reg>,
        out: &mut Vec<Ins>,
    ) -> Reg {
        let a = self.cexpr(a, mask, out);
        let b = self.cexpr(b, mask, out);
        let (pair, join) = if op == BinOp::Ne {
            (BinOp::Ne, BinOp::Or)
        } else {
            (BinOp::Eq, BinOp::And)
        };
        let re = self.cmp(pair, a.0, b.0, out);
        let im = self.cmp(pair, a.1, b.1, out);
        self.logic(join, re, im, out)
    }

    /// `real`, `imag`, `abs` or `arg` of a complex value.
    pub(super) fn complex_real_call(
        &mut self,
        f: Func,
        z: &TX,
        mask: Option<Reg>,
        out: &mut Vec<Ins>,
    ) -> Reg {
        let pt = z.ty.part();
        let a = self.cexpr(z, mask, out);
        match f {
            Func::Imag => a.1,
            Func::Abs => self.call(Func::Hypot, a.0, a.1, pt, out),
            Func::Arg => self.call(Func::Atan2, a.1, a.0, pt, out),
            _ => a.0,
        }
    }

    /// An operand of a complex operation: a complex value's registers, or a real value's
    /// register and `None`.
    fn operand(&mut self, x: &TX, mask: Option<Reg>, out: &mut Vec<Ins>) -> (Reg, Option<Reg>) {
        if x.ty.is_complex() {
            let (re, im) = self.cexpr(x, mask, out);
            (re, Some(im))
        } else {
            (self.expr(x, mask, out), None)
        }
    }

    /// `a op b` for `+ - * /` (`_kiln_cN_add`, `addr`, `sub`, `subr`, `rsub`, `mul`, `mulr`,
    /// `div`, `divr`).
    fn arith(
        &mut self,
        op: BinOp,
        pt: ScalarType,
        a: (Reg, Option<Reg>),
        b: (Reg, Option<Reg>),
        out: &mut Vec<Ins>,
    ) -> C {
        use BinOp::*;
        let zero = |l: &mut Self| l.konst(0.0, pt);
        match (op, a, b) {
            (Add | Sub, (ar, Some(ai)), (br, Some(bi))) => {
                (self.bin(op, ar, br, pt, out), self.bin(op, ai, bi, pt, out))
            }
            (Add | Sub, (ar, Some(ai)), (x, None)) => (self.bin(op, ar, x, pt, out), ai),
            (Add, (x, None), (br, Some(bi))) => (self.bin(Add, br, x, pt, out), bi),
            (Sub, (x, None), (br, Some(bi))) => (self.bin(Sub, x, br, pt, out), self.neg(bi, pt, out)),
            (Mul, (ar, Some(ai)), (br, Some(bi))) => self.mul((ar, ai), (br, bi), pt, out),
            (Mul, (ar, Some(ai)), (x, None)) | (Mul, (x, None), (ar, Some(ai))) => {
                (self.bin(Mul, ar, x, pt, out), self.bin(Mul, ai, x, pt, out))
            }
            (Div, (ar, Some(ai)), (x, None)) => {
                (self.bin(Div, ar, x, pt, out), self.bin(Div, ai, x, pt, out))
            }
            (Div, (ar, ai), (br, Some(bi))) => {
                let ai = ai.unwrap_or_else(|| zero(self));
                self.div((ar, ai), (br, bi), pt, out)
            }
            // two real operands never make a complex node
            (_, (x, _), _) => (x, zero(self)),
        }
    }

    /// `_kiln_cN_mul`: `(ar*br - ai*bi, ar*bi + ai*br)`.
    fn mul(&mut self, (ar, ai): C, (br, bi): C, pt: ScalarType, out: &mut Vec<Ins>) -> C {
        let t1 = self.bin(BinOp::Mul, ar, br, pt, out);
        let t2 = self.bin(BinOp::Mul, ai, bi, pt, out);
        let re = self.bin(BinOp::Sub, t1, t2, pt, out);
        let t3 = self.bin(BinOp::Mul, ar, bi, pt, out);
        let t4 = self.bin(BinOp::Mul, ai, br, pt, out);
        let im = self.bin(BinOp::Add, t3, t4, pt, out);
        (re, im)
    }

    /// `_kiln_cN_div`: both operands scaled by `1 / (|br| + |bi|)`, then the textbook
    /// quotient.
    fn div(&mut self, (ar, ai): C, (br, bi): C, pt: ScalarType, out: &mut Vec<Ins>) -> C {
        use BinOp::*;
        let one = self.konst(1.0, pt);
        let fb = self.call(Func::Fabs, br, br, pt, out);
        let fi = self.call(Func::Fabs, bi, bi, pt, out);
        let s = self.bin(Add, fb, fi, pt, out);
        let oos = self.bin(Div, one, s, pt, out);
        let ars = self.bin(Mul, ar, oos, pt, out);
        let ais = self.bin(Mul, ai, oos, pt, out);
        let brs = self.bin(Mul, br, oos, pt, out);
        let bis = self.bin(Mul, bi, oos, pt, out);
        let s1 = self.bin(Mul, brs, brs, pt, out);
        let s2 = self.bin(Mul, bis, bis, pt, out);
        let s = self.bin(Add, s1, s2, pt, out);
        let oos = self.bin(Div, one, s, pt, out);
        let p1 = self.bin(Mul, ars, brs, pt, out);
        let p2 = self.bin(Mul, ais, bis, pt, out);
        let p = self.bin(Add, p1, p2, pt, out);
        let re = self.bin(Mul, p, oos, pt, out);
        let q1 = self.bin(Mul, ais, brs, pt, out);
        let q2 = self.bin(Mul, ars, bis, pt, out);
        let q = self.bin(Sub, q1, q2, pt, out);
        let im = self.bin(Mul, q, oos, pt, out);
        (re, im)
    }

    /// `_kiln_cN_exp`: `exp(re) * (cos(im), sin(im))`, or `(exp(re), im)` where `im == 0`.
    fn exp(&mut self, (ar, ai): C, pt: ScalarType, out: &mut Vec<Ins>) -> C {
        let e = self.call(Func::Exp, ar, ar, pt, out);
        let c = self.call(Func::Cos, ai, ai, pt, out);
        let wr = self.bin(BinOp::Mul, e, c, pt, out);
        let s = self.call(Func::Sin, ai, ai, pt, out);
        let wi = self.bin(BinOp::Mul, e, s, pt, out);
        let zero = self.konst(0.0, pt);
        let real = self.cmp(BinOp::Eq, ai, zero, out);
        (
            self.select(real, e, wr, pt, out),
            self.select(real, ai, wi, pt, out),
        )
    }

    /// `_kiln_cN_log`: `(log(hypot(re, im)), atan2(im, re))`.
    fn log(&mut self, (ar, ai): C, pt: ScalarType, out: &mut Vec<Ins>) -> C {
        let h = self.call(Func::Hypot, ar, ai, pt, out);
        let re = self.call(Func::Log, h, h, pt, out);
        let im = self.call(Func::Atan2, ai, ar, pt, out);
        (re, im)
    }

    /// `_kiln_cN_sqrt`.
    fn sqrt(&mut self, (ar, ai): C, pt: ScalarType, out: &mut Vec<Ins>) -> C {
        use BinOp::*;
        let fr = self.call(Func::Fabs, ar, ar, pt, out);
        let fi = self.call(Func::Fabs, ai, ai, pt, out);
        let half = self.konst(0.5, pt);
        let m1 = self.bin(Mul, half, fr, pt, out);
        let h = self.call(Func::Hypot, ar, ai, pt, out);
        let m2 = self.bin(Mul, half, h, pt, out);
        let sum = self.bin(Add, m1, m2, pt, out);
        let t = self.call(Func::Sqrt, sum, sum, pt, out);
        let d = self.bin(Add, t, t, pt, out);
        let zero = self.konst(0.0, pt);
        let right = self.cmp(Ge, ar, zero, out);
        let u = self.bin(Div, ai, d, pt, out);
        let v = self.bin(Div, fi, d, pt, out);
        let cs = self.call(Func::Copysign, t, ai, pt, out);
        let wr = self.select(right, t, v, pt, out);
        let wi = self.select(right, u, cs, pt, out);
        let inf = self.konst(f64::INFINITY, pt);
        let big = self.cmp(Eq, fi, inf, out);
        let wr = self.select(big, fi, wr, pt, out);
        let wi = self.select(big, ai, wi, pt, out);
        let z = self.is_zero((ar, ai), pt, out);
        (self.select(z, zero, wr, pt, out), self.select(z, ai, wi, pt, out))
    }

    /// `_kiln_cN_sin` / `_kiln_cN_cos`.
    fn sin_cos(&mut self, f: Func, (ar, ai): C, pt: ScalarType, out: &mut Vec<Ins>) -> C {
        let (s, c) = if f == Func::Sin {
            let s = self.call(Func::Sin, ar, ar, pt, out);
            let ch = self.call(Func::Cosh, ai, ai, pt, out);
            let c = self.call(Func::Cos, ar, ar, pt, out);
            let sh = self.call(Func::Sinh, ai, ai, pt, out);
            (
                self.bin(BinOp::Mul, s, ch, pt, out),
                self.bin(BinOp::Mul, c, sh, pt, out),
            )
        } else {
            let c = self.call(Func::Cos, ar, ar, pt, out);
            let ch = self.call(Func::Cosh, ai, ai, pt, out);
            let s = self.call(Func::Sin, ar, ar, pt, out);
            let sh = self.call(Func::Sinh, ai, ai, pt, out);
            let p = self.bin(BinOp::Mul, s, sh, pt, out);
            (self.bin(BinOp::Mul, c, ch, pt, out), self.neg(p, pt, out))
        };
        (s, c)
    }

    /// `_kiln_cN_pow` (complex exponent) / `_kiln_cN_powr` (real exponent):
    /// `exp(b * log(a))`, 1 for a zero exponent, 0 for a zero base and a positive real
    /// exponent, NaN for a zero base otherwise.
    fn pow(&mut self, a: C, (br, bi): (Reg, Option<Reg>), pt: ScalarType, out: &mut Vec<Ins>) -> C {
        use BinOp::*;
        let l = self.log(a, pt, out);
        let m = match bi {
            Some(bi) => self.mul((br, bi), l, pt, out),
            None => (self.bin(Mul, l.0, br, pt, out), self.bin(Mul, l.1, br, pt, out)),
        };
        let w = self.exp(m, pt, out);
        let zero = self.konst(0.0, pt);
        let one = self.konst(1.0, pt);
        let nan = self.konst(f64::NAN, pt);
        let pos = self.cmp(Gt, br, zero, out);
        let (pos, b0) = match bi {
            Some(bi) => {
                let bi0 = self.cmp(Eq, bi, zero, out);
                let pos = self.logic(And, pos, bi0, out);
                (pos, self.is_zero((br, bi), pt, out))
            }
            None => (pos, self.cmp(Eq, br, zero, out)),
        };
        let zr = self.select(pos, zero, nan, pt, out);
        let zi = self.select(pos, zero, nan, pt, out);
        let a0 = self.is_zero(a, pt, out);
        let wr = self.select(a0, zr, w.0, pt, out);
        let wi = self.select(a0, zi, w.1, pt, out);
        (
            self.select(b0, one, wr, pt, out),
            self.select(b0, zero, wi, pt, out),
        )
    }

    /// `re == 0 && im == 0`.
    fn is_zero(&mut self, (r, i): C, pt: ScalarType, out: &mut Vec<Ins>) -> Reg {
        let zero = self.konst(0.0, pt);
        let a = self.cmp(BinOp::Eq, r, zero, out);
        let b = self.cmp(BinOp::Eq, i, zero, out);
        self.logic(BinOp::And, a, b, out)
    }

    /// A register holding `v` (of part type `t`) in every lane.
    fn konst(&mut self, v: f64, t: ScalarType) -> Reg {
        let r = self.reg(t);
        self.p.setup.push(Ins::Splat {
            dst: r,
            v: Value::F(v),
        });
        self.uniform.insert(r, Value::F(v));
        r
    }

    fn bin(&mut self, op: BinOp, a: Reg, b: Reg, t: ScalarType, out: &mut Vec<Ins>) -> Reg {
        let dst = self.reg(t);
        out.push(Ins::Bin {
            op,
            dst,
            a,
            b,
            f16: false,
            out: None,
        });
        dst
    }

    fn neg(&mut self, a: Reg, t: ScalarType, out: &mut Vec<Ins>) -> Reg {
        let dst = self.reg(t);
        out.push(Ins::Un {
            op: UnOp::Neg,
            dst,
            a,
            f16: false,
        });
        dst
    }

    /// A real math function of one (`b` = `a`) or two arguments.
    fn call(&mut self, f: Func, a: Reg, b: Reg, t: ScalarType, out: &mut Vec<Ins>) -> Reg {
        let dst = self.reg(t);
        out.push(Ins::Call {
            f,
            dst,
            a,
            b,
            f16: false,
        });
        dst
    }

    fn cmp(&mut self, op: BinOp, a: Reg, b: Reg, out: &mut Vec<Ins>) -> Reg {
        let dst = self.reg(ScalarType::Bool);
        out.push(Ins::Cmp { op, dst, a, b });
        dst
    }

    fn logic(&mut self, op: BinOp, a: Reg, b: Reg, out: &mut Vec<Ins>) -> Reg {
        let dst = self.reg(ScalarType::Bool);
        out.push(Ins::Logic { op, dst, a, b });
        dst
    }

    fn select(&mut self, c: Reg, a: Reg, b: Reg, t: ScalarType, out: &mut Vec<Ins>) -> Reg {
        let dst = self.reg(t);
        out.push(Ins::Select { dst, c, a, b });
        dst
    }

    /// Register `r` of type `from` converted to `to` (the register itself when both are
    /// held in the same lanes and `to` needs no rounding).
    fn convert(&mut self, r: Reg, from: ScalarType, to: ScalarType, out: &mut Vec<Ins>) -> Reg {
        if from == to
            || (lane_of(from) == lane_of(to)
                && from != ScalarType::F16
                && to != ScalarType::F16
                && from.is_float())
        {
            return r;
        }
        let dst = self.reg(to);
        out.push(Ins::Cast { dst, src: r, to });
        dst
    }
}
