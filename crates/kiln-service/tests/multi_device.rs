//! Multi-device workers (`workers.groups`): the config form parses and is validated, the
//! slots and the worker command line follow it, and a batch of jobs through a [`Pool`] of
//! CPU workers standing in for GPUs (`Worker::cpu_labelled`) gives the results of one
//! runtime: prices bit for bit (the executor's merge), element-wise maps element for
//! element, filter and GEMM jobs (run on the pool's first device) the same.
#![allow(clippy::unwrap_used)]

use kiln::core::finance::{McParams, OptionSpec, OptionType};
use kiln::executor::Worker;
use kiln_service::config::{GpuSelection, ServiceConfig};
use kiln_service::exec::{run_batch, run_batch_pool, ExecOptions, Pool};
use kiln_service::protocol::{JobResult, WorkItem, WorkOutcome};
use kiln_service::server::worker_devices;
use kiln_service::task::{ArrayInput, KernelSpec, Task};
use serde_json::Value;

#[test]
fn groups_parse_and_are_checked() {
    let c = ServiceConfig::from_toml("[workers]\ngroups = [\"0,1\", \"2,3\"]\ncpu_workers = 1\n").unwrap();
    c.validate().unwrap();
    let sets = c.workers.device_groups().unwrap();
    assert_eq!(
        sets.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        ["0,1", "2,3"]
    );
    // the slots: the groups replace the per-GPU workers, then the CPU workers
    let devices = worker_devices(&c.workers, &kiln::Config::default()).unwrap();
    assert_eq!(devices, ["group:0,1", "group:2,3", "cpu"]);
    // the default stays one worker per GPU (none here without a driver) plus the CPU
    let d = ServiceConfig::default();
    assert!(d.workers.groups.is_empty());
    let mut w = d.workers.clone();
    w.gpus = GpuSelection::List(vec![0, 1]);
    assert_eq!(
        worker_devices(&w, &kiln::Config::default()).unwrap(),
        ["cuda:0", "cuda:1", "cpu"]
    );
    // a hybrid group and a CPU-only group are sets too
    let c = ServiceConfig::from_toml("[workers]\ngroups = [\"cpu+all\"]\ncpu_workers = 0\n").unwrap();
    c.validate().unwrap();
    let c = ServiceConfig::from_toml("[workers]\ngroups = [\"cpu\"]\ncpu_workers = 0\ngpus = \"none\"\n")
        .unwrap();
    c.validate().unwrap();
    assert_eq!(
        worker_devices(&c.workers, &kiln::Config::default()).unwrap(),
        ["group:cpu"]
    );

    let bad = |toml: &str, needle: &str| {
        let e = ServiceConfig::from_toml(toml)
            .and_then(|c| c.validate())
            .unwrap_err();
        assert!(e.contains(needle), "{toml}: wanted `{needle}` in: {e}");
    };
    bad("[workers]\ngroups = [\"0,x\"]\n", "workers.groups[0] = `0,x`");
    bad(
        "[workers]\ngroups = [\"gpu\"]\n",
        "use all, 0,1,..., cpu, cpu+all or cpu+0,1",
    );
    bad("[workers]\ngroups = [\"0,1\", \"1,2\"]\n", "share a GPU");
    bad("[workers]\ngroups = [\"all\", \"3\"]\n", "share a GPU");
    bad("[workers]\ngroups = [\"0,1\"]\ngpus = [2]\n", "leave gpus");
    bad("[workers]\ngroup = [\"0,1\"]\n", "unknown field");
}

fn item(id: &str, task: &Task) -> WorkItem {
    WorkItem {
        id: id.into(),
        attempt: 1,
        task: serde_json::to_string(task).unwrap(),
    }
}

fn array(shape: &[usize], seed: u64) -> ArrayInput {
    let n: usize = shape.iter().product();
    ArrayInput {
        shape: shape.to_vec(),
        data: Some(kiln::testing::random_f32(n, -1.0, 1.0, seed)),
        blob: None,
    }
}

fn book(n: usize, seed: u64) -> Vec<OptionSpec> {
    let u = kiln::testing::random_f32(n, 0.0, 1.0, seed);
    u.iter()
        .enumerate()
        .map(|(i, x)| {
            let t = if i % 2 == 0 {
                OptionType::Call
            } else {
                OptionType::Put
            };
            OptionSpec::european(t, 100.0, 80.0 + 40.0 * f64::from(*x), 0.03, 0.01, 0.25, 1.0)
        })
        .collect()
}

fn result(r: &JobResult) -> &Value {
    match &r.outcome {
        WorkOutcome::Ok { result, .. } => result,
        other => panic!("{}: {other:?}", r.id),
    }
}

#[test]
fn a_pool_of_devices_gives_one_devices_results() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ExecOptions {
        blob_dir: dir.path().to_path_buf(),
        inline_max_elements: 1 << 20,
        max_elements: 16 << 20,
    };
    let mc = McParams {
        paths: 4096,
        steps: 4,
        seed: 11,
        ..McParams::default()
    };
    // two pricing jobs of one key (merged into one book), then the other kinds
    let jobs = [
        item(
            "p1",
            &Task::Price {
                method: "mc".into(),
                mc,
                options: book(37, 1),
            },
        ),
        item(
            "p2",
            &Task::Price {
                method: "mc".into(),
                mc,
                options: book(29, 2),
            },
        ),
        item(
            "e",
            &Task::Elementwise {
                op: "sigmoid".into(),
                a: None,
                b: None,
                x: array(&[1000, 37], 3),
            },
        ),
        item(
            "f",
            &Task::Filter2d {
                kernel: KernelSpec::Preset("gaussian:1.5".into()),
                mode: "reflect".into(),
                path: "auto".into(),
                input: array(&[41, 39], 4),
            },
        ),
        item(
            "g",
            &Task::Gemm {
                m: 9,
                n: 7,
                k: 13,
                trans_a: false,
                trans_b: true,
                a: array(&[9, 13], 5),
                b: array(&[7, 13], 6),
            },
        ),
    ];
    let one = kiln::Runtime::cpu();
    let (want, poisoned) = run_batch(&one, &opts, &jobs[..2]);
    assert!(!poisoned);
    let (want_rest, _) = run_batch(&one, &opts, &jobs[2..]);
    let pool = Pool::new(vec![
        Worker::cpu_labelled("cpu-a"),
        Worker::cpu_labelled("cpu-b"),
        Worker::cpu_labelled("cpu-c"),
    ])
    .unwrap();
    assert_eq!(pool.label(), "cpu-a+cpu-b+cpu-c");
    assert!(!pool.has_gpu());
    let (got, poisoned) = run_batch_pool(&pool, &opts, &jobs[..2]);
    assert!(!poisoned);
    let (got_rest, _) = run_batch_pool(&pool, &opts, &jobs[2..]);
    for (w, g) in want.iter().zip(&got) {
        let (w, g) = (result(w), result(g));
        // bit for bit: the JSON numbers print the f64 exactly
        assert_eq!(w["prices"], g["prices"], "{}", w["prices"]);
        assert_eq!(w["stream_offset"], g["stream_offset"]);
        assert_eq!(g["device"], "cpu-a+cpu-b+cpu-c");
        let split = g["workers"].as_array().unwrap();
        assert_eq!(split.len(), 3);
        let chunks: u64 = split.iter().map(|s| s["chunks"].as_u64().unwrap()).sum();
        assert!(chunks > 3, "the book was split: {split:?}");
    }
    assert_eq!(result(&got[1])["stream_offset"], 37);
    for (w, g) in want_rest.iter().zip(&got_rest) {
        assert_eq!(w.id, g.id);
        assert_eq!(result(w), result(g), "job {}", w.id);
    }
}
