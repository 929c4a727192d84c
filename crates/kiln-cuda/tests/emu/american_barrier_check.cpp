// Runs american.cu's and american_barrier.cu's kernels on the host as launch_american.rs and
// launch_american_barrier.rs launch them, one step a command, for
// tests/emu/american_barrier.rs, which drives them with kiln-core's run_lsm / run_lsm_barrier
// (so the host adds the block sums and solves the systems as for the GPU). f64 and f32 values
// travel as hex bit patterns. stdin, one command a line; each answers one line on stdout:
//   cfg paths dates option drift vol spot strike put level up in rebate df barrier k0..k19
//                        the run (barrier 0: the vanilla engine); answers "ok"
//   sim                  lsm_paths_f32, then (barrier) lsm_barrier_init_f64; "ok"
//   reg d                the regression kernel of date d; the blocks x 8 sums
//   ex d b0 b1 b2        the exercise kernel of date d; "ok"
//   fin                  the final kernel; the blocks x 2 sums
//   quit
// Per-path kernels run CTA by CTA, thread by thread on this thread; per-block kernels run
// each CTA's 256 threads as host threads (emu_launch_threads: __syncwarp a barrier).
#include <iostream>
#include <sstream>
#include <string>

static u64 hex(const std::string& s) { return std::stoull(s, nullptr, 16); }
static double f64_of(const std::string& s) { const u64 b = hex(s); double d; memcpy(&d, &b, 8); return d; }
static float f32_of(const std::string& s) { const u32 b = (u32)hex(s); float f; memcpy(&f, &b, 4); return f; }
static void print_bits(const std::vector<double>& v, size_t n) {
  std::ostringstream o;
  for (size_t i = 0; i < n; ++i) {
    u64 b; memcpy(&b, &v[i], 8);
    o << std::hex << b << (i + 1 < n ? " " : "");
  }
  std::cout << o.str() << std::endl;
}

template <class F> static void per_path(u64 paths, F body) {
  const unsigned ctas = (unsigned)((paths + 255) / 256);
  gridDim.x = ctas; blockDim.x = 256;
  for (unsigned b = 0; b < ctas; ++b) {
    blockIdx.x = b;
    for (unsigned t = 0; t < 256; ++t) { threadIdx.x = t; body(); }
  }
}

int main() {
  u64 paths = 0, nblocks = 0;
  u32 dates = 0, option = 0, put = 0, up = 0, in = 0, barrier = 0;
  float drift = 0, vol = 0;
  double spot = 0, strike = 0, level = 0, rebate = 0, df = 0;
  KilnKeys ks;
  std::vector<float> m;
  std::vector<double> v, w, sums;
  std::vector<u32> hit;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in_s(line);
    std::string cmd;
    in_s >> cmd;
    if (cmd == "cfg") {
      std::string t[14];
      for (auto& x : t) in_s >> x;
      paths = std::stoull(t[0]); dates = (u32)std::stoul(t[1]); option = (u32)std::stoul(t[2]);
      drift = f32_of(t[3]); vol = f32_of(t[4]); spot = f64_of(t[5]); strike = f64_of(t[6]);
      put = (u32)std::stoul(t[7]); level = f64_of(t[8]); up = (u32)std::stoul(t[9]);
      in = (u32)std::stoul(t[10]); rebate = f64_of(t[11]); df = f64_of(t[12]);
      barrier = (u32)std::stoul(t[13]);
      u32 k[20];
      for (auto& x : k) { std::string s; in_s >> s; x = (u32)hex(s); }
      memcpy(&ks, k, sizeof ks);
      nblocks = (paths + KILN_LSM_BLOCK - 1) / KILN_LSM_BLOCK;
      // poison: an element no kernel writes shows up in the sums
      m.assign(paths * dates, std::nanf(""));
      v.assign(paths, std::nan(""));
      w.assign(in ? paths : 1, std::nan(""));
      hit.assign(paths, 0xdeadbeefu);
      sums.assign(nblocks * KILN_LSM_SUMS, std::nan(""));
      std::cout << "ok" << std::endl;
    } else if (cmd == "sim") {
      per_path(paths, [&] {
        lsm_paths_f32(paths, dates, option, drift, vol, spot, strike, put, ks, m.data(), v.data());
      });
      if (barrier) {
        per_path(paths, [&] {
          lsm_barrier_init_f64(m.data(), v.data(), w.data(), hit.data(), paths, dates, spot, level, up, in, rebate);
        });
      }
      std::cout << "ok" << std::endl;
    } else if (cmd == "reg") {
      u32 d; in_s >> d;
      const unsigned ctas = (unsigned)((nblocks + KILN_LSM_WARPS - 1) / KILN_LSM_WARPS);
      if (barrier) {
        emu_launch_threads(ctas, 256, [&] {
          lsm_barrier_regress_f64(m.data(), v.data(), w.data(), hit.data(), paths, d, spot, strike, put, df, in,
                                  rebate, sums.data());
        });
      } else {
        emu_launch_threads(ctas, 256, [&] {
          lsm_regress_f64(m.data(), v.data(), paths, d, spot, strike, put, df, sums.data());
        });
      }
      print_bits(sums, nblocks * KILN_LSM_SUMS);
    } else if (cmd == "ex") {
      u32 d; std::string b[3];
      in_s >> d >> b[0] >> b[1] >> b[2];
      const double b0 = f64_of(b[0]), b1 = f64_of(b[1]), b2 = f64_of(b[2]);
      if (barrier && !in) {
        per_path(paths, [&] {
          lsm_barrier_exercise_f64(m.data(), v.data(), hit.data(), paths, d, spot, strike, put, b0, b1, b2);
        });
      } else {
        per_path(paths, [&] { lsm_exercise_f64(m.data(), v.data(), paths, d, spot, strike, put, b0, b1, b2); });
      }
      std::cout << "ok" << std::endl;
    } else if (cmd == "fin") {
      const unsigned ctas = (unsigned)((nblocks + KILN_LSM_WARPS - 1) / KILN_LSM_WARPS);
      if (barrier && in) {
        emu_launch_threads(ctas, 256, [&] {
          lsm_barrier_final_in_f64(w.data(), v.data(), hit.data(), paths, df, sums.data());
        });
      } else {
        emu_launch_threads(ctas, 256, [&] { lsm_final_f64(v.data(), paths, df, sums.data()); });
      }
      print_bits(sums, nblocks * 2);
    } else if (cmd == "quit") {
      return 0;
    } else {
      fprintf(stderr, "unknown command: %s\n", line.c_str());
      return 2;
    }
  }
  return 0;
}
