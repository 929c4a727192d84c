//! The parameter lists of the `__global__` functions in a user's CUDA C++ source, so a
//! launch can check each argument against the parameter it fills.
//!
//! Written by hand rather than with a parser crate: only a declaration's parameter list is
//! read (scalars and pointers of the numeric types, qualifiers, comments), and the C/C++
//! parser crates either reject C++ and CUDA (`lang-c` parses preprocessed C11 only, no
//! `extern "C"`, no `__global__`) or pull in a C toolchain and a whole C++ grammar
//! (tree-sitter) to read a few tokens. Whatever this reader does not understand (templates,
//! structs, vector types, references, macros in a declaration) is reported as "cannot be
//! parsed", never guessed: such a kernel is launched through an explicit signature.

use kiln_core::DType;
use std::collections::BTreeMap;

/// A scalar type of a kernel parameter (or the element type a pointer parameter points to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// `bool`.
    Bool,
    /// `char`, `signed char`, `int8_t`.
    I8,
    /// `short`, `int16_t`.
    I16,
    /// `int`, `int32_t`.
    I32,
    /// `long`, `long long`, `int64_t`, `ptrdiff_t` (64-bit on Linux).
    I64,
    /// `unsigned char`, `uint8_t`.
    U8,
    /// `unsigned short`, `uint16_t`.
    U16,
    /// `unsigned`, `unsigned int`, `uint32_t`.
    U32,
    /// `unsigned long`, `unsigned long long`, `uint64_t`, `size_t`.
    U64,
    /// `__half`, `half`.
    F16,
    /// `__nv_bfloat16`, `nv_bfloat16`.
    BF16,
    /// `float`.
    F32,
    /// `double`.
    F64,
}

impl ScalarType {
    /// Bytes of one value.
    pub const fn size_bytes(self) -> usize {
        use ScalarType::*;
        match self {
            Bool | I8 | U8 => 1,
            I16 | U16 | F16 | BF16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 => 8,
        }
    }

    /// Whether it is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 | ScalarType::F64
        )
    }

    /// The element type of a tensor dtype.
    pub fn of_dtype(d: DType) -> ScalarType {
        match d {
            DType::F32 => ScalarType::F32,
            DType::F64 => ScalarType::F64,
            DType::F16 => ScalarType::F16,
            DType::BF16 => ScalarType::BF16,
            DType::U8 => ScalarType::U8,
            DType::U16 => ScalarType::U16,
        }
    }

    /// The tensor dtype with this element type, if kiln's tensors have one.
    pub fn dtype(self) -> Option<DType> {
        match self {
            ScalarType::F32 => Some(DType::F32),
            ScalarType::F64 => Some(DType::F64),
            ScalarType::F16 => Some(DType::F16),
            ScalarType::BF16 => Some(DType::BF16),
            ScalarType::U8 => Some(DType::U8),
            ScalarType::U16 => Some(DType::U16),
            _ => None,
        }
    }

    /// The C spelling kiln reports it with.
    pub fn c_name(self) -> &'static str {
        use ScalarType::*;
        match self {
            Bool => "bool",
            I8 => "signed char",
            I16 => "short",
            I32 => "int",
            I64 => "long long",
            U8 => "unsigned char",
            U16 => "unsigned short",
            U32 => "unsigned int",
            U64 => "unsigned long long",
            F16 => "__half",
            BF16 => "__nv_bfloat16",
            F32 => "float",
            F64 => "double",
        }
    }
}

/// What one parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// A value of this type.
    Scalar(ScalarType),
    /// A device pointer to elements of this type; `None` for `void*`, which takes a buffer of
    /// any dtype.
    Pointer(Option<ScalarType>),
}

impl ParamType {
    /// Bytes the parameter occupies in the kernel's parameter buffer.
    pub fn size_bytes(self) -> usize {
        match self {
            ParamType::Scalar(s) => s.size_bytes(),
            ParamType::Pointer(_) => 8,
        }
    }
}

/// One parameter as declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its type.
    pub ty: ParamType,
    /// Its name, when the declaration gives one.
    pub name: Option<String>,
    /// The declaration as written (for error messages), whitespace normalised.
    pub text: String,
}

/// A kernel's name and parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The function's name.
    pub name: String,
    /// Its parameters, in order.
    pub params: Vec<Param>,
}

/// Every `__global__` function of `source` by name, each with its parsed signature or why it
/// cannot be parsed. Functions whose name cannot be found at all are left out.
/// A name declared twice with different parameter lists (C++ overloads, or templates of one
/// name) maps to why it cannot be told apart; a declaration repeated with the same list (a
/// forward declaration and its definition) is one kernel.
pub fn kernels(source: &str) -> BTreeMap<String, std::result::Result<Signature, String>> {
    let toks = tokens(source);
    let mut out: BTreeMap<String, std::result::Result<Signature, String>> = BTreeMap::new();
    for (i, t) in toks.iter().enumerate() {
        if t != "__global__" {
            continue;
        }
        if let Some((name, parsed)) = declaration(&toks, i) {
            let same = match (out.get(&name), &parsed) {
                (None, _) => true,
                (Some(Ok(a)), Ok(b)) => a.params.iter().map(|p| p.ty).eq(b.params.iter().map(|p| p.ty)),
                (Some(Err(_)), Err(_)) => continue,
                _ => false,
            };
            let entry = if same {
                parsed
            } else {
                Err(format!(
                    "`{name}` is declared more than once with different parameters (overloads): kiln cannot tell which one a launch means"
                ))
            };
            out.insert(name, entry);
        }
    }
    out
}

/// The parameters of the template kernel instantiation `expr` (a name expression such as
/// `my_sqrt<int>` or `axpy<float, double>`), read from `source` by putting the arguments in
/// place of the template's type parameters, when every template parameter is a type
/// (`typename T`, `class T`, no default), every argument is a scalar type kiln checks
/// (`int`, `unsigned int`, `float`, `double`, `int64_t`, ...) and one template of that name
/// is declared. `None` otherwise: the arguments are then checked by size alone.
pub fn instantiate(source: &str, expr: &str) -> Option<Vec<Param>> {
    let (base, args) = split_name_expression(expr)?;
    let toks = tokens(source);
    let mut found = None;
    for (i, t) in toks.iter().enumerate() {
        if t != "__global__" {
            continue;
        }
        let Some(tpl) = template_before(&toks, i) else {
            continue;
        };
        let Some((name, inner)) = declaration_tokens(&toks, i) else {
            continue;
        };
        if name != base {
            continue;
        }
        if found.is_some() {
            // two templates of one name: which one `expr` means is C++ overload resolution
            return None;
        }
        found = Some((tpl, inner));
    }
    let (tpl, inner) = found?;
    let names: Vec<&str> = split_top(tpl)
        .into_iter()
        .map(|p| match p {
            [kw, name] if (kw == "typename" || kw == "class") && is_ident(name) => Some(name.as_str()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if names.len() != args.len() {
        return None;
    }
    let mut subst: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (n, a) in names.iter().zip(&args) {
        let words: Vec<&str> = a.iter().map(String::as_str).collect();
        if !words.iter().all(|w| is_ident(w)) {
            return None;
        }
        scalar_type(&words)?;
        subst.insert(n, a.clone());
    }
    let replaced: Vec<String> = inner
        .iter()
        .flat_map(|t| subst.get(t.as_str()).cloned().unwrap_or_else(|| vec![t.clone()]))
        .collect();
    params(&replaced).ok()
}

/// `my_sqrt<int, float>` -> (`my_sqrt`, [[`int`], [`float`]]); `None` for anything but a
/// plain identifier followed by a template argument list.
fn split_name_expression(expr: &str) -> Option<(String, Vec<Vec<String>>)> {
    let toks = tokens(expr);
    let (base, rest) = toks.split_first()?;
    if !is_ident(base)
        || rest.first().map(String::as_str) != Some("<")
        || rest.last().map(String::as_str) != Some(">")
    {
        return None;
    }
    let inner = &rest[1..rest.len() - 1];
    let args: Vec<Vec<String>> = split_top(inner).into_iter().map(<[String]>::to_vec).collect();
    if args.iter().any(Vec::is_empty) {
        return None;
    }
    Some((base.clone(), args))
}

/// `toks` split at the commas outside brackets.
pub(crate) fn split_top(toks: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (k, t) in toks.iter().enumerate() {
        match t.as_str() {
            "(" | "<" | "[" => depth += 1,
            ")" | ">" | "]" => depth -= 1,
            "," if depth == 0 => {
                out.push(&toks[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    if start < toks.len() || !out.is_empty() {
        out.push(&toks[start..]);
    }
    out
}

/// The tokens between `template <` and its `>` when the declaration at `toks[at]` (its
/// `__global__`) is a template.
fn template_before(toks: &[String], at: usize) -> Option<&[String]> {
    let kw = toks[..at]
        .iter()
        .rposition(|t| t == "template" || t == ";" || t == "}" || t == "{")?;
    if toks[kw] != "template" || toks.get(kw + 1).map(String::as_str) != Some("<") {
        return None;
    }
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().take(at).skip(kw + 1) {
        match t.as_str() {
            "<" => depth += 1,
            ">" => {
                depth -= 1;
                if depth == 0 {
                    return Some(&toks[kw + 2..k]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parse a parameter list written out by the caller, e.g. `"const float* x, int n"` (the
/// text between a declaration's parentheses).
pub fn parse_params(list: &str) -> std::result::Result<Vec<Param>, String> {
    let toks = tokens(list);
    if toks.iter().any(|t| t == "(" || t == ")") {
        return Err(format!(
            "`{list}` is not a parameter list: give only what is between the parentheses, e.g. \"const float* x, int n\""
        ));
    }
    params(&toks)
}

/// The name and parameters of the `__global__` declaration whose keyword is `toks[at]`.
fn declaration(toks: &[String], at: usize) -> Option<(String, std::result::Result<Signature, String>)> {
    // `template <...>` before the keyword (since the previous declaration) mangles the name
    let templated = toks[..at]
        .iter()
        .rev()
        .take_while(|t| *t != ";" && *t != "}" && *t != "{")
        .any(|t| t == "template");
    let (name, inner) = declaration_tokens(toks, at)?;
    if templated {
        return Some((
            name.clone(),
            Err(format!(
                "`{name}` is a template: its symbol is mangled and its parameter types depend on the instantiation (name it in name_expressions)"
            )),
        ));
    }
    let parsed = params(inner).map(|params| Signature {
        name: name.clone(),
        params,
    });
    Some((name, parsed))
}

/// The name and the tokens between the parentheses of the `__global__` declaration whose
/// keyword is `toks[at]`.
pub(crate) fn declaration_tokens(toks: &[String], at: usize) -> Option<(String, &[String])> {
    let mut j = at + 1;
    while j + 1 < toks.len() {
        let t = &toks[j];
        if matches!(
            t.as_str(),
            "__launch_bounds__" | "__cluster_dims__" | "__maxnreg__" | "__attribute__"
        ) {
            j = skip_parens(toks, j + 1)?;
            continue;
        }
        if is_ident(t) && toks[j + 1] == "(" {
            let close = skip_parens(toks, j + 1)?;
            return Some((t.clone(), &toks[j + 2..close - 1]));
        }
        if t == ";" || t == "{" || t == "(" {
            return None;
        }
        j += 1;
    }
    None
}

/// The index after the parenthesised group opening at `toks[open]` (which must be `(`).
fn skip_parens(toks: &[String], open: usize) -> Option<usize> {
    if toks.get(open).map(String::as_str) != Some("(") {
        return None;
    }
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.as_str() {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn params(toks: &[String]) -> std::result::Result<Vec<Param>, String> {
    if toks.is_empty() || (toks.len() == 1 && toks[0] == "void") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (k, t) in toks.iter().enumerate() {
        match t.as_str() {
            "(" | "<" | "[" => depth += 1,
            ")" | ">" | "]" => depth -= 1,
            "," if depth == 0 => {
                out.push(param(&toks[start..k], out.len())?);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(param(&toks[start..], out.len())?);
    Ok(out)
}

const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "__grid_constant__",
];

fn param(toks: &[String], index: usize) -> std::result::Result<Param, String> {
    let text = toks.join(" ").replace(" *", "*");
    let why = |what: &str| Err(format!("parameter {} `{text}`: {what}", index + 1));
    if toks.is_empty() {
        return why("empty parameter");
    }
    if toks.iter().any(|t| t == "<" || t == ">" || t == "::") {
        return why("a template or qualified type name is not understood");
    }
    if toks.iter().any(|t| t == "&") {
        return why("a reference cannot be a kernel parameter kiln fills");
    }
    if toks.iter().any(|t| t == "=") {
        return why("a default argument is not understood");
    }
    let mut stars = toks.iter().filter(|t| *t == "*").count();
    // `float x[]` is a pointer
    if let Some(b) = toks.iter().position(|t| t == "[") {
        if toks[b + 1..].iter().any(|t| t != "]" && t != "[") {
            return why("a sized array parameter is not understood");
        }
        stars += 1;
    }
    if stars > 1 {
        return why("a pointer to pointers is not supported (kiln passes one buffer per pointer parameter)");
    }
    let mut words: Vec<&str> = toks
        .iter()
        .map(String::as_str)
        .filter(|t| is_ident(t) && !QUALIFIERS.contains(t))
        .collect();
    if toks
        .iter()
        .any(|t| !is_ident(t) && !matches!(t.as_str(), "*" | "[" | "]"))
    {
        return why("unexpected symbols");
    }
    let name = match words.last() {
        Some(w) if words.len() > 1 && !is_type_word(w) => {
            let n = w.to_string();
            words.pop();
            Some(n)
        }
        _ => None,
    };
    let ty = match scalar_type(&words) {
        Some(Some(s)) => s,
        Some(None) if stars == 1 => {
            return Ok(Param {
                ty: ParamType::Pointer(None),
                name,
                text,
            })
        }
        Some(None) => return why("a `void` value parameter"),
        None => {
            return why(&format!(
                "type `{}` is not one kiln checks (scalars and pointers of bool, the integer types, __half, __nv_bfloat16, float, double, or void*)",
                words.join(" ")
            ))
        }
    };
    Ok(Param {
        ty: if stars == 1 {
            ParamType::Pointer(Some(ty))
        } else {
            ParamType::Scalar(ty)
        },
        name,
        text,
    })
}

fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "signed" | "unsigned" | "char" | "short" | "int" | "long" | "void"
    ) || typedef(w).is_some()
}

fn typedef(w: &str) -> Option<ScalarType> {
    use ScalarType::*;
    Some(match w {
        "bool" => Bool,
        "int8_t" => I8,
        "int16_t" => I16,
        "int32_t" => I32,
        "int64_t" | "ptrdiff_t" | "ssize_t" | "intptr_t" => I64,
        "uint8_t" => U8,
        "uint16_t" => U16,
        "uint32_t" => U32,
        "uint64_t" | "size_t" | "uintptr_t" => U64,
        "__half" | "half" => F16,
        "__nv_bfloat16" | "nv_bfloat16" => BF16,
        "float" => F32,
        "double" => F64,
        _ => return None,
    })
}

/// The type named by `words` (qualifiers removed): `Some(None)` for `void`, `None` when not
/// understood.
fn scalar_type(words: &[&str]) -> Option<Option<ScalarType>> {
    use ScalarType::*;
    match words {
        [] => return None,
        ["void"] => return Some(None),
        [w] if typedef(w).is_some() => return typedef(w).map(Some),
        _ => {}
    }
    let count = |k: &str| words.iter().filter(|w| **w == k).count();
    if words
        .iter()
        .any(|w| !matches!(*w, "signed" | "unsigned" | "char" | "short" | "int" | "long"))
    {
        return None;
    }
    let (uns, sig, ch, sh, int, long) = (
        count("unsigned"),
        count("signed"),
        count("char"),
        count("short"),
        count("int"),
        count("long"),
    );
    if uns + sig > 1
        || ch > 1
        || sh > 1
        || int > 1
        || long > 2
        || (ch == 1 && (sh + int + long) > 0)
        || (sh == 1 && long > 0)
    {
        return None;
    }
    let u = uns == 1;
    Some(Some(match (ch, sh, long) {
        (1, _, _) => {
            if u {
                U8
            } else {
                I8
            }
        }
        (_, 1, _) => {
            if u {
                U16
            } else {
                I16
            }
        }
        (_, _, 0) => {
            if u {
                U32
            } else {
                I32
            }
        }
        // `long` is 64-bit on Linux, where kiln runs
        _ => {
            if u {
                U64
            } else {
                I64
            }
        }
    }))
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// The source's tokens: identifiers and numbers whole, `::` as one token, every other
/// character alone; comments, string and character literals, and preprocessor lines
/// dropped (except `"C"`, kept so `extern "C"` reads as two tokens).
pub(crate) fn tokens(src: &str) -> Vec<String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // a backslash ending a line splices it to the next (translation phase 2)
        if c == b'\\'
            && (b.get(i + 1) == Some(&b'\n')
                || (b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n')))
        {
            i += if b[i + 1] == b'\r' { 3 } else { 2 };
            continue;
        }
        if line_start && c == b'#' {
            // a directive runs to the end of the line, continued by a backslash
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && i + 1 < b.len() && b[i + 1] == b'\n' {
                    i += 1;
                }
                i += 1;
            }
            continue;
        }
        line_start = false;
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        if c == b'"' || c == b'\'' {
            let s = i;
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            if &src[s..i.min(b.len())] == "\"C\"" {
                out.push("\"C\"".to_string());
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(src[s..i].to_string());
            continue;
        }
        if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push("::".into());
            i += 2;
            continue;
        }
        // one character (a multi-byte UTF-8 character is skipped whole)
        let len = src[i..].chars().next().map_or(1, char::len_utf8);
        out.push(src[i..i + len].to_string());
        i += len;
    }
    out
}

#[cfg(test)]
#[path = "signature_tests.rs"]
mod tests;
