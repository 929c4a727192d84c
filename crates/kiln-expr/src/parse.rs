//! Lexer and recursive-descent parser for the C subset of kernel bodies.
//!
//! Written by hand rather than with a parser crate: the grammar is a small, fixed slice of C
//! (expressions with C's precedence, declarations, assignments, `if`/`else`), and what
//! matters is the error for everything outside it ("`for` loops are not supported ... at
//! line 2, column 5"), which a hand-written parser names construct by construct; a generated
//! or combinator grammar for full C would accept far more than the evaluator can run and
//! report the rest as generic syntax errors.

use kiln_core::Error;

use crate::lex::{lex, Tok};
use crate::types::ScalarType;

/// A position in the source: 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.col)
    }
}

/// A type as written: a concrete type or a placeholder bound at call time.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TypeName {
    Concrete(ScalarType),
    Placeholder(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    BitAnd,
    BitOr,
    BitXor,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub(crate) fn c(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Rem => "%",
            Shl => "<<",
            Shr => ">>",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Eq => "==",
            Ne => "!=",
            And => "&&",
            Or => "||",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Plus,
    Not,
    BitNot,
}

#[derive(Clone, Debug)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
pub(crate) enum ExprKind {
    Int {
        v: u64,
        unsigned: bool,
        long: bool,
        hex: bool,
    },
    Float {
        v: f64,
        single: bool,
    },
    Bool(bool),
    Ident(String),
    Call(String, Vec<Expr>),
    /// `obj.method()`: `_ind.size()` and `x.size()`.
    Method(String, String),
    Index(String, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(TypeName, Box<Expr>),
    /// `T(re, im)`: a complex value from its parts (the type must be complex).
    Complex(TypeName, Box<Expr>, Box<Expr>),
    Assign(Option<BinOp>, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    Decl {
        ty: TypeName,
        vars: Vec<(String, Option<Expr>, Pos)>,
    },
    Expr(Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    Block(Vec<Stmt>),
}

pub(crate) struct Parser<'a> {
    toks: Vec<(Tok, Pos)>,
    at: usize,
    placeholders: &'a [String],
    what: String,
    op: String,
}

const TYPE_WORDS: [&str; 6] = ["unsigned", "signed", "long", "short", "int", "char"];

impl<'a> Parser<'a> {
    /// A parser over `src` (the part of the kernel named `what`, e.g. "operation"), where the
    /// identifiers in `placeholders` name types.
    pub(crate) fn new(src: &str, placeholders: &'a [String], what: &str, op: &str) -> Result<Self, Error> {
        Ok(Parser {
            toks: lex(src, what, op)?,
            at: 0,
            placeholders,
            what: what.into(),
            op: op.into(),
        })
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.at].0
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.at + k).min(self.toks.len() - 1)].0
    }
    fn pos(&self) -> Pos {
        self.toks[self.at].1
    }
    fn bump(&mut self) -> (Tok, Pos) {
        let t = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        t
    }
    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.bump();
            true
        } else {
            false
        }
    }
    pub(crate) fn err(&self, pos: Pos, msg: impl std::fmt::Display) -> Error {
        Error::invalid(&self.op, format!("{}: {msg} at {pos}", self.what))
    }
    fn expect(&mut self, p: &str) -> Result<(), Error> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(self.err(self.pos(), format!("expected `{p}`, found {}", self.describe())))
        }
    }
    fn describe(&self) -> String {
        match self.peek() {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int { v, .. } => format!("`{v}`"),
            Tok::Float { v, .. } => format!("`{v}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "the end".into(),
        }
    }

    /// Whether a type name starts here.
    fn at_type(&self) -> bool {
        match self.peek() {
            Tok::Ident(s) => {
                TYPE_WORDS.contains(&s.as_str())
                    || s == "const"
                    || self.placeholders.iter().any(|p| p == s)
                    || matches!(ScalarType::from_name(s), Ok(Some(_)) | Err(_))
            }
            _ => false,
        }
    }

    /// Parses a type name (without `const`).
    fn type_name(&mut self) -> Result<TypeName, Error> {
        let pos = self.pos();
        let mut words = Vec::new();
        while let Tok::Ident(s) = self.peek() {
            if TYPE_WORDS.contains(&s.as_str()) {
                words.push(s.clone());
                self.bump();
            } else {
                break;
            }
        }
        if words.is_empty() {
            let Tok::Ident(s) = self.peek().clone() else {
                return Err(self.err(pos, format!("expected a type, found {}", self.describe())));
            };
            self.bump();
            if self.placeholders.contains(&s) {
                return Ok(TypeName::Placeholder(s));
            }
            if s == "complex" && self.is_punct("<") {
                return self.complex_type(pos);
            }
            return match ScalarType::from_name(&s)? {
                Some(t) => Ok(TypeName::Concrete(t)),
                None => Err(self.err(pos, format!("`{s}` is not a type"))),
            };
        }
        let joined = words.join(" ");
        match ScalarType::from_name(&joined)? {
            Some(t) => Ok(TypeName::Concrete(t)),
            None => Err(self.err(pos, format!("`{joined}` is not a supported type"))),
        }
    }

    /// The rest of `complex<float>` or `complex<double>` after `complex`.
    fn complex_type(&mut self, pos: Pos) -> Result<TypeName, Error> {
        self.expect("<")?;
        let part = self.type_name()?;
        self.expect(">")?;
        match part {
            TypeName::Concrete(ScalarType::F32) => Ok(TypeName::Concrete(ScalarType::C64)),
            TypeName::Concrete(ScalarType::F64) => Ok(TypeName::Concrete(ScalarType::C128)),
            TypeName::Concrete(t) => Err(self.err(
                pos,
                format!("`complex<{}>` is not supported; use complex<float> or complex<double>", t.c_name()),
            )),
            TypeName::Placeholder(p) => Err(self.err(
                pos,
                format!("`complex<{p}>` is not supported; declare the parameter complex64 or complex128, or give it a placeholder type bound to a complex array"),
            )),
        }
    }

    /// After a functional cast's type and `(`: `T(x)` or, for a complex `T`, `T(re, im)`.
    fn functional_cast(&mut self, ty: TypeName) -> Result<ExprKind, Error> {
        let e = self.assignment()?;
        let kind = if self.eat(",") {
            let im = self.assignment()?;
            ExprKind::Complex(ty, Box::new(e), Box::new(im))
        } else {
            ExprKind::Cast(ty, Box::new(e))
        };
        self.expect(")")?;
        Ok(kind)
    }

    /// Parses a whole statement list (the kernel body).
    pub(crate) fn statements(&mut self) -> Result<Vec<Stmt>, Error> {
        let mut out = Vec::new();
        while !matches!(self.peek(), Tok::Eof) {
            if let Some(s) = self.statement()? {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Parses one expression that must span the whole source.
    pub(crate) fn whole_expr(&mut self) -> Result<Expr, Error> {
        let e = self.expr()?;
        if !matches!(self.peek(), Tok::Eof) {
            return Err(self.err(
                self.pos(),
                format!("unexpected {} after the expression", self.describe()),
            ));
        }
        Ok(e)
    }

    fn block_or_statement(&mut self) -> Result<Vec<Stmt>, Error> {
        if self.eat("{") {
            let mut v = Vec::new();
            while !self.eat("}") {
                if matches!(self.peek(), Tok::Eof) {
                    return Err(self.err(self.pos(), "missing `}`"));
                }
                if let Some(s) = self.statement()? {
                    v.push(s);
                }
            }
            Ok(v)
        } else {
            Ok(self.statement()?.into_iter().collect())
        }
    }

    fn statement(&mut self) -> Result<Option<Stmt>, Error> {
        let pos = self.pos();
        if self.eat(";") {
            return Ok(None);
        }
        if self.is_punct("{") {
            return Ok(Some(Stmt::Block(self.block_or_statement()?)));
        }
        if self.is_punct("#") {
            return Err(self.err(pos, "preprocessor directives are not supported in the operation (a GPU-only kernel may put them in its preamble)"));
        }
        if let Tok::Ident(s) = self.peek().clone() {
            match s.as_str() {
                "if" => {
                    self.bump();
                    self.expect("(")?;
                    let c = self.expr()?;
                    self.expect(")")?;
                    let t = self.block_or_statement()?;
                    let e = if matches!(self.peek(), Tok::Ident(w) if w == "else") {
                        self.bump();
                        self.block_or_statement()?
                    } else {
                        Vec::new()
                    };
                    return Ok(Some(Stmt::If(c, t, e)));
                }
                "for" | "while" | "do" => {
                    return Err(self.err(pos, format!("`{s}` loops are not supported by kiln's expression compiler; write the loop in a raw kernel")))
                }
                "return" | "break" | "continue" | "goto" | "switch" | "case" => {
                    return Err(self.err(pos, format!("`{s}` is not supported by kiln's expression compiler")))
                }
                "struct" | "class" | "template" | "typedef" | "using" | "auto" | "static" | "extern" | "__device__" | "__shared__" => {
                    return Err(self.err(pos, format!("`{s}` declarations are not supported by kiln's expression compiler")))
                }
                _ => {}
            }
            if self.at_type() && !matches!(self.peek_at(1), Tok::Punct("(")) {
                return self.declaration().map(Some);
            }
        }
        let e = self.expr()?;
        // The last statement may omit its `;` (CuPy appends one to the operation).
        if matches!(self.peek(), Tok::Eof) {
            return Ok(Some(Stmt::Expr(e)));
        }
        self.expect(";").map_err(|_| {
            self.err(
                self.pos(),
                format!("expected `;` after the statement, found {}", self.describe()),
            )
        })?;
        Ok(Some(Stmt::Expr(e)))
    }

    fn declaration(&mut self) -> Result<Stmt, Error> {
        while matches!(self.peek(), Tok::Ident(s) if s == "const") {
            self.bump();
        }
        let ty = self.type_name()?;
        let mut vars = Vec::new();
        loop {
            let pos = self.pos();
            if self.is_punct("*") || self.is_punct("&") {
                return Err(self.err(
                    pos,
                    "pointer and reference declarations are not supported by kiln's expression compiler",
                ));
            }
            let name = match self.bump() {
                (Tok::Ident(n), _) => n,
                _ => return Err(self.err(pos, "expected a variable name in the declaration")),
            };
            if self.is_punct("[") {
                return Err(self.err(
                    pos,
                    "local arrays are not supported by kiln's expression compiler",
                ));
            }
            let init = if self.eat("=") {
                Some(self.assignment()?)
            } else {
                None
            };
            vars.push((name, init, pos));
            if !self.eat(",") {
                break;
            }
        }
        self.expect(";")?;
        Ok(Stmt::Decl { ty, vars })
    }

    fn expr(&mut self) -> Result<Expr, Error> {
        let e = self.assignment()?;
        if self.is_punct(",") {
            return Err(self.err(
                self.pos(),
                "the comma operator is not supported; write separate statements",
            ));
        }
        Ok(e)
    }

    fn assignment(&mut self) -> Result<Expr, Error> {
        let lhs = self.conditional()?;
        let pos = self.pos();
        let op = match self.peek() {
            Tok::Punct("=") => None,
            Tok::Punct("+=") => Some(BinOp::Add),
            Tok::Punct("-=") => Some(BinOp::Sub),
            Tok::Punct("*=") => Some(BinOp::Mul),
            Tok::Punct("/=") => Some(BinOp::Div),
            Tok::Punct("%=") => Some(BinOp::Rem),
            Tok::Punct("&=") => Some(BinOp::BitAnd),
            Tok::Punct("|=") => Some(BinOp::BitOr),
            Tok::Punct("^=") => Some(BinOp::BitXor),
            Tok::Punct("<<=") => Some(BinOp::Shl),
            Tok::Punct(">>=") => Some(BinOp::Shr),
            _ => return Ok(lhs),
        };
        self.bump();
        let rhs = self.assignment()?;
        Ok(Expr {
            kind: ExprKind::Assign(op, Box::new(lhs), Box::new(rhs)),
            pos,
        })
    }

    fn conditional(&mut self) -> Result<Expr, Error> {
        let c = self.binary(0)?;
        if self.is_punct("?") {
            let pos = self.pos();
            self.bump();
            let a = self.assignment()?;
            self.expect(":")?;
            let b = self.conditional()?;
            return Ok(Expr {
                kind: ExprKind::Cond(Box::new(c), Box::new(a), Box::new(b)),
                pos,
            });
        }
        Ok(c)
    }

    fn binop_at(&self) -> Option<(BinOp, u8)> {
        use BinOp::*;
        let Tok::Punct(p) = self.peek() else { return None };
        Some(match *p {
            "||" => (Or, 1),
            "&&" => (And, 2),
            "|" => (BitOr, 3),
            "^" => (BitXor, 4),
            "&" => (BitAnd, 5),
            "==" => (Eq, 6),
            "!=" => (Ne, 6),
            "<" => (Lt, 7),
            "<=" => (Le, 7),
            ">" => (Gt, 7),
            ">=" => (Ge, 7),
            "<<" => (Shl, 8),
            ">>" => (Shr, 8),
            "+" => (Add, 9),
            "-" => (Sub, 9),
            "*" => (Mul, 10),
            "/" => (Div, 10),
            "%" => (Rem, 10),
            _ => return None,
        })
    }

    /// Precedence climbing over C's left-associative binary operators.
    fn binary(&mut self, min: u8) -> Result<Expr, Error> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = self.binop_at() {
            if prec <= min {
                break;
            }
            let pos = self.pos();
            self.bump();
            let rhs = self.binary(prec)?;
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                pos,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        let pos = self.pos();
        let op = match self.peek() {
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("++") | Tok::Punct("--") => {
                return Err(self.err(pos, "`++`/`--` are not supported; write `x += 1`"))
            }
            Tok::Punct("*") | Tok::Punct("&") => {
                return Err(self.err(
                    pos,
                    "pointer dereference and address-of are not supported by kiln's expression compiler",
                ))
            }
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let e = self.unary()?;
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(e)),
                pos,
            });
        }
        // A cast `(type) expr`.
        if self.is_punct("(") {
            let save = self.at;
            self.bump();
            if self.at_type() {
                while matches!(self.peek(), Tok::Ident(s) if s == "const") {
                    self.bump();
                }
                let ty = self.type_name()?;
                if self.is_punct("*") {
                    return Err(self.err(
                        pos,
                        "pointer casts are not supported by kiln's expression compiler",
                    ));
                }
                self.expect(")")?;
                let e = self.unary()?;
                return Ok(Expr {
                    kind: ExprKind::Cast(ty, Box::new(e)),
                    pos,
                });
            }
            self.at = save;
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, Error> {
        let e = self.primary()?;
        if matches!(self.peek(), Tok::Punct("++") | Tok::Punct("--")) {
            return Err(self.err(self.pos(), "`++`/`--` are not supported; write `x += 1`"));
        }
        if self.is_punct("->") {
            return Err(self.err(self.pos(), "`->` is not supported by kiln's expression compiler"));
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        let pos = self.pos();
        let (tok, _) = self.bump();
        let kind = match tok {
            Tok::Int {
                v,
                unsigned,
                long,
                hex,
            } => ExprKind::Int {
                v,
                unsigned,
                long,
                hex,
            },
            Tok::Float { v, single } => ExprKind::Float { v, single },
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            Tok::Ident(name) => {
                if name == "true" || name == "false" {
                    ExprKind::Bool(name == "true")
                } else if name == "static_cast" {
                    self.expect("<")?;
                    let ty = self.type_name()?;
                    self.expect(">")?;
                    self.expect("(")?;
                    let e = self.expr()?;
                    self.expect(")")?;
                    ExprKind::Cast(ty, Box::new(e))
                } else if matches!(
                    name.as_str(),
                    "reinterpret_cast" | "const_cast" | "dynamic_cast" | "sizeof" | "new" | "delete" | "this"
                ) {
                    return Err(self.err(
                        pos,
                        format!("`{name}` is not supported by kiln's expression compiler"),
                    ));
                } else if self.is_punct("(")
                    && (self.placeholders.contains(&name)
                        || matches!(ScalarType::from_name(&name), Ok(Some(_))))
                {
                    // Functional cast `float(x)`, `T(x)`, and `T(re, im)` for a complex `T`.
                    self.at -= 1;
                    let ty = self.type_name()?;
                    self.expect("(")?;
                    self.functional_cast(ty)?
                } else if name == "complex" && self.is_punct("<") {
                    // `complex<float>(re, im)`, `complex<double>(x)`.
                    let ty = self.complex_type(pos)?;
                    self.expect("(")?;
                    self.functional_cast(ty)?
                } else if self.eat("(") {
                    let mut args = Vec::new();
                    if !self.eat(")") {
                        loop {
                            args.push(self.assignment()?);
                            if self.eat(")") {
                                break;
                            }
                            self.expect(",")?;
                        }
                    }
                    ExprKind::Call(name, args)
                } else if self.is_punct("<")
                    && matches!(self.peek_at(1), Tok::Ident(_))
                    && matches!(self.peek_at(2), Tok::Punct(">"))
                {
                    return Err(self.err(
                        pos,
                        format!(
                            "the template call `{name}<...>` is not supported by kiln's expression compiler"
                        ),
                    ));
                } else if self.eat("[") {
                    let idx = self.expr()?;
                    self.expect("]")?;
                    if self.is_punct("[") {
                        return Err(self.err(self.pos(), "multi-dimensional indexing is not supported; index raw arrays with one flat index"));
                    }
                    ExprKind::Index(name, Box::new(idx))
                } else if self.eat(".") {
                    let mpos = self.pos();
                    let Tok::Ident(m) = self.bump().0 else {
                        return Err(self.err(mpos, "expected a method name after `.`"));
                    };
                    if !(self.eat("(") && self.eat(")")) {
                        return Err(self.err(
                            mpos,
                            format!("`{name}.{m}` is not supported; only `_ind.size()` and `x.size()` are"),
                        ));
                    }
                    ExprKind::Method(name, m)
                } else if self.is_punct("::") {
                    return Err(self.err(
                        pos,
                        format!(
                            "the qualified name `{name}::...` is not supported by kiln's expression compiler"
                        ),
                    ));
                } else {
                    ExprKind::Ident(name)
                }
            }
            Tok::Punct(p) => return Err(self.err(pos, format!("unexpected `{p}`"))),
            Tok::Eof => return Err(self.err(pos, "unexpected end of the source (an expression is missing)")),
        };
        Ok(Expr { kind, pos })
    }
}

/// The reason of an error, without its operation prefix (kept to be re-raised later).
pub(crate) fn reason(e: Error) -> String {
    match e {
        Error::InvalidArgument { reason, .. } => reason,
        e => e.to_string(),
    }
}
