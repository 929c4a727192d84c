//! A complex number carrying its five partial derivatives (forward-mode differentiation):
//! the Heston characteristic function evaluated once in this type gives its value and its
//! exact gradient with respect to the parameters, with no finite-difference step.
//!
//! The partials are indexed by the parameter order of [`super::pricer`]: `v0, theta, rho,
//! kappa, xi` (Cui, del Baño Rollin and Germano's order).

use std::ops::{Add, Div, Mul, Neg, Sub};

/// Number of parameters (partials carried).
pub(crate) const NP: usize = 5;

/// A complex number (kiln-core takes no complex-number dependency for one formula).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Cx {
    pub re: f64,
    pub im: f64,
}

pub(crate) const fn cx(re: f64, im: f64) -> Cx {
    Cx { re, im }
}

impl Add for Cx {
    type Output = Cx;
    #[inline]
    fn add(self, o: Cx) -> Cx {
        cx(self.re + o.re, self.im + o.im)
    }
}

impl Sub for Cx {
    type Output = Cx;
    #[inline]
    fn sub(self, o: Cx) -> Cx {
        cx(self.re - o.re, self.im - o.im)
    }
}

impl Neg for Cx {
    type Output = Cx;
    #[inline]
    fn neg(self) -> Cx {
        cx(-self.re, -self.im)
    }
}

impl Mul for Cx {
    type Output = Cx;
    #[inline]
    fn mul(self, o: Cx) -> Cx {
        cx(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)
    }
}

impl Div for Cx {
    type Output = Cx;
    /// Smith's algorithm (no overflow in `|o|^2`).
    #[inline]
    fn div(self, o: Cx) -> Cx {
        if o.re.abs() >= o.im.abs() {
            let r = o.im / o.re;
            let den = o.re + o.im * r;
            cx((self.re + self.im * r) / den, (self.im - self.re * r) / den)
        } else {
            let r = o.re / o.im;
            let den = o.re * r + o.im;
            cx((self.re * r + self.im) / den, (self.im * r - self.re) / den)
        }
    }
}

impl Cx {
    #[inline]
    pub(crate) fn scale(self, s: f64) -> Cx {
        cx(self.re * s, self.im * s)
    }

    #[inline]
    fn exp(self) -> Cx {
        let e = self.re.exp();
        let (s, c) = self.im.sin_cos();
        cx(e * c, e * s)
    }

    /// `e^z - 1` without cancellation for small `z`.
    #[inline]
    fn expm1(self) -> Cx {
        let (s, c) = self.im.sin_cos();
        let em1 = self.re.exp_m1();
        let half = (0.5 * self.im).sin();
        cx(em1 * c - 2.0 * half * half, (em1 + 1.0) * s)
    }

    /// `ln(1 + z)` (principal branch) without cancellation for small `z`.
    #[inline]
    fn ln1p(self) -> Cx {
        let t = 2.0 * self.re + self.re * self.re + self.im * self.im;
        cx(0.5 * t.ln_1p(), self.im.atan2(1.0 + self.re))
    }

    /// The principal square root (`re >= 0`).
    #[inline]
    fn sqrt(self) -> Cx {
        let r = self.re.hypot(self.im);
        if r == 0.0 {
            return cx(0.0, 0.0);
        }
        if self.re >= 0.0 {
            let t = (0.5 * (r + self.re)).sqrt();
            cx(t, self.im / (2.0 * t))
        } else {
            let t = (0.5 * (r - self.re)).sqrt();
            cx(self.im.abs() / (2.0 * t), t.copysign(self.im))
        }
    }
}

/// A complex value `v` and its partials `d[j] = dv / dp_j`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Dual {
    pub v: Cx,
    pub d: [Cx; NP],
}

impl Dual {
    /// A constant (all partials zero).
    #[inline]
    pub(crate) fn cst(v: Cx) -> Dual {
        Dual {
            v,
            d: [Cx::default(); NP],
        }
    }

    /// The real parameter `p_j = value`.
    #[inline]
    pub(crate) fn param(value: f64, j: usize) -> Dual {
        let mut d = [Cx::default(); NP];
        d[j] = cx(1.0, 0.0);
        Dual { v: cx(value, 0.0), d }
    }

    #[inline]
    fn map(self, v: Cx, dv: Cx) -> Dual {
        // chain rule: f(a)' = f'(a) a'
        let mut d = self.d;
        for x in &mut d {
            *x = *x * dv;
        }
        Dual { v, d }
    }

    #[inline]
    pub(crate) fn scale(self, s: f64) -> Dual {
        let mut d = self.d;
        for x in &mut d {
            *x = x.scale(s);
        }
        Dual {
            v: self.v.scale(s),
            d,
        }
    }

    #[inline]
    pub(crate) fn exp(self) -> Dual {
        let e = self.v.exp();
        self.map(e, e)
    }

    #[inline]
    pub(crate) fn expm1(self) -> Dual {
        self.map(self.v.expm1(), self.v.exp())
    }

    #[inline]
    pub(crate) fn ln1p(self) -> Dual {
        self.map(self.v.ln1p(), cx(1.0, 0.0) / (cx(1.0, 0.0) + self.v))
    }

    #[inline]
    pub(crate) fn sqrt(self) -> Dual {
        let s = self.v.sqrt();
        self.map(s, cx(0.5, 0.0) / s)
    }
}

impl Add for Dual {
    type Output = Dual;
    #[inline]
    fn add(self, o: Dual) -> Dual {
        let mut d = self.d;
        for (x, y) in d.iter_mut().zip(o.d) {
            *x = *x + y;
        }
        Dual { v: self.v + o.v, d }
    }
}

impl Sub for Dual {
    type Output = Dual;
    #[inline]
    fn sub(self, o: Dual) -> Dual {
        let mut d = self.d;
        for (x, y) in d.iter_mut().zip(o.d) {
            *x = *x - y;
        }
        Dual { v: self.v - o.v, d }
    }
}

impl Neg for Dual {
    type Output = Dual;
    #[inline]
    fn neg(self) -> Dual {
        self.scale(-1.0)
    }
}

impl Mul for Dual {
    type Output = Dual;
    #[inline]
    fn mul(self, o: Dual) -> Dual {
        let mut d = self.d;
        for (x, y) in d.iter_mut().zip(o.d) {
            *x = *x * o.v + self.v * y;
        }
        Dual { v: self.v * o.v, d }
    }
}

impl Div for Dual {
    type Output = Dual;
    #[inline]
    fn div(self, o: Dual) -> Dual {
        // (a / b)' = (a' - q b') / b with q = a / b
        let q = self.v / o.v;
        let mut d = self.d;
        for (x, y) in d.iter_mut().zip(o.d) {
            *x = (*x - q * y) / o.v;
        }
        Dual { v: q, d }
    }
}
