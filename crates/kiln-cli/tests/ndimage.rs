//! `kiln ndimage` (and filter2d/filter3d's former refusals) on real data against scipy:
//! the vendored camera image (8-bit) and MRI volume (`tests/data/`, README there), filtered
//! by the CLI, must equal scipy.ndimage's output (committed, made by
//! `scripts/ndimage_fixtures.py --real`) within 2e-3 of the 8-bit range (outputs rounded and
//! clamped to 8 bits: half a step is 1.96e-3) and 1e-5 relative on float volumes. Runs on
//! the default device (auto), so on the GPU where there is one.
#![allow(clippy::unwrap_used)]

mod filter_support;
use filter_support::*;

/// The vendored data: where cargo built the test, else (an executable carried to the GPU
/// machine, run from the repository root) the same path under the current directory.
fn data(name: &str) -> PathBuf {
    let baked = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let dir = if baked.is_dir() {
        baked
    } else {
        PathBuf::from("crates/kiln-cli/tests/data")
            .canonicalize()
            .unwrap_or_default()
    };
    dir.join(name)
}

fn expected(name: &str) -> Vec<f64> {
    let (a, _) = kiln_io::read_npy_f64(data(name)).unwrap();
    a.iter().copied().collect()
}

/// Copies the vendored inputs into the scratch directory.
fn scratch() -> Dir {
    let d = Dir::new();
    for f in ["camera.png", "mri.nii", "k35.npy"] {
        std::fs::copy(data(f), d.p(f)).unwrap();
    }
    d
}

/// An 8-bit PNG output against scipy's float result, in units of the 8-bit range.
fn check_png(d: &Dir, out: &str, want: &str) {
    let img = kiln_io::read_image(d.p(out)).unwrap();
    let got: Vec<f64> = img.data.iter().map(|&v| v as f64).collect();
    let want = expected(want);
    assert_eq!(got.len(), want.len(), "{out}");
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w.clamp(0.0, 255.0)).abs() / 255.0)
        .fold(0.0, f64::max);
    assert!(worst <= 2e-3, "{out}: worst error {worst} of the 8-bit range");
}

/// A float output (`.npy` or NIfTI) against scipy, relative to scipy's largest |value|.
fn check_float(got: &[f32], want: &str, rel: f64) {
    let want = expected(want);
    assert_eq!(got.len(), want.len(), "{want:?}");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst = got
        .iter()
        .zip(&want)
        .map(|(&g, w)| (g as f64 - w).abs() / scale)
        .fold(0.0, f64::max);
    assert!(worst <= rel, "worst relative error {worst} > {rel}");
}

fn read_npy(d: &Dir, name: &str) -> Vec<f32> {
    kiln_io::read_npy(d.p(name))
        .unwrap()
        .data
        .iter()
        .copied()
        .collect()
}

fn read_nii(d: &Dir, name: &str) -> Vec<f32> {
    kiln_io::read_volume(d.p(name))
        .unwrap()
        .data
        .iter()
        .copied()
        .collect()
}

#[test]
fn camera_image_matches_scipy() {
    let d = scratch();
    d.ok("ndimage gaussian_filter --input camera.png --sigma 2 --output g.png");
    check_png(&d, "g.png", "camera_gauss2.npy");
    let j = d.ok("ndimage correlate --input camera.png --weights k35.npy --origin 0,1 --mode mirror --output c.png --json");
    assert_eq!(j["command"], "ndimage");
    check_png(&d, "c.png", "camera_corr35.npy");
    d.ok("ndimage sobel --input camera.png --axis 0 --mode nearest --output s.npy");
    check_float(&read_npy(&d, "s.npy"), "camera_sobel0.npy", 1e-5);
}

/// filter2d refused a rectangular kernel and filter3d sigma = 1 ("kernel must have equal
/// sides", "3-D gaussians need 0.125 <= sigma < 0.875"): both now run as scipy does.
#[test]
fn former_refusals_run_as_scipy() {
    let d = scratch();
    // correlate with origin 0 = filter2d --kernel (scipy's default placement)
    d.ok("ndimage correlate --input camera.png --weights k35.npy --mode mirror --output a.png");
    d.ok("filter2d --input camera.png --kernel k35.npy --mode mirror --output b.png");
    let a = kiln_io::read_image(d.p("a.png")).unwrap();
    let b = kiln_io::read_image(d.p("b.png")).unwrap();
    assert_eq!(a.data, b.data);
    let j = d.ok("filter3d --input mri.nii --kernel gaussian:1.0 --output m.nii --json");
    assert_eq!(j["path"], "ndimage");
    check_float(&read_nii(&d, "m.nii"), "mri_gauss1.npy", 1e-5);
}

#[test]
fn mri_volume_matches_scipy() {
    let d = scratch();
    d.ok("ndimage gaussian_filter --input mri.nii --sigma 1 --output g.nii");
    check_float(&read_nii(&d, "g.nii"), "mri_gauss1.npy", 1e-5);
    d.ok("ndimage gaussian_gradient_magnitude --input mri.nii --sigma 1.5 --mode nearest --output m.nii");
    check_float(&read_nii(&d, "m.nii"), "mri_ggm.npy", 1e-5);
}

#[test]
fn batch_mode_and_bad_input() {
    let d = scratch();
    std::fs::create_dir(d.p("in")).unwrap();
    std::fs::create_dir(d.p("out")).unwrap();
    for n in ["a.png", "b.png"] {
        std::fs::copy(data("camera.png"), d.p("in").join(n)).unwrap();
    }
    let j = d.ok("ndimage gaussian_filter --input in --sigma 2 --output out --json");
    assert_eq!(j["ok"], 2, "{j}");
    let img = kiln_io::read_image(d.p("out/b.png")).unwrap();
    std::fs::copy(d.p("out/b.png"), d.p("b.png")).unwrap();
    assert_eq!(img.data.len(), 256 * 256);
    check_png(&d, "b.png", "camera_gauss2.npy");
    for case in [
        "ndimage blur --input camera.png --output o.png => unknown function `blur`",
        "ndimage gaussian_filter --input camera.png --output o.png => needs --sigma",
        "ndimage uniform_filter --input camera.png --size 2 --origin 1 --output o.png => invalid origin",
        "ndimage sobel --input camera.png --axis 2 --output o.png => out of range",
        "ndimage gaussian_filter --input camera.png --sigma 1,2,3 --output o.png => 3 values for 2 axes",
        "ndimage gaussian_filter --input camera.png --sigma 1 --mode edge --output o.png => unknown mode",
        "ndimage gaussian_filter --input camera.png --sigma 1 --cval 2 --output o.png => constant modes",
    ] {
        let (args, needle) = case.split_once(" => ").unwrap();
        d.fails(args, needle);
    }
    let help = d.kiln("ndimage --help");
    let text = String::from_utf8_lossy(&help.stdout);
    for p in [
        "--sigma",
        "--order",
        "--truncate",
        "--radius",
        "--size",
        "--origin",
        "--axis",
        "--axes",
        "--weights",
        "--cval",
        "grid-wrap",
        "gaussian_gradient_magnitude",
    ] {
        assert!(text.contains(p), "help lacks {p}");
    }
}

fn expected_f32(name: &str) -> Vec<f32> {
    expected(name).iter().map(|&v| v as f32).collect()
}

/// The camera thresholded (`camera > t` as 0/1), as the fixtures script makes its masks.
fn camera_mask(d: &Dir, t: f32, name: &str) {
    let img = kiln_io::read_image(d.p("camera.png")).unwrap();
    let m: Vec<f32> = img.data.iter().map(|&v| f32::from(v > t)).collect();
    write_npy(&d.p(name), &[256, 256], m);
}

/// Rank filters and morphology through the CLI on the real image and volume: exactly
/// scipy's values (selection is exact, on the GPU as on the CPU).
#[test]
fn rank_and_morphology_match_scipy() {
    let d = scratch();
    std::fs::copy(data("disk7.npy"), d.p("disk7.npy")).unwrap();
    let j = d.ok("ndimage median_filter --input camera.png --size 5 --output m.png --json");
    assert_eq!(j["path"], "rank", "{j}");
    assert_eq!(
        pixels(&read_img(&d.p("m.png"))),
        expected_f32("camera_median5.npy")
    );
    d.ok("ndimage percentile_filter --input camera.png --percentile 25 --size 3,7 --mode constant --cval 10 --output p.png");
    assert_eq!(pixels(&read_img(&d.p("p.png"))), expected_f32("camera_pct25.npy"));
    d.ok("ndimage grey_opening --input camera.png --footprint disk7.npy --mode nearest --output g.png");
    assert_eq!(pixels(&read_img(&d.p("g.png"))), expected_f32("camera_gopen.npy"));
    camera_mask(&d, 128.0, "m128.npy");
    let j = d.ok("ndimage binary_fill_holes --input m128.npy --output f.npy --json");
    assert_eq!(j["path"], "morphology", "{j}");
    assert_eq!(read_npy(&d, "f.npy"), expected_f32("camera_fill.npy"));
    camera_mask(&d, 100.0, "m100.npy");
    d.ok("ndimage binary_closing --input m100.npy --connectivity 2 --iterations 2 --output c.npy");
    assert_eq!(read_npy(&d, "c.npy"), expected_f32("camera_bclose.npy"));
    d.ok("ndimage median_filter --input mri.nii --size 3 --output md.nii");
    assert_eq!(read_nii(&d, "md.nii"), expected_f32("mri_median3.npy"));
    d.ok("ndimage grey_dilation --input mri.nii --size 3,1,5 --mode mirror --output gd.nii");
    assert_eq!(read_nii(&d, "gd.nii"), expected_f32("mri_dilate.npy"));
}

/// A stack of images (`--batch`): each plane filtered on its own, as the 2-D function on
/// that image; and the flags a function does not read are refused.
#[test]
fn rank_planes_and_refusals() {
    let d = scratch();
    let cam: Vec<f32> = pixels(&read_img(&d.p("camera.png")));
    let flipped: Vec<f32> = cam.chunks(256).rev().flatten().copied().collect();
    let mut stack = cam.clone();
    stack.extend(&flipped);
    write_npy(&d.p("s.npy"), &[2, 256, 256], stack);
    d.ok("ndimage median_filter --input s.npy --batch --size 5 --output sm.npy");
    let got = read_npy(&d, "sm.npy");
    let want = expected_f32("camera_median5.npy");
    assert_eq!(got[..256 * 256], want[..]);
    write_npy(&d.p("f.npy"), &[256, 256], flipped);
    d.ok("ndimage median_filter --input f.npy --size 5 --output fm.npy");
    assert_eq!(got[256 * 256..], read_npy(&d, "fm.npy")[..]);
    camera_mask(&d, 128.0, "m.npy");
    let mut mask = read_npy(&d, "m.npy");
    mask.extend(mask.clone());
    write_npy(&d.p("ms.npy"), &[2, 256, 256], mask);
    d.ok("ndimage binary_fill_holes --input ms.npy --batch --output mf.npy");
    // until-stable with a structure whose centre is false can oscillate forever: refused,
    // naming the op
    write_npy(
        &d.p("ring.npy"),
        &[3, 3],
        vec![1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0],
    );
    d.fails(
        "ndimage binary_dilation --input m.npy --structure ring.npy --iterations 0 --output o.npy",
        "binary_dilation: invalid argument: iterations = 0 repeats until the result stops changing",
    );
    d.ok("ndimage binary_dilation --input m.npy --structure ring.npy --iterations 2 --output o.npy");
    let filled = read_npy(&d, "mf.npy");
    let want = expected_f32("camera_fill.npy");
    assert_eq!(filled[..256 * 256], want[..]);
    assert_eq!(filled[256 * 256..], want[..]);
    for case in [
        "ndimage median_filter --input camera.png --output o.png => needs a window",
        "ndimage median_filter --input camera.png --size 3 --sigma 1 --output o.png => does not take --sigma",
        "ndimage gaussian_filter --input camera.png --sigma 1 --footprint disk7.npy --output o.png => does not take --footprint",
        "ndimage binary_erosion --input camera.png --mode nearest --output o.png => does not take --mode",
        "ndimage median_filter --input camera.png --size 3 --rank 2 --output o.png => does not take --rank",
        "ndimage rank_filter --input camera.png --size 3 --output o.png => needs --rank",
        "ndimage rank_filter --input camera.png --size 3 --rank 9 --output o.png => out of range",
        "ndimage percentile_filter --input camera.png --size 3 --percentile 150 --output o.png => must lie in",
        "ndimage binary_dilation --input camera.png --connectivity 3 --output o.png => connectivity is 1 to 2",
        "ndimage binary_dilation --input camera.png --border-value 2 --output o.png => 0 or 1",
        "ndimage grey_erosion --input camera.png --footprint nothere.npy --output o.png => nothere.npy",
        "ndimage median_filter --input camera.png --size 3 --mode constant --cval 300 --output o.png => outside u8's range",
    ] {
        let (args, needle) = case.split_once(" => ").unwrap();
        d.fails(args, needle);
    }
    let help = String::from_utf8_lossy(&d.kiln("ndimage --help").stdout).into_owned();
    for p in [
        "median_filter",
        "percentile_filter",
        "binary_fill_holes",
        "--footprint",
        "--structure",
        "--connectivity",
        "--iterations",
        "--border-value",
    ] {
        assert!(help.contains(p), "help lacks {p}");
    }
}
