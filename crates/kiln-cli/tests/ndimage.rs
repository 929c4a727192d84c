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
