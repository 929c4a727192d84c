#!/usr/bin/env python3
"""Writes the rank-filter and morphology fixtures kiln's tests check against
(crates/kiln/tests/rank.rs): scipy.ndimage outputs over functions, boundary modes, odd and
even sizes, origins, footprints, structures and dtypes (u8, u16, f32; 2-D and 3-D).

    python3 scripts/rank_fixtures.py [OUT_DIR]    # default crates/kiln/tests/fixtures/rank

Files: in_*.npy (inputs), cNNN.npy (one output a case; binary outputs as uint8 0/1) and
cases.txt, one case a line: `name func input output key=value ...` where values are
comma-separated numbers, `fp=AxB:0101..` a footprint (shape, row-major bits) and
`st=AxB:v,v,..` a structure. Deterministic (fixed seeds); re-running rewrites the same
files for the same scipy. Needs numpy and scipy.
"""
import os
import sys

import numpy as np
import scipy
from scipy import ndimage as ndi

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "crates", "kiln", "tests", "fixtures", "rank")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(19)

INPUTS = {
    "u8_2d": rng.integers(0, 256, (19, 23), dtype=np.uint8),
    "u8ties_2d": rng.integers(0, 5, (18, 21), dtype=np.uint8),
    "u16_2d": rng.integers(0, 65536, (17, 21), dtype=np.uint16),
    "f32_2d": rng.normal(0, 10, (19, 22)).astype(np.float32) + np.float32(0.5),
    "u8_3d": rng.integers(0, 256, (6, 7, 9), dtype=np.uint8),
    "f32_3d": rng.normal(0, 3, (5, 8, 7)).astype(np.float32) + np.float32(0.25),
    "u8mid_2d": rng.integers(10, 200, (16, 19), dtype=np.uint8),
    "bin_2d": (rng.random((24, 26)) < 0.62).astype(np.uint8),
    "bin_3d": (rng.random((6, 8, 9)) < 0.6).astype(np.uint8),
    "binf_2d": ((rng.random((15, 17)) < 0.55) * rng.normal(0, 1, (15, 17))).astype(np.float32),
}
# holes for fill_holes: rings with empty centres
holes = np.zeros((20, 24), np.uint8)
holes[2:9, 3:10] = 1
holes[4:7, 5:8] = 0
holes[10:18, 12:22] = 1
holes[12:16, 14:16] = 0
holes[13, 18] = 0
holes[0:5, 18:24] = 1
holes[1:4, 19:22] = 0
holes[16:20, 0:5] = 1
holes[17, 2] = 0
INPUTS["holes_2d"] = holes
h3 = np.zeros((7, 8, 9), np.uint8)
h3[1:6, 1:7, 2:8] = 1
h3[2:5, 3:5, 4:6] = 0
h3[3, 0:8, 0] = 1
INPUTS["holes_3d"] = h3

for name, a in INPUTS.items():
    np.save(os.path.join(OUT, f"in_{name}.npy"), a)

MODES = [("reflect", 0.0), ("constant", 0.0), ("constant", 7.0), ("nearest", 0.0), ("mirror", 0.0), ("wrap", 0.0)]
lines = []


def enc_fp(fp):
    fp = np.asarray(fp, bool)
    return "x".join(map(str, fp.shape)) + ":" + "".join("1" if v else "0" for v in fp.ravel())


def enc_st(st):
    st = np.asarray(st, np.float64)
    return "x".join(map(str, st.shape)) + ":" + ",".join(repr(float(v)) for v in st.ravel())


def nums(v):
    return ",".join(str(x) for x in (v if isinstance(v, (list, tuple)) else [v]))


def case(func, inp, out, **kw):
    name = f"c{len(lines):03d}"
    np.save(os.path.join(OUT, name + ".npy"), out.astype(np.uint8) if out.dtype == bool else out)
    parts = [name, func, inp, name + ".npy"]
    for k, v in kw.items():
        if v is None:
            continue
        if k in ("footprint", "structure_bin"):
            parts.append(("fp=" if k == "footprint" else "bst=") + enc_fp(v))
        elif k == "structure":
            parts.append("st=" + enc_st(v))
        elif k == "mode":
            parts.append(f"mode={v}")
        else:
            parts.append(f"{k}={nums(v)}")
    lines.append(" ".join(parts))


def rank_case(func, inp, size=None, footprint=None, mode="reflect", cval=0.0, origin=0, extra=None):
    a = INPUTS[inp]
    kw = dict(size=size, footprint=footprint, mode=mode, cval=cval, origin=origin)
    f = getattr(ndi, func)
    if extra is None:
        out = f(a, **kw)
        case(func, inp, out, size=size, footprint=footprint, mode=mode, cval=cval, origin=origin)
    else:
        (k, v), = extra.items()
        out = f(a, v, **kw)
        case(func, inp, out, **{k: v}, size=size, footprint=footprint, mode=mode, cval=cval, origin=origin)


cross = ndi.generate_binary_structure(2, 1)
fp_odd = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 1, 0]], bool)  # 4x3, even rows
fp_wide = (rng.random((3, 7)) < 0.6)
fp_wide[1, 3] = True

# median / rank / percentile over modes, sizes, origins, footprints, dtypes
for inp in ["u8_2d", "u16_2d", "f32_2d", "u8ties_2d"]:
    for mode, cval in MODES:
        rank_case("median_filter", inp, size=3, mode=mode, cval=cval)
    rank_case("median_filter", inp, size=5, mode="reflect")
    rank_case("median_filter", inp, size=[2, 4], mode="mirror", origin=[0, -1])
    rank_case("median_filter", inp, size=[3, 4], mode="constant", cval=3.0, origin=[1, 1])
    rank_case("median_filter", inp, footprint=cross, mode="nearest")
    rank_case("median_filter", inp, footprint=fp_odd, mode="wrap", origin=[-1, 0])
    rank_case("rank_filter", inp, size=[3, 5], mode="reflect", extra={"rank": 2})
    rank_case("rank_filter", inp, footprint=fp_wide, mode="constant", cval=1.0, extra={"rank": -2})
    rank_case("percentile_filter", inp, size=4, mode="nearest", extra={"percentile": 25.0})
    rank_case("percentile_filter", inp, size=[5, 3], mode="mirror", origin=[2, -1], extra={"percentile": -10.0})
    rank_case("percentile_filter", inp, footprint=cross, mode="reflect", extra={"percentile": 100.0})
    rank_case("median_filter", inp, size=7, mode="reflect")
    rank_case("median_filter", inp, size=[9, 8], mode="wrap")
    rank_case("rank_filter", inp, size=[7, 9], mode="constant", cval=2.0, extra={"rank": 40})
    for func in ["minimum_filter", "maximum_filter"]:
        rank_case(func, inp, size=[3, 5], mode="reflect")
        rank_case(func, inp, size=4, mode="constant", cval=5.0, origin=[1, -2])
        rank_case(func, inp, size=[2, 9], mode="wrap")
        rank_case(func, inp, footprint=fp_odd, mode="mirror")
        rank_case(func, inp, size=[19, 1], mode="nearest")

for inp in ["u8_3d", "f32_3d"]:
    rank_case("median_filter", inp, size=3, mode="reflect")
    rank_case("median_filter", inp, size=[2, 3, 3], mode="constant", cval=4.0, origin=[-1, 0, 1])
    rank_case("median_filter", inp, footprint=ndi.generate_binary_structure(3, 1), mode="wrap")
    rank_case("median_filter", inp, size=[1, 7, 7], mode="mirror")
    rank_case("rank_filter", inp, size=[3, 2, 4], mode="nearest", extra={"rank": 5})
    rank_case("percentile_filter", inp, footprint=ndi.generate_binary_structure(3, 2), mode="reflect",
              extra={"percentile": 60.0})
    for func in ["minimum_filter", "maximum_filter"]:
        rank_case(func, inp, size=[3, 4, 2], mode="reflect", origin=[0, 1, 0])
        rank_case(func, inp, size=[1, 3, 5], mode="constant", cval=9.0)
        rank_case(func, inp, footprint=ndi.generate_binary_structure(3, 1), mode="nearest")

# grey morphology
asym = np.array([[1, 1, 0], [0, 1, 1]], bool)
st = np.array([[0.0, 1.0, 2.0], [1.5, 0.5, 3.0], [2.0, 0.0, 1.0]])
for inp in ["u8_2d", "f32_2d", "u16_2d"]:
    for func in ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing"]:
        f = getattr(ndi, func)
        a = INPUTS[inp]
        case(func, inp, f(a, size=(3, 4)), size=[3, 4])
        case(func, inp, f(a, footprint=asym, mode="constant", cval=3.0, origin=[0, 1]),
             footprint=asym, mode="constant", cval=3.0, origin=[0, 1])
        case(func, inp, f(a, size=(2, 5), mode="mirror", origin=(-1, 0)), size=[2, 5], mode="mirror",
             origin=[-1, 0])
for inp in ["f32_2d", "u8mid_2d"]:
    a = INPUTS[inp]
    for func in ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing"]:
        f = getattr(ndi, func)
        case(func, inp, f(a, structure=st, mode="nearest"), structure=st, mode="nearest")
        case(func, inp, f(a, footprint=asym, structure=st[:2], mode="wrap", origin=[-1, 1]),
             footprint=asym, structure=st[:2], mode="wrap", origin=[-1, 1])
for inp in ["u8_3d", "f32_3d"]:
    a = INPUTS[inp]
    for func in ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing"]:
        f = getattr(ndi, func)
        case(func, inp, f(a, size=(2, 3, 3), mode="reflect"), size=[2, 3, 3])

# binary morphology
s2 = ndi.generate_binary_structure(2, 2)
odd_st = np.array([[0, 1], [1, 1], [1, 0]], bool)
for inp in ["bin_2d", "binf_2d"]:
    a = INPUTS[inp]
    for func in ["binary_erosion", "binary_dilation", "binary_opening", "binary_closing"]:
        f = getattr(ndi, func)
        for it in [1, 2]:
            for bv in [0, 1]:
                case(func, inp, f(a, iterations=it, border_value=bv), iterations=it, border_value=bv)
        case(func, inp, f(a, structure=s2, iterations=3), structure_bin=s2, iterations=3)
        case(func, inp, f(a, structure=odd_st, origin=(1, 0), border_value=1), structure_bin=odd_st,
             origin=[1, 0], border_value=1)
    for func in ["binary_erosion", "binary_dilation"]:
        f = getattr(ndi, func)
        case(func, inp, f(a, iterations=-1), iterations=-1)
        case(func, inp, f(a, structure=s2, iterations=0, border_value=1), structure_bin=s2, iterations=0,
             border_value=1)
a = INPUTS["bin_3d"]
for func in ["binary_erosion", "binary_dilation", "binary_opening", "binary_closing"]:
    f = getattr(ndi, func)
    case(func, "bin_3d", f(a), iterations=1)
    s3 = ndi.generate_binary_structure(3, 2)
    case(func, "bin_3d", f(a, structure=s3, iterations=2, border_value=1), structure_bin=s3, iterations=2,
         border_value=1)
for inp in ["holes_2d", "bin_2d"]:
    a = INPUTS[inp]
    case("binary_fill_holes", inp, ndi.binary_fill_holes(a))
    case("binary_fill_holes", inp, ndi.binary_fill_holes(a, structure=s2), structure_bin=s2)
case("binary_fill_holes", "holes_3d", ndi.binary_fill_holes(INPUTS["holes_3d"]))
case("binary_fill_holes", "holes_3d", ndi.binary_fill_holes(INPUTS["holes_3d"],
                                                            structure=ndi.generate_binary_structure(3, 3)),
     structure_bin=ndi.generate_binary_structure(3, 3))

with open(os.path.join(OUT, "cases.txt"), "w") as fh:
    fh.write(f"# scipy {scipy.__version__}, numpy {np.__version__}; written by scripts/rank_fixtures.py\n")
    fh.write("\n".join(lines) + "\n")
total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
print(f"{len(lines)} cases, {total / 1e6:.2f} MB in {OUT}")
