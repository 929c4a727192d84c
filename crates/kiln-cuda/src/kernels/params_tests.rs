//! Every kernel's declared parameters against its `extern "C" __global__` declaration in
//! the embedded source: count, order, pointer element types and constness, scalar types,
//! and by-value structs by name and size (the size computed from the struct's definition).
//!
//! kiln's sources declare most kernels through a macro (`KILN_MC_KERNEL(name, ...)`) and
//! name their own integer types (`u32`, `i64`, `SF16::T`), so the source is read the way the
//! preprocessor would for these cases: continued lines joined, the kernel-defining macros
//! expanded at their invocations, object-like macros (`KILN_GEMM_ARGS`) expanded inside a
//! parameter list, file-scope typedefs and `struct X { typedef ... T; }` members resolved.
//! The parameter reader is the one users' sources go through (`user::signature`).

use super::{Access, KernelParam, ScalarType};
use crate::kernels::Kernel;
use crate::user::signature::{declaration_tokens, parse_params, split_top, tokens, ParamType};
use std::collections::BTreeMap;

/// A `#define`: its parameters (`None` for an object-like macro) and its body.
struct Define {
    params: Option<Vec<String>>,
    body: String,
}

/// One module's source, read for declarations.
struct Source {
    /// The source with the kernel-defining macros expanded (directives still in place).
    expanded: String,
    defines: BTreeMap<String, Define>,
    /// File-scope `typedef <words> NAME;`.
    typedefs: BTreeMap<String, Vec<String>>,
    /// `struct X { typedef <words> T; ... }`: (X, T) -> words.
    members: BTreeMap<(String, String), Vec<String>>,
    /// File-scope `struct NAME { ... };` bodies.
    structs: BTreeMap<String, String>,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `text` with every identifier found in `map` replaced by its value.
fn replace_idents(text: &str, map: &BTreeMap<&str, &str>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if is_ident_start(b[i]) && (i == 0 || !is_ident_char(b[i - 1])) {
            let s = i;
            while i < b.len() && is_ident_char(b[i]) {
                i += 1;
            }
            let id = &text[s..i];
            out.push_str(map.get(id).copied().unwrap_or(id));
        } else {
            let len = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + len]);
            i += len;
        }
    }
    out
}

/// The arguments of the invocation whose `(` is at `open`, split at top-level commas, and
/// the index after its `)`.
fn invocation_args(text: &str, open: usize) -> Option<(Vec<String>, usize)> {
    let b = text.as_bytes();
    let (mut depth, mut start, mut args) = (0usize, open + 1, Vec::new());
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    args.push(text[start..k].trim().to_string());
                    return Some((args, k + 1));
                }
            }
            b',' if depth == 1 => {
                args.push(text[start..k].trim().to_string());
                start = k + 1;
            }
            _ => {}
        }
    }
    None
}

impl Source {
    fn read(raw: &str) -> Source {
        let joined = raw.replace("\\\r\n", " ").replace("\\\n", " ");
        let mut defines = BTreeMap::new();
        let mut typedefs = BTreeMap::new();
        for line in joined.lines() {
            let t = line.trim_start();
            if let Some(rest) = t.strip_prefix("#define") {
                let rest = rest.trim_start();
                let end = rest.bytes().position(|c| !is_ident_char(c)).unwrap_or(rest.len());
                let name = rest[..end].to_string();
                let after = &rest[end..];
                let (params, body) = match after.strip_prefix('(') {
                    Some(p) => {
                        let close = p.find(')').unwrap_or(p.len());
                        let ps = p[..close].split(',').map(|s| s.trim().to_string()).collect();
                        (Some(ps), p[close + 1..].to_string())
                    }
                    None => (None, after.to_string()),
                };
                defines.insert(name, Define { params, body });
            } else if let Some(rest) = line.strip_prefix("typedef ") {
                let words: Vec<String> = tokens(rest).into_iter().take_while(|w| w != ";").collect();
                if let Some((name, ty)) = words.split_last() {
                    typedefs.insert(name.clone(), ty.to_vec());
                }
            }
        }
        // Expand the macros that define kernels at their invocations (outside directives).
        let mut expanded = String::new();
        for line in joined.lines() {
            if line.trim_start().starts_with('#') {
                expanded.push_str(line);
            } else {
                expanded.push_str(&Self::expand_kernel_macros(line, &defines));
            }
            expanded.push('\n');
        }
        let toks = tokens(&joined);
        let mut members = BTreeMap::new();
        let mut structs = BTreeMap::new();
        for (i, t) in toks.iter().enumerate() {
            if t != "struct" || toks.get(i + 2).map(String::as_str) != Some("{") {
                continue;
            }
            let name = toks[i + 1].clone();
            let close = toks[i + 2..]
                .iter()
                .position(|t| t == "}")
                .map_or(toks.len(), |p| i + 2 + p);
            let body = &toks[i + 3..close];
            structs.insert(name.clone(), body.join(" "));
            // `typedef <words> T;` members
            for (k, w) in body.iter().enumerate() {
                if w == "typedef" {
                    let end = body[k..]
                        .iter()
                        .position(|t| t == ";")
                        .map_or(body.len(), |p| k + p);
                    if let Some((m, ty)) = body[k + 1..end].split_last() {
                        members.insert((name.clone(), m.clone()), ty.to_vec());
                    }
                }
            }
        }
        Source {
            expanded,
            defines,
            typedefs,
            members,
            structs,
        }
    }

    fn expand_kernel_macros(line: &str, defines: &BTreeMap<String, Define>) -> String {
        let mut out = line.to_string();
        for (name, d) in defines {
            let Some(params) = &d.params else { continue };
            if !d.body.contains("__global__") {
                continue;
            }
            let pat = format!("{name}(");
            while let Some(at) = out.find(&pat) {
                if at > 0 && is_ident_char(out.as_bytes()[at - 1]) {
                    break;
                }
                let Some((args, end)) = invocation_args(&out, at + name.len()) else {
                    break;
                };
                let map: BTreeMap<&str, &str> = params
                    .iter()
                    .map(String::as_str)
                    .zip(args.iter().map(String::as_str))
                    .collect();
                let body = replace_idents(&d.body, &map);
                out = format!("{}{}{}", &out[..at], body, &out[end..]);
            }
        }
        out
    }

    /// The parameter tokens of `symbol`'s `__global__` declaration (object-like macros in
    /// it expanded); every declaration of the symbol must list the same tokens.
    fn param_tokens(&self, symbol: &str) -> Result<Vec<String>, String> {
        let toks = tokens(&self.expanded);
        let mut found: Option<Vec<String>> = None;
        for (i, t) in toks.iter().enumerate() {
            if t != "__global__" {
                continue;
            }
            let Some((name, inner)) = declaration_tokens(&toks, i) else {
                continue;
            };
            if name != symbol {
                continue;
            }
            let inner = self.expand_objects(inner);
            match &found {
                Some(prev) if *prev != inner => {
                    return Err(format!("{symbol}: declared twice with different parameters"))
                }
                _ => found = Some(inner),
            }
        }
        found.ok_or_else(|| format!("{symbol}: no `__global__` declaration found in the source"))
    }

    fn expand_objects(&self, toks: &[String]) -> Vec<String> {
        let mut cur = toks.to_vec();
        for _ in 0..8 {
            let mut changed = false;
            let mut next = Vec::new();
            for t in &cur {
                match self.defines.get(t) {
                    Some(Define { params: None, body }) => {
                        next.extend(tokens(body));
                        changed = true;
                    }
                    _ => next.push(t.clone()),
                }
            }
            cur = next;
            if !changed {
                break;
            }
        }
        cur
    }

    /// `toks` with `X :: T` struct members and file-scope typedefs resolved.
    fn resolve(&self, toks: &[String]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            if toks.get(i + 1).map(String::as_str) == Some("::") {
                if let Some(ty) = toks
                    .get(i + 2)
                    .and_then(|m| self.members.get(&(toks[i].clone(), m.clone())))
                {
                    out.extend(ty.iter().cloned());
                    i += 3;
                    continue;
                }
            }
            out.push(toks[i].clone());
            i += 1;
        }
        for _ in 0..4 {
            out = out
                .into_iter()
                .flat_map(|t| self.typedefs.get(&t).cloned().unwrap_or_else(|| vec![t]))
                .collect();
        }
        out
    }

    /// The scalar type named by `words` (typedefs resolved), through the user reader.
    fn scalar(&self, words: &[String]) -> Option<ScalarType> {
        let text = format!("{} x", self.resolve(words).join(" "));
        match parse_params(&text).ok()?.first()?.ty {
            ParamType::Scalar(s) => Some(s),
            ParamType::Pointer(_) => None,
        }
    }

    /// `sizeof(struct name)` from its definition: fields of scalar types and arrays of
    /// them, C layout (each field aligned to its size, the whole to the largest).
    fn struct_size(&self, name: &str) -> Result<usize, String> {
        let body = self
            .structs
            .get(name)
            .ok_or_else(|| format!("struct {name} is not defined"))?;
        let (mut off, mut align) = (0usize, 1usize);
        for field in body.split(';').map(str::trim).filter(|f| !f.is_empty()) {
            let toks = tokens(field);
            // the type is the words before the first declarator: declarators are split
            // by commas; the first one's name is the last identifier before `[` or `,`
            let first_end = toks
                .iter()
                .position(|t| t == "[" || t == ",")
                .unwrap_or(toks.len());
            if first_end < 2 {
                return Err(format!("struct {name}: cannot read field `{field}`"));
            }
            let ty = &toks[..first_end - 1];
            let s = self
                .scalar(ty)
                .ok_or_else(|| format!("struct {name}: field `{field}` is not of a scalar type"))?
                .size_bytes();
            let decls = split_top(&toks[first_end - 1..]);
            for d in decls {
                let mut count = 1usize;
                for w in d.windows(3) {
                    if w[0] == "[" && w[2] == "]" {
                        count *= w[1]
                            .parse::<usize>()
                            .map_err(|_| format!("struct {name}: array size `{}`", w[1]))?;
                    }
                }
                off = off.next_multiple_of(s) + s * count;
                align = align.max(s);
            }
        }
        Ok(off.next_multiple_of(align))
    }

    /// What the source declares for one parameter.
    fn param(&self, toks: &[String]) -> Result<KernelParam, String> {
        let text = toks.join(" ");
        let resolved = self.resolve(toks);
        let is_ptr = resolved.iter().any(|t| t == "*");
        if !is_ptr {
            if let Some(name) = resolved.iter().find(|t| self.structs.contains_key(*t)) {
                let bytes = self.struct_size(name)?;
                let name: &'static str = Box::leak(name.clone().into_boxed_str());
                return Ok(KernelParam::Struct {
                    name,
                    bytes: bytes as u32,
                });
            }
        }
        let p = parse_params(&resolved.join(" ")).map_err(|e| format!("`{text}`: {e}"))?;
        let [p] = p.as_slice() else {
            return Err(format!("`{text}` is not one parameter"));
        };
        Ok(match p.ty {
            ParamType::Scalar(s) => KernelParam::Scalar(s),
            ParamType::Pointer(elem) => {
                let star = resolved.iter().position(|t| t == "*").unwrap_or(0);
                let is_const = resolved[..star].iter().any(|t| t == "const");
                KernelParam::Pointer {
                    elem,
                    // constness is what the source can say: `In` for const, else unknown
                    access: if is_const { Access::In } else { Access::InOut },
                }
            }
        })
    }
}

/// Whether a declared parameter agrees with what the source says.
fn agrees(declared: KernelParam, source: KernelParam) -> bool {
    match (declared, source) {
        (KernelParam::Pointer { elem: a, access: da }, KernelParam::Pointer { elem: b, access: sa }) => {
            a == b && (sa != Access::In || da == Access::In)
        }
        (a, b) => a == b,
    }
}

#[test]
fn every_declared_signature_matches_its_source() {
    let mut sources: BTreeMap<&str, Source> = BTreeMap::new();
    let mut failures = Vec::new();
    for k in Kernel::ALL {
        let m = k.module();
        let src = sources.entry(m.name).or_insert_with(|| Source::read(m.source));
        let inner = match src.param_tokens(k.symbol()) {
            Ok(t) => t,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let parsed: Result<Vec<KernelParam>, String> = split_top(&inner)
            .into_iter()
            .filter(|p| !p.is_empty() && *p != ["void"])
            .map(|p| src.param(p))
            .collect();
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {e}", k.symbol()));
                continue;
            }
        };
        let declared = k.params();
        if declared.len() != parsed.len() {
            failures.push(format!(
                "{}: {} parameters declared, the source has {}: {:?}",
                k.symbol(),
                declared.len(),
                parsed.len(),
                parsed.iter().map(|p| p.c_type()).collect::<Vec<_>>()
            ));
            continue;
        }
        for (i, (d, s)) in declared.iter().zip(&parsed).enumerate() {
            if !agrees(*d, *s) {
                failures.push(format!(
                    "{}: parameter {} declared {:?} ({}), the source has {:?} ({})",
                    k.symbol(),
                    i + 1,
                    d,
                    d.c_type(),
                    s,
                    s.c_type()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_reader_follows_macros_typedefs_and_structs() {
    let src = Source::read(concat!(
        "typedef unsigned long long u64;\n",
        "struct S16 { typedef unsigned short T; };\n",
        "struct Win { int lo[3]; int D, H, W; short s[3]; };\n",
        "#define ARGS const float* __restrict__ a, \\\n    u64 n\n",
        "#define K(NAME, S) \\\n  extern \"C\" __global__ void __launch_bounds__(256, 2) NAME(const S::T* x, Win w, ARGS) {}\n",
        "K(k_one, S16)\n",
    ));
    let toks = src.param_tokens("k_one").expect("declared");
    let params: Vec<KernelParam> = split_top(&toks)
        .into_iter()
        .map(|p| src.param(p).expect("parsed"))
        .collect();
    assert_eq!(
        params,
        [
            KernelParam::Pointer {
                elem: Some(ScalarType::U16),
                access: Access::In
            },
            KernelParam::Struct {
                name: "Win",
                bytes: 3 * 4 + 3 * 4 + 3 * 2 + 2
            },
            KernelParam::Pointer {
                elem: Some(ScalarType::F32),
                access: Access::In
            },
            KernelParam::Scalar(ScalarType::U64),
        ]
    );
    assert!(src.param_tokens("k_two").is_err());
    // a const pointer declared as written is a disagreement; a non-const one may be any
    assert!(!agrees(
        KernelParam::Pointer {
            elem: Some(ScalarType::F32),
            access: Access::Out
        },
        params[2]
    ));
}
