//! Boundary modes: how a filter reads outside the image, with scipy.ndimage's names,
//! spellings and semantics.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How a filter reads outside the image, with scipy.ndimage's names and semantics
/// (shown for the signal `a b c d`; every axis is extended independently):
///
/// | mode | extension | period |
/// | --- | --- | --- |
/// | `reflect` (default) | `d c b a \| a b c d \| d c b a` (half-sample symmetric) | `2n` |
/// | `mirror` | `d c b \| a b c d \| c b a` (whole-sample symmetric) | `2n-2` |
/// | `nearest` | `a a a a \| a b c d \| d d d d` | - |
/// | `wrap` | `a b c d \| a b c d \| a b c d` | `n` |
/// | `constant` | `k k k k \| a b c d \| k k k k` (`k` = cval, 0 by default) | - |
///
/// Extensions repeat with the period for indices arbitrarily far outside (a kernel larger
/// than the image). On a size-1 axis every mode but `constant` reads the one sample (scipy
/// maps `mirror` on a size-1 axis to `nearest`, since its period `2n-2` is 0).
///
/// One deliberate difference: scipy's n-D `correlate` (`NI_InitFilterOffsets`) maps the
/// `reflect` index `-4n` (and `-6n`, ...) to `-1`, outside the array, which only a kernel
/// radius of at least 4× the axis length reaches; kiln reads index 0 there, as the periodic
/// definition and scipy's own `correlate1d` (`NI_ExtendLine`) do.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum BoundaryMode {
    /// Outside reads `cval` (scipy `mode="constant", cval=...`; `constant` means cval 0).
    Constant(f64),
    /// Outside reads the nearest edge sample.
    Nearest,
    /// Half-sample symmetric: the edge sample is repeated (scipy's default).
    #[default]
    Reflect,
    /// Whole-sample symmetric: the edge sample is not repeated.
    Mirror,
    /// Periodic.
    Wrap,
}

impl BoundaryMode {
    /// The accepted spellings, as [`FromStr`] reports them.
    pub const VALID: &'static str =
        "reflect (the default), constant (cval 0), constant:CVAL, nearest, mirror, wrap, \
         grid-wrap (= wrap), grid-constant (= constant), grid-mirror (= reflect)";

    /// scipy's name of the mode.
    pub fn name(&self) -> &'static str {
        match self {
            BoundaryMode::Constant(_) => "constant",
            BoundaryMode::Nearest => "nearest",
            BoundaryMode::Reflect => "reflect",
            BoundaryMode::Mirror => "mirror",
            BoundaryMode::Wrap => "wrap",
        }
    }

    /// The value read outside the image: `Some(cval)` for `constant`, `None` otherwise.
    pub fn cval(&self) -> Option<f64> {
        match *self {
            BoundaryMode::Constant(c) => Some(c),
            _ => None,
        }
    }

    /// The in-range index that position `i` of an axis of length `len` reads, or `None`
    /// where it reads `cval` (`constant` outside, or an empty axis). `i` may be any
    /// distance outside `0..len`.
    pub fn map_index(&self, i: isize, len: usize) -> Option<usize> {
        if len == 0 {
            return None;
        }
        let n = len as isize;
        if (0..n).contains(&i) {
            return Some(i as usize);
        }
        let m = match self {
            BoundaryMode::Constant(_) => return None,
            BoundaryMode::Nearest => i.clamp(0, n - 1),
            BoundaryMode::Wrap => i.rem_euclid(n),
            _ if n == 1 => 0,
            BoundaryMode::Reflect => {
                let p = i.rem_euclid(2 * n);
                if p < n {
                    p
                } else {
                    2 * n - 1 - p
                }
            }
            BoundaryMode::Mirror => {
                let p = i.rem_euclid(2 * n - 2);
                if p < n {
                    p
                } else {
                    2 * n - 2 - p
                }
            }
        };
        Some(m as usize)
    }
}

impl fmt::Display for BoundaryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundaryMode::Constant(c) if *c != 0.0 => write!(f, "constant:{c}"),
            m => f.write_str(m.name()),
        }
    }
}

impl FromStr for BoundaryMode {
    type Err = Error;

    /// Parses scipy's names (case-insensitive); `constant:CVAL` sets a finite cval.
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        let bad = |why: String| Error::invalid("boundary mode", why);
        Ok(match t.as_str() {
            "reflect" => BoundaryMode::Reflect,
            "mirror" => BoundaryMode::Mirror,
            "nearest" => BoundaryMode::Nearest,
            // scipy: for filters, grid-wrap, grid-constant and grid-mirror are synonyms
            // of wrap, constant and reflect.
            "wrap" | "grid-wrap" => BoundaryMode::Wrap,
            "grid-mirror" => BoundaryMode::Reflect,
            "constant" | "grid-constant" => BoundaryMode::Constant(0.0),
            _ => match t
                .strip_prefix("constant:")
                .or_else(|| t.strip_prefix("grid-constant:"))
            {
                Some(v) => match v.trim().parse::<f64>() {
                    Ok(c) if c.is_finite() => BoundaryMode::Constant(c),
                    _ => return Err(bad(format!("`{s}`: cval must be a finite number"))),
                },
                None => {
                    return Err(bad(format!(
                        "unknown mode `{s}`; valid modes: {}",
                        BoundaryMode::VALID
                    )))
                }
            },
        })
    }
}
