#include "sensors/preprocess.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace recon::sensors {

void counts_to_line_integrals(std::span<const float> counts, std::span<const float> dark,
                              std::span<const float> flat, std::span<float> out)
{
    const std::size_t m = counts.size();
    const auto check = [m](std::span<const float> v, const char* name, bool optional) {
        if ((optional && v.empty()) || v.size() == m) return;
        throw std::invalid_argument(std::string{"preprocessing: "} + name + " has " +
                                    std::to_string(v.size()) + " values, expected " +
                                    std::to_string(m));
    };
    check(dark, "dark", true);
    check(flat, "flat", true);
    if (out.size() != m) {
        throw std::invalid_argument("preprocessing: output has " + std::to_string(out.size()) +
                                    " values, expected " + std::to_string(m));
    }
    // The frame's brightest ray stands in for the open beam when no flat exists.
    const float frame_max = m == 0 ? 0.0f : *std::max_element(counts.begin(), counts.end());
    for (std::size_t i = 0; i < m; ++i) {
        const float d = dark.empty() ? 0.0f : dark[i];
        const float f = flat.empty() ? frame_max : flat[i];
        const float open = f - d;
        if (!(open > 0.0f)) {
            // NaN calibration values propagate (the reader reports them).
            out[i] = std::isnan(open) ? open : 0.0f;
            continue;
        }
        const float ratio = (counts[i] - d) / open;
        out[i] = -std::log(std::max(ratio, min_transmission));
    }
}

std::vector<float> counts_to_line_integrals(std::span<const float> counts,
                                            std::span<const float> dark,
                                            std::span<const float> flat)
{
    std::vector<float> out(counts.size());
    counts_to_line_integrals(counts, dark, flat, out);
    return out;
}

}  // namespace recon::sensors
