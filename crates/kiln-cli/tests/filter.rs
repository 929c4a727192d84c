//! `kiln filter2d` / `kiln filter3d` end to end: the binary on small PNG, TIFF, NPY and NIfTI
//! files made here, the outputs read back and checked against a naive float64 correlation
//! written in this file (its own boundary-index rules, its own preset weights), and every
//! kind of bad input checked for its exit code, its message and the absence of any output.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod filter_support;
use filter_support::*;

#[test]
fn cross4_on_a_17x33_npy_equals_the_reference_in_every_mode() {
    let d = Dir::new();
    let (h, w) = (17, 33);
    let x = f32s(h * w, 1, -10.0, 10.0);
    write_npy(&d.p("in.npy"), &[h, w], x.clone());
    let (k, ks) = preset("cross4", 2);
    for (mode, extra, name, cval) in [
        ("reflect", None, "reflect", 0.0),
        ("mirror", None, "mirror", 0.0),
        ("nearest", None, "nearest", 0.0),
        ("wrap", None, "wrap", 0.0),
        ("constant", None, "constant", 0.0),
        ("constant", Some("2.5"), "constant", 2.5),
        ("constant:-3", None, "constant", -3.0),
    ] {
        let cv = extra.map_or(String::new(), |c| format!("--cval {c}"));
        let args = format!("--input in.npy --kernel cross4 --mode {mode} --output out.npy {cv}");
        d.ok(&format!("filter2d {args}"));
        let (shape, got, dtype) = read_npy(&d.p("out.npy"));
        assert_eq!((shape, dtype), (vec![h, w], kiln_io::NpyDtype::F32));
        let want = correlate(&as_f64(&x), &[h, w], &k, ks, name, cval);
        assert_close(
            &got,
            &want,
            &k,
            10.0_f64.max(cval.abs()),
            &format!("cross4 {mode} {extra:?}"),
        );
    }
    // The default mode is reflect: the same bits as asking for it.
    d.ok("filter2d --input in.npy --kernel cross4 --output dflt.npy");
    d.ok("filter2d --input in.npy --kernel cross4 --mode reflect --output refl.npy");
    assert_eq!(read_npy(&d.p("dflt.npy")).1, read_npy(&d.p("refl.npy")).1);
}

#[test]
fn every_2d_preset_on_npy_equals_the_reference() {
    let d = Dir::new();
    let (h, w) = (13, 19);
    let x = f32s(h * w, 2, -5.0, 20.0);
    write_npy(&d.p("in.npy"), &[h, w], x.clone());
    for name in [
        "cross4",
        "box:3",
        "box:5",
        "gaussian:1",
        "gaussian:2.5",
        "sobel-x",
        "sobel-y",
        "laplacian",
        "sharpen",
    ] {
        let json = d.ok(&format!(
            "filter2d --input in.npy --kernel {name} --mode mirror --output out.npy --json"
        ));
        let (k, ks) = preset(name, 2);
        assert_eq!(json["kernel"], name);
        assert_eq!(json["kernel_size"], ks);
        let got = read_npy(&d.p("out.npy")).1;
        let want = correlate(&as_f64(&x), &[h, w], &k, ks, "mirror", 0.0);
        assert_close(&got, &want, &k, 20.0, name);
    }
}

#[test]
fn user_kernel_npy_in_f64_and_f32() {
    let d = Dir::new();
    let (h, w) = (11, 8);
    let x = f32s(h * w, 3, -1.0, 1.0);
    write_npy(&d.p("in.npy"), &[h, w], x.clone());
    // Not rank 1, so it runs as the direct 5x5 sum; sobel-x's axis is checked by asymmetry.
    let k = values(25, 4, -1.0, 1.0);
    write_npy_f64(&d.p("k.npy"), &[5, 5], &k);
    let json = d.ok("filter2d --input in.npy --kernel k.npy --mode wrap --output out.npy --json");
    assert_eq!(
        (json["kernel"].as_str(), json["path"].as_str()),
        (Some("user 5×5"), Some("direct"))
    );
    let got = read_npy(&d.p("out.npy")).1;
    assert_close(
        &got,
        &correlate(&as_f64(&x), &[h, w], &k, 5, "wrap", 0.0),
        &k,
        1.0,
        "user 5x5 f64",
    );
    // A float32 kernel file, 1x1 and larger than the image (a 31x31 on 11x8).
    write_npy(&d.p("k1.npy"), &[1, 1], vec![-2.0]);
    d.ok("filter2d --input in.npy --kernel k1.npy --output o1.npy");
    let got = read_npy(&d.p("o1.npy")).1;
    assert_eq!(got, x.iter().map(|v| -2.0 * v).collect::<Vec<f32>>());
    let k31 = f32s(31 * 31, 5, 0.0, 1.0);
    write_npy(&d.p("k31.npy"), &[31, 31], k31.clone());
    d.ok("filter2d --input in.npy --kernel k31.npy --mode reflect --output o31.npy");
    let k31 = as_f64(&k31);
    let want = correlate(&as_f64(&x), &[h, w], &k31, 31, "reflect", 0.0);
    assert_close(&read_npy(&d.p("o31.npy")).1, &want, &k31, 1.0, "31x31 on 11x8");
}

#[test]
fn u8_png_is_rounded_and_clamped() {
    let d = Dir::new();
    let (h, w) = (12, 15);
    let x = ints(h * w, 6, 255);
    write_img(&d.p("in.png"), h, w, 1, x.clone(), SampleType::U8);
    // box:3: fractions k/9, never a tie; the result must be rounded, not truncated.
    d.ok("filter2d --input in.png --kernel box:3 --output box.png");
    let out = read_img(&d.p("box.png"));
    assert_eq!((out.sample_type, out.data.dim()), (SampleType::U8, (h, w, 1)));
    let (k, ks) = preset("box:3", 2);
    let want = correlate(&as_f64(&x), &[h, w], &k, ks, "reflect", 0.0);
    assert!(want.iter().any(|v| v - v.floor() > 0.5), "some values round up");
    let got = pixels(&out);
    assert_quantised(&got, &want, 255.0, "box:3 u8");
    // sharpen overshoots both ends: clamped to 0 and 255.
    d.ok("filter2d --input in.png --kernel sharpen --output sharp.png");
    let (k, ks) = preset("sharpen", 2);
    let want = correlate(&as_f64(&x), &[h, w], &k, ks, "reflect", 0.0);
    assert!(want.iter().any(|&v| v < 0.0) && want.iter().any(|&v| v > 255.0));
    let got = pixels(&read_img(&d.p("sharp.png")));
    assert_quantised(&got, &want, 255.0, "sharpen u8");
    // The same input to .npy: float32, neither rounded nor clamped.
    d.ok("filter2d --input in.png --kernel sharpen --output sharp.npy");
    let (shape, got, dtype) = read_npy(&d.p("sharp.npy"));
    assert_eq!((shape, dtype), (vec![h, w], kiln_io::NpyDtype::F32));
    assert_close(&got, &want, &k, 255.0, "sharpen u8 -> f32");
}

#[test]
fn u16_images_gray_png_and_rgb_tiff() {
    let d = Dir::new();
    let (h, w) = (9, 14);
    let x = ints(h * w, 7, 65535);
    write_img(&d.p("g.png"), h, w, 1, x.clone(), SampleType::U16);
    d.ok("filter2d --input g.png --kernel laplacian --mode nearest --output g_out.png");
    let out = read_img(&d.p("g_out.png"));
    assert_eq!(out.sample_type, SampleType::U16);
    let (k, ks) = preset("laplacian", 2);
    let want = correlate(&as_f64(&x), &[h, w], &k, ks, "nearest", 0.0);
    assert!(want.iter().any(|&v| v < 0.0) && want.iter().any(|&v| v > 65535.0));
    assert_quantised(&pixels(&out), &want, 65535.0, "laplacian u16");

    let rgb = ints(h * w * 3, 8, 65535);
    write_img(&d.p("c.tif"), h, w, 3, rgb.clone(), SampleType::U16);
    let json = d.ok("filter2d --input c.tif --kernel gaussian:1 --output c_out.tiff --json");
    assert_eq!(json["layout"], "channels");
    assert_eq!(json["input_shape"], serde_json::json!([h, w, 3]));
    assert_eq!(
        (json["input_type"].as_str(), json["output_type"].as_str()),
        (Some("u16"), Some("u16"))
    );
    let out = read_img(&d.p("c_out.tiff"));
    assert_eq!((out.sample_type, out.data.dim()), (SampleType::U16, (h, w, 3)));
    let (k, ks) = preset("gaussian:1", 2);
    let want = reference_hwc(&rgb, [h, w, 3], &k, ks, "reflect");
    assert_quantised(&pixels(&out), &want, 65535.0, "gaussian:1 rgb16");
}

#[test]
fn rgba_alpha_is_kept_and_f32_tiff_stays_f32() {
    let d = Dir::new();
    let (h, w) = (7, 10);
    let px = ints(h * w * 4, 9, 255);
    write_img(&d.p("a.png"), h, w, 4, px.clone(), SampleType::U8);
    let json = d.ok("filter2d --input a.png --kernel sobel-x --output a_out.png --json");
    assert_eq!(json["layout"], "channels+alpha");
    let out = pixels(&read_img(&d.p("a_out.png")));
    let (k, ks) = preset("sobel-x", 2);
    let colour: Vec<f32> = px.chunks(4).flat_map(|p| p[..3].to_vec()).collect();
    let want = reference_hwc(&colour, [h, w, 3], &k, ks, "reflect");
    let got_colour: Vec<f32> = out.chunks(4).flat_map(|p| p[..3].to_vec()).collect();
    assert_quantised(&got_colour, &want, 255.0, "sobel-x rgb of rgba");
    let alpha_in: Vec<f32> = px.chunks(4).map(|p| p[3]).collect();
    let alpha_out: Vec<f32> = out.chunks(4).map(|p| p[3]).collect();
    assert_eq!(alpha_out, alpha_in, "alpha copied unchanged");

    let x = f32s(h * w, 10, -100.0, 100.0);
    write_img(&d.p("f.tif"), h, w, 1, x.clone(), SampleType::F32);
    d.ok("filter2d --input f.tif --kernel sobel-y --mode constant --cval -7 --output f_out.tif");
    let out = read_img(&d.p("f_out.tif"));
    assert_eq!(out.sample_type, SampleType::F32);
    let (k, ks) = preset("sobel-y", 2);
    // scipy's sobel pads each pass with cval: not one 2-D correlation (off by 7 at the edge).
    let want = scipy_preset("sobel-y", &as_f64(&x), &[h, w], "constant", -7.0);
    assert_close(&pixels(&out), &want, &k, 100.0, "sobel-y f32 tiff");
    let direct = correlate(&as_f64(&x), &[h, w], &k, ks, "constant", -7.0);
    assert!(
        want.iter().zip(&direct).any(|(a, b)| (a - b).abs() > 1.0),
        "the case tells them apart"
    );
}

#[test]
fn three_d_npy_is_channels_or_with_batch_a_batch() {
    let d = Dir::new();
    let (a, b, c) = (5, 9, 11);
    let x = f32s(a * b * c, 11, -1.0, 1.0);
    write_npy(&d.p("in.npy"), &[a, b, c], x.clone());
    let (k, ks) = preset("cross4", 2);
    // --batch: a images of b x c.
    let json = d.ok("filter2d --input in.npy --batch --kernel cross4 --mode wrap --output b.npy --json");
    assert_eq!(
        (json["layout"].as_str(), json["items"].as_u64()),
        (Some("batch"), Some(a as u64))
    );
    let (shape, got, _) = read_npy(&d.p("b.npy"));
    assert_eq!(shape, vec![a, b, c]);
    for i in 0..a {
        let plane = as_f64(&x[i * b * c..(i + 1) * b * c]);
        let want = correlate(&plane, &[b, c], &k, ks, "wrap", 0.0);
        assert_close(
            &got[i * b * c..(i + 1) * b * c],
            &want,
            &k,
            1.0,
            &format!("batch image {i}"),
        );
    }
    // Without: one a x b image of c channels.
    d.ok("filter2d --input in.npy --kernel cross4 --mode wrap --output c.npy");
    let (shape, got, _) = read_npy(&d.p("c.npy"));
    assert_eq!(shape, vec![a, b, c]);
    assert_close(
        &got,
        &reference_hwc(&x, [a, b, c], &k, ks, "wrap"),
        &k,
        1.0,
        "11 channels",
    );
}

// ---- 3-D values --------------------------------------------------------------------------

#[test]
fn bad_2d_input_exits_4_and_writes_nothing() {
    let d = Dir::new();
    write_npy(&d.p("in.npy"), &[8, 9], f32s(8 * 9, 16, 0.0, 1.0));
    write_img(&d.p("in.png"), 8, 9, 1, ints(72, 17, 255), SampleType::U8);
    write_npy(&d.p("k4.npy"), &[4, 4], vec![0.1; 16]);
    write_npy(&d.p("k33.npy"), &[33, 33], vec![0.001; 33 * 33]);
    write_npy(&d.p("k3d.npy"), &[3, 3, 3], vec![0.1; 27]);
    write_npy(&d.p("k1d.npy"), &[3], vec![0.1; 3]);
    write_npy(&d.p("k35.npy"), &[3, 5], vec![0.1; 15]);
    let mut nan = vec![0.1f32; 9];
    nan[5] = f32::NAN;
    write_npy(&d.p("knan.npy"), &[3, 3], nan);
    let mut inf = vec![0.1f64; 9];
    inf[0] = f64::NEG_INFINITY;
    write_npy_f64(&d.p("kinf.npy"), &[3, 3], &inf);
    write_npy(&d.p("empty.npy"), &[0, 5], vec![]);
    write_npy(&d.p("four.npy"), &[2, 2, 2, 2], vec![1.0; 16]);
    let bytes = std::fs::read(d.p("in.npy")).unwrap();
    std::fs::write(d.p("trunc.npy"), &bytes[..bytes.len() - 7]).unwrap();
    let png = std::fs::read(d.p("in.png")).unwrap();
    std::fs::write(d.p("trunc.png"), &png[..png.len() / 2]).unwrap();
    let bad: Vec<u8> = png
        .iter()
        .enumerate()
        .map(|(i, &b)| if i < 40 { b } else { b ^ 0x5a })
        .collect();
    std::fs::write(d.p("corrupt.png"), bad).unwrap();
    std::fs::write(d.p("notes.txt"), "not a kernel").unwrap();
    std::fs::write(d.p("in.jpg"), [0xff, 0xd8, 0xff]).unwrap();
    write_nifti(&d.p("vol.nii"), &[3, 3, 3], vec![1.0; 27]);
    std::fs::write(d.p("keep.npy"), b"old").unwrap();
    // Each case: the arguments => what stderr must say.
    for case in [
        "--input in.jpg --kernel cross4 --output o.png => unknown file extension",
        "--input in.npy --kernel cross4 --output o.bmp => image files must end in one of: .png .tif .tiff .npy",
        "--input vol.nii --kernel cross4 --output o.npy => use kiln filter3d",
        "--input missing.png --kernel cross4 --output o.png => file not found",
        "--input trunc.npy --kernel cross4 --output o.npy => truncated",
        "--input trunc.png --kernel cross4 --output o.png => not a valid PNG file",
        "--input corrupt.png --kernel cross4 --output o.png => not a valid PNG file",
        "--input empty.npy --kernel cross4 --output o.npy => empty image",
        "--input four.npy --kernel cross4 --output o.npy => use kiln filter3d",
        "--input in.npy --kernel knan.npy --output o.npy => weight [1, 2] is NaN",
        "--input in.npy --kernel kinf.npy --output o.npy => weight [0, 0] is -inf",
        "--input in.npy --kernel k3d.npy --output o.npy => rank 3",
        "--input in.npy --kernel k1d.npy --output o.npy => rank 1",
        "--input in.npy --kernel blur --output o.npy => unknown kernel `blur`; presets: cross4",
        "--input in.npy --kernel notes.txt --output o.npy => not .npy",
        "--input in.npy --kernel missing.npy --output o.npy => file not found",
        "--input in.npy --kernel cross4 --mode edge --output o.npy => unknown mode `edge`",
        "--input in.npy --kernel cross4 --cval 1 --output o.npy => --mode constant only",
        "--input in.npy --kernel cross4 --batch --output o.npy => --batch needs a 3-D",
        "--input in.npy --kernel cross4 --output o.png => PNG has no float samples",
        "--input in.npy --kernel cross4 --output no/such/dir/o.npy => does not exist",
        "--input in.npy --kernel cross4 --output in.npy => is the input file",
        "--input in.npy --kernel cross4 --output ./in.npy => is the input file",
        // An existing output stays as it was.
        "--input in.npy --kernel knan.npy --output keep.npy => is NaN",
        "--input trunc.npy --kernel cross4 --output keep.npy => truncated",
    ] {
        let (args, needle) = case.split_once(" => ").unwrap();
        d.fails(&format!("filter2d {args}"), needle);
    }
    assert_eq!(std::fs::read(d.p("keep.npy")).unwrap(), b"old");
    // Refused before issue 19, now scipy's correlate / gaussian_filter / uniform_filter.
    for k in ["k4.npy", "k33.npy", "k35.npy", "box:4", "box:33", "gaussian:4"] {
        let j = d.ok(&format!(
            "filter2d --input in.npy --kernel {k} --output ok.npy --json"
        ));
        assert_eq!(j["path"], "ndimage", "{k}: {j}");
    }
    // Usage errors stay clap's (exit 2).
    let o = d.kiln("filter2d --input in.npy --output o.npy");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn one_file_json_on_the_cpu_has_no_device_stages() {
    let d = Dir::new();
    let (h, w) = (67, 129);
    write_npy(&d.p("in.npy"), &[h, w], f32s(h * w, 9, 0.0, 1.0));
    let cpu = d.ok("filter2d --input in.npy --kernel gaussian:2 --output out.npy --json --device cpu");
    assert_eq!(cpu["device"], "cpu");
    assert!(cpu["timings"]["filter_parts"].is_null(), "{cpu}");
    assert!(cpu["timings"]["runtime_parts"].is_null(), "{cpu}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn one_file_json_splits_a_device_run_into_its_stages() {
    if !kiln::testing::gpu_or_skip("one_file_json_splits_a_device_run_into_its_stages") {
        return;
    }
    let d = Dir::new();
    let (h, w) = (67, 129);
    write_npy(&d.p("in.npy"), &[h, w], f32s(h * w, 9, 0.0, 1.0));
    // the default device: the GPU, since this machine has one
    let auto = d.ok("filter2d --input in.npy --kernel gaussian:2 --output out.npy --json");
    let device = auto["device"].as_str().unwrap();
    assert!(
        device.starts_with("cuda"),
        "this machine has a GPU but filter2d ran on {device}"
    );
    let p = &auto["timings"]["filter_parts"];
    let secs = |k: &str| {
        p[k].as_f64()
            .unwrap_or_else(|| panic!("filter_parts.{k} in {auto}"))
    };
    let stages = secs("upload_s") + secs("kernels_s") + secs("download_s");
    for k in ["upload_s", "kernels_s", "download_s"] {
        assert!(secs(k) > 0.0, "{k} in {auto}");
    }
    // the stages are the filter's time, split (the rest: the timer calls themselves)
    let filter_s = auto["timings"]["filter_s"].as_f64().unwrap();
    assert!(
        stages <= filter_s && stages > 0.5 * filter_s,
        "{stages} of {filter_s}: {auto}"
    );
    assert!(p["module_loads"].as_u64().unwrap() >= 1, "{auto}");
    // the runtime is released beside the write, and timed
    assert!(auto["timings"]["teardown_s"].as_f64().unwrap() > 0.0, "{auto}");
    assert!(secs("module_load_ms") >= 0.0 && secs("module_lookup_ms") >= 0.0);
}
