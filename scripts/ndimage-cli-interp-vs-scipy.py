#!/usr/bin/env python3
"""`kiln ndimage` interpolation against scipy.ndimage, bit for bit: each case writes a random
float32 array (odd 2-D shapes, a 3-D volume) as .npy, runs the CLI, and compares the float32
output with scipy's result on the same float32 array (exact equality of the bits).

Usage: scripts/ndimage-cli-interp-vs-scipy.py [path/to/kiln]   (default: target/debug/kiln,
or $CARGO_TARGET_DIR/debug/kiln). Needs numpy and scipy. Exit 1 on any difference.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
from scipy import ndimage as nd


def kiln_bin():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "debug", "kiln")


CASES_2D = [
    ("zoom --zoom 1.7,0.6", lambda x: nd.zoom(x, (1.7, 0.6))),
    ("zoom --zoom 2.5 --order 1 --mode nearest --grid-mode true",
     lambda x: nd.zoom(x, 2.5, order=1, mode="nearest", grid_mode=True)),
    ("zoom --zoom 0.7 --order 5 --mode grid-constant --cval 3.5",
     lambda x: nd.zoom(x, 0.7, order=5, mode="grid-constant", cval=3.5)),
    ("zoom --zoom 1.3 --order 2 --mode nearest", lambda x: nd.zoom(x, 1.3, order=2, mode="nearest")),
    ("shift --shift 1.5,-2.25 --mode wrap", lambda x: nd.shift(x, (1.5, -2.25), mode="wrap")),
    ("shift --shift 0.4 --order 0 --mode grid-wrap", lambda x: nd.shift(x, 0.4, order=0, mode="grid-wrap")),
    ("rotate --angle 30", lambda x: nd.rotate(x, 30)),
    ("rotate --angle -117.5 --reshape false --order 1 --mode mirror",
     lambda x: nd.rotate(x, -117.5, reshape=False, order=1, mode="mirror")),
    ("rotate --angle 73.3 --order 4 --mode reflect", lambda x: nd.rotate(x, 73.3, order=4, mode="reflect")),
    ("rotate --angle 200 --prefilter false --mode grid-constant --cval -2",
     lambda x: nd.rotate(x, 200, prefilter=False, mode="grid-constant", cval=-2)),
    ("affine_transform --matrix 0.9,0.2;-0.1,1.1 --offset 1,-2 --output-shape 11,14 --mode reflect",
     lambda x: nd.affine_transform(x, [[0.9, 0.2], [-0.1, 1.1]], offset=(1, -2), output_shape=(11, 14),
                                   mode="reflect")),
    ("affine_transform --matrix 1.2,0,0.5;0,0.8,-1;0,0,1 --order 2 --mode grid-mirror",
     lambda x: nd.affine_transform(x, [[1.2, 0, 0.5], [0, 0.8, -1], [0, 0, 1]], order=2, mode="grid-mirror")),
    ("affine_transform --matrix 0.5,1.5 --offset 2", lambda x: nd.affine_transform(x, [0.5, 1.5], offset=2)),
    ("spline_filter --order 4", lambda x: nd.spline_filter(x, 4).astype(np.float32)),
    ("spline_filter1d --axis 0 --mode nearest",
     lambda x: nd.spline_filter1d(x, 3, axis=0, mode="nearest").astype(np.float32)),
]

CASES_3D = [
    ("rotate --angle 25", lambda x: nd.rotate(x, 25)),
    ("rotate --angle 70 --axes 0,2 --reshape false --mode nearest",
     lambda x: nd.rotate(x, 70, axes=(0, 2), reshape=False, mode="nearest")),
    ("zoom --zoom 2,1.5,0.6 --order 1", lambda x: nd.zoom(x, (2, 1.5, 0.6), order=1)),
    ("shift --shift 0.5,-1,2.25", lambda x: nd.shift(x, (0.5, -1, 2.25))),
    ("affine_transform --matrix 1,0.1,0,0.5;0,0.9,0.2,-1;0.05,0,1.1,0 --order 1",
     lambda x: nd.affine_transform(x, [[1, 0.1, 0, 0.5], [0, 0.9, 0.2, -1], [0.05, 0, 1.1, 0]], order=1)),
]


def main():
    kiln = kiln_bin()
    rng = np.random.default_rng(7)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for shape, cases in (((13, 9), CASES_2D), ((31, 17), CASES_2D), ((7, 6, 5), CASES_3D)):
            x = rng.uniform(-40, 90, shape).astype(np.float32)
            src = os.path.join(d, "in.npy")
            np.save(src, x)
            for line, ref in cases:
                out = os.path.join(d, "out.npy")
                cmd = [kiln, "ndimage", *line.split(), "--input", src, "--output", out]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"FAIL {shape} {line}: exit {r.returncode}: {r.stderr.strip()}")
                    bad += 1
                    continue
                got = np.load(out)
                want = np.asarray(ref(x), dtype=np.float32)
                same = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
                if not same:
                    diff = (np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape
                            else f"shape {got.shape} vs {want.shape}")
                    print(f"DIFF {shape} {line}: {diff}")
                    bad += 1
                else:
                    print(f"same {shape} {line}")
    print(f"{bad} case(s) differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
