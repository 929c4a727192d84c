use super::*;

fn cfg(min_rows: u64, shard_rows: u64) -> Sharding {
    Sharding {
        min_rows,
        shard_rows,
        ..Sharding::default()
    }
}

#[test]
fn settings_are_checked() {
    assert!(Sharding::default().validate().is_ok(), "off by default");
    assert!(!Sharding::default().splits(u64::MAX));
    let e = cfg(10, 0).validate().unwrap_err();
    assert!(e.contains("shard_rows = 0"), "{e}");
    let e = cfg(10, 11).validate().unwrap_err();
    assert!(e.contains("at most min_rows"), "{e}");
    assert!(cfg(10, 10).validate().is_ok());
    assert!(!cfg(10, 3).splits(10) && cfg(10, 3).splits(11));
}

#[test]
fn shards_grow_past_the_shard_cap() {
    assert_eq!(cfg(10, 3).shard_size(20), 3);
    assert_eq!(cfg(10, 1).shard_size(MAX_SHARDS * 5 + 1), 6);
}

fn price_row(p: f64) -> String {
    serde_json::to_string(&json!({"price": p, "std_error": p / 7.0, "kind": "bs"})).unwrap()
}

fn shard_result(prices: &[f64], device: &str) -> String {
    let rows: Vec<Value> = prices
        .iter()
        .map(|p| serde_json::from_str(&price_row(*p)).unwrap())
        .collect();
    json!({"method": "mc", "rng": "philox", "prices": rows, "stream_offset": 3,
           "batch_options": prices.len(), "device": device, "workers": null, "note": "[x]"})
    .to_string()
}

#[test]
fn merge_joins_the_price_rows_in_order_keeping_their_text() {
    let parent = ParentTask {
        kind: "sharded".into(),
        rows: 5,
        shards: 2,
        shard_rows: 3,
        merge_max_bytes: 0,
    };
    // prices whose shortest text is long: any reprint would show
    let a = [0.1 + 0.2, 1.0 / 3.0, 2.5e-300];
    let b = [std::f64::consts::PI, -0.0];
    let merged = merge(&parent, &[shard_result(&a, "cpu:a"), shard_result(&b, "cpu:b")]).unwrap();
    let v: Value = serde_json::from_str(&merged).unwrap();
    let prices: Vec<f64> = v["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["price"].as_f64().unwrap())
        .collect();
    let want: Vec<f64> = a.iter().chain(&b).copied().collect();
    assert_eq!(
        prices.iter().map(|p| p.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|p| p.to_bits()).collect::<Vec<_>>()
    );
    let text: Vec<String> = want.iter().map(|p| price_row(*p)).collect();
    assert!(merged.contains(&text.join(",")), "{merged}");
    assert_eq!(v["batch_options"], 5);
    assert_eq!(v["stream_offset"], 0);
    assert_eq!(v["shards"], 2);
    assert_eq!(v["device"], "cpu:a");
    assert_eq!(v["devices"], json!(["cpu:a", "cpu:b"]));
}

#[test]
fn merge_refuses_results_that_do_not_fit() {
    let parent = ParentTask {
        kind: "sharded".into(),
        rows: 5,
        shards: 2,
        shard_rows: 3,
        merge_max_bytes: 0,
    };
    let e = merge(&parent, &[shard_result(&[1.0; 3], "d")]).unwrap_err();
    assert!(e.contains("1 shard results for 2 shards"), "{e}");
    let e = merge(
        &parent,
        &[shard_result(&[1.0; 3], "d"), shard_result(&[1.0; 3], "d")],
    )
    .unwrap_err();
    assert!(e.contains("shard 1 has 3 prices for 2 options"), "{e}");
    let e = merge(&parent, &[shard_result(&[1.0; 3], "d"), "{\"x\": 1}".into()]).unwrap_err();
    assert!(e.contains("shard 1's result is not a book's"), "{e}");
    let fits = [shard_result(&[1.0; 3], "d"), shard_result(&[1.0; 2], "d")];
    let bytes = fits[0].len() + fits[1].len();
    assert!(merge_within(&parent, &fits, bytes).is_ok());
    let e = merge_within(&parent, &fits, bytes - 1).unwrap_err();
    assert!(e.contains(&format!("about {bytes} bytes")), "{e}");
}

#[test]
fn the_prices_key_is_found_only_at_the_top_level() {
    let t = r#"{"a": {"prices": [9]}, "s": "prices", "prices" : [ [1], {"x": "]"} ], "z": 1}"#;
    let r = top_level_array(t, "prices").unwrap();
    assert_eq!(&t[r], r#"[ [1], {"x": "]"} ]"#);
    assert_eq!(top_level_array(r#"{"prices": 3}"#, "prices"), None);
    assert_eq!(top_level_array(r#"{"p": "\"prices\""}"#, "prices"), None);
}

#[test]
fn a_book_is_planned_in_row_slices_with_their_first_streams() {
    use kiln::core::finance::{McParams, OptionSpec, OptionType};
    let spec = |k: f64| OptionSpec::european(OptionType::Call, 100.0, k, 0.01, 0.0, 0.2, 1.0);
    let task = Task::Price {
        method: "mc".into(),
        mc: McParams::default(),
        options: (0..11).map(|i| spec(90.0 + i as f64)).collect(),
    };
    assert!(plan(&cfg(11, 3), &task).is_none(), "not over min_rows");
    let p = plan(&cfg(10, 3), &task).unwrap();
    assert_eq!(p.parent.rows, 11);
    assert_eq!(p.parent.shards, 4);
    let firsts: Vec<(u32, usize)> = p
        .shards
        .iter()
        .map(|t| match t {
            Task::PriceBook {
                first_option,
                options,
                ..
            } => (*first_option, options.len()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(firsts, [(0, 3), (3, 3), (6, 3), (9, 2)]);
    let Task::PriceBook { options, .. } = &p.shards[3] else {
        unreachable!()
    };
    assert!(matches!(options[1], BookOption::Plain(s) if s.strike == 100.0));
}

#[test]
fn a_manifest_and_its_shards_join_to_the_merged_text() {
    let parent = ParentTask {
        kind: "sharded".into(),
        rows: 7,
        shards: 3,
        shard_rows: 3,
        merge_max_bytes: 0,
    };
    let results = [
        shard_result(&[0.1 + 0.2, 1.0 / 3.0, 2.5e-300], "cpu:a"),
        // whitespace inside the array is trimmed away as the merge trims it
        shard_result(&[std::f64::consts::PI, -0.0, 7.0], "cpu:b").replace("\"prices\":[", "\"prices\": [ "),
        shard_result(&[1e300], "cpu:c"),
    ];
    let merged = merge(&parent, &results).unwrap();
    let mut m = Merger::new(&parent);
    let spans: Vec<_> = results.iter().map(|r| m.push(r).unwrap()).collect();
    let head = m.head().unwrap();
    assert!(!head.contains("prices"), "{head}");
    let rows: Vec<&str> = results.iter().zip(spans).map(|(r, s)| &r[s]).collect();
    let joined = format!(
        "{}{}{}",
        result::OPEN,
        rows.join(","),
        result::close(&head).unwrap()
    );
    assert_eq!(joined, merged);
    assert!(result::close("{}").is_err() && result::close("[1]").is_err());
    assert!(result::rows(r#"{"prices": [ ]}"#).is_some_and(|r| r.is_empty()));
}
