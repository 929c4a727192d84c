use super::*;
use kiln_core::finance::basket::{BasketAsset, BasketAverage, BasketSpec};
use kiln_core::finance::heston::{HestonParams, HestonSpec};
use kiln_core::finance::risk::{Shock, ALL_UNDERLYINGS};
use kiln_core::finance::{OptionSpec, OptionType};

use crate::finance::AmericanSpec;

/// A small deterministic generator (the tests need no rand distribution).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.next()
    }
}

fn euro(kind: OptionType, k: f64) -> OptionSpec {
    OptionSpec::european(kind, 100.0, k, 0.03, 0.01, 0.25, 0.75)
}

fn scenarios(n: usize, rng: &mut Lcg) -> ScenarioSet {
    ScenarioSet {
        scenarios: (0..n)
            .map(|j| {
                let a = Shock {
                    spot: SpotShift::Relative(rng.range(-0.15, 0.15)),
                    vol: rng.range(-0.05, 0.08),
                    rate: rng.range(-0.01, 0.01),
                };
                let b = Shock {
                    spot: SpotShift::Absolute(rng.range(-8.0, 8.0)),
                    vol: rng.range(-0.04, 0.04),
                    rate: 0.0,
                };
                let d = Shock {
                    spot: SpotShift::Relative(rng.range(-0.05, 0.05)),
                    ..Shock::default()
                };
                Scenario::new(format!("s{j}"))
                    .with("AAA", a)
                    .with("BBB", b)
                    .with(ALL_UNDERLYINGS, d)
            })
            .collect(),
    }
}

fn mixed_book() -> Vec<Position> {
    let heston = HestonSpec {
        option: euro(OptionType::Call, 105.0),
        heston: HestonParams {
            kappa: 1.5,
            theta: 0.05,
            xi: 0.4,
            rho: -0.6,
            v0: 0.04,
        },
    };
    let am = AmericanSpec {
        option_type: OptionType::Put,
        spot: 90.0,
        strike: 95.0,
        rate: 0.04,
        dividend: 0.0,
        volatility: 0.3,
        maturity: 0.5,
        exercise_dates: 4,
    };
    let basket = BasketSpec {
        kind: OptionType::Call,
        strike: 95.0,
        rate: 0.02,
        maturity: 1.0,
        average: BasketAverage::Geometric,
        assets: vec![
            BasketAsset::new(100.0, 0.25, 0.0, 0.5).named("AAA"),
            BasketAsset::new(90.0, 0.2, 0.01, 0.5).named("BBB"),
        ],
        correlation: vec![1.0, 0.4, 0.4, 1.0],
    };
    let pos = |o: BookOption, u: Option<&str>, q: f64| Position {
        option: o,
        underlying: u.map(str::to_string),
        quantity: q,
        id: None,
    };
    vec![
        pos(BookOption::Plain(euro(OptionType::Call, 95.0)), Some("AAA"), 3.0),
        pos(BookOption::Plain(euro(OptionType::Put, 110.0)), Some("BBB"), -2.0),
        pos(
            BookOption::Plain(euro(OptionType::Call, 100.0).with_style(
                Style::BarrierUpOut,
                None,
                Some(130.0),
            )),
            Some("AAA"),
            5.0,
        ),
        pos(
            BookOption::Plain(euro(OptionType::Put, 100.0).with_style(Style::AsianGeometric, Some(6), None)),
            None,
            1.5,
        ),
        pos(BookOption::Heston(heston), Some("AAA"), -1.0),
        pos(
            BookOption::American {
                spec: am,
                continuous: false,
            },
            Some("BBB"),
            4.0,
        ),
        pos(BookOption::Basket(basket), Some("ZZZ"), 2.0),
    ]
}

/// Every entry of the P&L matrix is the quantity times the closed form of the shocked
/// option (built here field by field) minus that of the base; totals sum the rows; the
/// measures are the sorted-loss quantile and tail mean.
#[test]
fn analytic_pnl_is_repricing_each_shocked_option() {
    let rt = Runtime::cpu();
    let mut rng = Lcg(11);
    let book = mixed_book();
    let set = scenarios(37, &mut rng);
    let p = RiskParams {
        keep_matrix: true,
        tree_steps: 200,
        levels: vec![0.9, 0.95],
        ..RiskParams::default()
    };
    let r = rt.risk(&book, &set, &p).unwrap();
    assert!(r.valuation.iter().all(|v| *v == Valuation::Analytic));
    let m = r.matrix.as_ref().unwrap();
    let n = book.len();
    for (s, sc) in set.scenarios.iter().enumerate() {
        let a = sc.shock(Some("AAA"));
        let b = sc.shock(Some("BBB"));
        let d = sc.default;
        // option 0 on AAA: every field by hand
        let BookOption::Plain(o) = book[0].option else {
            unreachable!()
        };
        let want = 3.0
            * (bsm(
                o.option_type,
                o.spot * (1.0 + a.spot.value()),
                o.strike,
                o.rate + a.rate,
                o.dividend,
                o.volatility + a.vol,
                o.maturity,
            )
            .price
                - bs_price(&o));
        assert!((m[s * n] - want).abs() < 1e-12, "{s}: {} vs {want}", m[s * n]);
        // option 1 on BBB, an absolute spot shift
        let BookOption::Plain(o) = book[1].option else {
            unreachable!()
        };
        let want = -2.0
            * (bsm(
                o.option_type,
                o.spot + b.spot.value(),
                o.strike,
                o.rate + b.rate,
                o.dividend,
                o.volatility + b.vol,
                o.maturity,
            )
            .price
                - bs_price(&o));
        assert!((m[s * n + 1] - want).abs() < 1e-12);
        // option 3 names no underlying: the default shock
        let BookOption::Plain(o) = book[3].option else {
            unreachable!()
        };
        let mut sh = o;
        sh.spot *= 1.0 + d.spot.value();
        let want = 1.5 * (price_analytic(&sh).unwrap().price - price_analytic(&o).unwrap().price);
        assert!((m[s * n + 3] - want).abs() < 1e-12);
        // the basket: AAA and BBB move its assets, ZZZ (the default) its rate
        let BookOption::Basket(bk) = &book[6].option else {
            unreachable!()
        };
        let mut shb = bk.clone();
        shb.assets[0].spot *= 1.0 + a.spot.value();
        shb.assets[0].volatility += a.vol;
        shb.assets[1].spot += b.spot.value();
        shb.assets[1].volatility += b.vol;
        shb.rate += d.rate;
        let want = 2.0 * (shb.price_analytic().unwrap() - bk.price_analytic().unwrap());
        assert!((m[s * n + 6] - want).abs() < 1e-12);
        let row: f64 = m[s * n..(s + 1) * n].iter().sum();
        assert_eq!(row, r.pnl[s]);
    }
    let mut loss: Vec<f64> = r.pnl.iter().map(|x| -x).collect();
    loss.sort_by(f64::total_cmp);
    // 36 * 0.9 = 32.4: between the 33rd and 34th smallest losses
    let var = loss[32] + 0.4 * (loss[33] - loss[32]);
    assert!((r.measures[0].var - var).abs() < 1e-12);
    let tail: Vec<f64> = loss.iter().copied().filter(|&l| l >= var).collect();
    assert_eq!(tail.len(), 4);
    assert!((r.measures[0].es - tail.iter().sum::<f64>() / 4.0).abs() < 1e-12);
}

/// With common random numbers the P&L of a small shock to a Monte Carlo option varies far
/// less from seed to seed than when the shocked price draws another stream.
#[test]
fn common_random_numbers_shrink_the_pnl_noise() {
    let rt = Runtime::cpu();
    let asian = euro(OptionType::Call, 100.0).with_style(Style::AsianArithmetic, Some(8), None);
    let book = vec![Position::new(BookOption::Plain(asian))];
    let set = ScenarioSet {
        scenarios: vec![Scenario::new("up1%").with(
            ALL_UNDERLYINGS,
            Shock {
                spot: SpotShift::Relative(0.01),
                ..Shock::default()
            },
        )],
    };
    let mut shocked = asian;
    shocked.spot *= 1.01;
    let (mut crn, mut ind) = (Vec::new(), Vec::new());
    for seed in 0..12u64 {
        let mc = McParams {
            paths: 2003,
            steps: 8,
            seed: 1000 + seed,
            ..McParams::default()
        };
        let p = RiskParams {
            mc,
            ..RiskParams::default()
        };
        let r = rt.risk(&book, &set, &p).unwrap();
        assert_eq!(r.valuation[0], Valuation::MonteCarlo);
        crn.push(r.pnl[0]);
        // the same shocked option on another stream: independent noise
        let other = rt.price_batch(&[shocked], Method::MonteCarlo, &mc, 1)[0]
            .as_ref()
            .unwrap()
            .price;
        ind.push(other - r.base[0]);
    }
    let sd = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    };
    let (a, b) = (sd(&crn), sd(&ind));
    assert!(a < 0.2 * b, "CRN sd {a} vs independent {b}");
    // and the CRN P&L is near the true delta move (~0.6 * 1.0)
    let mean = crn.iter().sum::<f64>() / crn.len() as f64;
    assert!(mean > 0.3 && mean < 0.9, "{mean}");
}

#[test]
fn refusals_name_the_option_and_the_scenario() {
    let rt = Runtime::cpu();
    let mut book = mixed_book();
    book[1].id = Some("short-put".into());
    let set = ScenarioSet {
        scenarios: vec![
            Scenario::new("calm"),
            Scenario::new("crash").with(
                "BBB",
                Shock {
                    spot: SpotShift::Absolute(-105.0),
                    ..Shock::default()
                },
            ),
        ],
    };
    let p = RiskParams {
        tree_steps: 50,
        ..RiskParams::default()
    };
    let e = rt.risk(&book, &set, &p).unwrap_err().to_string();
    assert!(
        e.contains("short-put") && e.contains("`crash`") && e.contains("spot"),
        "{e}"
    );
    book[0].quantity = f64::NAN;
    let e = rt.risk(&book, &set, &p).unwrap_err().to_string();
    assert!(e.contains("option 0") && e.contains("quantity"), "{e}");
    book[0].quantity = 1.0;
    let bad = RiskParams {
        levels: vec![1.5],
        ..p.clone()
    };
    assert!(rt
        .risk(&book, &set, &bad)
        .unwrap_err()
        .to_string()
        .contains("level 1.5"));
    assert!(rt.risk(&book, &ScenarioSet::default(), &p).is_err());
}

/// A book of every Monte Carlo kind (arithmetic Asian, barrier, Heston Asian, American,
/// arithmetic and spread baskets, a three-asset rainbow) between options with closed forms,
/// on named underlyings and none.
fn exotic_book() -> Vec<Position> {
    let mut book = mixed_book();
    let h = |style: Style| HestonSpec {
        option: euro(OptionType::Put, 98.0).with_style(style, (style != Style::European).then_some(5), None),
        heston: HestonParams {
            kappa: 2.0,
            theta: 0.04,
            xi: 0.3,
            rho: -0.5,
            v0: 0.05,
        },
    };
    let basket = |average: BasketAverage, w: [f64; 3]| {
        BookOption::Basket(BasketSpec {
            kind: OptionType::Call,
            strike: 10.0,
            rate: 0.02,
            maturity: 0.5,
            average,
            assets: vec![
                BasketAsset::new(100.0, 0.25, 0.0, w[0]).named("AAA"),
                BasketAsset::new(90.0, 0.2, 0.01, w[1]).named("BBB"),
                BasketAsset::new(80.0, 0.3, 0.0, w[2]),
            ],
            correlation: vec![1.0, 0.4, 0.2, 0.4, 1.0, 0.3, 0.2, 0.3, 1.0],
        })
    };
    let extra = [
        (
            BookOption::Plain(euro(OptionType::Call, 102.0).with_style(
                Style::AsianArithmetic,
                Some(5),
                None,
            )),
            Some("BBB"),
        ),
        (BookOption::Heston(h(Style::AsianArithmetic)), Some("AAA")),
        (basket(BasketAverage::Arithmetic, [0.3, 0.3, 0.4]), None),
        (
            BookOption::Plain(euro(OptionType::Put, 99.0).with_style(
                Style::BarrierDownIn,
                Some(5),
                Some(85.0),
            )),
            None,
        ),
        (basket(BasketAverage::Arithmetic, [1.0, -0.5, -0.4]), Some("BBB")),
        (basket(BasketAverage::Max, [1.0, 1.0, 1.0]), None),
        (BookOption::Heston(h(Style::European)), None),
        (
            BookOption::Plain(euro(OptionType::Call, 97.0).with_style(Style::AsianArithmetic, Some(5), None)),
            Some("AAA"),
        ),
    ];
    for (k, (o, u)) in extra.into_iter().enumerate() {
        book.push(Position {
            option: o,
            underlying: u.map(str::to_string),
            quantity: 1.5 - k as f64 * 0.75,
            id: None,
        });
    }
    book
}

fn report_bits(r: &RiskReport) -> Vec<u64> {
    let m = r.matrix.as_deref().unwrap_or(&[]);
    r.base
        .iter()
        .chain(&r.base_std_error)
        .chain(&r.pnl)
        .chain(m)
        .chain(
            r.measures
                .iter()
                .flat_map(|x| [x.var, x.es])
                .collect::<Vec<_>>()
                .iter(),
        )
        .map(|x| x.to_bits())
        .collect()
}

/// The batched Monte Carlo path (what a GPU runtime runs), driven by the CPU engines: the
/// per-option path's report to the bit, whatever the batch size, every scenario reported
/// done once.
#[test]
fn batched_mc_rows_are_the_per_option_bits() {
    let rt = Runtime::cpu();
    let book = exotic_book();
    let mut rng = Lcg(41);
    let set = scenarios(37, &mut rng);
    for method in [Method::Analytic, Method::MonteCarlo] {
        let p = RiskParams {
            method,
            mc: McParams {
                paths: 1024 + 5,
                steps: 5,
                seed: 77,
                ..McParams::default()
            },
            keep_matrix: method == Method::Analytic,
            tree_steps: 40,
            ..RiskParams::default()
        };
        let want = rt.risk_run(&book, &set, &p, &|| {}, None).unwrap();
        let mc = want
            .valuation
            .iter()
            .filter(|v| **v == Valuation::MonteCarlo)
            .count();
        assert!(mc >= 6, "{method:?}: {mc} options by Monte Carlo");
        for max in [1, 5, 7 * mc + 3, 1 << 16] {
            let ticks = std::sync::atomic::AtomicUsize::new(0);
            let tick = || {
                ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            };
            let got = rt.risk_run(&book, &set, &p, &tick, Some(max)).unwrap();
            assert_eq!(got.valuation, want.valuation);
            assert_eq!(got.matrix.is_some(), want.matrix.is_some());
            assert_eq!(report_bits(&got), report_bits(&want), "{method:?}, batch {max}");
            assert_eq!(ticks.into_inner(), set.len());
        }
    }
}

/// The batched path reports the error the per-option path meets first: the first failing
/// option in book order of the first failing scenario, analytic or Monte Carlo.
#[test]
fn batched_errors_are_the_per_option_paths() {
    let rt = Runtime::cpu();
    let mut rng = Lcg(43);
    let mut set = scenarios(9, &mut rng);
    // BBB below zero from scenario 5 on
    for sc in set.scenarios.iter_mut().skip(5) {
        sc.set(
            "BBB",
            Shock {
                spot: SpotShift::Absolute(-1000.0),
                ..Shock::default()
            },
        );
    }
    let p = RiskParams {
        mc: McParams {
            paths: 1024,
            steps: 5,
            ..McParams::default()
        },
        tree_steps: 40,
        ..RiskParams::default()
    };
    let full = exotic_book();
    // the first option on BBB in book order analytic (option 1), then, without the put, the
    // American and the geometric basket, Monte Carlo (the arithmetic Asian)
    let mc_first: Vec<Position> = full
        .iter()
        .enumerate()
        .filter(|&(i, _)| ![1, 5, 6].contains(&i))
        .map(|(_, x)| x.clone())
        .collect();
    for (book, first) in [(full, "option 1 "), (mc_first, "option 4 ")] {
        let want = rt
            .risk_run(&book, &set, &p, &|| {}, None)
            .unwrap_err()
            .to_string();
        assert!(want.contains(first) && want.contains("`s5`"), "{want}");
        for max in [1, 4, 1 << 16] {
            let got = rt
                .risk_run(&book, &set, &p, &|| {}, Some(max))
                .unwrap_err()
                .to_string();
            assert_eq!(got, want);
        }
    }
}

/// Under `Method::Analytic` an option whose kind has a closed form is valued by it, and
/// the closed form's error is the option's error (no silent Monte Carlo); kinds without
/// one still go to Monte Carlo.
#[test]
fn a_closed_form_error_is_reported_not_simulated() {
    let rt = Runtime::cpu();
    // a rainbow on two assets, one of volatility 0: Stulz's formula refuses it
    let rainbow = BasketSpec {
        kind: OptionType::Call,
        strike: 95.0,
        rate: 0.02,
        maturity: 1.0,
        average: BasketAverage::Max,
        assets: vec![
            BasketAsset::new(100.0, 0.25, 0.0, 1.0),
            BasketAsset::new(90.0, 0.0, 0.0, 1.0),
        ],
        correlation: vec![1.0, 0.0, 0.0, 1.0],
    };
    assert!(has_closed_form(&BookOption::Basket(rainbow.clone())));
    assert!(rainbow.price_analytic().is_err());
    let mut book = mixed_book();
    book.push(Position {
        id: Some("flat-rainbow".into()),
        ..Position::new(BookOption::Basket(rainbow))
    });
    let set = ScenarioSet {
        scenarios: vec![Scenario::new("calm")],
    };
    let p = RiskParams {
        tree_steps: 40,
        mc: McParams {
            paths: 1024,
            steps: 4,
            ..McParams::default()
        },
        ..RiskParams::default()
    };
    for batch in [None, Some(16)] {
        let e = rt
            .risk_run(&book, &set, &p, &|| {}, batch)
            .unwrap_err()
            .to_string();
        assert!(e.contains("flat-rainbow") && e.contains("Stulz"), "{e}");
    }
    // Monte Carlo values it
    let mc = RiskParams {
        method: Method::MonteCarlo,
        ..p.clone()
    };
    let r = rt.risk(&book, &set, &mc).unwrap();
    assert_eq!(r.valuation[7], Valuation::MonteCarlo);
    // kinds without a closed form are simulated under Analytic
    let asian = euro(OptionType::Call, 100.0).with_style(Style::AsianArithmetic, Some(4), None);
    assert!(!has_closed_form(&BookOption::Plain(asian)));
    let r = rt
        .risk(&[Position::new(BookOption::Plain(asian))], &set, &p)
        .unwrap();
    assert_eq!(r.valuation[0], Valuation::MonteCarlo);
}

/// An American rainbow's assets are shocked as a basket's (each by its name's shock, the
/// rate by its own underlying's); it is always simulated, and a scenario moves its value.
#[test]
fn an_american_rainbow_is_shocked_as_a_basket_and_simulated() {
    use kiln_core::finance::american::AmericanRainbowSpec;
    use kiln_core::finance::rainbow::Extreme;
    let rt = Runtime::cpu();
    let spec = AmericanRainbowSpec {
        kind: OptionType::Call,
        extreme: Extreme::Max,
        strike: 100.0,
        rate: 0.03,
        maturity: 1.0,
        exercise_dates: 4,
        assets: vec![
            BasketAsset::new(100.0, 0.25, 0.02, 1.0).named("AAA"),
            BasketAsset::new(95.0, 0.3, 0.0, 1.0).named("BBB"),
        ],
        correlation: vec![1.0, 0.4, 0.4, 1.0],
    };
    let pos = Position {
        underlying: Some("AAA".into()),
        ..Position::new(BookOption::AmericanRainbow(spec.clone()))
    };
    assert!(!has_closed_form(&pos.option));
    let up = Shock {
        spot: SpotShift::Relative(0.1),
        vol: 0.05,
        rate: 0.01,
    };
    let down = Shock {
        spot: SpotShift::Absolute(-5.0),
        ..Shock::default()
    };
    let sc = Scenario::new("moves").with("AAA", up).with("BBB", down);
    let BookOption::AmericanRainbow(got) = shock_option(&pos, &sc, &|| "option 1".into()).unwrap() else {
        panic!("not a rainbow")
    };
    let basket = BasketSpec {
        kind: spec.kind,
        strike: spec.strike,
        rate: spec.rate,
        maturity: spec.maturity,
        average: BasketAverage::Max,
        assets: spec.assets.clone(),
        correlation: spec.correlation.clone(),
    };
    let want = shock_basket(&basket, &up, &|name| sc.shock(name), &|| "option 1".into()).unwrap();
    assert_eq!((got.assets, got.rate), (want.assets, want.rate));
    assert_eq!(
        (got.correlation, got.exercise_dates, got.strike),
        (spec.correlation.clone(), 4, 100.0)
    );

    let set = ScenarioSet {
        scenarios: vec![
            Scenario::new("calm"),
            Scenario::new("rally").with(ALL_UNDERLYINGS, up),
        ],
    };
    let p = RiskParams {
        mc: McParams {
            paths: 4096,
            ..McParams::default()
        },
        ..RiskParams::default()
    };
    let r = rt.risk(&[pos], &set, &p).unwrap();
    assert_eq!(r.valuation[0], Valuation::MonteCarlo);
    assert!(r.base[0] > 0.0 && r.base_std_error[0] > 0.0);
    assert_eq!(r.pnl[0], 0.0, "no shock, the same paths");
    assert!(r.pnl[1] > 0.0, "a rally raises a max-call: {:?}", r.pnl);
}
