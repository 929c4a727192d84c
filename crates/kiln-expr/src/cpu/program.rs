//! The typed AST compiled to a register program over chunks of lanes.
//!
//! Every register holds one chunk of values of one lane type; every instruction is one loop
//! over a chunk. `if` becomes two masks: both branches' expressions run only when some lane
//! takes them, and assignments inside blend under the mask. Nothing but a raw load or store
//! can fail, so expressions evaluate on every lane (integer division by zero gives 0 and never
//! traps) and only raw accesses look at the mask.

use kiln_core::Error;

use super::num::{lane_of, Buf, Lane};
use crate::parse::{BinOp, UnOp};
use crate::typed::{Func, Special, Var, VarKind, TE, TS, TX};
use crate::types::{ScalarType, Value};

pub(crate) type Reg = usize;

#[derive(Clone, Debug)]
pub(crate) enum Ins {
    Splat {
        dst: Reg,
        v: Value,
    },
    Special {
        dst: Reg,
        s: Special,
    },
    LoadIn {
        dst: Reg,
        param: usize,
    },
    /// Every input of a body, loaded together.
    LoadGroup(Vec<(Reg, usize)>),
    LoadOut {
        dst: Reg,
        param: usize,
    },
    StoreOut {
        src: Reg,
        param: usize,
    },
    /// The real (`part` 0) or imaginary (1) parts of a complex input's elements.
    LoadInPart {
        dst: Reg,
        param: usize,
        part: u8,
    },
    /// As `LoadInPart`, of a complex output.
    LoadOutPart {
        dst: Reg,
        param: usize,
        part: u8,
    },
    /// Stores one part of a complex output's elements.
    StoreOutPart {
        src: Reg,
        param: usize,
        part: u8,
    },
    RawLoad {
        dst: Reg,
        param: usize,
        idx: Reg,
        mask: Option<Reg>,
        /// The part of a complex element (`None`: the element).
        part: Option<u8>,
    },
    RawStore {
        param: usize,
        idx: Reg,
        val: Reg,
        mask: Option<Reg>,
        /// As `RawLoad::part`.
        part: Option<u8>,
    },
    Cast {
        dst: Reg,
        src: Reg,
        to: ScalarType,
    },
    Un {
        op: UnOp,
        dst: Reg,
        a: Reg,
        f16: bool,
    },
    Not {
        dst: Reg,
        a: Reg,
    },
    Bin {
        op: BinOp,
        dst: Reg,
        a: Reg,
        b: Reg,
        f16: bool,
        /// The output parameter this result is the final value of, written straight into
        /// its memory (no register pass, no separate store).
        out: Option<usize>,
    },
    /// `a op v` (or `v op a` when `swap`) with `v` the same in every lane.
    BinS {
        op: BinOp,
        dst: Reg,
        a: Reg,
        v: Value,
        swap: bool,
        f16: bool,
        /// As `Bin::out`.
        out: Option<usize>,
    },
    Cmp {
        op: BinOp,
        dst: Reg,
        a: Reg,
        b: Reg,
    },
    Logic {
        op: BinOp,
        dst: Reg,
        a: Reg,
        b: Reg,
    },
    Select {
        dst: Reg,
        c: Reg,
        a: Reg,
        b: Reg,
    },
    Call {
        f: Func,
        dst: Reg,
        a: Reg,
        b: Reg,
        f16: bool,
    },
    Copy {
        dst: Reg,
        src: Reg,
    },
    Blend {
        dst: Reg,
        m: Reg,
        src: Reg,
    },
    If {
        mt: Reg,
        me: Reg,
        then: Vec<Ins>,
        els: Vec<Ins>,
    },
}

/// A compiled body.
#[derive(Clone, Debug, Default)]
pub(crate) struct Program {
    /// Run once per worker (constants, scalars, sizes).
    pub setup: Vec<Ins>,
    /// Run per chunk.
    pub body: Vec<Ins>,
    pub lanes: Vec<Lane>,
    /// Registers of the reduction operands `a` and `b`.
    pub acc: [Option<Reg>; 2],
    /// The value of an expression program.
    pub result: Option<Reg>,
}

pub(super) struct Lower<'v> {
    pub(super) p: Program,
    pub(super) vars: &'v [Var],
    var_regs: Vec<Option<Reg>>,
    /// The (real, imaginary) registers of complex variables.
    pub(super) cvar_regs: Vec<Option<(Reg, Reg)>>,
    pub(super) prologue: Vec<Ins>,
    pub(super) out_load: Vec<bool>,
    pub(super) out_store: Vec<bool>,
    pub(super) scalars: &'v [Option<Value>],
    /// Registers holding one value in every lane (constants, scalar parameters).
    pub(super) uniform: std::collections::HashMap<Reg, Value>,
}

impl<'v> Lower<'v> {
    fn new(vars: &'v [Var], scalars: &'v [Option<Value>]) -> Self {
        Lower {
            p: Program::default(),
            vars,
            var_regs: vec![None; vars.len()],
            cvar_regs: vec![None; vars.len()],
            prologue: Vec::new(),
            out_load: vec![false; vars.len()],
            out_store: vec![false; vars.len()],
            scalars,
            uniform: Default::default(),
        }
    }

    /// Whether `r` is a variable's register (which an instruction must not be retargeted
    /// away from).
    fn is_var_reg(&self, r: Reg) -> bool {
        self.var_regs.contains(&Some(r)) || self.cvar_regs.iter().flatten().any(|&(a, b)| a == r || b == r)
    }

    pub(super) fn reg(&mut self, t: ScalarType) -> Reg {
        self.p.lanes.push(lane_of(t));
        self.p.lanes.len() - 1
    }

    fn var(&mut self, id: usize) -> Reg {
        if let Some(r) = self.var_regs[id] {
            return r;
        }
        let v = &self.vars[id];
        let (ty, kind) = (v.ty, v.kind.clone());
        let r = self.reg(ty);
        self.var_regs[id] = Some(r);
        match kind {
            VarKind::In(p) => self.prologue.push(Ins::LoadIn { dst: r, param: p }),
            VarKind::Scalar(p) => {
                let v = self.scalars.get(p).copied().flatten().unwrap_or(Value::I(0));
                self.p.setup.push(Ins::Splat { dst: r, v });
                self.uniform.insert(r, v);
            }
            VarKind::Acc(k) => self.p.acc[k as usize] = Some(r),
            VarKind::Local | VarKind::Out(_) => {}
        }
        r
    }

    pub(super) fn stmts(&mut self, ss: &[TS], mask: Option<Reg>, out: &mut Vec<Ins>) {
        for s in ss {
            match s {
                TS::Assign(id, x) if self.vars[*id].ty.is_complex() => self.assign_complex(*id, x, mask, out),
                TS::RawStore(p, idx, val) if val.ty.is_complex() => {
                    let idx = self.expr(idx, mask, out);
                    let (re, im) = self.cexpr(val, mask, out);
                    for (part, val) in [(0, re), (1, im)] {
                        out.push(Ins::RawStore {
                            param: *p,
                            idx,
                            val,
                            mask,
                            part: Some(part),
                        });
                    }
                }
                TS::Assign(id, x) => {
                    let src = self.expr(x, mask, out);
                    if let VarKind::Out(_) = self.vars[*id].kind {
                        self.out_store[*id] = true;
                        if mask.is_some() {
                            self.out_load[*id] = true;
                        }
                    }
                    let dst = self.var(*id);
                    if dst == src {
                        continue;
                    }
                    // Unconditional: let the instruction that computed the value write the
                    // variable directly (one pass fewer), unless it also reads it.
                    if mask.is_none() && !self.is_var_reg(src) {
                        if let Some(last) = out.last_mut() {
                            if retarget(last, src, dst) {
                                continue;
                            }
                        }
                    }
                    match mask {
                        None => out.push(Ins::Copy { dst, src }),
                        Some(m) => out.push(Ins::Blend { dst, m, src }),
                    }
                }
                TS::RawStore(p, idx, val) => {
                    let idx = self.expr(idx, mask, out);
                    let val = self.expr(val, mask, out);
                    out.push(Ins::RawStore {
                        param: *p,
                        idx,
                        val,
                        mask,
                        part: None,
                    });
                }
                TS::If(c, t, e) => {
                    let c = self.expr(c, mask, out);
                    let nc = self.reg(ScalarType::Bool);
                    out.push(Ins::Not { dst: nc, a: c });
                    let (mt, me) = match mask {
                        None => (c, nc),
                        Some(m) => {
                            let mt = self.reg(ScalarType::Bool);
                            let me = self.reg(ScalarType::Bool);
                            out.push(Ins::Logic {
                                op: BinOp::And,
                                dst: mt,
                                a: m,
                                b: c,
                            });
                            out.push(Ins::Logic {
                                op: BinOp::And,
                                dst: me,
                                a: m,
                                b: nc,
                            });
                            (mt, me)
                        }
                    };
                    let mut then = Vec::new();
                    self.stmts(t, Some(mt), &mut then);
                    let mut els = Vec::new();
                    self.stmts(e, Some(me), &mut els);
                    out.push(Ins::If { mt, me, then, els });
                }
            }
        }
    }

    /// The masks the two arms of `c ? a : b` are evaluated under: `mask & c` and
    /// `mask & !c` for an arm with raw accesses (which must not read where the arm is not
    /// taken), `mask` for one without.
    pub(super) fn arm_masks(
        &mut self,
        mask: Option<Reg>,
        c: Reg,
        a: &TX,
        b: &TX,
        out: &mut Vec<Ins>,
    ) -> (Option<Reg>, Option<Reg>) {
        let ma = if has_raw(a) {
            Some(self.narrow(mask, c, false, out))
        } else {
            mask
        };
        let mb = if has_raw(b) {
            Some(self.narrow(mask, c, true, out))
        } else {
            mask
        };
        (ma, mb)
    }

    /// `mask & c` (or `c`), for the raw accesses of a conditionally evaluated operand.
    pub(super) fn narrow(&mut self, mask: Option<Reg>, c: Reg, negate: bool, out: &mut Vec<Ins>) -> Reg {
        let c = if negate {
            let n = self.reg(ScalarType::Bool);
            out.push(Ins::Not { dst: n, a: c });
            n
        } else {
            c
        };
        match mask {
            None => c,
            Some(m) => {
                let d = self.reg(ScalarType::Bool);
                out.push(Ins::Logic {
                    op: BinOp::And,
                    dst: d,
                    a: m,
                    b: c,
                });
                d
            }
        }
    }

    pub(super) fn expr(&mut self, x: &TX, mask: Option<Reg>, out: &mut Vec<Ins>) -> Reg {
        let f16 = x.ty == ScalarType::F16;
        if x.ty.is_complex() {
            // (the checker gives no real node a complex value; its real part, to be total)
            return self.cexpr(x, mask, out).0;
        }
        match &x.e {
            TE::Cmp(op, a, b) if a.ty.is_complex() => self.complex_cmp(*op, a, b, mask, out),
            TE::Call(f, args) if args[0].ty.is_complex() => self.complex_real_call(*f, &args[0], mask, out),
            TE::Complex(..) => self.cexpr(x, mask, out).0,
            TE::Const(v) => {
                let r = self.reg(x.ty);
                self.p.setup.push(Ins::Splat { dst: r, v: *v });
                self.uniform.insert(r, *v);
                r
            }
            TE::Var(id) => {
                if let VarKind::Out(_) = self.vars[*id].kind {
                    self.out_load[*id] = true;
                }
                self.var(*id)
            }
            TE::Special(s) => {
                let r = self.reg(ScalarType::I64);
                if *s == Special::Index {
                    self.prologue.push(Ins::Special { dst: r, s: *s });
                } else {
                    self.p.setup.push(Ins::Special { dst: r, s: *s });
                }
                r
            }
            TE::RawLoad(p, idx) => {
                let idx = self.expr(idx, mask, out);
                let r = self.reg(x.ty);
                out.push(Ins::RawLoad {
                    dst: r,
                    param: *p,
                    idx,
                    mask,
                    part: None,
                });
                r
            }
            TE::Unary(op, a) => {
                let a = self.expr(a, mask, out);
                let r = self.reg(x.ty);
                out.push(Ins::Un {
                    op: *op,
                    dst: r,
                    a,
                    f16,
                });
                r
            }
            TE::Not(a) => {
                let a = self.expr(a, mask, out);
                let r = self.reg(ScalarType::Bool);
                out.push(Ins::Not { dst: r, a });
                r
            }
            TE::Bin(op, a, b) => {
                let a = self.expr(a, mask, out);
                let b = self.expr(b, mask, out);
                let r = self.reg(x.ty);
                // One operand the same in every lane: read it once, not once per lane.
                if let Some(&v) = self.uniform.get(&b) {
                    out.push(Ins::BinS {
                        op: *op,
                        dst: r,
                        a,
                        v,
                        swap: false,
                        f16,
                        out: None,
                    });
                    return r;
                }
                if let Some(&v) = self.uniform.get(&a) {
                    out.push(Ins::BinS {
                        op: *op,
                        dst: r,
                        a: b,
                        v,
                        swap: true,
                        f16,
                        out: None,
                    });
                    return r;
                }
                out.push(Ins::Bin {
                    op: *op,
                    dst: r,
                    a,
                    b,
                    f16,
                    out: None,
                });
                r
            }
            TE::Cmp(op, a, b) => {
                let a = self.expr(a, mask, out);
                let b = self.expr(b, mask, out);
                let r = self.reg(ScalarType::Bool);
                out.push(Ins::Cmp {
                    op: *op,
                    dst: r,
                    a,
                    b,
                });
                r
            }
            TE::Logic(op, a, b) => {
                let ra = self.expr(a, mask, out);
                let mb = if has_raw(b) {
                    Some(self.narrow(mask, ra, *op == BinOp::Or, out))
                } else {
                    mask
                };
                let rb = self.expr(b, mb, out);
                let r = self.reg(ScalarType::Bool);
                out.push(Ins::Logic {
                    op: *op,
                    dst: r,
                    a: ra,
                    b: rb,
                });
                r
            }
            TE::Select(c, a, b) => {
                let rc = self.expr(c, mask, out);
                let (ma, mb) = self.arm_masks(mask, rc, a, b, out);
                let ra = self.expr(a, ma, out);
                let rb = self.expr(b, mb, out);
                let r = self.reg(x.ty);
                out.push(Ins::Select {
                    dst: r,
                    c: rc,
                    a: ra,
                    b: rb,
                });
                r
            }
            TE::Cast(a) => {
                let src = self.expr(a, mask, out);
                let r = self.reg(x.ty);
                out.push(Ins::Cast {
                    dst: r,
                    src,
                    to: x.ty,
                });
                r
            }
            TE::Call(f, args) => {
                let a = self.expr(&args[0], mask, out);
                let b = if args.len() > 1 {
                    self.expr(&args[1], mask, out)
                } else {
                    a
                };
                let r = self.reg(x.ty);
                out.push(Ins::Call {
                    f: *f,
                    dst: r,
                    a,
                    b,
                    f16,
                });
                r
            }
        }
    }
}

pub(super) fn has_raw(x: &TX) -> bool {
    match &x.e {
        TE::RawLoad(..) => true,
        TE::Const(_) | TE::Var(_) | TE::Special(_) => false,
        TE::Unary(_, a) | TE::Not(a) | TE::Cast(a) => has_raw(a),
        TE::Bin(_, a, b) | TE::Cmp(_, a, b) | TE::Logic(_, a, b) | TE::Complex(a, b) => {
            has_raw(a) || has_raw(b)
        }
        TE::Select(c, a, b) => has_raw(c) || has_raw(a) || has_raw(b),
        TE::Call(_, args) => args.iter().any(has_raw),
    }
}

/// Compiles a statement body; outputs read or conditionally written are loaded first, and
/// every output written is stored last.
pub(crate) fn compile_body(body: &[TS], vars: &[Var], scalars: &[Option<Value>]) -> Program {
    let mut l = Lower::new(vars, scalars);
    let mut main = Vec::new();
    l.stmts(body, None, &mut main);
    let mut body = group_loads(std::mem::take(&mut l.prologue));
    for (id, v) in vars.iter().enumerate() {
        if let (VarKind::Out(p), true) = (&v.kind, l.out_load[id]) {
            if v.ty.is_complex() {
                let (re, im) = l.cvar(id);
                for (part, dst) in [(0, re), (1, im)] {
                    body.push(Ins::LoadOutPart { dst, param: *p, part });
                }
                continue;
            }
            let dst = l.var(id);
            body.push(Ins::LoadOut { dst, param: *p });
        }
    }
    // Loading an input may have been requested by the output pass above.
    body.append(&mut l.prologue);
    body.extend(main);
    for (id, v) in vars.iter().enumerate() {
        if let (VarKind::Out(p), true) = (&v.kind, l.out_store[id]) {
            if let Some((re, im)) = l.cvar_regs[id] {
                for (part, src) in [(0, re), (1, im)] {
                    body.push(Ins::StoreOutPart { src, param: *p, part });
                }
                continue;
            }
            if let Some(src) = l.var_regs[id] {
                if !l.out_load[id] && direct_lane(v.ty) && write_direct(&mut body, src, *p) {
                    continue;
                }
                body.push(Ins::StoreOut { src, param: *p });
            }
        }
    }
    l.p.body = body;
    l.p
}

/// Compiles one expression; `result` holds its value.
pub(crate) fn compile_expr(x: &TX, vars: &[Var], scalars: &[Option<Value>]) -> Program {
    let mut l = Lower::new(vars, scalars);
    for (id, v) in vars.iter().enumerate() {
        if let VarKind::Acc(_) = v.kind {
            l.var(id);
        }
    }
    let mut main = Vec::new();
    let mut r = l.expr(x, None, &mut main);
    // An input register may stand for the input's memory (see `Regs::alias`); the result
    // is read as a buffer, so copy it.
    if l.var_regs
        .iter()
        .zip(vars)
        .any(|(vr, v)| *vr == Some(r) && matches!(v.kind, VarKind::In(_)))
    {
        let t = l.p.lanes[r];
        l.p.lanes.push(t);
        let d = l.p.lanes.len() - 1;
        main.push(Ins::Copy { dst: d, src: r });
        r = d;
    }
    let mut body = group_loads(std::mem::take(&mut l.prologue));
    body.extend(main);
    l.p.body = body;
    l.p.result = Some(r);
    l.p
}

/// Registers of one worker.
pub(crate) struct Regs {
    pub bufs: Vec<Buf>,
    pub scratch: Vec<isize>,
    /// Registers that stand for an input's memory in the current chunk (the parameter),
    /// instead of a copy.
    pub alias: Vec<Option<usize>>,
}

impl Regs {
    pub(crate) fn new(p: &Program, chunk: usize) -> Regs {
        Regs {
            // Registers of slightly different lengths, so they do not all start at the same offset
            // modulo 4 KiB (which maps them to the same L1 sets).
            bufs: p
                .lanes
                .iter()
                .enumerate()
                .map(|(k, &l)| Buf::new(l, chunk + 16 * (k % 8)))
                .collect(),
            scratch: Vec::with_capacity(chunk),
            alias: vec![None; p.lanes.len()],
        }
    }
}

pub(crate) fn internal(what: &str) -> Error {
    Error::invalid(
        "kiln-expr",
        format!("internal error: {what}; please report this kernel"),
    )
}

/// Replaces the `LoadIn`s of a prologue by one `LoadGroup`.
fn group_loads(prologue: Vec<Ins>) -> Vec<Ins> {
    let mut group = Vec::new();
    let mut rest = Vec::new();
    for ins in prologue {
        match ins {
            Ins::LoadIn { dst, param } => group.push((dst, param)),
            other => rest.push(other),
        }
    }
    if !group.is_empty() {
        rest.insert(0, Ins::LoadGroup(group));
    }
    rest
}

/// Makes `ins`, which writes `from`, write `to` instead, when it does not read `to` (an
/// instruction's destination is taken out of the register file while it runs).
fn retarget(ins: &mut Ins, from: Reg, to: Reg) -> bool {
    let (d, reads): (&mut Reg, Vec<Reg>) = match ins {
        Ins::Cast { dst, src, .. } => (dst, vec![*src]),
        Ins::Un { dst, a, .. } | Ins::Not { dst, a } | Ins::BinS { dst, a, .. } => (dst, vec![*a]),
        Ins::Bin { dst, a, b, .. } | Ins::Cmp { dst, a, b, .. } | Ins::Logic { dst, a, b, .. } => {
            (dst, vec![*a, *b])
        }
        Ins::Select { dst, c, a, b } => (dst, vec![*c, *a, *b]),
        Ins::Call { dst, a, b, .. } => (dst, vec![*a, *b]),
        _ => return false,
    };
    if *d != from || reads.contains(&to) {
        return false;
    }
    *d = to;
    true
}

/// Whether values of `t` are stored exactly as their lanes (so a result can be computed in
/// the output's memory).
fn direct_lane(t: ScalarType) -> bool {
    use ScalarType::*;
    matches!(t, I32 | U32 | I64 | U64 | F32 | F64)
}

/// When the only top-level write of register `reg` is one `Bin`/`BinS` and nothing writes it
/// inside an `if`, makes that instruction write output `param` directly.
fn write_direct(body: &mut [Ins], reg: Reg, param: usize) -> bool {
    fn writes(i: &Ins, reg: Reg) -> bool {
        match i {
            Ins::If { then, els, .. } => then.iter().chain(els).any(|i| writes(i, reg)),
            Ins::Splat { dst, .. }
            | Ins::Special { dst, .. }
            | Ins::LoadIn { dst, .. }
            | Ins::LoadOut { dst, .. }
            | Ins::LoadInPart { dst, .. }
            | Ins::LoadOutPart { dst, .. }
            | Ins::RawLoad { dst, .. }
            | Ins::Cast { dst, .. }
            | Ins::Un { dst, .. }
            | Ins::Not { dst, .. }
            | Ins::Bin { dst, .. }
            | Ins::BinS { dst, .. }
            | Ins::Cmp { dst, .. }
            | Ins::Logic { dst, .. }
            | Ins::Select { dst, .. }
            | Ins::Call { dst, .. }
            | Ins::Copy { dst, .. }
            | Ins::Blend { dst, .. } => *dst == reg,
            Ins::LoadGroup(items) => items.iter().any(|(d, _)| *d == reg),
            Ins::StoreOut { .. } | Ins::StoreOutPart { .. } | Ins::RawStore { .. } => false,
        }
    }
    let at: Vec<usize> = (0..body.len()).filter(|&k| writes(&body[k], reg)).collect();
    let [k] = at[..] else { return false };
    match &mut body[k] {
        Ins::Bin { out, f16: false, .. } | Ins::BinS { out, f16: false, .. } => {
            *out = Some(param);
            true
        }
        _ => false,
    }
}
