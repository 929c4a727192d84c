// Driver of the implied-volatility kernels on the host (tests/host_emulation.rs): reads a
// book from DIR (n.bin: u64 n; price, spot, strike, maturity, rate, dividend .bin: n f64
// each; put.bin: n u8), runs implied_vol_f64 over a simulated grid smaller than the book (so
// the grid-stride loop takes several turns) and writes DIR/vol.bin (n f64) and
// DIR/reason.bin (n u8); then runs the grouped kernels as launch_implied.rs launches them
// (classify, tile counts, offsets, scatter, the four solves; the tile kernels' CTAs as host
// threads) on the whole book and writes DIR/gvol.bin and DIR/greason.bin, checking that each
// way's list is the book's quotes of that way in book order; and runs them on the book's
// first 1, 31, 257 and 4099 quotes, whose outputs must be implied_vol_f64's bit for bit
// (printed: "grouped prefixes: N bad").
#include <cstdlib>
#include <string>

static std::vector<char> emu_read(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path.c_str()); exit(2); }
  std::vector<char> v;
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + k);
  fclose(f);
  return v;
}

template <class T> static std::vector<T> emu_read_as(const std::string& path) {
  std::vector<char> b = emu_read(path);
  std::vector<T> v(b.size() / sizeof(T));
  memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

static void emu_write(const std::string& path, const void* p, size_t bytes) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot write %s\n", path.c_str()); exit(2); }
  fclose(f);
}

struct EmuBook {
  const double *price, *spot, *strike, *maturity, *rate, *dividend;
  const unsigned char* put;
};

// The grouped launches of SolveImpliedVol on the first n quotes of b; checks each way's list
// (returns false, saying why, where one is wrong).
static bool emu_grouped(const EmuBook& b, unsigned long long n, double* vol, unsigned char* reason) {
  const unsigned long long tiles = (n + IV_TILE - 1) / IV_TILE;
  std::vector<double> start(7 * n, -7.0);
  std::vector<unsigned char> way(n, 255);
  std::vector<unsigned> counts(tiles * IV_WAYS, 0xdeadbeefu), offsets(tiles * IV_WAYS, 0xdeadbeefu);
  std::vector<unsigned> starts(IV_WAYS + 1, 0xdeadbeefu), order(n, 0xdeadbeefu);
  // classify: a grid-stride grid of 3 CTAs of 128 (several turns on a large book)
  gridDim.x = 3; gridDim.y = gridDim.z = 1;
  blockDim.x = 128; blockDim.y = blockDim.z = 1;
  for (unsigned g = 0; g < gridDim.x; ++g) {
    blockIdx.x = g;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      threadIdx.x = t;
      implied_vol_classify_f64(b.price, b.spot, b.strike, b.maturity, b.rate, b.dividend, b.put, n, start.data(),
                               way.data(), vol, reason);
    }
  }
  emu_launch_threads((unsigned)tiles, IV_TILE, [&] { implied_vol_tile_count(way.data(), n, counts.data()); });
  emu_launch_threads(1, IV_OFFSETS_THREADS,
                     [&] { implied_vol_offsets(counts.data(), (unsigned)tiles, offsets.data(), starts.data()); });
  emu_launch_threads((unsigned)tiles, IV_TILE,
                     [&] { implied_vol_scatter(way.data(), n, offsets.data(), order.data()); });
  // each way's list: that way's quotes, in book order
  unsigned long long at = 0;
  for (int w = 0; w < IV_WAYS; ++w) {
    if (starts[w] != at) { printf("way %d starts at %u, not %llu\n", w, starts[w], at); return false; }
    for (unsigned long long i = 0; i < n; ++i) {
      if (way[i] != w) continue;
      if (order[at] != i) { printf("way %d: list entry %llu is %u, not %llu\n", w, at, order[at], i); return false; }
      ++at;
    }
  }
  if (starts[IV_WAYS] != at) { printf("the lists hold %u, not %llu\n", starts[IV_WAYS], at); return false; }
  // the solves: grids of 2 CTAs of 128, one thread at a time (no barriers)
  gridDim.x = 2;
  for (int w = 0; w < IV_WAYS; ++w) {
    for (unsigned g = 0; g < gridDim.x; ++g) {
      blockIdx.x = g;
      for (unsigned t = 0; t < blockDim.x; ++t) {
        threadIdx.x = t;
        const double* st = start.data();
        if (w == IV_WAY_LOWER)
          implied_vol_solve_lower_f64(st, n, b.maturity, order.data(), starts.data(), vol, reason);
        else if (w == IV_WAY_LOW_MID)
          implied_vol_solve_low_mid_f64(st, n, b.maturity, order.data(), starts.data(), vol, reason);
        else if (w == IV_WAY_HIGH_MID)
          implied_vol_solve_high_mid_f64(st, n, b.maturity, order.data(), starts.data(), vol, reason);
        else
          implied_vol_solve_upper_f64(st, n, b.maturity, order.data(), starts.data(), vol, reason);
      }
    }
  }
  printf("grouped, %llu quotes: ways %u %u %u %u, %llu need no solve\n", n, starts[1] - starts[0],
         starts[2] - starts[1], starts[3] - starts[2], starts[4] - starts[3], n - starts[IV_WAYS]);
  return true;
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: implied_vol_check DIR\n"); return 2; }
  const std::string d = argv[1];
  const unsigned long long n = emu_read_as<unsigned long long>(d + "/n.bin").at(0);
  const auto price = emu_read_as<double>(d + "/price.bin");
  const auto spot = emu_read_as<double>(d + "/spot.bin");
  const auto strike = emu_read_as<double>(d + "/strike.bin");
  const auto maturity = emu_read_as<double>(d + "/maturity.bin");
  const auto rate = emu_read_as<double>(d + "/rate.bin");
  const auto dividend = emu_read_as<double>(d + "/dividend.bin");
  const auto put = emu_read_as<unsigned char>(d + "/put.bin");
  if (price.size() != n || put.size() != n) { fprintf(stderr, "short input\n"); return 2; }
  std::vector<double> vol(n, -1.0);
  std::vector<unsigned char> reason(n, 255);
  // 7 CTAs of 128 threads: 896 threads, each visiting every 896th quote.
  gridDim.x = 7; gridDim.y = gridDim.z = 1;
  blockDim.x = 128; blockDim.y = blockDim.z = 1;
  for (unsigned b = 0; b < gridDim.x; ++b) {
    blockIdx.x = b;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      threadIdx.x = t;
      implied_vol_f64(price.data(), spot.data(), strike.data(), maturity.data(), rate.data(), dividend.data(),
                      put.data(), n, vol.data(), reason.data());
    }
  }
  emu_write(d + "/vol.bin", vol.data(), n * sizeof(double));
  emu_write(d + "/reason.bin", reason.data(), n);
  printf("%llu quotes\n", n);
  const EmuBook b{price.data(), spot.data(), strike.data(), maturity.data(), rate.data(), dividend.data(), put.data()};
  std::vector<double> gvol(n, -1.0);
  std::vector<unsigned char> greason(n, 255);
  if (!emu_grouped(b, n, gvol.data(), greason.data())) return 1;
  emu_write(d + "/gvol.bin", gvol.data(), n * sizeof(double));
  emu_write(d + "/greason.bin", greason.data(), n);
  unsigned long long bad = 0;
  for (unsigned long long m : {1ull, 31ull, 257ull, 4099ull}) {
    if (m > n) continue;
    std::vector<double> pv(m, -1.0);
    std::vector<unsigned char> pr(m, 255);
    if (!emu_grouped(b, m, pv.data(), pr.data())) return 1;
    for (unsigned long long i = 0; i < m; ++i) {
      if (memcmp(&pv[i], &vol[i], sizeof(double)) != 0 || pr[i] != reason[i]) ++bad;
    }
  }
  printf("grouped prefixes: %llu bad\n", bad);
  return 0;
}
