//! The lexer of kernel bodies: C tokens with their positions.

use kiln_core::Error;

use crate::parse::Pos;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
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
    Punct(&'static str),
    Eof,
}

const PUNCTS: [&str; 44] = [
    "<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=",
    "/=", "%=", "&=", "|=", "^=", "::", "+", "-", "*", "/", "%", "<", ">", "=", "!", "~", "&", "|", "^", "?",
    ":", "(", ")", "{", "}", ";", ",",
];
const PUNCTS_MORE: [&str; 4] = ["[", "]", ".", "#"];

pub(crate) fn lex(src: &str, what: &str, op: &str) -> Result<Vec<(Tok, Pos)>, Error> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let err = |pos: Pos, msg: String| Error::invalid(op, format!("{what}: {msg} at {pos}"));
    while i < b.len() {
        let c = b[i];
        let pos = Pos { line, col };
        if c == b'\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            col += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    line += 1;
                    col = 1;
                } else {
                    col += 1;
                }
                i += 1;
            }
            if i >= b.len() {
                return Err(err(pos, "unterminated comment".into()));
            }
            i += 2;
            col += 2;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(src[start..i].to_string()), pos));
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let hex = c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X'));
            let mut is_float = false;
            if hex {
                i += 2;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    is_float |= b[i] == b'.';
                    i += 1;
                }
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    is_float = true;
                    i += 1;
                    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                        i += 1;
                    }
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let body = &src[start..i];
            let sfx_start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let sfx = src[sfx_start..i].to_ascii_lowercase();
            if is_float {
                let single = match sfx.as_str() {
                    "" => false,
                    "f" => true,
                    _ => return Err(err(pos, format!("unknown suffix `{sfx}` on the number `{body}`"))),
                };
                let v: f64 = body
                    .parse()
                    .map_err(|_| err(pos, format!("malformed number `{body}`")))?;
                out.push((Tok::Float { v, single }, pos));
            } else {
                if sfx == "f" {
                    return Err(err(
                        pos,
                        format!("`{body}f` is not a C literal; write `{body}.0f`"),
                    ));
                }
                let unsigned = sfx.contains('u');
                let long = sfx.contains('l');
                if !sfx.chars().all(|c| c == 'u' || c == 'l') || sfx.matches('u').count() > 1 {
                    return Err(err(pos, format!("unknown suffix `{sfx}` on the number `{body}`")));
                }
                let v = if hex {
                    u64::from_str_radix(&body[2..], 16)
                } else if body.len() > 1 && body.starts_with('0') {
                    u64::from_str_radix(&body[1..], 8)
                } else {
                    body.parse()
                }
                .map_err(|_| err(pos, format!("the integer `{body}` does not fit 64 bits")))?;
                out.push((
                    Tok::Int {
                        v,
                        unsigned,
                        long,
                        hex: hex || (body.len() > 1 && body.starts_with('0')),
                    },
                    pos,
                ));
            }
        } else if let Some(p) = PUNCTS
            .iter()
            .chain(PUNCTS_MORE.iter())
            .find(|p| src[i..].starts_with(**p))
        {
            i += p.len();
            out.push((Tok::Punct(p), pos));
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(err(pos, format!("unexpected character `{ch}`")));
        }
        col += (i - start) as u32;
    }
    out.push((Tok::Eof, Pos { line, col }));
    Ok(out)
}
