#!/usr/bin/python3
"""Reference sinogram from scikit-image for the parallel2d convention test.

usage: radon_skimage.py IMAGE.f32 N ANGLES_CSV OUT.f32
Reads an N x N float32 image (row-major), writes radon(image, theta,
circle=True).T as float32 [views][N].
"""
import sys

import numpy as np
from skimage.transform import radon


def main():
    image_path, n, angles, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    image = np.fromfile(image_path, dtype=np.float32).reshape(n, n).astype(np.float64)
    theta = np.array([float(a) for a in angles.split(",")])
    sinogram = radon(image, theta=theta, circle=True).T
    sinogram.astype(np.float32).tofile(out_path)


if __name__ == "__main__":
    main()
