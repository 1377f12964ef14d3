#pragma once
// Raw detector counts to line integrals (Beer-Lambert):
//     p_i = -log((I_i - dark_i) / (flat_i - dark_i)).

#include <cstddef>
#include <span>
#include <vector>

namespace recon::sensors {

/// Smallest transmission (I - dark) / (flat - dark) taken before the log.
/// Ratios at or below it (counts at or under the dark level, photon
/// starvation behind dense material) are clamped to it, so a line integral
/// is at most -log(1e-6) ≈ 13.8 instead of +inf or NaN. Ratios above 1
/// (noise in weakly attenuating rays) are kept: clipping them would bias the
/// reconstruction.
inline constexpr float min_transmission = 1e-6f;

/// Converts one frame of raw counts (m values) to line integrals.
///
/// dark, flat: per-cell dark current and open-beam (flat-field) counts, each
/// of length m or empty. When absent: dark = 0; flat = the largest count of
/// this frame, i.e. the frame's brightest ray is taken as unattenuated (true
/// when some rays miss the object, as in a usual CT field of view; when the
/// object fills the field every line integral is low by the same constant).
/// A cell whose flat - dark <= 0 (dead or uncalibrated) carries no
/// information and gets p = 0. `out` may alias `counts`.
/// Throws std::invalid_argument when a length differs from counts.size().
void counts_to_line_integrals(std::span<const float> counts, std::span<const float> dark,
                              std::span<const float> flat, std::span<float> out);

/// The same, returning a new vector.
std::vector<float> counts_to_line_integrals(std::span<const float> counts,
                                            std::span<const float> dark = {},
                                            std::span<const float> flat = {});

}  // namespace recon::sensors
