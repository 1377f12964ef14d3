#pragma once
// Image quality against ground truth: PSNR and SSIM, defined as
// scikit-image computes them with an explicit data range, so figures can be
// checked with skimage.metrics (peak_signal_noise_ratio, structural_similarity
// with win_size=7, gaussian_weights=False, data_range = truth.max() - truth.min()).

#include <vector>

#include "pipeline/reconstruction.hpp"
#include "recon/system_model.hpp"

namespace recon::pipeline {

/// max(truth) - min(truth); throws std::invalid_argument when empty.
double data_range(const std::vector<float>& truth);

/// PSNR in dB: 10 log10(range² / MSE), range = data_range(truth); +inf when
/// the images are equal. Throws std::invalid_argument on a size mismatch or
/// a zero range.
double psnr(const std::vector<float>& image, const std::vector<float>& truth);

/// Mean SSIM over 7 x 7 uniform windows (sample covariances, K1 = 0.01,
/// K2 = 0.03, L = data_range(truth)), averaged over the pixels whose window
/// lies inside the image (skimage crops 3 pixels at every border). Images
/// are [shape.ny][shape.nx]; both sides must be at least 7.
double ssim(const std::vector<float>& image, const std::vector<float>& truth,
            recon::ImageShape shape);

/// PSNR, and SSIM when the image is at least 7 x 7 (a 1 x n image of a
/// matrix system has no SSIM), for an image of `shape`.
Quality measure_quality(const std::vector<float>& image, const std::vector<float>& truth,
                        recon::ImageShape shape);

}  // namespace recon::pipeline
