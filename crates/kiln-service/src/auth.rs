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

impl Principal {
    /// Whether it may submit `kind`.
    pub fn may_submit(&self, kind: &str) -> bool {
        self.kinds.as_ref().is_none_or(|k| k.contains(kind))
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
/// [max_in_flight=N]`; `#` starts a comment.
pub fn parse_tokens_file(text: &str) -> Result<Vec<TokenConfig>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(name), Some(secret)) = (parts.next(), parts.next()) else {
            return Err(format!(
                "line {}: expected `NAME sha256:HEX|TOKEN [kinds=a,b]`",
                i + 1
            ));
        };
        let mut t = TokenConfig {
            name: name.to_string(),
            ..Default::default()
        };
        match secret.strip_prefix("sha256:") {
            Some(h) => t.sha256 = Some(h.to_string()),
            None => t.token = Some(secret.to_string()),
        }
        for p in parts {
            if let Some(k) = p.strip_prefix("kinds=") {
                t.kinds = Some(k.split(',').map(str::to_string).collect());
            } else if let Some(n) = p.strip_prefix("max_in_flight=") {
                t.max_in_flight = Some(
                    n.parse()
                        .map_err(|_| format!("line {}: bad max_in_flight", i + 1))?,
                );
            } else {
                return Err(format!("line {}: unknown field `{p}`", i + 1));
            }
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
        let bad = [TokenConfig {
            name: "x".into(),
            sha256: Some("zz".into()),
            ..Default::default()
        }];
        assert!(TokenSet::from_configs(&bad).is_err());
    }
}
