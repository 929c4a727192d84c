
// Runs kernels/label.cu's seven kernels on the host as launch_imaging/label.rs launches
// them (the same tiles, kernel order and arguments; grid-stride kernels over fewer blocks,
// which changes only which thread takes which element). Reads a case file: d h w, run
// (0, 1 or 2), the neighbour count and its [dz, dy, dx] offsets, then d*h*w mask bytes.
// Writes the label count and the n int32 labels to the output file.
static std::vector<int> emu_read_ints(FILE* f, int n) {
  std::vector<int> v(n);
  for (int& x : v) if (fscanf(f, "%d", &x) != 1) { fprintf(stderr, "bad case\n"); exit(2); }
  return v;
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: label_check CASE OUT\n"); return 2; }
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  std::vector<int> head = emu_read_ints(f, 5);
  const int D = head[0], H = head[1], W = head[2], run = head[3], cnt = head[4];
  std::vector<int> offs = emu_read_ints(f, 3 * cnt);
  fgetc(f);  // the newline before the mask
  const int n = D * H * W;
  std::vector<unsigned char> mask(n);
  if ((int)fread(mask.data(), 1, n, f) != n) { fprintf(stderr, "short mask\n"); return 2; }
  fclose(f);
  int td = 4, th = 8, tw = 32;
  if (D == 1 && H == 1) { td = 1; th = 1; tw = 1024; }
  else if (D == 1) { td = 1; th = 32; tw = 32; }
  const int tiles = ((D + td - 1) / td) * ((H + th - 1) / th) * ((W + tw - 1) / tw);
  const int blocks = (n + 1023) / 1024;
  std::vector<int> L(n), out(n), counts(blocks), total(1);
  const int* offp = offs.empty() ? nullptr : offs.data();
  emu_launch_threads(tiles, 256, [&] { label_local(mask.data(), 0, L.data(), D, H, W, td, th, tw, offp, cnt, run); });
  if (tiles > 1 && cnt > 0)
    emu_launch_threads(tiles, 256, [&] { label_border(L.data(), D, H, W, td, th, tw, offp, cnt, run); });
  const unsigned stride_blocks = std::min(4u, (unsigned)((n + 255) / 256));
  emu_launch_threads(blocks, 256, [&] { label_compress(L.data(), n, counts.data()); });
  emu_launch_threads(1, 256, [&] { label_scan(counts.data(), blocks, total.data()); });
  emu_launch_threads(blocks, 256, [&] { label_number(L.data(), n, counts.data()); });
  emu_launch_threads(stride_blocks, 256, [&] { label_resolve(L.data(), out.data(), n); });
  FILE* o = fopen(argv[2], "wb");
  if (!o) return 2;
  fwrite(&total[0], 4, 1, o);
  fwrite(out.data(), 4, n, o);
  fclose(o);
  return 0;
}
