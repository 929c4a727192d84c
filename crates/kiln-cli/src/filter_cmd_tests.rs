//! Unit tests of `filter_cmd.rs` (mode and cval parsing, extension checks), kept apart so
//! the command file stays under the house's 800 lines.

use super::*;

#[test]
fn mode_and_cval_combine() {
    assert_eq!(parse_mode("reflect", None).ok(), Some(BoundaryMode::Reflect));
    assert_eq!(
        parse_mode("constant", Some(-2.5)).ok(),
        Some(BoundaryMode::Constant(-2.5))
    );
    assert_eq!(
        parse_mode("constant:3", Some(3.0)).ok(),
        Some(BoundaryMode::Constant(3.0))
    );
    let e = |m: &str, c: Option<f64>| {
        parse_mode(m, c)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
            .unwrap_err()
    };
    assert!(e("constant:3", Some(4.0)).contains("disagree"));
    assert!(e("wrap", Some(1.0)).contains("--mode constant only"));
    assert!(e("constant", Some(f64::NAN)).contains("not a finite"));
    assert!(e("edge", None).contains("unknown mode `edge`"));
}

#[test]
fn extensions_point_to_the_other_command() {
    let e = format_of("--input", Path::new("a.nii.gz"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("use kiln filter3d"), "{e}");
    let e = format_of("--input", Path::new("a.png"), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("use kiln filter2d"), "{e}");
    let e = format_of("--input", Path::new("a.jpg"), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(".png .tif .tiff .npy") && !e.contains("filter3d"),
        "{e}"
    );
    assert_eq!(
        format_of("--input", Path::new("A.TIFF"), true).ok(),
        Some(Format::Tiff)
    );
}
