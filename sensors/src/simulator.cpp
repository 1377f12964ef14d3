#include "sensors/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>

#include "random.hpp"
#include "sensors/preprocess.hpp"

namespace recon::sensors {

namespace {

[[noreturn]] void bad_sensor(const std::string& sensor, const std::string& what)
{
    throw std::invalid_argument("simulate: sensor '" + sensor + "': " + what);
}

bool is_counts(const std::string& dtype) { return dtype == "uint16" || dtype == "uint32"; }

double max_count(const std::string& dtype)
{
    return dtype == "uint16" ? 65535.0
                             : static_cast<double>(std::numeric_limits<std::uint32_t>::max());
}

void validate(const SimulatedSensor& s)
{
    const PhantomOptions& p = s.phantom;
    const NoiseOptions& n = s.noise;
    if (s.name.empty() || s.name.find('/') != std::string::npos) {
        bad_sensor(s.name, "a name must be non-empty and have no '/'");
    }
    if (s.dtype != "float32" && !is_counts(s.dtype)) {
        bad_sensor(s.name, "dtype must be float32, uint16 or uint32, found '" + s.dtype + "'");
    }
    if (p.ellipses < 1) bad_sensor(s.name, "phantom.ellipses must be at least 1");
    if (p.supersample < 1 || p.supersample > 16) {
        bad_sensor(s.name, "phantom.supersample must be in [1, 16], found " +
                               std::to_string(p.supersample));
    }
    if (!(std::isfinite(p.value_scale) && p.value_scale > 0.0)) {
        bad_sensor(s.name, "phantom.value_scale must be > 0");
    }
    if (!(std::isfinite(p.max_line_integral) && p.max_line_integral >= 0.0)) {
        bad_sensor(s.name, "phantom.max_line_integral must be >= 0");
    }
    if (!(std::isfinite(p.shift) && p.shift >= 0.0) ||
        !(std::isfinite(p.jitter) && p.jitter >= 0.0 && p.jitter < 1.0) ||
        !(std::isfinite(p.period) && p.period > 0.0)) {
        bad_sensor(s.name, "phantom motion needs shift >= 0, jitter in [0, 1), period > 0");
    }
    if (!(std::isfinite(n.sigma) && n.sigma >= 0.0)) {
        bad_sensor(s.name, "noise.sigma must be >= 0");
    }
    if (n.kind == NoiseKind::poisson || is_counts(s.dtype)) {
        if (!(std::isfinite(n.photons) && n.photons >= 1.0 && n.photons <= max_count(s.dtype))) {
            bad_sensor(s.name, "noise.photons (incident counts I0) must be in [1, " +
                                   std::to_string(static_cast<long long>(max_count(s.dtype))) +
                                   "], found " + std::to_string(n.photons));
        }
    }
}

struct SensorState {
    SimulatedSensor options;
    std::unique_ptr<recon::SystemModel> model;
    recon::ImageShape grid;
    Phantom base;
    double scale = 1.0;
};

std::vector<float> project(const recon::SystemModel& model, const std::vector<float>& image)
{
    std::vector<float> p(static_cast<std::size_t>(model.rows()));
    model.apply(Executor::cpu(),
                View<const float>{image.data(), static_cast<size_type>(image.size())},
                View<float>{p.data(), static_cast<size_type>(p.size())});
    return p;
}

float max_abs(const std::vector<float>& v)
{
    float m = 0.0f;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
}

}  // namespace

std::vector<double> make_angles(index_t views, double range_deg, double start_deg)
{
    if (views < 1) {
        throw std::invalid_argument("angles: views must be at least 1, found " +
                                    std::to_string(views));
    }
    if (!(std::isfinite(range_deg) && range_deg > 0.0) || !std::isfinite(start_deg)) {
        throw std::invalid_argument("angles: the range must be finite and > 0 degrees");
    }
    std::vector<double> angles(static_cast<std::size_t>(views));
    for (index_t k = 0; k < views; ++k) {
        angles[static_cast<std::size_t>(k)] = start_deg + range_deg * k / views;
    }
    return angles;
}

PhantomKind parse_phantom_kind(const std::string& text)
{
    if (text == "shepp_logan" || text == "shepp-logan") return PhantomKind::shepp_logan;
    if (text == "random_ellipses" || text == "random") return PhantomKind::random_ellipses;
    throw std::invalid_argument("unknown phantom '" + text +
                                "' (expected shepp_logan or random_ellipses)");
}

const char* to_string(PhantomKind kind)
{
    return kind == PhantomKind::shepp_logan ? "shepp_logan" : "random_ellipses";
}

NoiseKind parse_noise_kind(const std::string& text)
{
    if (text == "none") return NoiseKind::none;
    if (text == "gaussian") return NoiseKind::gaussian;
    if (text == "poisson") return NoiseKind::poisson;
    throw std::invalid_argument("unknown noise '" + text +
                                "' (expected none, gaussian or poisson)");
}

const char* to_string(NoiseKind kind)
{
    switch (kind) {
    case NoiseKind::none: return "none";
    case NoiseKind::gaussian: return "gaussian";
    case NoiseKind::poisson: return "poisson";
    }
    return "none";
}

SimulationConfig SimulationConfig::uniform(int count, const SimulatedSensor& sensor,
                                           std::int64_t frames, double frame_rate_hz,
                                           std::uint64_t seed)
{
    SimulationConfig config;
    for (int i = 0; i < count; ++i) {
        config.sensors.push_back(sensor);
        config.sensors.back().name = "sensor" + std::to_string(i);
    }
    config.frames = frames;
    config.frame_rate_hz = frame_rate_hz;
    config.seed = seed;
    return config;
}

// --- Simulator ------------------------------------------------------------------

struct Simulator::Impl {
    SimulationConfig config;
    std::vector<SensorState> sensors;

    static SensorState make_state(const SimulatedSensor& options, std::size_t index,
                                  std::uint64_t seed);

    /// The scaled phantom image of frame k.
    static std::vector<float> image(const SensorState& s, std::int64_t k, std::mt19937_64& rng)
    {
        const PhantomOptions& p = s.options.phantom;
        const Phantom moved = vary(s.base, k, p.shift, p.jitter, p.period, rng).scaled(s.scale);
        return rasterize(moved, s.grid.nx, s.grid.ny, p.supersample);
    }
};

Simulator::Simulator(SimulationConfig config) : impl_{std::make_unique<Impl>()}
{
    impl_->config = std::move(config);
    const SimulationConfig& c = impl_->config;
    if (c.sensors.empty()) throw std::invalid_argument("simulate: no sensors configured");
    if (c.frames < 0) throw std::invalid_argument("simulate: frames must be >= 0");
    if (!(std::isfinite(c.frame_rate_hz) && c.frame_rate_hz > 0.0)) {
        throw std::invalid_argument("simulate: frame rate must be > 0 Hz");
    }
    std::set<std::string> names;
    for (std::size_t i = 0; i < c.sensors.size(); ++i) {
        validate(c.sensors[i]);
        if (!names.insert(c.sensors[i].name).second)
            bad_sensor(c.sensors[i].name, "duplicate name");
        impl_->sensors.push_back(Impl::make_state(c.sensors[i], i, c.seed));
    }
}

SensorState Simulator::Impl::make_state(const SimulatedSensor& options, std::size_t index,
                                        std::uint64_t seed)
{
    SensorState s;
    s.options = options;
    try {
        s.model = recon::make_system_model(options.system);
    } catch (const std::exception& e) {
        bad_sensor(options.name, e.what());
    }
    s.grid = s.model->image_shape();
    s.base = options.phantom.kind == PhantomKind::shepp_logan
                 ? shepp_logan()
                 : random_ellipses(options.phantom.ellipses,
                                   seed ^ (0x9E3779B97F4A7C15ull * (index + 1)));
    s.scale = 1.0;
    if (options.phantom.max_line_integral > 0.0) {
        // Calibrated on frame 0 as frame() makes it, before any noise.
        auto rng = make_rng(seed, index, 0);
        const float peak = max_abs(project(*s.model, image(s, 0, rng)));
        if (!(peak > 0.0f)) bad_sensor(options.name, "the phantom projects to zero");
        s.scale = options.phantom.max_line_integral / peak;
    } else {
        s.scale = options.phantom.value_scale;
    }
    return s;
}

Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

const SimulationConfig& Simulator::config() const { return impl_->config; }
std::size_t Simulator::sensor_count() const { return impl_->sensors.size(); }

const recon::SystemModel& Simulator::model(std::size_t sensor) const
{
    return *impl_->sensors.at(sensor).model;
}

std::int64_t Simulator::timestamp_ns(std::int64_t k) const
{
    return impl_->config.start_ns +
           std::llround(static_cast<double>(k) * 1e9 / impl_->config.frame_rate_hz);
}

std::vector<SensorSetup> Simulator::setups() const
{
    std::vector<SensorSetup> out;
    for (const SensorState& s : impl_->sensors) {
        SensorSetup setup;
        setup.name = s.options.name;
        setup.system = s.options.system;
        if (const auto* p = dynamic_cast<const recon::Parallel2d*>(s.model.get())) {
            // Record exactly what the model uses (defaults resolved).
            setup.system.angles_deg = p->angles_deg();
            setup.system.views = p->views();
            setup.system.bins = p->bins();
        }
        setup.dtype = s.options.dtype;
        setup.measurements = s.model->rows();
        setup.image_shape = s.grid;
        if (is_counts(setup.dtype)) {
            setup.dark.assign(static_cast<std::size_t>(setup.measurements), 0.0f);
            setup.flat.assign(static_cast<std::size_t>(setup.measurements),
                              static_cast<float>(s.options.noise.photons));
        }
        const NoiseOptions& n = s.options.noise;
        setup.notes = {{"simulated_phantom", to_string(s.options.phantom.kind)},
                       {"simulated_noise", to_string(n.kind)},
                       {"simulated_sigma", std::to_string(n.sigma)},
                       {"simulated_photons", std::to_string(n.photons)},
                       {"simulated_value_scale", std::to_string(s.scale)},
                       {"simulated_seed", std::to_string(impl_->config.seed)}};
        out.push_back(std::move(setup));
    }
    return out;
}

SimulatedFrame Simulator::frame(std::size_t sensor, std::int64_t k) const
{
    const SensorState& s = impl_->sensors.at(sensor);
    const NoiseOptions& noise = s.options.noise;
    auto rng = make_rng(impl_->config.seed, sensor, static_cast<std::uint64_t>(k));

    SimulatedFrame out;
    out.ground_truth = Impl::image(s, k, rng);
    std::vector<float> p = project(*s.model, out.ground_truth);

    if (noise.kind == NoiseKind::gaussian) {
        const double sigma = noise.sigma * max_abs(p);
        for (float& v : p) v += static_cast<float>(sigma * standard_normal(rng));
    }
    const bool counts = is_counts(s.options.dtype);
    if (noise.kind == NoiseKind::poisson || counts) {
        const double limit = max_count(counts ? s.options.dtype : "uint32");
        out.counts.resize(p.size());
        for (std::size_t i = 0; i < p.size(); ++i) {
            const double mean = noise.photons * std::exp(-static_cast<double>(p[i]));
            double c = std::round(mean);
            if (noise.kind == NoiseKind::poisson) {
                c = static_cast<double>(std::poisson_distribution<long long>{mean}(rng));
            }
            out.counts[i] = static_cast<std::uint32_t>(std::clamp(c, 0.0, limit));
        }
        // What a reader delivers from these counts (dark 0, flat I0).
        const std::vector<float> as_float(out.counts.begin(), out.counts.end());
        const std::vector<float> flat(p.size(), static_cast<float>(noise.photons));
        p = counts_to_line_integrals(as_float, {}, flat);
        if (!counts) out.counts.clear();
    }
    out.frame.sensor = s.options.name;
    out.frame.frame_id = k;
    out.frame.timestamp_ns = timestamp_ns(k);
    out.frame.data = std::move(p);
    return out;
}

void simulate_recording(const std::string& path, const SimulationConfig& config)
{
    const Simulator simulator{config};
    RecordingWriter writer{path, simulator.setups()};
    for (std::int64_t k = 0; k < config.frames; ++k) {
        for (std::size_t s = 0; s < simulator.sensor_count(); ++s) {
            const SimulatedFrame f = simulator.frame(s, k);
            if (f.counts.empty()) {
                writer.append(f.frame.sensor, f.frame.timestamp_ns, f.frame.data);
            } else {
                writer.append_counts(f.frame.sensor, f.frame.timestamp_ns, f.counts);
            }
            if (config.ground_truth) writer.append_ground_truth(f.frame.sensor, f.ground_truth);
        }
    }
    writer.close();
}

}  // namespace recon::sensors
