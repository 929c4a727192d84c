
// Runs kernels/distance.cu's two kernels on the host as launch_imaging/distance.rs launches
// them (one launch a pass, axis 0 first, pass d's features into buffer d % 2 and the last
// pass's into the index planes (or none, for the distances alone); grid-stride kernels over a few blocks, each thread in turn:
// the kernels share nothing between threads). Reads a case file of whitespace-separated
// numbers: r, the r axis lengths, the r sampling values (as 17 significant digits), the
// r passes' (fast, scan) flags, then the n mask bytes after a newline. Writes the n float64
// distances and the r*n int32 index planes to the output file.
template <class F> static void emu_serial(unsigned grid, unsigned block, F body) {
  gridDim.x = grid; gridDim.y = gridDim.z = 1;
  blockDim.x = block; blockDim.y = blockDim.z = 1;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    for (unsigned t = 0; t < block; ++t) {
      threadIdx.x = t; threadIdx.y = threadIdx.z = 0;
      body();
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: edt_check CASE OUT\n"); return 2; }
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  int r = 0;
  if (fscanf(f, "%d", &r) != 1 || r < 1 || r > EDT_MAXR) { fprintf(stderr, "bad rank\n"); return 2; }
  std::vector<long long> dims(r);
  std::vector<double> s(r);
  std::vector<int> fast(r), scan(r);
  long long n = 1;
  for (auto& d : dims) { if (fscanf(f, "%lld", &d) != 1) return 2; n *= d; }
  for (auto& v : s) if (fscanf(f, "%lf", &v) != 1) return 2;
  for (int d = 0; d < r; ++d) if (fscanf(f, "%d %d", &fast[d], &scan[d]) != 2) return 2;
  fgetc(f);  // the newline before the mask
  std::vector<unsigned char> mask(n);
  if ((long long)fread(mask.data(), 1, n, f) != n) { fprintf(stderr, "short mask\n"); return 2; }
  fclose(f);
  std::vector<int> buf[2] = {std::vector<int>(r * n), std::vector<int>(r * n)};
  std::vector<int> ind(r * n), sg(n);
  std::vector<double> sw(n), dist(n), dist_only(n);
  // twice: with the index planes, then distances alone (the last pass writes no plane,
  // except a one-axis scan, which sweeps in a buffer), which must give the same distances
  for (int with_ind = 1; with_ind >= 0; --with_ind) {
    double* dd = with_ind ? dist.data() : dist_only.data();
    for (int d = 0; d < r; ++d) {
      const long long len = dims[d], lines = n / len;
      const bool last = d == r - 1;
      int* dst = !last ? buf[d % 2].data()
                 : with_ind ? ind.data()
                 : (r == 1 && scan[0]) ? buf[0].data() : nullptr;
      const unsigned grid = (unsigned)std::min(3LL, (lines + 255) / 256);
      if (d == 0 && scan[0]) {
        emu_serial(grid, 256, [&] {
          edt_scan0(mask.data(), dst, r == 1 ? dd : nullptr, lines, (int)len, s[0]);
        });
        continue;
      }
      const int* src = d == 0 ? nullptr : buf[(d - 1) % 2].data();
      emu_serial(grid, 256, [&] {
        edt_pass(d == 0 ? mask.data() : nullptr, src, dst, sg.data(), sw.data(),
                 last ? dd : nullptr, dims.data(), s.data(), r, d, n, fast[d]);
      });
    }
  }
  if (memcmp(dist.data(), dist_only.data(), n * sizeof(double)) != 0) {
    fprintf(stderr, "the distances alone differ from the distances with the indices\n");
    return 3;
  }
  FILE* o = fopen(argv[2], "wb");
  if (!o) return 2;
  fwrite(dist.data(), sizeof(double), n, o);
  fwrite(ind.data(), sizeof(int), r * n, o);
  fclose(o);
  return 0;
}
