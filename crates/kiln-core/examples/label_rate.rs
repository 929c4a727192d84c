//! CPU `label` throughput: a random 50%-dense square mask (2048² by default) labelled with
//! the faces-only and the full 3 x 3 structure, best of 30 calls each into one reused
//! output, on rayon's pool (`RAYON_NUM_THREADS=1` for one core). A quick loop for the
//! labelling code without Python; scipy comparisons go through the Python package
//! (docs/performance.md, "scipy.ndimage's labels and measurements, CPU").
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --release -p kiln-core --example label_rate
//! cargo run --release -p kiln-core --example label_rate -- 4096
//! ```

use std::time::Instant;

use kiln_core::imaging::label::{label, Structure};

fn main() {
    let n: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 2048,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: label_rate [SIDE]  (a positive integer, default 2048)");
            std::process::exit(2);
        }
    };
    // xorshift64: a fixed, dependency-free mask
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mask: Vec<u8> = (0..n * n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            u8::from(s >> 63 == 1)
        })
        .collect();
    let mut out = vec![0i32; n * n];
    for (name, conn) in [("faces", 1), ("3x3", 2)] {
        let st = Structure::connectivity(2, conn).expect("a 2-D structure");
        let mut best = f64::MAX;
        let mut count = 0;
        for _ in 0..30 {
            let t = Instant::now();
            count = label(&mask, &[n, n], &st, &mut out).expect("label");
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{n}x{n} {name}: {count} groups, best {:.2} ms", best * 1e3);
    }
}
