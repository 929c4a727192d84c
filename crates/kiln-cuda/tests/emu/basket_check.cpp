// Runs basket.cu's kernels on the host over the arrays tests/host_emulation.rs wrote to the
// directory argv[1] (u.bin, f.bin, d.bin: the launch's parameter arrays; keys.bin: the 20 round
// keys; cfg.bin: options, samples, antithetic, samples to emit per option, all u64), and
// writes what they compute for the test to compare with kiln-core, bit for bit:
//   samples.bin: basket_samples_f64, option by option: (y, c) of samples 0 .. count;
//   blocks.bin:  basket_blocks_f64 over every (option, block), 3 CTAs of 256 threads
//                (grid-stride: a warp takes several items);
//   tail.bin:    basket_blocks_f64 from first_block 1 (a chunked launch's indexing).
#include <fstream>
#include <iterator>
#include <string>

template <class T> static std::vector<T> load(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

template <class T> static void save(const std::string& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), (std::streamsize)(v.size() * sizeof(T)));
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: basket_check DIR\n"); return 2; }
  const std::string d = argv[1];
  const auto u = load<u32>(d + "/u.bin");
  const auto f = load<float>(d + "/f.bin");
  const auto dp = load<double>(d + "/d.bin");
  const auto kw = load<u32>(d + "/keys.bin");
  const auto cfg = load<u64>(d + "/cfg.bin");
  if (kw.size() != 20 || cfg.size() != 4) { fprintf(stderr, "bad keys or cfg\n"); return 2; }
  KilnKeys ks;
  memcpy(&ks, kw.data(), sizeof ks);
  const u32 n_opt = (u32)cfg[0], anti = (u32)cfg[2], count = (u32)cfg[3];
  const u64 samples = cfg[1];
  std::vector<double> s_out(2ull * count * n_opt);
  for (u32 k = 0; k < n_opt; ++k) {
    double* o = s_out.data() + 2ull * count * k;
    const u32* row = u.data() + (u64)BASKET_OPT_U * k;
    emu_launch_threads((count + 63) / 64, 64, [&] {
      basket_samples_f64(row, f.data(), dp.data(), 0u, count, anti, ks, o);
    });
  }
  save(d + "/samples.bin", s_out);
  const u64 nb = (samples + BASKET_BLOCK_SAMPLES - 1) / BASKET_BLOCK_SAMPLES;
  std::vector<double> b_out((u64)n_opt * nb * BASKET_SUMS, -1.0);
  emu_launch_threads(3, 256, [&] {
    basket_blocks_f64(u.data(), f.data(), dp.data(), n_opt, 0, nb, samples, anti, ks, b_out.data());
  });
  save(d + "/blocks.bin", b_out);
  std::vector<double> t_out((u64)n_opt * (nb - 1) * BASKET_SUMS, -1.0);
  if (nb > 1) {
    emu_launch_threads(2, 256, [&] {
      basket_blocks_f64(u.data(), f.data(), dp.data(), n_opt, 1, nb - 1, samples, anti, ks, t_out.data());
    });
  }
  save(d + "/tail.bin", t_out);
  printf("ran %u options, %llu blocks\n", n_opt, (unsigned long long)nb);
  return 0;
}
