//! Option pricing through the runtime: closed forms on the CPU always, Monte Carlo on the
//! runtime's finance engine ([`Runtime::finance_backend`]: kiln-core's [`FinanceBackend`],
//! the GPU's launchers when the runtime has one, else the CPU's engines). The engines give
//! the same bits for the same seed and stream (see `kiln_cuda`'s `launch_finance`), so
//! where a price was computed never shows in it.

use kiln_core::finance::{bsm, geometric_asian, price_analytic};
use kiln_core::finance::{McParams, OptionSpec, OptionType, PriceResult, Style};
use kiln_core::Result;
use kiln_cpu::finance as cpu;

use crate::verify::{time_host, Covers, Timing};
use crate::Runtime;

pub use kiln_core::finance;
/// Implied volatility of European quotes (Jäckel's "Let's Be Rational"), one quote or a
/// whole book on the CPU's cores; `Runtime::implied_volatility_book` solves a book on the
/// runtime's device.
pub use kiln_core::finance::implied;
/// The finance backend interface and its inputs ([`Runtime::finance_backend`] gives the
/// runtime's engine).
pub use kiln_core::storage::{BsGridBook, FinanceBackend, McStreams, ShockGrid};

pub mod american;
mod basket;
pub mod book;
mod book_streams;
mod calibrate;
pub mod greeks;
mod heston;
mod implied_book;
pub mod records;
pub mod risk;
mod target;
pub use american::{AmericanBarrierSpec, AmericanRainbowSpec, AmericanSpec, Extreme, DEFAULT_TREE_STEPS};
pub use book::BookOption;
pub use greeks::{Estimate, GreeksParams, McGreeks};
pub use records::{book_option, normalize_record, RecordError};
pub use risk::{Position, RiskParams, RiskReport, Valuation};
pub use target::{TargetRun, TargetSe};

/// How to price.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Closed form (European, geometric Asian, barriers with continuous monitoring).
    Analytic,
    /// Monte Carlo with the run's parameters.
    MonteCarlo,
}

impl std::str::FromStr for Method {
    type Err = kiln_core::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "analytic" => Ok(Method::Analytic),
            "mc" | "monte_carlo" => Ok(Method::MonteCarlo),
            _ => Err(kiln_core::Error::invalid(
                "method",
                format!("unknown method `{s}`; use analytic or mc"),
            )),
        }
    }
}

/// Whether `method` can price `style` (analytic: all but the arithmetic Asian; barriers
/// continuously monitored).
pub fn supports(method: Method, style: Style) -> bool {
    match method {
        Method::Analytic => !matches!(style, Style::AsianArithmetic),
        Method::MonteCarlo => true,
    }
}

pub(crate) use kiln_core::storage::every_slot;

impl Runtime {
    /// The runtime's finance engines: the GPU's when it has one, else the CPU's. A `&dyn`
    /// rather than a generic: the runtime's engine is known only at run time, every method
    /// prices a whole batch (one indirect call per batch costs nothing beside it), and the
    /// pricing methods' signatures stay free of a backend parameter.
    pub fn finance_backend(&self) -> &dyn FinanceBackend {
        match self.cuda() {
            Some(gpu) => gpu,
            None => &cpu::CpuFinance,
        }
    }

    /// Prices every option; option `i` uses Monte Carlo stream index `i`. One result per
    /// option: an invalid option is an error in its slot.
    pub fn price(&self, specs: &[OptionSpec], method: Method, mc: &McParams) -> Vec<Result<PriceResult>> {
        self.price_batch(specs, method, mc, 0)
    }

    /// [`price`](Self::price) for a batch of a larger portfolio that starts at stream index
    /// `first_option`: pricing a portfolio batch by batch gives the bits of pricing it whole.
    pub fn price_batch(
        &self,
        specs: &[OptionSpec],
        method: Method,
        mc: &McParams,
        first_option: u32,
    ) -> Vec<Result<PriceResult>> {
        let _range = crate::profiler().host_range(match method {
            Method::Analytic => "price analytic",
            Method::MonteCarlo => "price mc",
        });
        match method {
            Method::Analytic => specs.iter().map(price_analytic).collect(),
            // the CPU engine prices in parallel whatever the first option (a serial loop
            // made a book in the executor's chunks ~3x slower on the CPU than in one piece)
            Method::MonteCarlo => {
                match self
                    .finance_backend()
                    .price_mc(specs, mc, McStreams::From(first_option))
                {
                    Ok(v) => v,
                    Err(e) if specs.is_empty() => {
                        tracing::warn!("price: {e}");
                        Vec::new()
                    }
                    // A device failure or an invalid run: every slot says so.
                    Err(e) => every_slot("price", e, specs.len()),
                }
            }
        }
    }
}

/// One row of the pricing part of `kiln demo`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoCase {
    /// What was priced, e.g. `mc european call`.
    pub op: String,
    /// Options x paths x steps.
    pub size: String,
    /// How the pricing call was timed (wall clock of `Runtime::price`: on a GPU the
    /// parameters go up and the totals come down through pageable memory).
    pub timing: Timing,
    /// Simulated path-steps per second at the median time.
    pub path_steps_per_s: f64,
    /// The Monte Carlo price (first option).
    pub price: f64,
    /// The value it is checked against: a closed form, or (the arithmetic Asian, which has
    /// none) a high-path Sobol reference ([`ARITHMETIC_ASIAN_REFERENCE`]).
    pub closed_form: f64,
    /// What `closed_form` is: `"closed form"` or `"Sobol reference"`.
    pub reference: &'static str,
    /// The standard error of `price`.
    pub std_error: f64,
    /// `|price - reference| <= 4 sqrt(std_error^2 + the reference's own error^2)` (and, on
    /// a GPU, bitwise equal to the CPU's price of a smaller run of the same seed).
    pub verified: bool,
}

/// The arithmetic-average Asian call of `kiln demo` (S = K = 100, r = 0.05, q = 0.02,
/// sigma = 0.2, T = 1, 64 fixings), which has no closed form: its price and standard error
/// by randomised quasi-Monte Carlo, an estimator independent of the demo's (Sobol points
/// with a Brownian bridge, 32 random shifts, 2^22 paths, no control variate), from
/// `kiln price --device cpu --method mc --rng sobol --replicates 32 --paths 4194304
/// --steps 64` on that one option. With the control variate the same run gives 5.242888
/// +- 0.000013, within one standard error of this.
pub const ARITHMETIC_ASIAN_REFERENCE: (f64, f64) = (5.242_933, 0.000_060);

/// The pricing cases of `kiln demo`: European and geometric Asian against their closed
/// forms, an arithmetic Asian with its control variate against a Sobol reference
/// ([`ARITHMETIC_ASIAN_REFERENCE`]), and a portfolio. `scale` in
/// `(0, 1]` shrinks the path counts (1.0: 2^20 paths x 256 steps on a GPU, 2^16 on the CPU).
/// Each case's first call is timed alone (on a GPU it loads the finance module), then up to
/// `reps` runs after a warm-up ([`time_host`]); the first call's price is the one checked.
pub fn demo_cases(rt: &Runtime, scale: f64, reps: usize) -> Result<Vec<DemoCase>> {
    let gpu = rt.cuda().is_some();
    let covers = Covers::host_call(rt);
    let scale = scale.clamp(1e-3, 1.0);
    let base_paths = if gpu { 1u64 << 20 } else { 1u64 << 16 };
    let paths = ((base_paths as f64 * scale) as u64).max(4096);
    let euro = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0);
    let geo = euro.with_style(Style::AsianGeometric, Some(64), None);
    let arith = euro.with_style(Style::AsianArithmetic, Some(64), None);
    let mut rows = Vec::new();
    // (name, option, steps, control variate, reference, its standard error, what it is)
    let (asian_ref, asian_ref_se) = ARITHMETIC_ASIAN_REFERENCE;
    let cases: [(&str, OptionSpec, u32, bool, f64, f64, &str); 3] = [
        (
            "mc european call",
            euro,
            256,
            false,
            bsm(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0).price,
            0.0,
            "closed form",
        ),
        (
            "mc asian geometric call",
            geo,
            64,
            false,
            geometric_asian(OptionType::Call, 100.0, 100.0, 0.05, 0.02, 0.2, 1.0, 64),
            0.0,
            "closed form",
        ),
        (
            "mc asian arithmetic call (cv)",
            arith,
            64,
            true,
            asian_ref,
            asian_ref_se,
            "Sobol reference",
        ),
    ];
    for (name, spec, steps, cv, closed, closed_se, reference) in cases {
        let mc = McParams {
            paths,
            steps,
            seed: 2026,
            antithetic: false,
            control_variate: cv,
            fast_math: false,
            rng: kiln_core::finance::Rng::Philox,
        };
        let (r, timing) = time_host(reps, covers, || {
            rt.price(&[spec], Method::MonteCarlo, &mc).remove(0)
        })?;
        let secs = timing.median_ms / 1e3;
        let path_steps = paths as f64 * f64::from(if spec.style.is_asian() { 64 } else { steps });
        let ok_stat = (r.price - closed).abs() <= 4.0 * r.std_error.hypot(closed_se);
        let ok_bits = if gpu {
            let small = McParams { paths: 4096, ..mc };
            let g = rt.price(&[spec], Method::MonteCarlo, &small).remove(0)?;
            let c = cpu::price_mc(&spec, &small, 0)?;
            g.price.to_bits() == c.price.to_bits()
        } else {
            true
        };
        rows.push(DemoCase {
            op: name.into(),
            size: format!("1 x {paths} x {steps}"),
            timing,
            path_steps_per_s: path_steps / secs.max(1e-9),
            price: r.price,
            closed_form: closed,
            reference,
            std_error: r.std_error,
            verified: ok_stat && ok_bits,
        });
    }
    // A portfolio: strikes 80..120, one price per option.
    let n_opt = if gpu { 1000 } else { 32 };
    let specs: Vec<OptionSpec> = (0..n_opt)
        .map(|i| {
            OptionSpec::european(
                OptionType::Call,
                100.0,
                80.0 + 40.0 * i as f64 / n_opt as f64,
                0.03,
                0.0,
                0.25,
                0.5,
            )
        })
        .collect();
    let mc = McParams {
        paths: if gpu { 1 << 16 } else { 1 << 12 },
        steps: 64,
        seed: 7,
        antithetic: true,
        control_variate: false,
        fast_math: false,
        rng: kiln_core::finance::Rng::Philox,
    };
    let (res, timing) = time_host(reps, covers, || Ok(rt.price(&specs, Method::MonteCarlo, &mc)))?;
    let secs = timing.median_ms / 1e3;
    let mut worst = 0.0f64;
    let mut first = (0.0, 0.0, 0.0);
    for (i, (s, r)) in specs.iter().zip(&res).enumerate() {
        let r = r
            .as_ref()
            .map_err(|e| kiln_core::Error::invalid("demo", e.to_string()))?;
        let b = price_analytic(s)?.price;
        worst = worst.max((r.price - b).abs() / r.std_error.max(1e-12));
        if i == 0 {
            first = (r.price, b, r.std_error);
        }
    }
    rows.push(DemoCase {
        op: "mc portfolio european (antithetic)".into(),
        size: format!("{n_opt} x {} x 64", mc.paths_used()),
        timing,
        path_steps_per_s: n_opt as f64 * mc.paths_used() as f64 * 64.0 / secs.max(1e-9),
        price: first.0,
        closed_form: first.1,
        reference: "closed form",
        std_error: first.2,
        // 4.5 sigma over up to 1000 options: a false alarm is ~1e-2 likely at most.
        verified: worst <= 4.5,
    });
    Ok(rows)
}
