// Driver of the implied-volatility kernel on the host (tests/host_emulation.rs): reads a
// book from DIR (n.bin: u64 n; price, spot, strike, maturity, rate, dividend .bin: n f64
// each; put.bin: n u8), runs implied_vol_f64 over a simulated grid smaller than the book (so
// the grid-stride loop takes several turns), and writes DIR/vol.bin (n f64) and
// DIR/reason.bin (n u8).
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
  return 0;
}
