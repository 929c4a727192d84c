
// Runs ndimage.cu's nd_uniform_f64 on the host as launch_imaging/ndimage_exact.rs launches
// it (uniform_pass: the axis's lines as (o, ia), a grid of a few blocks, grid-stride; the
// kernel's threads share nothing, so they run one after another). Reads a case file: ti to
// (0 f32, 1 f64), d h w, axis, size, anchor, mode code, cval (17 digits), then the d*h*w
// input values as 17-digit doubles (exact for f32 inputs). Writes the output's raw bytes.
int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: uniform_check CASE OUT\n"); return 2; }
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  int ti, to, axis, size, anchor, mode;
  long long d, h, w;
  double cval;
  if (fscanf(f, "%d %d %lld %lld %lld %d %d %d %d %lf", &ti, &to, &d, &h, &w, &axis, &size, &anchor,
             &mode, &cval) != 10) { fprintf(stderr, "bad header\n"); return 2; }
  const long long n = d * h * w;
  std::vector<double> x(n);
  for (auto& v : x) if (fscanf(f, "%lf", &v) != 1) { fprintf(stderr, "short data\n"); return 2; }
  fclose(f);
  std::vector<float> xf(x.begin(), x.end());
  std::vector<double> od(n, NAN);
  std::vector<float> of(n, NAN);
  const void* src = ti == 0 ? (const void*)xf.data() : (const void*)x.data();
  void* dst = to == 0 ? (void*)of.data() : (void*)od.data();
  long long len, sa, a, o, so;
  if (axis == 0) { len = d; sa = h * w; a = h * w; o = 1; so = 0; }
  else if (axis == 1) { len = h; sa = w; a = w; o = d; so = h * w; }
  else { len = w; sa = 1; a = 1; o = d * h; so = w; }
  const unsigned grid = (unsigned)std::min(3LL, (a * o + 255) / 256);
  gridDim.x = grid; gridDim.y = gridDim.z = 1;
  blockDim.x = 256; blockDim.y = blockDim.z = 1;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    for (unsigned t = 0; t < 256; ++t) {
      threadIdx.x = t; threadIdx.y = threadIdx.z = 0;
      nd_uniform_f64(src, dst, (int)len, sa, (int)a, (int)o, so, size, anchor, mode, cval, ti, to);
    }
  }
  FILE* out = fopen(argv[2], "wb");
  if (!out) return 2;
  if (to == 0) fwrite(of.data(), sizeof(float), n, out);
  else fwrite(od.data(), sizeof(double), n, out);
  fclose(out);
  return 0;
}
