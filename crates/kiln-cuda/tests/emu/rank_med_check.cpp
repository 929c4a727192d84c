// Runs the rank module's median kernels (one output a thread, and four u8 outputs a thread on
// packed bytes) over a simulated grid on the host and compares every output with a naive
// median through the boundary mode: all five modes, constant values, 3x3 and 5x5, widths of
// whole words with interior and border-only words, ties. Built and run by
// tests/host_emulation.rs (a C++ compiler stands in for NVRTC; the CUDA intrinsics are the
// documented per-byte/per-half operations of cuda_host_stub.h).
// the rank module (imaging.cuh, rank.cu, rank_med_net.cuh, rank_med.cu) is prepended by
// tests/host_emulation.rs, after cuda_host_stub.h
typedef void (*Kern)(const void*, void*, RankWin, NetOffs);
static void launch(Kern k, unsigned gx, unsigned gy, unsigned gz, const void* s, void* d, RankWin w, NetOffs o) {
  gridDim = {gx, gy, gz}; blockDim = {32, 8, 1};
  for (unsigned bz = 0; bz < gz; ++bz) for (unsigned by = 0; by < gy; ++by) for (unsigned bx = 0; bx < gx; ++bx)
    for (unsigned ty = 0; ty < 8; ++ty) for (unsigned tx = 0; tx < 32; ++tx) {
      blockIdx = {bx, by, bz}; threadIdx = {tx, ty, 0}; k(s, d, w, o);
    }
}
int main() {
  std::mt19937 rng(7); int bad = 0, cases = 0;
  int shapes[][3] = {{1, 37, 52}, {1, 9, 12}, {1, 3, 4}, {2, 20, 44}, {1, 2, 16}, {1, 1, 8}, {3, 11, 8}, {1, 67, 128}};
  for (auto& sh : shapes) for (int R = 1; R <= 2; ++R) for (int mode = 0; mode < 5; ++mode) for (unsigned ckey : {0u, 37u, 255u}) {
    if (mode != 0 && ckey != 0) continue;
    int D = sh[0], H = sh[1], W = sh[2], K = 2*R+1, N = K*K;
    std::vector<unsigned char> src((size_t)D*H*W), a(src.size(), 0xAA), b(src.size(), 0x55), ref(src.size());
    for (auto& v : src) v = rng() & 255;
    if (cases % 3 == 0) for (auto& v : src) v = (rng() % 4) * 60;  // many ties
    RankWin w{}; w.lo[0]=0; w.lo[1]=-R; w.lo[2]=-R; w.hi[0]=0; w.hi[1]=R; w.hi[2]=R; w.cnt=N; w.rank=N/2; w.mode=mode; w.ckey=ckey; w.dt=0; w.D=D; w.H=H; w.W=W;
    NetOffs o{}; int i = 0;
    for (int dy = -R; dy <= R; ++dy) for (int dx = -R; dx <= R; ++dx) { o.dz[i]=0; o.dy[i]=dy; o.dx[i]=dx; o.lin[i]=dy*W+dx; ++i; }
    for (int z = 0; z < D; ++z) for (int y = 0; y < H; ++y) for (int x = 0; x < W; ++x) {
      std::vector<unsigned> v;
      for (int dy = -R; dy <= R; ++dy) for (int dx = -R; dx <= R; ++dx) {
        int yy = kiln_map(y+dy, H, mode), xx = kiln_map(x+dx, W, mode);
        v.push_back(yy < 0 || xx < 0 ? ckey : src[((size_t)z*H+yy)*W+xx]);
      }
      std::nth_element(v.begin(), v.begin()+N/2, v.end()); ref[((size_t)z*H+y)*W+x] = v[N/2];
    }
    unsigned gy = (H+7)/8;
    launch(R == 1 ? rank_med9 : rank_med25, (W+31)/32, gy, D, src.data(), a.data(), w, o);
    launch(R == 1 ? rank_med9_u8x4 : rank_med25_u8x4, (W/4+31)/32, gy, D, src.data(), b.data(), w, o);
    ++cases;
    if (a != ref) { ++bad; printf("scalar differs: D%d H%d W%d R%d mode%d ckey%u\n", D, H, W, R, mode, ckey); }
    if (b != ref) { ++bad; size_t k = 0; while (b[k] == ref[k]) ++k; printf("packed differs: D%d H%d W%d R%d mode%d ckey%u at %zu: %d vs %d\n", D, H, W, R, mode, ckey, k, b[k], ref[k]); }
  }
  printf("%d cases, %d bad\n", cases, bad);
  return bad != 0;
}
