// Driver of the interpolation kernels on the host (tests/emu/interp.rs): reads DIR/cases.bin,
// a sequence of records (little-endian u64 fields):
//   kind (0 zoom/shift, 1 affine, 2 coordinates, 3 a prefilter),
//   symbol bytes + the kernel's name (the one the launcher picks),
//   args bytes + the kernel's argument struct as the launcher builds it (for a prefilter,
//   one struct per pole, launched in order),
//   data bytes + the input (f32 or f64 per the struct; the f64 data of a prefilter),
//   coordinate count + that many f64,
//   output bytes (0 for a prefilter, which works in place on the data),
// runs each over a simulated grid smaller than the work (3 CTAs of 37 threads, so the
// grid-stride loops take several turns), and writes DIR/out.bin: per record the status word
// (u64) and the output bytes (the data, for a prefilter).
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

struct EmuReader {
  const std::vector<char>& b;
  size_t at = 0;
  unsigned long long u64() {
    unsigned long long v;
    take(&v, 8);
    return v;
  }
  void take(void* p, size_t n) {
    if (at + n > b.size()) { fprintf(stderr, "short cases.bin at %zu\n", at); exit(2); }
    memcpy(p, b.data() + at, n);
    at += n;
  }
};

template <class F> static void emu_grid(F body) {
  gridDim.x = 3; gridDim.y = gridDim.z = 1;
  blockDim.x = 37; blockDim.y = blockDim.z = 1;
  for (unsigned b = 0; b < gridDim.x; ++b) {
    blockIdx.x = b;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      threadIdx.x = t;
      body();
    }
  }
}

// The resampling kernels by symbol: coordinate kind, input type, and the entry point.
struct EmuResampler {
  const char* sym;
  unsigned long long kind;
  bool in_f64;
  void (*f32)(const float*, void*, int*, InterpArgs);
  void (*f64)(const double*, void*, int*, InterpArgs);
  void (*c32)(const float*, void*, int*, const double*, InterpArgs);
  void (*c64)(const double*, void*, int*, const double*, InterpArgs);
};

static const EmuResampler EMU_RESAMPLERS[] = {
  {"interp_zoom_shift_o0_f32", 0, false, interp_zoom_shift_o0_f32, nullptr, nullptr, nullptr},
  {"interp_zoom_shift_o0_f64", 0, true, nullptr, interp_zoom_shift_o0_f64, nullptr, nullptr},
  {"interp_zoom_shift_o1_f32", 0, false, interp_zoom_shift_o1_f32, nullptr, nullptr, nullptr},
  {"interp_zoom_shift_o1_f64", 0, true, nullptr, interp_zoom_shift_o1_f64, nullptr, nullptr},
  {"interp_zoom_shift_o2_f32", 0, false, interp_zoom_shift_o2_f32, nullptr, nullptr, nullptr},
  {"interp_zoom_shift_o2_f64", 0, true, nullptr, interp_zoom_shift_o2_f64, nullptr, nullptr},
  {"interp_zoom_shift_o3_f32", 0, false, interp_zoom_shift_o3_f32, nullptr, nullptr, nullptr},
  {"interp_zoom_shift_o3_f64", 0, true, nullptr, interp_zoom_shift_o3_f64, nullptr, nullptr},
  {"interp_zoom_shift_o4_f32", 0, false, interp_zoom_shift_o4_f32, nullptr, nullptr, nullptr},
  {"interp_zoom_shift_o4_f64", 0, true, nullptr, interp_zoom_shift_o4_f64, nullptr, nullptr},
  {"interp_zoom_shift_o5_f32", 0, false, interp_zoom_shift_o5_f32, nullptr, nullptr, nullptr},
  {"interp_zoom_shift_o5_f64", 0, true, nullptr, interp_zoom_shift_o5_f64, nullptr, nullptr},
  {"interp_affine_o0_f32", 1, false, interp_affine_o0_f32, nullptr, nullptr, nullptr},
  {"interp_affine_o0_f64", 1, true, nullptr, interp_affine_o0_f64, nullptr, nullptr},
  {"interp_affine_o1_f32", 1, false, interp_affine_o1_f32, nullptr, nullptr, nullptr},
  {"interp_affine_o1_f64", 1, true, nullptr, interp_affine_o1_f64, nullptr, nullptr},
  {"interp_affine_o2_f32", 1, false, interp_affine_o2_f32, nullptr, nullptr, nullptr},
  {"interp_affine_o2_f64", 1, true, nullptr, interp_affine_o2_f64, nullptr, nullptr},
  {"interp_affine_o3_f32", 1, false, interp_affine_o3_f32, nullptr, nullptr, nullptr},
  {"interp_affine_o3_f64", 1, true, nullptr, interp_affine_o3_f64, nullptr, nullptr},
  {"interp_affine_o4_f32", 1, false, interp_affine_o4_f32, nullptr, nullptr, nullptr},
  {"interp_affine_o4_f64", 1, true, nullptr, interp_affine_o4_f64, nullptr, nullptr},
  {"interp_affine_o5_f32", 1, false, interp_affine_o5_f32, nullptr, nullptr, nullptr},
  {"interp_affine_o5_f64", 1, true, nullptr, interp_affine_o5_f64, nullptr, nullptr},
  {"interp_coords_o0_f32", 2, false, nullptr, nullptr, interp_coords_o0_f32, nullptr},
  {"interp_coords_o0_f64", 2, true, nullptr, nullptr, nullptr, interp_coords_o0_f64},
  {"interp_coords_o1_f32", 2, false, nullptr, nullptr, interp_coords_o1_f32, nullptr},
  {"interp_coords_o1_f64", 2, true, nullptr, nullptr, nullptr, interp_coords_o1_f64},
  {"interp_coords_o2_f32", 2, false, nullptr, nullptr, interp_coords_o2_f32, nullptr},
  {"interp_coords_o2_f64", 2, true, nullptr, nullptr, nullptr, interp_coords_o2_f64},
  {"interp_coords_o3_f32", 2, false, nullptr, nullptr, interp_coords_o3_f32, nullptr},
  {"interp_coords_o3_f64", 2, true, nullptr, nullptr, nullptr, interp_coords_o3_f64},
  {"interp_coords_o4_f32", 2, false, nullptr, nullptr, interp_coords_o4_f32, nullptr},
  {"interp_coords_o4_f64", 2, true, nullptr, nullptr, nullptr, interp_coords_o4_f64},
  {"interp_coords_o5_f32", 2, false, nullptr, nullptr, interp_coords_o5_f32, nullptr},
  {"interp_coords_o5_f64", 2, true, nullptr, nullptr, nullptr, interp_coords_o5_f64},
};

static const EmuResampler* emu_resampler(const std::string& sym) {
  for (const EmuResampler& k : EMU_RESAMPLERS)
    if (sym == k.sym) return &k;
  return nullptr;
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: interp_check DIR\n"); return 2; }
  const std::string d = argv[1];
  const std::vector<char> all = emu_read(d + "/cases.bin");
  EmuReader r{all};
  std::vector<char> out;
  unsigned long long records = 0;
  while (r.at < all.size()) {
    const unsigned long long kind = r.u64();
    const unsigned long long sym_bytes = r.u64();
    std::string sym(sym_bytes, '\0');
    r.take(&sym[0], sym_bytes);
    const unsigned long long args_bytes = r.u64();
    std::vector<char> args(args_bytes);
    r.take(args.data(), args_bytes);
    const unsigned long long data_bytes = r.u64();
    // 8-byte aligned storage for the data
    std::vector<double> data(data_bytes / 8 + 1);
    r.take(data.data(), data_bytes);
    const unsigned long long nc = r.u64();
    std::vector<double> coords(nc + 1);
    r.take(coords.data(), nc * 8);
    const unsigned long long out_bytes = r.u64();
    std::vector<double> dst(out_bytes / 8 + 1);
    int status = 0;
    if (kind == 3) {
      // the prefilter's passes, one launch each, in order, in place
      SplineArgs a;
      if (args_bytes % sizeof a) { fprintf(stderr, "SplineArgs: %llu bytes, not a multiple of %zu\n", args_bytes, sizeof a); return 2; }
      for (size_t k = 0; k < args_bytes / sizeof a; ++k) {
        memcpy(&a, args.data() + k * sizeof a, sizeof a);
        emu_grid([&] { interp_spline_pole_f64(data.data(), a); });
      }
    } else {
      InterpArgs a;
      if (args_bytes != sizeof a) { fprintf(stderr, "InterpArgs: %llu bytes, want %zu\n", args_bytes, sizeof a); return 2; }
      memcpy(&a, args.data(), sizeof a);
      const EmuResampler* k = emu_resampler(sym);
      if (!k) { fprintf(stderr, "no resampling kernel %s\n", sym.c_str()); return 2; }
      if (k->kind != kind || k->in_f64 != (a.in_f64 != 0)) {
        fprintf(stderr, "%s: kind %llu, in_f64 %d do not match it\n", sym.c_str(), kind, a.in_f64);
        return 2;
      }
      emu_grid([&] {
        if (k->in_f64) {
          const double* src = data.data();
          if (k->c64) k->c64(src, dst.data(), &status, coords.data(), a);
          else k->f64(src, dst.data(), &status, a);
        } else {
          const float* src = (const float*)data.data();
          if (k->c32) k->c32(src, dst.data(), &status, coords.data(), a);
          else k->f32(src, dst.data(), &status, a);
        }
      });
    }
    const unsigned long long st = (unsigned long long)status;
    const char* res = kind == 3 ? (const char*)data.data() : (const char*)dst.data();
    const unsigned long long res_bytes = kind == 3 ? data_bytes : out_bytes;
    out.insert(out.end(), (const char*)&st, (const char*)&st + 8);
    out.insert(out.end(), res, res + res_bytes);
    records++;
  }
  FILE* f = fopen((d + "/out.bin").c_str(), "wb");
  if (!f || fwrite(out.data(), 1, out.size(), f) != out.size()) { fprintf(stderr, "cannot write out.bin\n"); return 2; }
  fclose(f);
  printf("%llu records\n", records);
  return 0;
}
