//! Bearer tokens: kept as SHA-256 hashes, compared in constant time.
//!
//! A presented token is hashed and compared with every configured hash with
//! `subtle::ConstantTimeEq`, without stopping at a match, so timing says nothing about which
//! (or whether a) token matched. Clear tokens given in config are hashed when loaded.

use crate::config::{ServiceConfig, TokenConfig};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::Arc;
use subtle::{ConditionallySelectable, ConstantTimeEq};

/// Who is calling: a token's name and limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The token's name (`anonymous` when the server has no tokens).
    pub name: String,
    /// Kinds it may submit (`None`: all).
    pub kinds: Option<HashSet<String>>,
    /// Its in-flight limit, if set on the token.
    pub max_in_flight: Option<u64>,
}

/// The fault-injection kind: accepted only with the server's flag
/// (`allow_fault_injection`) AND from a token whose `kinds` name it.
pub const FAULT_KIND: &str = "fault";

/// Users' own kernels: accepted only with the server's `allow_user_kernels` (a 403 naming
/// the setting otherwise, before the token's `kinds` are looked at); then like any kind, a
/// token without `kinds` may submit them, one with `kinds` only if they name it.
pub const USER_KERNEL_KIND: &str = crate::user_kernel::KIND;

impl Principal {
    /// Whether it may submit `kind`: one of its `kinds`, or, without `kinds`, any kind but
    /// [`FAULT_KIND`] (which a token must name explicitly).
    pub fn may_submit(&self, kind: &str) -> bool {
        match &self.kinds {
            Some(k) => k.contains(kind),
            None => kind != FAULT_KIND,
        }
    }
}

struct Entry {
    hash: [u8; 32],
    principal: Arc<Principal>,
}

/// The configured tokens.
pub struct TokenSet {
    entries: Vec<Entry>,
    anonymous: Arc<Principal>,
}

/// SHA-256 of a token, hex (what a config's `sha256` holds): `printf %s TOKEN | sha256sum`.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn parse_hash(name: &str, h: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(h.trim()).map_err(|_| format!("token `{name}`: sha256 is not hex"))?;
    bytes
        .try_into()
        .map_err(|_| format!("token `{name}`: sha256 must be 64 hex digits"))
}

fn entry(t: &TokenConfig) -> Result<Entry, String> {
    if t.name.is_empty() {
        return Err("a token needs a name".into());
    }
    let hash = match (&t.sha256, &t.token) {
        (Some(h), None) => parse_hash(&t.name, h)?,
        (None, Some(tok)) if !tok.is_empty() => Sha256::digest(tok.as_bytes()).into(),
        _ => {
            return Err(format!(
                "token `{}`: give exactly one of sha256 and token",
                t.name
            ))
        }
    };
    Ok(Entry {
        hash,
        principal: Arc::new(Principal {
            name: t.name.clone(),
            kinds: t.kinds.as_ref().map(|k| k.iter().cloned().collect()),
            max_in_flight: t.max_in_flight,
        }),
    })
}

/// Parse a tokens file: one token per line, `NAME sha256:HEX|TOKEN [kinds=a,b]
/// [max_in_flight=N]`; `#` starts a comment. Each entry is checked here, and an error names
/// its line and what is wrong, never the line's text: a misplaced field may be the secret
/// (a token with a space in it, a token written before the name).
pub fn parse_tokens_file(text: &str) -> Result<Vec<TokenConfig>, String> {
    const FORM: &str = "expected `NAME sha256:HEX|TOKEN [kinds=a,b] [max_in_flight=N]`";
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(name), Some(secret)) = (parts.next(), parts.next()) else {
            return Err(format!("line {n}: {FORM}"));
        };
        let mut t = TokenConfig {
            name: name.to_string(),
            ..Default::default()
        };
        match secret.strip_prefix("sha256:") {
            Some(h) => t.sha256 = Some(h.to_string()),
            None => t.token = Some(secret.to_string()),
        }
        for (j, p) in parts.enumerate() {
            if let Some(k) = p.strip_prefix("kinds=") {
                t.kinds = Some(k.split(',').map(str::to_string).collect());
            } else if let Some(v) = p.strip_prefix("max_in_flight=") {
                t.max_in_flight = Some(
                    v.parse()
                        .map_err(|_| format!("line {n}: max_in_flight is not a whole number"))?,
                );
            } else {
                return Err(format!(
                    "line {n}: field {} is neither kinds= nor max_in_flight= ({FORM}; a token \
                     holds no spaces)",
                    j + 3
                ));
            }
        }
        if t.sha256.as_deref().is_some_and(|h| parse_hash("", h).is_err()) {
            return Err(format!("line {n}: the sha256: value is not 64 hex digits"));
        }
        out.push(t);
    }
    Ok(out)
}

impl TokenSet {
    /// The tokens of `cfg` and its tokens file.
    pub fn load(cfg: &ServiceConfig) -> Result<TokenSet, String> {
        let mut list = cfg.tokens.clone();
        if let Some(f) = &cfg.tokens_file {
            let text = std::fs::read_to_string(f).map_err(|e| format!("tokens file {}: {e}", f.display()))?;
            list.extend(parse_tokens_file(&text).map_err(|e| format!("tokens file {}: {e}", f.display()))?);
        }
        Self::from_configs(&list)
    }

    /// From token configs.
    pub fn from_configs(list: &[TokenConfig]) -> Result<TokenSet, String> {
        let entries = list.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
        Ok(TokenSet {
            entries,
            anonymous: Arc::new(Principal {
                name: "anonymous".into(),
                kinds: None,
                max_in_flight: None,
            }),
        })
    }

    /// Whether any token is configured (without one, every caller is `anonymous`).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The caller of an `Authorization` header value.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Option<Arc<Principal>> {
        if self.entries.is_empty() {
            return Some(self.anonymous.clone());
        }
        let presented = authorization?;
        let token = presented
            .strip_prefix(b"Bearer ")
            .or_else(|| presented.strip_prefix(b"bearer "))?;
        let h: [u8; 32] = Sha256::digest(token).into();
        let mut found = subtle::Choice::from(0);
        let mut index = 0u32;
        for (i, e) in self.entries.iter().enumerate() {
            let eq = e.hash[..].ct_eq(&h[..]);
            index = u32::conditional_select(&index, &(i as u32), eq);
            found |= eq;
        }
        if bool::from(found) {
            self.entries.get(index as usize).map(|e| e.principal.clone())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bad_token_lines_name_their_line_and_none_of_the_secret() {
        let secret = "Xq7Vb2Lm9Wz4";
        for (text, line) in [
            (format!("# c\nrisk {secret} frobs\n"), 2),
            ("ok tok\n\nrisk Xq7Vb2 Lm9Wz4\n".to_string(), 3),
            (format!("{secret}\n"), 1),
            (format!("risk sha256:{secret}\n"), 1),
            (format!("risk {secret} max_in_flight={secret}\n"), 1),
            (format!("risk {secret} kinds=price {secret}\n"), 1),
        ] {
            let e = parse_tokens_file(&text).unwrap_err();
            assert!(e.starts_with(&format!("line {line}:")), "{e}");
            for w in secret.as_bytes().windows(3) {
                let w = std::str::from_utf8(w).unwrap();
                assert!(!e.contains(w), "`{w}` of the token in: {e}");
            }
        }
    }

    #[test]
    fn fault_needs_an_explicit_kind() {
        let s = TokenSet::from_configs(&parse_tokens_file("all a\nnamed b kinds=fault,price\n").unwrap())
            .unwrap();
        let all = s.authenticate(Some(b"Bearer a")).unwrap();
        assert!(all.may_submit("price") && !all.may_submit(FAULT_KIND));
        let named = s.authenticate(Some(b"Bearer b")).unwrap();
        assert!(named.may_submit(FAULT_KIND) && named.may_submit("price"));
        let anonymous = TokenSet::from_configs(&[]).unwrap().authenticate(None).unwrap();
        assert!(!anonymous.may_submit(FAULT_KIND));
    }

    #[test]
    fn user_kernels_follow_a_tokens_kinds() {
        let s = TokenSet::from_configs(
            &parse_tokens_file("all a\nprice b kinds=price\nuk c kinds=user_kernel\n").unwrap(),
        )
        .unwrap();
        assert!(s
            .authenticate(Some(b"Bearer a"))
            .unwrap()
            .may_submit(USER_KERNEL_KIND));
        assert!(!s
            .authenticate(Some(b"Bearer b"))
            .unwrap()
            .may_submit(USER_KERNEL_KIND));
        let uk = s.authenticate(Some(b"Bearer c")).unwrap();
        assert!(uk.may_submit(USER_KERNEL_KIND) && !uk.may_submit("price"));
    }

    use super::*;

    fn set() -> TokenSet {
        let text = format!(
            "# desk tokens\nrisk {}  kinds=price max_in_flight=3\nimaging clear-secret\n",
            format_args!("sha256:{}", hash_token("s3cret"))
        );
        TokenSet::from_configs(&parse_tokens_file(&text).unwrap()).unwrap()
    }

    #[test]
    fn tokens_match_by_hash_and_carry_limits() {
        let s = set();
        let p = s.authenticate(Some(b"Bearer s3cret")).unwrap();
        assert_eq!(p.name, "risk");
        assert!(p.may_submit("price") && !p.may_submit("gemm"));
        assert_eq!(p.max_in_flight, Some(3));
        let q = s.authenticate(Some(b"Bearer clear-secret")).unwrap();
        assert_eq!(q.name, "imaging");
        assert!(q.may_submit("gemm"));
    }

    #[test]
    fn wrong_or_missing_tokens_are_refused() {
        let s = set();
        assert!(s.authenticate(None).is_none());
        assert!(s.authenticate(Some(b"Bearer s3cre")).is_none());
        assert!(s.authenticate(Some(b"s3cret")).is_none());
        assert!(s.authenticate(Some(b"Basic s3cret")).is_none());
    }

    #[test]
    fn without_tokens_everyone_is_anonymous() {
        let s = TokenSet::from_configs(&[]).unwrap();
        assert_eq!(s.authenticate(None).unwrap().name, "anonymous");
    }

    #[test]
    fn bad_token_lines_are_reported() {
        assert!(parse_tokens_file("lonely").is_err());
        assert!(parse_tokens_file("a b frobs=1").is_err());
        assert!(parse_tokens_file("a sha256:abc").is_err());
        let bad = [TokenConfig {
            name: "x".into(),
            sha256: Some("zz".into()),
            ..Default::default()
        }];
        assert!(TokenSet::from_configs(&bad).is_err());
    }
}
