//! Unit tests of job validation (`super`): params, inputs and blob element counts.
use super::*;
use serde_json::json;

/// One CSV blob on disk.
struct OneBlob(PathBuf);
impl BlobLookup for OneBlob {
    fn blob(&self, id: &str) -> Option<(PathBuf, String)> {
        (id == "b").then(|| (self.0.clone(), "csv".to_string()))
    }
}

fn err(r: Result<Validated, ApiError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    }
}

fn price(params: Value, inputs: Value, blobs: &dyn BlobLookup) -> Result<Validated, ApiError> {
    validate("price", &params, &inputs, 1 << 20, false, false, blobs)
}

fn heston_rec() -> Value {
    json!({"model": "heston", "option_type": "put", "spot": 100.0, "strike": 100.0, "rate": 0.02,
        "maturity": 1.0, "kappa": 1.5, "theta": 0.04, "xi": 0.5, "rho": -0.6, "v0": 0.04})
}

fn basket_rec(average: &str, correlation: Value) -> Value {
    json!({"style": "basket", "average": average, "strike": 100.0, "rate": 0.0, "maturity": 1.0,
        "assets": [{"spot": 100.0, "volatility": 0.2, "weight": 1.0},
                   {"spot": 100.0, "volatility": 0.3, "weight": 1.0},
                   {"spot": 100.0, "volatility": 0.25, "weight": 1.0}],
        "correlation": correlation})
}

/// Every kind of record is accepted; a Black-Scholes book under Philox without a target
/// keeps its batched path (`Task::Price`), anything else is a solo `Task::PriceBook`.
#[test]
fn every_option_kind_is_accepted_and_plain_books_keep_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let none = OneBlob(dir.path().join("none.csv"));
    let plain = json!({"option_type": "call", "spot": 100.0, "strike": 100.0, "rate": 0.0,
        "volatility": 0.2, "maturity": 1.0});
    let v = price(json!({"method": "analytic"}), json!({"options": [plain]}), &none).unwrap();
    assert!(matches!(v.task, Task::Price { ref options, .. } if options.len() == 1));
    assert_eq!(v.batch_key, "price:analytic");

    let corr = json!([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]]);
    let american = json!({"option_type": "put", "style": "american", "spot": 36.0, "strike": 40.0,
        "rate": 0.06, "volatility": 0.2, "maturity": 1.0, "fixings": 50});
    let book = json!({"options": [plain, heston_rec(), american, basket_rec("geometric", corr.clone())]});
    let v = price(json!({"method": "analytic"}), book.clone(), &none).unwrap();
    let Task::PriceBook {
        ref options,
        target_se: None,
        ..
    } = v.task
    else {
        panic!("{:?}", v.task)
    };
    let kinds: Vec<&str> = options.iter().map(BookOption::kind).collect();
    assert_eq!(kinds, ["bs", "heston", "american", "basket"]);
    assert!(v.batch_key.starts_with("solo:"), "{}", v.batch_key);
    assert_eq!(v.elements, 4);
    // the stored task deserializes to itself
    let back: Task = serde_json::from_str(&serde_json::to_string(&v.task).unwrap()).unwrap();
    assert_eq!(back, v.task);

    // mc with an arithmetic basket and Sobol; a plain book under Sobol is a book too
    let mut mixed = book.clone();
    mixed["options"][3] = basket_rec("arithmetic", corr);
    let v = price(
        json!({"method": "mc", "rng": "sobol", "replicates": 8, "paths": 4096}),
        mixed,
        &none,
    )
    .unwrap();
    assert!(
        matches!(v.task, Task::PriceBook { mc, .. } if mc.rng == kiln::core::finance::Rng::Sobol { replicates: 8 })
    );
    let v = price(
        json!({"method": "mc", "target_se": "1e-3rel", "max_paths": 1 << 20}),
        json!({"options": [plain]}),
        &none,
    )
    .unwrap();
    assert!(matches!(
        v.task,
        Task::PriceBook {
            target_se: Some(TargetSe::Relative(_)),
            max_paths: 1048576,
            ..
        }
    ));
}

/// American barrier records and CSV rows are accepted as their own kind (the stored task
/// keeps the barrier); a bad one is refused naming the option and the field.
#[test]
fn american_barrier_options_are_accepted_and_bad_ones_named() {
    let dir = tempfile::tempdir().unwrap();
    let none = OneBlob(dir.path().join("none.csv"));
    let rec = json!({"option_type": "put", "style": "american_barrier_up_out", "spot": 40.0,
        "strike": 40.0, "rate": 0.06, "volatility": 0.2, "maturity": 1.0, "fixings": 50,
        "barrier": 46.0, "rebate": 0.5});
    let v = price(json!({"method": "mc"}), json!({"options": [rec.clone()]}), &none).unwrap();
    let Task::PriceBook { ref options, .. } = v.task else {
        panic!("{:?}", v.task)
    };
    let BookOption::AmericanBarrier { spec, continuous } = &options[0] else {
        panic!("{options:?}")
    };
    assert_eq!((spec.barrier, spec.rebate, *continuous), (46.0, 0.5, false));
    let back: Task = serde_json::from_str(&serde_json::to_string(&v.task).unwrap()).unwrap();
    assert_eq!(back, v.task);
    let mut bad = rec.clone();
    bad["rebate"] = json!(-2.0);
    let e = err(price(
        json!({"method": "analytic"}),
        json!({"options": [rec, bad]}),
        &none,
    ));
    assert!(
        e.contains("inputs.options[1]") && e.contains("rebate = -2"),
        "{e}"
    );

    let csv = dir.path().join("book.csv");
    std::fs::write(
        &csv,
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,barrier\n\
         a,put,american_barrier_down_in,40,40,0.06,0.2,1,,37\n\
         b,put,american_barrier_down_in,40,40,0.06,0.2,1,,\n",
    )
    .unwrap();
    let e = err(price(
        json!({"method": "analytic"}),
        json!({"csv_blob": "b"}),
        &OneBlob(csv),
    ));
    assert!(e.contains("barrier is empty"), "{e}");
}

/// A CSV blob's Heston and American rows are read; a basket row is refused before the
/// file it names is opened (it names a server path).
#[test]
fn csv_blobs_price_every_kind_but_basket_rows() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("book.csv");
    std::fs::write(
        &csv,
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
         a,call,european,100,100,0.05,0.2,1,,,,,,,\n\
         b,put,american,36,40,0.06,0.2,1,50,,,,,,\n\
         c,call,european,100,100,0.0,,1,,heston,1.5,0.04,0.5,-0.6,0.04\n",
    )
    .unwrap();
    let v = price(json!({"method": "mc"}), json!({"csv_blob": "b"}), &OneBlob(csv)).unwrap();
    let Task::PriceBook { options, .. } = v.task else {
        panic!("{:?}", v.task)
    };
    let kinds: Vec<&str> = options.iter().map(BookOption::kind).collect();
    assert_eq!(kinds, ["bs", "american", "heston"]);

    let csv = dir.path().join("baskets.csv");
    std::fs::write(
        &csv,
        "type,style,spot,strike,rate,volatility,maturity,basket\n\
         call,european,100,100,0.05,0.2,1,\n\
         call,basket,,100,0.05,,1,/etc/passwd\n",
    )
    .unwrap();
    let e = err(price(
        json!({"method": "mc"}),
        json!({"csv_blob": "b"}),
        &OneBlob(csv),
    ));
    assert!(
        e.contains("row 2 is a basket row") && e.contains("inputs.options") && !e.contains("passwd"),
        "{e}"
    );
}

/// Bad records and params are refused at validation, naming the option and the field:
/// unknown fields, missing Heston parameters, a correlation matrix that is not positive
/// definite, closed forms that do not exist, targets where they do not apply.
#[test]
fn bad_books_are_refused_naming_the_option_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let none = OneBlob(dir.path().join("none.csv"));
    let ok = json!({"spot": 100.0, "strike": 100.0, "rate": 0.0, "volatility": 0.2, "maturity": 1.0});
    let refused = |params: Value, options: Vec<Value>, needles: &[&str]| {
        let e = err(price(params, json!({ "options": options }), &none));
        for n in needles {
            assert!(e.contains(n), "wanted `{n}` in: {e}");
        }
    };
    let mut sigma = ok.clone();
    sigma["sigma"] = json!(0.2);
    refused(
        json!({}),
        vec![ok.clone(), sigma],
        &["inputs.options[1]", "unknown field `sigma`"],
    );
    let mut h = heston_rec();
    h.as_object_mut().unwrap().remove("xi");
    h.as_object_mut().unwrap().remove("v0");
    refused(
        json!({}),
        vec![h],
        &["inputs.options[0]", "model heston needs xi, v0"],
    );
    let not_pd = json!([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]]);
    refused(
        json!({"method": "mc"}),
        vec![ok.clone(), basket_rec("geometric", not_pd)],
        &["inputs.options[1]", "not positive definite: pivot 3"],
    );
    let corr = json!([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]]);
    refused(
        json!({"method": "analytic"}),
        vec![basket_rec("arithmetic", corr)],
        &[
            "inputs.options[0]",
            "average arithmetic has no closed form; use method mc",
        ],
    );
    let mut asian = heston_rec();
    asian["style"] = json!("asian_arithmetic");
    asian["fixings"] = json!(12);
    refused(
        json!({"method": "analytic"}),
        vec![asian],
        &[
            "inputs.options[0]",
            "asian_arithmetic under model heston has no closed form; use method mc",
        ],
    );
    refused(
        json!({"method": "mc", "target_se": 1e-3}),
        vec![ok.clone(), heston_rec()],
        &[
            "inputs.options[1]",
            "target_se prices Black-Scholes options only (this one is heston)",
        ],
    );
    refused(
        json!({"target_se": 1e-3}),
        vec![ok.clone()],
        &["params.target_se needs method mc"],
    );
    refused(
        json!({"method": "mc", "target_se": "-1"}),
        vec![ok.clone()],
        &["params.target_se", "must be > 0"],
    );
    refused(
        json!({"method": "mc", "rng": "mt19937"}),
        vec![ok.clone()],
        &["params.rng = `mt19937`"],
    );
    refused(
        json!({"method": "mc", "rng": "sobol", "replicates": 1}),
        vec![ok.clone()],
        &["params:", "replicates"],
    );
    refused(
        json!({"method": "mc", "replicates": 8}),
        vec![ok.clone()],
        &["params.replicates needs rng = \"sobol\""],
    );
    refused(
        json!({"method": "mc", "max_paths": 1 << 20}),
        vec![ok.clone()],
        &["params.max_paths caps a target_se run"],
    );
    refused(
        json!({"method": "mc", "turbo": true}),
        vec![ok],
        &["unknown field `turbo`"],
    );
}

/// A stored task is JSON text: a price job's numbers must come back from the store as
/// the same f64s, or a worker would price a different book than the one validated. A
/// 17-digit value is where serde_json's default (best-effort) float parser is one ulp
/// off; the workspace turns on its `float_roundtrip` feature.
#[test]
fn stored_books_keep_every_bit() {
    let dir = tempfile::tempdir().unwrap();
    let none = OneBlob(dir.path().join("none.csv"));
    let spot = 130.65331632653061_f64;
    let rec = json!({"style": "american", "spot": spot, "strike": 0.30000000000000004, "rate": 0.03,
        "volatility": 0.2, "maturity": 1.0, "fixings": 4});
    let v = price(json!({"method": "mc"}), json!({ "options": [rec] }), &none).unwrap();
    let text = serde_json::to_string(&v.task).unwrap();
    let back: Task = serde_json::from_str(&text).unwrap();
    let Task::PriceBook { options, .. } = &back else {
        panic!("{back:?}")
    };
    let BookOption::American { spec, .. } = options[0] else {
        panic!("{options:?}")
    };
    assert_eq!(spec.spot.to_bits(), spot.to_bits(), "{text}");
    assert_eq!(back, v.task);
}

/// A number past float32's range is refused at submission, naming the element; it used to
/// be stored as `null` and fail in the worker.
#[test]
fn array_numbers_past_float32_are_refused_naming_the_element() {
    let e = err(validate(
        "elementwise",
        &json!({"op": "relu"}),
        &json!({"x": {"shape": [3], "data": [1.0, 1e39, 2.0]}}),
        1 << 20,
        false,
        false,
        &OneBlob(PathBuf::new()),
    ));
    assert!(
        e.contains("inputs.x.data[1]: 1e+39") && e.contains("float32"),
        "{e}"
    );
    let e = err(validate(
        "elementwise",
        &json!({"op": "relu"}),
        &json!({"x": {"shape": [2], "data": [1.0, null]}}),
        1 << 20,
        false,
        false,
        &OneBlob(PathBuf::new()),
    ));
    assert!(e.contains("inputs.x") && e.contains("null"), "{e}");
}

/// Every list of numbers and float32 parameter is checked element by element at
/// submission: each bad element is a 400 naming it by path and index. Before, a clamp bound
/// past float32's range parsed as an infinity, passed (an infinite bound is ordered), was
/// stored as `null` and failed on the worker (`clamp` needs `lo`); a `null` or a string in
/// a list was refused without its index.
#[test]
fn bad_numbers_are_refused_naming_the_element() {
    let none = OneBlob(PathBuf::new());
    let run = |kind: &str, params: Value, inputs: Value| {
        err(validate(kind, &params, &inputs, 1 << 20, false, true, &none))
    };
    let x = json!({"x": {"shape": [2], "data": [1.0, 2.0]}});
    for (params, want) in [
        (
            json!({"op": "clamp", "lo": -1e39, "hi": 1.0}),
            "params.lo: -1e+39 is outside float32's range",
        ),
        (
            json!({"op": "clamp", "lo": 0.0, "hi": 1e39}),
            "params.hi: 1e+39 is outside float32's range",
        ),
        (
            json!({"op": "scale_shift", "a": "2", "b": 1.0}),
            "params.a: \"2\" (a string) is not a number",
        ),
    ] {
        let e = run("elementwise", params, x.clone());
        assert!(e.starts_with(want), "{want}\n{e}");
    }
    for (data, want) in [
        (
            json!([1.0, "2"]),
            "inputs.x.data[1]: \"2\" (a string) is not a number",
        ),
        (
            json!([true, 2.0]),
            "inputs.x.data[0]: true (a boolean) is not a number",
        ),
        (json!([1.0, [2.0]]), "inputs.x.data[1]: a list is not a number"),
    ] {
        let e = run("elementwise", json!({"op": "relu"}), json!({"x": {"data": data}}));
        assert!(e.starts_with(want), "{want}\n{e}");
    }
    let e = run(
        "elementwise",
        json!({"op": "relu"}),
        json!({"x": {"shape": [2, null], "data": [1.0, 2.0]}}),
    );
    assert!(e.starts_with("inputs.x.shape[1]: null is not a size"), "{e}");
    let img = json!({"image": {"shape": [3, 3], "data": vec![0.5; 9]}});
    let e = run(
        "filter2d",
        json!({"kernel": {"shape": [3, 3], "weights": [0.1, 0.1, 0.1, 0.1, null, 0.1, 0.1, 0.1, 0.1]}}),
        img,
    );
    assert!(
        e.starts_with("params.kernel.weights[4]: null is not a number"),
        "{e}"
    );
    let e = run(
        "gemm",
        json!({"m": 1, "n": 1, "k": 2}),
        json!({"a": {"data": [1.0, 2.0]}, "b": {"data": [1.0, 1e39]}}),
    );
    assert!(
        e.starts_with("inputs.b.data[1]: 1e+39 is outside float32's range"),
        "{e}"
    );
    let red = json!({"type": "reduction", "in_params": "T x", "out_params": "T y", "map_expr": "x",
        "reduce_expr": "a + b", "post_map_expr": "y = a", "identity": "0", "axis": [0, "1"]});
    let e = run(
        "user_kernel",
        red,
        json!({"x": {"shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]}}),
    );
    assert!(
        e.starts_with("params.axis[1]: \"1\" (a string) is not an integer"),
        "{e}"
    );
}
