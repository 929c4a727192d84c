//! `kiln filter2d` / `kiln filter3d` batch mode end to end (on the CPU where there is no
//! GPU): a directory or a glob of small files in, a directory out; every output equals the
//! one-file command's output byte for byte; bad files are listed without stopping the
//! batch; `--fail-fast`; atomic outputs; the exit code; the `--json` summary's schema.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use kiln_io::{HostImage, SampleType};
use ndarray::{Array3, ArrayD, IxDyn};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: `KILN_BIN` (for the device bundle) or the one cargo built.
fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Dir(tempfile::tempdir().unwrap())
    }

    fn p(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Runs `kiln <args>` here (each argument as given: a glob reaches kiln unexpanded).
    fn kiln(&self, args: &[&str]) -> Output {
        let dir = self.0.path();
        Command::new(bin())
            .args(args)
            .current_dir(dir)
            .env("KILN_CACHE_DIR", cache_dir(dir))
            .env_remove("KILN_DEVICES")
            .env_remove("KILN_CONFIG")
            .output()
            .expect("run kiln")
    }

    fn line(&self, line: &str) -> Output {
        self.kiln(&line.split_whitespace().collect::<Vec<_>>())
    }
}

/// The kernel cache: `KILN_CACHE_DIR` when the environment sets one (the GPU machine's
/// scripts warm one for every test), else one in the test's directory.
fn cache_dir(dir: &Path) -> PathBuf {
    std::env::var_os("KILN_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("cache"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Deterministic values in `0..max` (an LCG; the values only need to differ).
fn vals(n: usize, seed: u64, max: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % (max as u64 + 1)) as f32
        })
        .collect()
}

fn img(path: &Path, h: usize, w: usize, c: usize, st: SampleType, seed: u64) {
    let max = st.max_value().unwrap_or(1000.0);
    let a = Array3::from_shape_vec((h, w, c), vals(h * w * c, seed, max)).unwrap();
    kiln_io::write_image(path, &HostImage::new(a, st), st).unwrap();
}

fn npy(path: &Path, shape: &[usize], seed: u64) {
    let n = shape.iter().product();
    let a = ArrayD::from_shape_vec(IxDyn(shape), vals(n, seed, 200.0)).unwrap();
    kiln_io::write_npy(path, &a).unwrap();
}

/// A folder of good files of every 2-D kind, and bad ones.
fn inputs(d: &Dir) -> Vec<&'static str> {
    std::fs::create_dir(d.p("in")).unwrap();
    img(&d.p("in/gray8.png"), 9, 13, 1, SampleType::U8, 1);
    img(&d.p("in/rgb16.png"), 7, 10, 3, SampleType::U16, 2);
    img(&d.p("in/rgba8.png"), 8, 6, 4, SampleType::U8, 3);
    img(&d.p("in/f32.tif"), 6, 11, 1, SampleType::F32, 4);
    npy(&d.p("in/plane.npy"), &[12, 9], 5);
    npy(&d.p("in/hwc.npy"), &[5, 7, 3], 6);
    // bad: a PNG cut short, and one that cannot be read (a link to nothing)
    let png = std::fs::read(d.p("in/gray8.png")).unwrap();
    std::fs::write(d.p("in/cut.png"), &png[..png.len() / 2]).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(d.p("nowhere.png"), d.p("in/gone.png")).unwrap();
    std::fs::write(d.p("in/notes.txt"), "not an image").unwrap();
    // a temporary file of another run: passed over by the directory and by `*`
    std::fs::write(d.p("in/.kiln-tmp-abc.png"), "partial").unwrap();
    vec![
        "f32.tif",
        "gray8.png",
        "hwc.npy",
        "plane.npy",
        "rgb16.png",
        "rgba8.png",
    ]
}

fn bad_names() -> Vec<&'static str> {
    if cfg!(unix) {
        vec!["cut.png", "gone.png"]
    } else {
        vec!["cut.png"]
    }
}

#[test]
fn a_directory_batch_equals_the_one_file_command_and_lists_the_bad_files() {
    let d = Dir::new();
    let good = inputs(&d);
    let kernel = "--kernel gaussian:1.2 --mode constant:3";
    let o = d.line(&format!(
        "filter2d --input in {kernel} --output out --json --readers 2 --writers 2"
    ));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let s = json(&o);
    let bad = bad_names();
    assert_eq!(s["files"], good.len() + bad.len());
    assert_eq!(
        (s["ok"].as_u64(), s["failed"].as_u64()),
        (Some(good.len() as u64), Some(bad.len() as u64))
    );
    assert_eq!(s["not_processed"], 0);
    // Every output is the one-file command's, byte for byte; the bad files have none and no
    // temporary file is left.
    assert_eq!(
        names(&d.p("out")),
        good.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    );
    std::fs::create_dir(d.p("one")).unwrap();
    for g in &good {
        let o1 = d.line(&format!("filter2d --input in/{g} {kernel} --output one/{g}"));
        assert_eq!(o1.status.code(), Some(0), "{g}: {}", stderr(&o1));
        let (a, b) = (
            std::fs::read(d.p(&format!("out/{g}"))).unwrap(),
            std::fs::read(d.p(&format!("one/{g}"))).unwrap(),
        );
        assert!(a == b, "{g}: the batch output differs from the one-file output");
    }
    // The errors: listed in the JSON and on stderr, with their stage and exit code.
    let errors = s["errors"].as_array().unwrap();
    let listed: Vec<&str> = errors.iter().map(|e| e["input"].as_str().unwrap()).collect();
    assert_eq!(listed, bad.iter().map(|b| format!("in/{b}")).collect::<Vec<_>>());
    for e in errors {
        assert_eq!(
            (e["stage"].as_str(), e["exit_code"].as_u64()),
            (Some("read"), Some(4)),
            "{e}"
        );
        assert!(err.contains(e["input"].as_str().unwrap()), "{err}");
    }
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .contains("not a valid PNG file"),
        "{}",
        errors[0]
    );
    if errors.len() > 1 {
        assert!(
            errors[1]["error"].as_str().unwrap().contains("file not found"),
            "{}",
            errors[1]
        );
    }
    assert_eq!(s["skipped"][0]["path"], "in/notes.txt");
    assert!(
        err.contains("read/decode") && (err.contains("bound by") || err.contains("no stage saturated")),
        "the stage report: {err}"
    );
}

#[test]
fn a_glob_batch_takes_the_matching_files_and_exits_0_when_all_succeed() {
    let d = Dir::new();
    inputs(&d);
    // only the npys: all good
    let o = d.kiln(&[
        "filter2d", "--input", "in/*.npy", "--kernel", "box:3", "--output", "out", "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = json(&o);
    assert_eq!(
        (s["files"].as_u64(), s["ok"].as_u64(), s["items"].as_u64()),
        (Some(2), Some(2), Some(2))
    );
    assert_eq!(names(&d.p("out")), ["hwc.npy", "plane.npy"]);
    // A 3-D .npy under --batch is N gray images: items counts them.
    std::fs::create_dir(d.p("stacks")).unwrap();
    npy(&d.p("stacks/a.npy"), &[3, 5, 6], 7);
    npy(&d.p("stacks/b.npy"), &[2, 4, 4], 8);
    let o = d.line("filter2d --input stacks --batch --kernel cross4 --output sout --json");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["items"], 5);
    let o1 = d.line("filter2d --input stacks/a.npy --batch --kernel cross4 --output a1.npy");
    assert_eq!(o1.status.code(), Some(0), "{}", stderr(&o1));
    assert_eq!(
        std::fs::read(d.p("sout/a.npy")).unwrap(),
        std::fs::read(d.p("a1.npy")).unwrap()
    );
}

#[test]
fn fail_fast_stops_at_the_first_failure() {
    let d = Dir::new();
    std::fs::create_dir(d.p("in")).unwrap();
    std::fs::write(d.p("in/a_bad.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    for i in 0..4 {
        img(&d.p(&format!("in/f{i}.png")), 5, 5, 1, SampleType::U8, 10 + i);
    }
    let args = "filter2d --input in --kernel cross4 --output out --json --readers 1 --writers 1 --streams 1";
    let o = d.line(&format!("{args} --fail-fast"));
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let s = json(&o);
    assert_eq!(
        (
            s["ok"].as_u64(),
            s["failed"].as_u64(),
            s["not_processed"].as_u64()
        ),
        (Some(0), Some(1), Some(4))
    );
    assert!(!d.p("out").exists() || names(&d.p("out")).is_empty());
    // Without it the rest go on.
    let o = d.line(args);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let s = json(&o);
    assert_eq!(
        (
            s["ok"].as_u64(),
            s["failed"].as_u64(),
            s["not_processed"].as_u64()
        ),
        (Some(4), Some(1), Some(0))
    );
}

#[test]
fn a_failed_write_leaves_no_partial_file() {
    let d = Dir::new();
    std::fs::create_dir(d.p("in")).unwrap();
    img(&d.p("in/a.png"), 6, 7, 1, SampleType::U8, 20);
    img(&d.p("in/b.png"), 6, 7, 1, SampleType::U8, 21);
    // An output name taken by a directory: the rename into place fails.
    std::fs::create_dir_all(d.p("out/a.png")).unwrap();
    std::fs::write(d.p("out/b.png"), b"old").unwrap();
    let o = d.line("filter2d --input in --kernel cross4 --output out --json");
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = json(&o);
    assert_eq!((s["ok"].as_u64(), s["failed"].as_u64()), (Some(1), Some(1)));
    assert_eq!(s["errors"][0]["stage"], "write");
    assert_eq!(names(&d.p("out")), ["a.png", "b.png"], "no temporary file left");
    assert!(d.p("out/a.png").is_dir());
    // b.png was replaced whole
    assert_eq!(
        kiln_io::read_image(d.p("out/b.png")).unwrap().data.dim(),
        (6, 7, 1)
    );
}

#[test]
fn the_json_summary_has_its_schema() {
    let d = Dir::new();
    inputs(&d);
    let o = d.kiln(&[
        "filter2d",
        "--input",
        "in/*.png",
        "--kernel",
        "sobel-x",
        "--output",
        "out",
        "--json",
        "--streams",
        "3",
    ]);
    let s = json(&o);
    for (key, kind) in [
        ("command", "string"),
        ("batch", "bool"),
        ("input", "string"),
        ("output", "string"),
        ("kernel", "string"),
        ("kernel_size", "number"),
        ("mode", "string"),
        ("path", "string"),
        ("device", "string"),
        ("files", "number"),
        ("ok", "number"),
        ("failed", "number"),
        ("not_processed", "number"),
        ("items", "number"),
        ("seconds", "number"),
        ("runtime_s", "number"),
        ("files_per_s", "number"),
        ("frames_per_s", "number"),
        ("readers", "number"),
        ("writers", "number"),
        ("streams", "number"),
        ("bound_by", "string"),
        ("errors", "array"),
        ("skipped", "array"),
    ] {
        let v = &s[key];
        let ok = match kind {
            "string" => v.is_string(),
            "bool" => v.is_boolean(),
            "number" => v.is_number(),
            _ => v.is_array(),
        };
        assert!(ok, "{key} should be a {kind}: {v}");
    }
    assert_eq!(
        (s["command"].as_str(), s["streams"].as_u64()),
        (Some("filter2d"), Some(3))
    );
    for stage in ["read", "device", "write"] {
        let st = &s["stages"][stage];
        assert!(st["threads"].as_u64().unwrap() >= 1, "{st}");
        assert!(st["busy_s"].as_f64().unwrap() >= 0.0, "{st}");
        let u = st["utilisation"].as_f64().unwrap();
        assert!((0.0..=1.5).contains(&u), "{stage}: {u}");
    }
    assert!(["read", "device", "write"].contains(&s["bound_by"].as_str().unwrap()));
    for e in s["errors"].as_array().unwrap() {
        for key in ["input", "output", "stage", "error"] {
            assert!(e[key].is_string(), "{e}");
        }
        assert!(e["exit_code"].is_u64(), "{e}");
    }
}

#[test]
fn filter3d_batches_volumes() {
    let d = Dir::new();
    std::fs::create_dir(d.p("vols")).unwrap();
    npy(&d.p("vols/a.npy"), &[5, 4, 6], 30);
    npy(&d.p("vols/b.npy"), &[4, 4, 3, 2], 31);
    let o = d.line("filter3d --input vols --kernel box:3 --mode wrap --output vout --json");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = json(&o);
    assert_eq!((s["files"].as_u64(), s["items"].as_u64()), (Some(2), Some(3)));
    for v in ["a.npy", "b.npy"] {
        let o1 = d.line(&format!(
            "filter3d --input vols/{v} --kernel box:3 --mode wrap --output one_{v}"
        ));
        assert_eq!(o1.status.code(), Some(0), "{}", stderr(&o1));
        assert!(
            std::fs::read(d.p(&format!("vout/{v}"))).unwrap()
                == std::fs::read(d.p(&format!("one_{v}"))).unwrap()
        );
    }
}

#[test]
fn setup_errors_exit_4_before_any_work() {
    let d = Dir::new();
    inputs(&d);
    std::fs::create_dir_all(d.p("two/x")).unwrap();
    std::fs::create_dir_all(d.p("two/y")).unwrap();
    img(&d.p("two/x/same.png"), 4, 4, 1, SampleType::U8, 40);
    img(&d.p("two/y/same.png"), 4, 4, 1, SampleType::U8, 41);
    std::fs::write(d.p("afile"), b"x").unwrap();
    for (args, needle) in [
        (vec!["--input", "in/*.jpg", "--output", "o1"], "no image files"),
        (
            vec!["--input", "in/[", "--output", "o2"],
            "not a valid glob pattern",
        ),
        (vec!["--input", "in", "--output", "afile"], "is a file"),
        (vec!["--input", "in", "--output", "in"], "holds the inputs"),
        (
            vec!["--input", "two/*/same.png", "--output", "o3"],
            "would both be written",
        ),
        (
            vec!["--input", "in", "--output", "o4", "--mode", "edge"],
            "unknown mode",
        ),
        (
            vec!["--input", "in/gray8.png", "--output", "o5.png", "--readers", "2"],
            "--readers applies to a batch",
        ),
        (
            vec!["--input", "in/gray8.png", "--output", "o6.png", "--fail-fast"],
            "--fail-fast applies to a batch",
        ),
    ] {
        let mut a = vec!["filter2d", "--kernel", "cross4"];
        a.extend(args.iter().copied());
        let o = d.kiln(&a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(4), "{a:?}: {err}");
        assert!(err.contains(needle), "{a:?}: wanted `{needle}` in {err}");
    }
    for o in ["o1", "o2", "o3", "o4", "o5.png", "o6.png"] {
        assert!(!d.p(o).exists() || names(&d.p(o)).is_empty(), "{o} written");
    }
    // A 3-D command over images finds nothing to do.
    let o = d.kiln(&[
        "filter3d", "--input", "in/*.png", "--kernel", "box:3", "--output", "o7",
    ]);
    assert_eq!(o.status.code(), Some(4));
    assert!(stderr(&o).contains("no volume files"), "{}", stderr(&o));
}

#[cfg(unix)]
#[test]
fn an_unreadable_file_fails_alone() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new();
    std::fs::create_dir(d.p("in")).unwrap();
    img(&d.p("in/ok.png"), 4, 5, 1, SampleType::U8, 50);
    img(&d.p("in/locked.png"), 4, 5, 1, SampleType::U8, 51);
    std::fs::set_permissions(d.p("in/locked.png"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let line = "filter2d --input in --kernel cross4 --output out --json";
    let o = if std::fs::read(d.p("in/locked.png")).is_ok() {
        // Root reads any file (CAP_DAC_OVERRIDE): run kiln as root without the two
        // capabilities that bypass file permissions (setpriv, util-linux), so the file is
        // unreadable to it as to anyone else.
        let o = Command::new("setpriv")
            .args([
                "--bounding-set=-dac_override,-dac_read_search",
                "--inh-caps=-all",
                "--",
            ])
            .arg(bin())
            .args(line.split(' '))
            .current_dir(d.0.path())
            .env("KILN_CACHE_DIR", cache_dir(d.0.path()))
            .env_remove("KILN_DEVICES")
            .env_remove("KILN_CONFIG")
            .output()
            .expect("setpriv (util-linux) runs kiln without the permission-bypassing capabilities");
        assert!(
            !stderr(&o).contains("setpriv:"),
            "setpriv could not drop the capabilities: {}",
            stderr(&o)
        );
        o
    } else {
        d.line(line)
    };
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let s = json(&o);
    assert_eq!((s["ok"].as_u64(), s["failed"].as_u64()), (Some(1), Some(1)));
    assert!(
        s["errors"][0]["error"].as_str().unwrap().contains("ermission"),
        "{}",
        s["errors"][0]
    );
    assert_eq!(names(&d.p("out")), ["ok.png"]);
}
