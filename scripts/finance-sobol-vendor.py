#!/usr/bin/env python3
"""Writes crates/kiln-core/src/finance/sobol_jk.bin: the Joe-Kuo direction-number parameters
(new-joe-kuo-6.21201) of the first DIMS Sobol dimensions, in kiln's compact format, from
scipy's copy of them (scipy/stats/_sobol_direction_numbers.npz in scipy's wheel:
`pip download scipy --no-deps --only-binary=:all:`, unzip, pass the .npz path).

Format (little-endian): b"KJK1", u32 dims, then for each dimension d = 0..dims-1:
u8 s (the primitive polynomial's degree; 0 for dimension 0, the van der Corput sequence),
u16 a (its inner coefficients, a_1 the most significant of s-1 bits), then m_1..m_s, m_k
in ceil(k/8) bytes. Run: python3 scripts/finance-sobol-vendor.py NPZ [DIMS]
"""
import struct
import sys

import numpy as np

npz = np.load(sys.argv[1])
dims = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
poly, vinit = npz["poly"], npz["vinit"]
out = bytearray(b"KJK1")
out += struct.pack("<I", dims)
for d in range(dims):
    p = int(poly[d])
    s = p.bit_length() - 1
    a = (p >> 1) & ((1 << max(s - 1, 0)) - 1)
    out += struct.pack("<BH", s, a)
    for k in range(1, s + 1):
        m = int(vinit[d, k - 1])
        assert 0 < m < (1 << k) and m % 2 == 1, (d, k, m)
        out += m.to_bytes((k + 7) // 8, "little")
path = "crates/kiln-core/src/finance/sobol_jk.bin"
open(path, "wb").write(out)
print(f"{path}: {dims} dimensions, {len(out)} bytes")
