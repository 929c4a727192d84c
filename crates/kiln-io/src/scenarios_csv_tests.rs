use super::*;
use kiln_core::finance::risk::ALL_UNDERLYINGS;

fn parse(s: &str) -> ScenariosFile {
    parse_scenarios(Path::new("s.csv"), s.as_bytes()).unwrap()
}

#[test]
fn scenarios_group_rows_by_name_in_first_row_order() {
    let f = parse(
        "Scenario, underlying ,spot_shift,spot_shift_kind,vol_shift,rate_shift\n\
         up,AAA,0.1,,0.02,\n\
         down,AAA,-7.5,absolute,,0.001\n\
         \n\
         up,*,0.05,relative,,-0.002\n",
    );
    assert!(f.errors.is_empty(), "{:?}", f.errors);
    let names: Vec<&str> = f.set.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["up", "down"]);
    let up = &f.set.scenarios[0];
    assert_eq!(up.shock(Some("AAA")).spot, SpotShift::Relative(0.1));
    assert_eq!(up.shock(Some("AAA")).vol, 0.02);
    assert_eq!(up.shock(Some("BBB")).rate, -0.002);
    assert_eq!(up.shock(None), up.default);
    let down = &f.set.scenarios[1];
    assert_eq!(down.shock(Some("AAA")).spot, SpotShift::Absolute(-7.5));
    assert!(down.default.is_zero());
    assert_eq!(ALL_UNDERLYINGS, "*");
}

#[test]
fn every_bad_row_is_reported_in_one_pass_naming_the_column() {
    let f = parse(
        "scenario,underlying,spot_shift,spot_shift_kind,vol_shift,rate_shift\n\
         ok,AAA,0.1,,,\n\
         a,AAA,abc,,,\n\
         b,,0.1,,,\n\
         c,AAA,-1.2,,,\n\
         d,AAA,1,sideways,,\n\
         e,AAA,,,inf,\n\
         ok,AAA,0.2,,,\n\
         ,BBB,0.1,,,\n\
         f,AAA,0.1,,0.01,x\n\
         a,BBB,0.1,,,\n",
    );
    let rows: Vec<usize> = f.errors.iter().map(|e| e.row).collect();
    assert_eq!(rows, [2, 3, 4, 5, 6, 7, 8, 9], "{:?}", f.errors);
    let r = |i: usize| f.errors[i].reason.clone();
    assert!(r(0).contains("spot_shift") && r(0).contains("`abc`"), "{}", r(0));
    assert!(r(1).contains("underlying is empty"));
    assert!(r(2).contains("> -1"));
    assert!(r(3).contains("spot_shift_kind") && r(3).contains("sideways"));
    assert!(r(4).contains("vol_shift") && r(4).contains("finite"));
    assert!(r(5).contains("already in row 1"), "{}", r(5));
    assert!(r(6).contains("scenario is empty"));
    assert!(r(7).contains("rate_shift"));
    // a scenario with a bad row is dropped whole; `ok` had a bad duplicate row
    let names: Vec<&str> = f.set.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert!(!names.contains(&"a") && !names.contains(&"ok"), "{names:?}");
    assert!(f.dropped.contains(&"a".to_string()));
    let shown = f.errors[0].to_string();
    assert!(shown.contains("row 2") && shown.contains("line 3"), "{shown}");
}

#[test]
fn a_bad_header_names_the_column() {
    let e = parse_scenarios(Path::new("s.csv"), "scenario,spot,vol\n".as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s.csv") && e.contains("`underlying`") && e.contains("spot_shift"),
        "{e}"
    );
}

#[test]
fn covariance_and_pnl_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cov.csv");
    std::fs::write(
        &p,
        "factor,AAA:spot,*:vol\nAAA:spot,0.04,0.001\n*:vol,0.001,0.0004\n",
    )
    .unwrap();
    let c = read_covariance(&p).unwrap();
    assert_eq!(c.factors.len(), 2);
    assert_eq!(c.factors[1].underlying, "*");
    assert_eq!(c.matrix, [0.04, 0.001, 0.001, 0.0004]);
    std::fs::write(&p, "factor,AAA:spot,AAA:delta\nAAA:spot,x,0\nAAA:delta,0,1\n").unwrap();
    let e = read_covariance(&p).unwrap_err().to_string();
    assert!(
        e.contains("cov.csv") && e.contains("delta") && e.contains("row 1, column `AAA:spot`"),
        "{e}"
    );
    let out = dir.path().join("pnl.csv");
    let names = vec!["s1".to_string(), "s2".to_string()];
    let ids = vec!["a".to_string(), "b".to_string()];
    write_pnl(
        &out,
        &names,
        &[0.1, -2.5e-7],
        Some((&ids, &[0.05, 0.05, 1.0, -1.0000025])),
    )
    .unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text,
        "scenario,pnl,a,b\ns1,0.1,0.05,0.05\ns2,-2.5e-7,1,-1.0000025\n"
    );
    let e = write_pnl(dir.path().join("x.csv"), &names, &[f64::NAN, 0.0], None).unwrap_err();
    assert!(e.to_string().contains("`s1`"));
    assert!(!dir.path().join("x.csv").exists());
}
