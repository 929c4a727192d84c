//! scipy's `map_coordinate` (ni_interpolation.c): a coordinate outside `[0, len - 1]` folded
//! back in per boundary mode, with scipy's arithmetic (the integer quotients are C casts,
//! truncating toward zero, and integer products before the `f64` sum; products of a
//! coordinate too large for `i64` wrap, where C's are undefined).

use super::InterpMode;

/// `in` mapped into the input along an axis of `len` samples, as scipy's `map_coordinate`
/// does it: `constant` gives `-1` for a coordinate outside `[0, len - 1]` (the caller then
/// uses `cval`); `grid-constant` leaves it unchanged.
#[inline]
pub fn map_coordinate(x: f64, len: usize, mode: InterpMode) -> f64 {
    let n = len as i64;
    let mut x = x;
    if x < 0.0 {
        match mode {
            InterpMode::Mirror => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    let sz2 = 2 * n - 2;
                    x = sz2.wrapping_mul((-x / sz2 as f64) as i64) as f64 + x;
                    x = if x <= (1 - n) as f64 { x + sz2 as f64 } else { -x };
                }
            }
            InterpMode::Reflect => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    let sz2 = 2 * n;
                    if x < -(sz2 as f64) {
                        x = sz2.wrapping_mul((-x / sz2 as f64) as i64) as f64 + x;
                    }
                    x = if x < -(n as f64) {
                        x + sz2 as f64
                    } else {
                        (if x > -1e-15 { 1e-15 } else { -x }) - 1.0
                    };
                }
            }
            InterpMode::Wrap => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    let sz = n - 1;
                    x += sz.wrapping_mul(((-x / sz as f64) as i64).wrapping_add(1)) as f64;
                }
            }
            InterpMode::GridWrap => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    x += n.wrapping_mul((((-1.0 - x) / n as f64) as i64).wrapping_add(1)) as f64;
                }
            }
            InterpMode::Nearest => x = 0.0,
            InterpMode::Constant => x = -1.0,
            InterpMode::GridConstant => {}
        }
    } else if x > (n - 1) as f64 {
        match mode {
            InterpMode::Mirror => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    let sz2 = 2 * n - 2;
                    x -= sz2.wrapping_mul((x / sz2 as f64) as i64) as f64;
                    if x >= n as f64 {
                        x = sz2 as f64 - x;
                    }
                }
            }
            InterpMode::Reflect => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    let sz2 = 2 * n;
                    x -= sz2.wrapping_mul((x / sz2 as f64) as i64) as f64;
                    if x >= n as f64 {
                        x = sz2 as f64 - x - 1.0;
                    }
                }
            }
            InterpMode::Wrap => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    let sz = n - 1;
                    x -= sz.wrapping_mul((x / sz as f64) as i64) as f64;
                }
            }
            InterpMode::GridWrap => {
                if len <= 1 {
                    x = 0.0;
                } else {
                    x -= n.wrapping_mul((x / n as f64) as i64) as f64;
                }
            }
            InterpMode::Nearest => x = (n - 1) as f64,
            InterpMode::Constant => x = -1.0,
            InterpMode::GridConstant => {}
        }
    }
    x
}
