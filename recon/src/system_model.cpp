// SystemModel's shared operations and the factory from a SystemSpec.

#include "recon/system_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/primitives.hpp"
#include "kernels/rows.hpp"

namespace recon {

std::vector<std::pair<index_t, float>> SystemModel::row(index_t i) const
{
    if (i < 0 || i >= rows()) {
        throw std::out_of_range{"row " + std::to_string(i) + " outside [0, " +
                                std::to_string(rows()) + ")"};
    }
    std::vector<std::pair<index_t, float>> entries;
    std::visit([&](const auto& v) {
        kernels::for_each_entry(v, i, [&](index_t col, float w) { entries.emplace_back(col, w); });
    }, view(Executor::cpu()));
    return entries;
}

CsrMatrix SystemModel::materialize() const
{
    CsrMatrix csr;
    csr.rows = rows();
    csr.cols = cols();
    csr.row_ptr.reserve(static_cast<std::size_t>(csr.rows) + 1);
    csr.row_ptr.push_back(0);
    const kernels::SystemView v = view(Executor::cpu());
    std::vector<std::pair<index_t, float>> entries;
    for (index_t i = 0; i < csr.rows; ++i) {
        entries.clear();
        std::visit([&](const auto& s) {
            kernels::for_each_entry(s, i, [&](index_t col, float w) {
                if (w != 0.0f) entries.emplace_back(col, w);
            });
        }, v);
        // Generators emit columns in order along the ray, which may run
        // backwards; CSR wants them sorted.
        std::sort(entries.begin(), entries.end());
        for (const auto& [col, w] : entries) {
            csr.col_idx.push_back(col);
            csr.values.push_back(w);
        }
        csr.row_ptr.push_back(static_cast<size_type>(csr.values.size()));
    }
    return csr;
}

void SystemModel::apply(const Executor& exec, View<const float> x, View<float> y, int batch) const
{
    kernels::apply(exec, view(exec), batch, x, y);
}

void SystemModel::apply_adjoint(const Executor& exec, View<const float> y, View<float> x,
                                int batch) const
{
    kernels::apply_adjoint(exec, view(exec), batch, y, x);
}

void SystemModel::normal_apply(const Executor& exec, View<const float> d, View<float> u,
                               int batch) const
{
    kernels::normal_apply(exec, view(exec), batch, d, u, View<float>{});
}

MatrixLayout parse_matrix_layout(const std::string& text)
{
    if (text == "csr") return MatrixLayout::csr;
    if (text == "ell" || text == "sliced_ell") return MatrixLayout::sliced_ell;
    if (text == "auto" || text == "automatic") return MatrixLayout::automatic;
    throw std::invalid_argument{"unknown matrix layout '" + text + "' (expected csr, ell or auto)"};
}

const char* to_string(MatrixLayout layout)
{
    switch (layout) {
    case MatrixLayout::csr: return "csr";
    case MatrixLayout::sliced_ell: return "ell";
    case MatrixLayout::automatic: return "auto";
    }
    return "unknown";
}

namespace {

void require_positive(long long value, const char* name)
{
    if (value <= 0) {
        throw std::invalid_argument{std::string{"system."} + name + " must be positive, found " +
                                    std::to_string(value)};
    }
}

std::unique_ptr<SystemModel> make_parallel2d(const SystemSpec& spec)
{
    require_positive(spec.nx, "nx");
    require_positive(spec.ny, "ny");
    const index_t bins = spec.bins > 0 ? spec.bins : spec.nx;
    std::vector<double> angles = spec.angles_deg;
    if (angles.empty()) {
        require_positive(spec.views, "views");
        if (!(spec.angle_range_deg > 0.0) || !std::isfinite(spec.angle_range_deg)) {
            throw std::invalid_argument{"system.angle_range must be a positive number of degrees"};
        }
        for (index_t k = 0; k < spec.views; ++k) {
            angles.push_back(spec.angle_range_deg * k / spec.views);
        }
    } else if (spec.views > 0 && static_cast<index_t>(angles.size()) != spec.views) {
        throw std::invalid_argument{"system: " + std::to_string(angles.size()) +
                                    " rotation angles given for " + std::to_string(spec.views) +
                                    " views"};
    }
    return std::make_unique<Parallel2d>(spec.nx, spec.ny, bins, std::move(angles),
                                        spec.center_offset);
}

}  // namespace

std::unique_ptr<SystemModel> make_system_model(const SystemSpec& spec)
{
    std::unique_ptr<SystemModel> model;
    if (spec.geometry == "parallel2d") {
        model = make_parallel2d(spec);
    } else if (spec.geometry == "synthetic") {
        require_positive(spec.rows, "rows");
        require_positive(spec.cols, "cols");
        require_positive(spec.nnz, "nnz");
        model = std::make_unique<Synthetic>(spec.rows, spec.cols, spec.nnz, spec.seed);
    } else if (spec.geometry == "matrix") {
        if (spec.matrix_file.empty()) {
            throw std::invalid_argument{"system.matrix_file is required for geometry 'matrix'"};
        }
        std::vector<long long> image_shape;
        CsrMatrix csr = read_matrix_file(spec.matrix_file, spec.matrix_group, &image_shape);
        ImageShape shape{};
        if (image_shape.size() == 2) {
            shape = {static_cast<index_t>(image_shape[0]), static_cast<index_t>(image_shape[1])};
        }
        return std::make_unique<StoredMatrix>(std::move(csr), spec.layout, spec.matrix_file, shape);
    } else {
        throw std::invalid_argument{"unknown geometry '" + spec.geometry +
                                    "' (expected matrix, parallel2d or synthetic)"};
    }
    if (spec.materialize) {
        const ImageShape shape = model->image_shape();
        return std::make_unique<StoredMatrix>(model->materialize(), spec.layout,
                                              "materialized " + model->kind(), shape);
    }
    return model;
}

}  // namespace recon
