// 2D parallel-beam geometry with rows generated on the fly.

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "kernels/parallel2d_adjoint.hpp"
#include "kernels/parallel2d_rays.hpp"
#include "recon/system_model.hpp"

namespace recon {

Parallel2d::Parallel2d(index_t nx, index_t ny, index_t bins, std::vector<double> angles_deg,
                       double center_offset)
    : nx_{nx}, ny_{ny}, bins_{bins}, angles_deg_{std::move(angles_deg)},
      center_offset_{center_offset}
{
    if (nx_ <= 0 || ny_ <= 0 || bins_ <= 0) {
        throw std::invalid_argument{"parallel2d: nx, ny and bins must be positive"};
    }
    if (angles_deg_.empty()) throw std::invalid_argument{"parallel2d: no rotation angles"};
    if (!std::isfinite(center_offset_)) {
        throw std::invalid_argument{"parallel2d: center_offset must be finite"};
    }
    for (double a : angles_deg_) {
        if (!std::isfinite(a)) throw std::invalid_argument{"parallel2d: non-finite rotation angle"};
        // The image's y axis (row index) points down, as in scikit-image,
        // so that angles turn the same way as skimage.transform.radon.
        const double rad = a * std::numbers::pi / 180.0;
        cos_.push_back(static_cast<float>(std::cos(rad)));
        sin_.push_back(static_cast<float>(-std::sin(rad)));
    }
}

index_t Parallel2d::rows() const { return views() * bins_; }

std::map<std::string, std::string> Parallel2d::parameters() const
{
    return {{"geometry", "parallel2d"},
            {"nx", std::to_string(nx_)},
            {"ny", std::to_string(ny_)},
            {"bins", std::to_string(bins_)},
            {"views", std::to_string(views())},
            {"center_offset", std::to_string(center_offset_)}};
}

kernels::Parallel2dView Parallel2d::make_view(const float* cos_angle, const float* sin_angle,
                                              const std::int32_t* rays_order,
                                              const kernels::RaySetup* rays,
                                              const kernels::AdjointView* adjoint_views) const
{
    kernels::Parallel2dView v;
    v.nx = nx_;
    v.ny = ny_;
    v.views = views();
    v.bins = bins_;
    v.center_offset = static_cast<float>(center_offset_);
    v.cos_angle = cos_angle;
    v.sin_angle = sin_angle;
    v.rays_order = rays_order;
    v.rays = rays;
    v.adjoint_views = adjoint_views;
    return v;
}

kernels::SystemView Parallel2d::view(const Executor& exec) const
{
    if (exec.is_cpu()) return make_view(cos_.data(), sin_.data());
    std::lock_guard lock{mutex_};
    auto it = device_.find(exec.device());
    if (it == device_.end()) {
        const kernels::Parallel2dView host = make_view(cos_.data(), sin_.data());
        const auto order = kernels::rays_order(host);
        const auto rays = kernels::rays_setup(host, order);
        const auto adjoint_views = kernels::adjoint_views_table(host);
        DeviceArrays arrays{kernels::Array<float>{exec, cos_}, kernels::Array<float>{exec, sin_},
                            kernels::Array<std::int32_t>{exec, order},
                            kernels::Array<kernels::RaySetup>{exec, rays},
                            kernels::Array<kernels::AdjointView>{exec, adjoint_views}};
        exec.synchronize();
        it = device_.emplace(exec.device(), std::move(arrays)).first;
    }
    const DeviceArrays& arrays = it->second;
    return make_view(arrays.cos_angle.data(), arrays.sin_angle.data(), arrays.rays_order.data(),
                     arrays.rays.data(), arrays.adjoint_views.data());
}

}  // namespace recon
