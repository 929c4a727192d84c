//! The option CSV's tests: parsing rules, every bad row reported, prices written and read back.

use super::*;
use kiln_core::finance::PriceResult;

fn parse(s: &str) -> OptionsFile {
    parse_options(Path::new("test.csv"), s.as_bytes()).unwrap()
}

#[test]
fn heston_and_american_rows_parse_and_bad_ones_say_why() {
    let f = parse(
        "id,type,style,spot,strike,rate,volatility,maturity,fixings,model,kappa,theta,xi,rho,v0\n\
         h1,call,european,100,100,0,,1,,heston,1.5768,0.0398,0.5751,-0.5711,0.0175\n\
         h2,put,asian_arithmetic,100,95,0.02,0.3,1,12,HESTON,2,0.04,0.3,-0.7,0.04\n\
         a1,put,american,36,40,0.06,0.2,1,50,,,,,,\n\
         a2,put,AMERICAN,36,40,0.06,0.2,1,,bs,,,,,\n\
         b1,call,european,100,100,0.01,0.2,1,,,2,,,,\n\
         b2,call,asian_geometric,100,100,0.01,0.2,1,4,heston,2,0.04,0.3,-0.7,0.04\n\
         b3,call,european,100,100,0.01,0.2,1,,heston,2,0.04,0.3,,0.04\n\
         b4,put,american,36,40,0.06,0.2,1,,heston,2,0.04,0.3,-0.7,0.04\n\
         b5,put,american,36,40,0.06,0.2,1,0,,,,,,\n\
         b6,call,european,100,100,0.01,0.2,1,,sabr,,,,,\n",
    );
    let row = |id: &str| f.options.iter().find(|o| o.id == id).unwrap();
    let h1 = row("h1").heston().unwrap();
    assert_eq!(h1.heston.kappa, 1.5768);
    assert!((h1.option.volatility - 0.0398f64.sqrt()).abs() < 1e-15);
    assert_eq!(row("h2").spec.fixings, Some(12));
    assert!(matches!(row("h2").kind, RowKind::Heston(_)));
    assert_eq!(row("a1").kind, RowKind::American(Some(50)));
    assert_eq!(row("a1").american(7).unwrap().exercise_dates, 50);
    assert_eq!(row("a2").american(7).unwrap().exercise_dates, 7);
    assert!(row("a2").heston().is_none());
    let why = |id: &str| f.errors.iter().find(|e| e.id == id).unwrap().reason.clone();
    assert!(why("b1").contains("kappa given for model bs"), "{}", why("b1"));
    assert!(why("b2").contains("european"), "{}", why("b2"));
    assert!(why("b3").contains("rho is empty"), "{}", why("b3"));
    assert!(why("b4").contains("Black-Scholes only"), "{}", why("b4"));
    assert!(why("b5").contains("exercise"), "{}", why("b5"));
    assert!(why("b6").contains("unknown model `sabr`"), "{}", why("b6"));
    assert_eq!(f.options.len(), 4);
    assert_eq!(f.errors.len(), 6);
}

#[test]
fn american_barrier_rows_parse_and_bad_ones_name_the_field() {
    let f = parse(
        "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier,rebate,model\n\
         o1,put,american_barrier_down_out,40,44,0.06,,0.3,1,50,33,0.5,\n\
         o2,call,AMERICAN_BARRIER_UP_IN,100,100,0.03,0.05,0.25,1,,120,,bs\n\
         b1,put,american_barrier_down_out,40,44,0.06,,0.3,1,50,,,\n\
         b2,put,american_barrier_up_out,40,44,0.06,,0.3,1,50,-5,,\n\
         b3,put,american_barrier_up_out,40,44,0.06,,0.3,1,50,45,-1,\n\
         b4,put,american_barrier_up_out,40,44,0.06,,0.3,1,0,45,,\n\
         b5,put,american_barrier_up_out,40,44,0.06,,0.3,1,,45,,heston\n\
         b6,put,american_barrier_sideways,40,44,0.06,,0.3,1,,45,,\n",
    );
    let row = |id: &str| f.options.iter().find(|o| o.id == id).unwrap();
    let o1 = row("o1").american_barrier(7).unwrap();
    assert_eq!(row("o1").kind, RowKind::AmericanBarrier(Some(50)));
    assert_eq!(
        (o1.style, o1.barrier, o1.rebate, o1.option.exercise_dates),
        (Style::BarrierDownOut, 33.0, 0.5, 50)
    );
    assert_eq!(o1.option.strike, 44.0);
    assert!(row("o1").american(7).is_none());
    let o2 = row("o2").american_barrier(7).unwrap();
    assert_eq!(
        (o2.style, o2.option.exercise_dates, o2.option.dividend),
        (Style::BarrierUpIn, 7, 0.05)
    );
    assert_eq!(row("o2").kind, RowKind::AmericanBarrier(None));
    let err = |id: &str| f.errors.iter().find(|e| e.id == id).unwrap().clone();
    let why = |id: &str| err(id).reason;
    assert!(why("b1").contains("barrier is empty"), "{}", why("b1"));
    assert!(why("b1").contains("american_barrier_down_out"), "{}", why("b1"));
    assert!(why("b2").contains("barrier = -5"), "{}", why("b2"));
    assert!(why("b3").contains("rebate = -1"), "{}", why("b3"));
    assert!(
        why("b4").contains("fixings = 0") && why("b4").contains("exercise dates"),
        "{}",
        why("b4")
    );
    assert!(why("b5").contains("Black-Scholes only"), "{}", why("b5"));
    assert!(why("b6").contains("american_barrier_up_out"), "{}", why("b6"));
    assert_eq!(err("b3").row, 5);
    assert_eq!((f.options.len(), f.errors.len()), (2, 6));
}

fn header_error(s: &str) -> String {
    parse_options(Path::new("test.csv"), s.as_bytes())
        .unwrap_err()
        .to_string()
}

#[test]
fn columns_in_any_order_and_case() {
    let a = parse(
        "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\n\
         e1,call,european,100,100,0.05,0.01,0.2,1,,\n\
         a1,put,asian_geometric,100,95,0.05,0.01,0.2,1,12,\n\
         b1,call,barrier_up_out,100,100,0.05,0.01,0.2,1,,130\n",
    );
    let b = parse(
        " Barrier , MATURITY,volatility,Fixings,dividend,rate,strike,spot,Style,TYPE,id\n\
         130 ,1,0.2,,0.01,0.05,100,100,BARRIER_UP_OUT,Call,b1\n\
         ,1,0.2,,0.01,0.05,100,100,european,call,e1\n\
         \n\
         ,,,,,,,,,,\n\
         ,1,0.2,12,0.01,0.05,95,100,asian_geometric,put,a1\n",
    );
    assert!(
        a.errors.is_empty() && b.errors.is_empty(),
        "{:?} {:?}",
        a.errors,
        b.errors
    );
    let find = |f: &OptionsFile, id: &str| f.options.iter().find(|o| o.id == id).unwrap().spec;
    for id in ["e1", "a1", "b1"] {
        assert_eq!(find(&a, id), find(&b, id), "{id}");
    }
    assert_eq!(find(&a, "b1").barrier, Some(130.0));
    assert_eq!(find(&a, "a1").fixings, Some(12));
    assert_eq!(find(&a, "a1").option_type, OptionType::Put);
    // The blank line is skipped: data rows stay 1..=3, file lines say where.
    let rows: Vec<(usize, u64)> = b.options.iter().map(|o| (o.row, o.line)).collect();
    assert_eq!(rows, vec![(1, 2), (2, 3), (3, 6)]);
}

#[test]
fn optional_columns_default() {
    let f =
        parse("type,style,spot,strike,rate,volatility,maturity\r\n\r\nput,european,100,90,0.03,0.25,0.5\r\n");
    assert!(f.errors.is_empty(), "{:?}", f.errors);
    let o = &f.options[0];
    assert_eq!((o.id.as_str(), o.spec.dividend, o.row, o.line), ("1", 0.0, 1, 3));
    let f = parse(
        "id,type,style,spot,strike,rate,dividend,volatility,maturity\n,call,european,100,90,0.03,,0.25,0.5\n",
    );
    assert!(f.errors.is_empty(), "{:?}", f.errors);
    assert_eq!((f.options[0].id.as_str(), f.options[0].spec.dividend), ("1", 0.0));
}

#[test]
fn header_problems_name_the_columns() {
    let e = header_error("id,type,style,spot,rate,vol,maturity\n");
    assert!(
        e.contains("missing required column(s) `strike`, `volatility`"),
        "{e}"
    );
    assert!(e.contains("unknown column(s) `vol`"), "{e}");
    // the file is readable: not called truncated or corrupt, nor sent to be re-copied
    assert!(!e.contains("corrupt") && !e.contains("re-copy"), "{e}");
    // a near miss is answered with the column it nearly spells
    assert!(e.contains("`vol` (did you mean `volatility`?)"), "{e}");
    let e = header_error("type,style,spot,strike,rate,volatility,maturity,spot\n");
    assert!(e.contains("named twice: `spot`"), "{e}");
    let e = header_error("");
    assert!(e.contains("empty"), "{e}");
    assert!(e.contains("test.csv"), "{e}");
}

#[test]
fn an_unknown_column_is_a_header_error_listing_the_accepted_ones() {
    let e = parse_options(
        Path::new("book.csv"),
        "id,type,style,spot,strike,rate,volatility,maturity,exercise,strke\n".as_bytes(),
    )
    .unwrap_err();
    assert!(matches!(e, IoError::Content { .. }), "{e:?}");
    let e = e.to_string();
    // each column named, with where its content goes or the column it nearly spells
    assert!(
        e.contains("unknown column(s) `exercise` (the exercise style goes in `style`"),
        "{e}"
    );
    assert!(e.contains("`strke` (did you mean `strike`?)"), "{e}");
    // every accepted column listed, nothing said about damage
    for c in INPUT_COLUMNS {
        assert!(e.contains(c), "{c} not listed: {e}");
    }
    assert!(
        !e.contains("corrupt") && !e.contains("truncated") && !e.contains("re-copy"),
        "{e}"
    );
    // a name nothing is near gets no guess
    let e = header_error("type,style,spot,strike,rate,volatility,maturity,notional\n");
    assert!(e.contains("unknown column(s) `notional`. The header"), "{e}");
}

#[test]
fn every_bad_row_is_reported_with_its_number() {
    let f = parse(
        "id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\n\
         ok1,call,european,100,100,0.05,0,0.2,1,,\n\
         t,straddle,european,100,100,0.05,0,0.2,1,,\n\
         s,call,bermudan,100,100,0.05,0,0.2,1,,\n\
         n,call,european,abc,100,0.05,0,0.2,1,,\n\
         v,call,european,100,100,0.05,0,0,1,,\n\
         m,call,european,100,100,0.05,0,0.2,-1,,\n\
         b,call,barrier_down_in,100,100,0.05,0,0.2,1,,\n\
         f,call,asian_arithmetic,100,100,0.05,0,0.2,1,,\n\
         nan,call,european,100,NaN,0.05,0,0.2,1,,\n\
         inf,put,european,100,100,inf,0,0.2,1,,\n\
         x,call,european,100,100,0.05,0,0.2,1,,90\n\
         fx,call,asian_geometric,100,100,0.05,0,0.2,1,2.5,\n\
         ok1,put,european,100,100,0.05,0,0.2,1,,\n\
         two,put,european,-5,100,0.05,0,zero,1,,\n\
         ok2,put,asian_arithmetic,100,100,0.05,0,0.2,1,12,\n",
    );
    let ids: Vec<&str> = f.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, vec!["ok1", "ok2"]);
    let want: [(usize, &str, &[&str]); 13] = [
        (2, "t", &["unknown type `straddle`"]),
        (3, "s", &["unknown style `bermudan`"]),
        (4, "n", &["spot: `abc` is not a number"]),
        (5, "v", &["volatility = 0"]),
        (6, "m", &["maturity = -1"]),
        (7, "b", &["barrier is empty", "barrier_down_in"]),
        (8, "f", &["fixings is empty", "asian_arithmetic"]),
        (9, "nan", &["strike: `NaN` is not a finite number"]),
        (10, "inf", &["rate: `inf` is not a finite number"]),
        (11, "x", &["barrier = 90 given for style european"]),
        (12, "fx", &["fixings: `2.5` is not a whole number"]),
        (13, "ok1", &["id `ok1` is already used by row 1"]),
        (14, "two", &["volatility: `zero` is not a number"]),
    ];
    assert_eq!(f.errors.len(), want.len(), "{:#?}", f.errors);
    for (e, (row, id, parts)) in f.errors.iter().zip(want) {
        assert_eq!((e.row, e.id.as_str()), (row, id), "{e}");
        assert_eq!(e.line, row as u64 + 1);
        for p in parts {
            assert!(e.reason.contains(p), "row {row}: `{}` lacks `{p}`", e.reason);
        }
    }
    assert_eq!(f.rows(), 15);
    assert!(f.errors[1]
        .to_string()
        .starts_with("row 3 (line 4, id `s`): unknown style"));
}

#[test]
fn ragged_rows_are_row_errors() {
    let f = parse("type,style,spot,strike,rate,volatility,maturity\ncall,european,100\ncall,european,100,100,0.05,0.2,1,7\n");
    assert_eq!(f.errors.len(), 2, "{:?}", f.errors);
    assert!(
        f.errors[0].reason.contains("strike is empty"),
        "{}",
        f.errors[0].reason
    );
    assert!(f.errors[1].reason.contains("8 fields"), "{}", f.errors[1].reason);
}

#[test]
fn missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nope.csv");
    let e = read_options(&p).unwrap_err();
    assert!(matches!(e, IoError::NotFound { .. }), "{e}");
    assert!(e.to_string().contains("nope.csv"));
}

#[test]
fn prices_round_trip_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prices.csv");
    let mut exact = PriceResult::exact(10.450583572185565);
    exact.delta = Some(0.6368306511756191);
    exact.theta = Some(-6.414027546438197);
    let recs = vec![
        PriceRecord::new("a,b \"quoted\"", &exact),
        PriceRecord {
            id: "tiny".into(),
            price: 1.234e-12,
            std_error: 3.0e-7,
            delta: None,
            gamma: Some(2.5e20),
            vega: Some(-0.0),
            theta: None,
            rho: Some(1.0 / 3.0),
        },
    ];
    write_prices(&p, &recs).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(
        text.starts_with("id,price,std_error,delta,gamma,vega,theta,rho\n"),
        "{text}"
    );
    assert!(
        text.contains(",0,0.6368306511756191,,,-6.414027546438197,\n"),
        "{text}"
    );
    let back = read_prices(&p).unwrap();
    // f64 `==`: the same bits, up to the sign of zero.
    assert_eq!(back, recs);
}

#[test]
fn non_finite_values_are_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prices.csv");
    let mut r = PriceRecord::new("bad", &PriceResult::exact(f64::NAN));
    let e = write_prices(&p, std::slice::from_ref(&r)).unwrap_err();
    assert!(e.to_string().contains("price is NaN"), "{e}");
    r.price = 1.0;
    r.vega = Some(f64::INFINITY);
    let e = write_prices(&p, &[r]).unwrap_err();
    assert!(e.to_string().contains("vega is inf"), "{e}");
    assert!(!p.exists());
}

#[test]
fn greek_errors_follow_the_price_columns_and_readers_skip_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prices.csv");
    let mut r = PriceRecord::new("a", &PriceResult::exact(2.5));
    r.delta = Some(0.5);
    r.rho = Some(3.0);
    let e = GreekErrors {
        delta: Some(0.25),
        rho: Some(0.125),
        ..GreekErrors::default()
    };
    write_prices_with_errors(&p, std::slice::from_ref(&r), &[e]).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(
        text,
        "id,price,std_error,delta,gamma,vega,theta,rho,delta_se,gamma_se,vega_se,theta_se,rho_se\n\
         a,2.5,0,0.5,,,,3,0.25,,,,0.125\n"
    );
    assert_eq!(read_prices(&p).unwrap(), [r.clone()]);
    // a length mismatch or a non-finite error: nothing written
    std::fs::remove_file(&p).unwrap();
    assert!(write_prices_with_errors(&p, std::slice::from_ref(&r), &[]).is_err());
    let nan = GreekErrors {
        gamma: Some(f64::NAN),
        ..e
    };
    let err = write_prices_with_errors(&p, &[r], &[nan]).unwrap_err();
    assert!(err.to_string().contains("gamma_se is NaN"), "{err}");
    assert!(!p.exists());
}

#[test]
fn errors_file_quotes_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prices.errors.csv");
    let errs = vec![RowError {
        row: 3,
        line: 4,
        id: "x".into(),
        reason: "spot: `a,b` is not a number; strike is empty".into(),
    }];
    write_errors(&p, &errs).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(
        text,
        "row,id,reason\n3,x,\"spot: `a,b` is not a number; strike is empty\"\n"
    );
}

#[test]
fn basket_rows_name_shared_files_and_bad_ones_say_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("b")).unwrap();
    std::fs::write(
        dir.path().join("b/two.csv"),
        "asset,weight,spot,volatility,dividend,X,Y\nX,0.5,100,0.2,0.01,1,0.4\nY,0.5,80,0.3,,0.4,1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("npd.csv"),
        "asset,weight,spot,volatility,dividend,A,B,C\n\
         A,1,100,0.2,0,1,0.9,0.9\nB,1,50,0.3,0,0.9,1,-0.9\nC,1,70,0.3,0,0.9,-0.9,1\n",
    )
    .unwrap();
    let book = dir.path().join("book.csv");
    std::fs::write(
        &book,
        "id,type,style,spot,strike,rate,volatility,maturity,dividend,basket,average\n\
         k1,call,basket,,90,0.02,,1,,b/two.csv,\n\
         k2,put,BASKET,,90,0.02,,1,,b/two.csv,Geometric\n\
         e1,call,european,100,100,0.02,0.2,1,,,\n\
         x1,call,basket,100,90,0.02,,1,,b/two.csv,\n\
         x2,call,basket,,90,0.02,,1,,npd.csv,\n\
         x3,call,basket,,90,0.02,,1,,missing.csv,\n\
         x4,call,basket,,90,0.02,,1,,b/two.csv,median\n\
         x5,call,european,100,100,0.02,0.2,1,,b/two.csv,\n\
         x6,call,basket,,90,0.02,0.2,1,0.01,,\n\
         x7,call,basket,,90,0.02,,1,,npd.csv,\n\
         x8,call,basket,,0,0.02,,1,,b/two.csv,\n\
         x9,put,basket,,-10,0.02,,1,,b/two.csv,\n",
    )
    .unwrap();
    let f = read_options(&book).unwrap();
    let row = |id: &str| f.options.iter().find(|o| o.id == id).unwrap();
    // one file read once for two rows; the bad one is not kept
    assert_eq!(f.baskets.len(), 1);
    let k1 = row("k1").basket(&f.baskets).unwrap();
    assert_eq!(
        (k1.assets.len(), k1.average, k1.strike),
        (2, BasketAverage::Arithmetic, 90.0)
    );
    assert_eq!(k1.assets[1].dividend, 0.0);
    let k2 = row("k2").basket(&f.baskets).unwrap();
    assert_eq!((k2.kind, k2.average), (OptionType::Put, BasketAverage::Geometric));
    assert!(row("e1").basket(&f.baskets).is_none());
    let why = |id: &str| f.errors.iter().find(|e| e.id == id).unwrap().reason.clone();
    assert!(
        why("x1").contains("spot: `100` given for style basket"),
        "{}",
        why("x1")
    );
    assert!(
        why("x2").contains("npd.csv") && why("x2").contains("pivot 3 (asset `C`)"),
        "{}",
        why("x2")
    );
    assert_eq!(why("x2"), why("x7"));
    assert!(
        why("x3").contains("missing.csv") && why("x3").contains("cannot be read"),
        "{}",
        why("x3")
    );
    assert!(why("x4").contains("average: unknown `median`"), "{}", why("x4"));
    assert!(why("x5").contains("belongs to style basket"), "{}", why("x5"));
    let x6 = why("x6");
    assert!(
        x6.contains("volatility: `0.2`") && x6.contains("dividend: `0.01`") && x6.contains("basket is empty"),
        "{x6}"
    );
    // a basket's strike may be 0 or below (the spot slot holds a placeholder, not the strike)
    assert_eq!(row("x8").basket(&f.baskets).unwrap().strike, 0.0);
    assert_eq!(row("x9").basket(&f.baskets).unwrap().strike, -10.0);
    assert_eq!((f.options.len(), f.errors.len()), (5, 7));
}

#[test]
fn spreads_and_rainbows_are_basket_rows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("spread.csv"),
        "asset,weight,spot,volatility,dividend,BRENT,WTI\nBRENT,1,82,0.3,0.01,1,0.9\nWTI,-1,78,0.32,0.01,0.9,1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pair.csv"),
        "asset,weight,spot,volatility,dividend,A,B\nA,1,100,0.2,0,1,0.5\nB,1,105,0.25,0,0.5,1\n",
    )
    .unwrap();
    let book = dir.path().join("book.csv");
    std::fs::write(
        &book,
        "id,type,style,spot,strike,rate,volatility,maturity,basket,average\n\
         s1,call,basket,,0,0.02,,1,spread.csv,\n\
         s2,put,basket,,-3,0.02,,1,spread.csv,arithmetic\n\
         r1,call,basket,,100,0.02,,1,pair.csv,max\n\
         r2,put,basket,,100,0.02,,1,pair.csv,MIN\n\
         g1,call,basket,,4,0.02,,1,spread.csv,geometric\n\
         m1,call,basket,,4,0.02,,1,spread.csv,max\n\
         k1,call,basket,,abc,0.02,,1,spread.csv,\n",
    )
    .unwrap();
    let f = read_options(&book).unwrap();
    let row = |id: &str| {
        f.options
            .iter()
            .find(|o| o.id == id)
            .unwrap()
            .basket(&f.baskets)
            .unwrap()
    };
    let s1 = row("s1");
    assert_eq!((s1.spread_legs(), s1.strike), (Some((0, 1)), 0.0));
    assert!(s1.price_analytic().unwrap() > 0.0);
    assert_eq!(row("s2").strike, -3.0);
    assert_eq!(
        (row("r1").average, row("r2").average),
        (BasketAverage::Max, BasketAverage::Min)
    );
    let why = |id: &str| {
        let e = f.errors.iter().find(|e| e.id == id).unwrap();
        (e.row, e.reason.clone())
    };
    // a negative weight is refused where the payoff needs positive ones, naming the asset
    let (r, g1) = why("g1");
    assert!(
        r == 5 && g1.contains("asset `WTI`: weight = -1") && g1.contains("average geometric"),
        "{g1}"
    );
    let (r, m1) = why("m1");
    assert!(
        r == 6 && m1.contains("asset `WTI`: weight = -1") && m1.contains("average max"),
        "{m1}"
    );
    let (r, k1) = why("k1");
    assert!(r == 7 && k1.contains("strike"), "{k1}");
    assert_eq!((f.options.len(), f.errors.len()), (4, 3));
}

#[test]
fn underlying_and_quantity_are_optional_position_cells() {
    // a file without them: every holding is one unit of no named underlying
    let f = parse("type,style,spot,strike,rate,volatility,maturity\ncall,european,100,100,0.05,0.2,1\n");
    assert_eq!(
        f.holdings,
        [Holding {
            underlying: None,
            quantity: 1.0
        }]
    );
    let f = parse(
        "id,type,style,spot,strike,rate,volatility,maturity,underlying,quantity\n\
         a,call,european,100,100,0.05,0.2,1,SPX,-2.5\n\
         b,put,european,100,100,0.05,0.2,1,,\n\
         c,put,european,100,100,0.05,0.2,1,SPX,lots\n\
         d,put,european,100,100,0.05,0.2,1,SPX,inf\n\
         e,put,european,100,-3,0.05,0.2,1,SPX,nan\n",
    );
    assert_eq!(f.options.len(), f.holdings.len());
    assert_eq!(f.holdings[0].underlying.as_deref(), Some("SPX"));
    assert_eq!((f.holdings[0].quantity, f.holdings[1].quantity), (-2.5, 1.0));
    assert_eq!(f.holdings[1].underlying, None);
    let reasons: Vec<(usize, &str)> = f.errors.iter().map(|e| (e.row, e.reason.as_str())).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].0 == 3 && reasons[0].1.contains("quantity: `lots` is not a number"));
    assert!(reasons[1].1.contains("quantity: `inf` is not a finite number"));
    // every reason of a row at once: the strike and the quantity
    assert!(
        reasons[2].1.contains("strike") && reasons[2].1.contains("quantity"),
        "{}",
        reasons[2].1
    );
}

#[test]
fn american_rainbow_rows_take_a_basket_file_and_their_dates_and_bad_ones_say_every_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("three.csv"),
        "asset,weight,spot,volatility,dividend,A,B,C\n\
         A,1,100,0.2,0.1,1,0.3,0.2\nB,1,95,0.3,0.05,0.3,1,0.4\nC,1,105,0.25,0,0.2,0.4,1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("spread.csv"),
        "asset,weight,spot,volatility,dividend,X,Y\nX,1,100,0.2,0,1,0.5\nY,-1,95,0.3,0,0.5,1\n",
    )
    .unwrap();
    let book = dir.path().join("book.csv");
    std::fs::write(
        &book,
        "id,type,style,spot,strike,rate,volatility,maturity,dividend,fixings,barrier,rebate,model,basket,average\n\
         r1,call,american_rainbow,,100,0.05,,1,,9,,,,three.csv,max\n\
         r2,put,AMERICAN_RAINBOW,,90,0.05,,1,,4,,,bs,three.csv,MIN\n\
         x1,call,american_rainbow,,100,0.05,,1,,,,,,three.csv,max\n\
         x2,call,american_rainbow,,100,0.05,,1,,9,,,,three.csv,arithmetic\n\
         x3,call,american_rainbow,100,100,0.05,0.2,1,0.01,0,120,1,heston,,\n\
         x4,call,american_rainbow,,100,0.05,,1,,9,,,,spread.csv,max\n\
         x5,call,american_rainbow,,-5,0.05,,1,,9,,,,three.csv,max\n\
         x6,call,american_rainbow,,100,0.05,,1,,2.5,,,,three.csv,\n\
         x7,call,american,100,100,0.05,0.2,1,,9,,,,three.csv,max\n",
    )
    .unwrap();
    let f = read_options(&book).unwrap();
    let row = |id: &str| f.options.iter().find(|o| o.id == id).unwrap();
    assert_eq!(f.baskets.len(), 2, "each file read once");
    let r1 = row("r1").american_rainbow(&f.baskets).unwrap();
    assert_eq!(
        (
            r1.kind,
            r1.extreme,
            r1.strike,
            r1.rate,
            r1.maturity,
            r1.exercise_dates
        ),
        (OptionType::Call, Extreme::Max, 100.0, 0.05, 1.0, 9)
    );
    assert_eq!(r1.assets.len(), 3);
    assert_eq!(r1.assets[1].dividend, 0.05);
    assert_eq!(r1.correlation[5], 0.4);
    assert!(matches!(
        row("r1").kind,
        RowKind::AmericanRainbow {
            assets: 3,
            dates: 9,
            ..
        }
    ));
    let r2 = row("r2").american_rainbow(&f.baskets).unwrap();
    assert_eq!(
        (r2.kind, r2.extreme, r2.exercise_dates),
        (OptionType::Put, Extreme::Min, 4)
    );
    assert!(row("r1").basket(&f.baskets).is_none());
    assert!(row("r1").american(7).is_none());

    let why = |id: &str| f.errors.iter().find(|e| e.id == id).unwrap().reason.clone();
    let x1 = why("x1");
    assert!(
        x1.contains("fixings is empty") && x1.contains("no continuous-exercise price"),
        "{x1}"
    );
    let x2 = why("x2");
    assert!(
        x2.contains("average: `arithmetic`") && x2.contains("max or min"),
        "{x2}"
    );
    // every reason of the row in one pass
    let x3 = why("x3");
    for part in [
        "spot: `100`",
        "volatility: `0.2`",
        "dividend: `0.01`",
        "barrier: `120`",
        "rebate: `1`",
        "Black-Scholes only",
        "average is empty",
        "basket is empty",
        "fixings = 0",
    ] {
        assert!(x3.contains(part), "{part}: {x3}");
    }
    assert!(why("x4").contains("weight = -1"), "{}", why("x4"));
    assert!(why("x5").contains("strike = -5"), "{}", why("x5"));
    let x6 = why("x6");
    assert!(
        x6.contains("fixings: `2.5` is not a whole number") && x6.contains("average is empty"),
        "{x6}"
    );
    assert!(
        why("x7").contains("belongs to style basket or american_rainbow"),
        "{}",
        why("x7")
    );
    assert_eq!((f.options.len(), f.errors.len()), (2, 7));
}
