// The simulator: angles, reproducible frames, measurements through the
// system model, noise statistics, raw counts, configuration errors, and the
// parallel2d convention against analytic projections of a phantom.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sensors/phantom.hpp"
#include "sensors/simulator.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

using sensors::NoiseKind;
using sensors::PhantomKind;
using sensors::SimulatedSensor;
using sensors::SimulationConfig;
using sensors::Simulator;

SimulatedSensor small_sensor(index_t n = 40, index_t views = 48)
{
    SimulatedSensor s;
    s.system.nx = s.system.ny = n;
    s.system.views = views;
    s.phantom.supersample = 2;
    return s;
}

std::vector<float> project(const recon::SystemModel& model, const std::vector<float>& image)
{
    std::vector<float> p(static_cast<std::size_t>(model.rows()));
    model.apply(kernels::Executor::cpu(), cview_of(image), view_of(p));
    return p;
}

TEST(Simulator, AnglesForFullLimitedAndSparseScans)
{
    const auto full = sensors::make_angles(4);
    EXPECT_EQ(full, (std::vector<double>{0.0, 45.0, 90.0, 135.0}));
    const auto limited = sensors::make_angles(3, 90.0, 10.0);
    EXPECT_EQ(limited, (std::vector<double>{10.0, 40.0, 70.0}));
    expect_error([] { (void)sensors::make_angles(0); }, {"views must be at least 1"});
    expect_error([] { (void)sensors::make_angles(5, -1.0); }, {"range"});
    // The same angles the system model makes from a spec without angles.
    recon::SystemSpec spec;
    spec.nx = spec.ny = 8;
    spec.views = 7;
    spec.angle_range_deg = 120.0;
    const auto model = recon::make_system_model(spec);
    EXPECT_EQ(dynamic_cast<const recon::Parallel2d&>(*model).angles_deg(),
              sensors::make_angles(7, 120.0));
}

TEST(Simulator, Parallel2dAgreesWithAnalyticProjections)
{
    // The phantom's coordinates and the model's geometry must agree: the
    // model applied to the rasterized phantom approximates its exact line
    // integrals, while a mirrored phantom does not.
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    const index_t n = 96;
    recon::SystemSpec spec;
    spec.nx = spec.ny = n;
    spec.views = 24;
    spec.angles_deg = sensors::make_angles(24, 360.0, 7.0);
    spec.center_offset = 0.25;
    const auto model = recon::make_system_model(spec);
    const sensors::Phantom p = sensors::random_ellipses(7, rng());
    const auto image = sensors::rasterize(p, n, n, 4);
    const auto measured = project(*model, image);
    const auto exact = sensors::analytic_sinogram(p, n, n, n, spec.angles_deg, spec.center_offset);
    const double error = rel_error(measured, exact);
    // About 1% from pixelization; half a bin off in the centre would give 3-4%.
    EXPECT_LT(error, 0.02);
    sensors::Phantom mirrored = p;
    for (sensors::Ellipse& e : mirrored.ellipses) {
        e.y0 = -e.y0;
        e.phi_deg = -e.phi_deg;
    }
    const auto wrong =
        sensors::analytic_sinogram(mirrored, n, n, n, spec.angles_deg, spec.center_offset);
    EXPECT_GT(rel_error(measured, wrong), 4.0 * error);
}

TEST(Simulator, FramesAreReproducibleAndMeasuredThroughTheModel)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    const SimulationConfig config = SimulationConfig::uniform(2, small_sensor(), 4, 25.0, seed);
    const Simulator a{config};
    const Simulator b{config};
    const sensors::SimulatedFrame f = a.frame(1, 2);
    EXPECT_EQ(f.frame.sensor, "sensor1");
    EXPECT_EQ(f.frame.frame_id, 2);
    EXPECT_EQ(f.frame.timestamp_ns, 80000000);
    EXPECT_EQ(f.ground_truth.size(), 1600u);
    EXPECT_TRUE(f.counts.empty());
    EXPECT_EQ(b.frame(1, 2).frame.data, f.frame.data);  // another instance, same data
    EXPECT_EQ(a.frame(1, 2).ground_truth, f.ground_truth);
    EXPECT_NE(a.frame(1, 3).ground_truth, f.ground_truth);  // the phantom moves
    EXPECT_NE(a.frame(0, 2).ground_truth, f.ground_truth);  // sensors differ
    // Noise-free data are exactly A x of the ground truth.
    EXPECT_LT(rel_error(f.frame.data, project(a.model(1), f.ground_truth)), 1e-6);
    EXPECT_GT(norm(f.frame.data), 0.0);
}

TEST(Simulator, GaussianNoiseHasTheRequestedLevel)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    SimulatedSensor clean = small_sensor(48, 60);
    clean.phantom.kind = PhantomKind::random_ellipses;
    SimulatedSensor noisy = clean;
    noisy.noise.kind = NoiseKind::gaussian;
    noisy.noise.sigma = 0.02;
    const auto ref =
        Simulator{SimulationConfig::uniform(1, clean, 1, 10.0, seed)}.frame(0, 0).frame.data;
    const auto data =
        Simulator{SimulationConfig::uniform(1, noisy, 1, 10.0, seed)}.frame(0, 0).frame.data;
    double peak = 0.0, sum = 0.0, sum2 = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        peak = std::max(peak, static_cast<double>(std::fabs(ref[i])));
        const double d = data[i] - ref[i];
        sum += d;
        sum2 += d * d;
    }
    const double count = static_cast<double>(ref.size());
    const double sigma = 0.02 * peak;
    EXPECT_LT(std::fabs(sum / count), 5.0 * sigma / std::sqrt(count));
    EXPECT_NEAR(std::sqrt(sum2 / count), sigma, 0.06 * sigma);
}

TEST(Simulator, PoissonCountsFollowTheBeerLambertMean)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    SimulatedSensor clean = small_sensor(48, 60);
    clean.phantom.max_line_integral = 2.0;
    SimulatedSensor counted = clean;
    counted.noise.kind = NoiseKind::poisson;
    counted.noise.photons = 3000;
    counted.dtype = "uint32";
    const auto p =
        Simulator{SimulationConfig::uniform(1, clean, 1, 10.0, seed)}.frame(0, 0).frame.data;
    EXPECT_NEAR(*std::max_element(p.begin(), p.end()), 2.0, 1e-5);
    const Simulator simulator{SimulationConfig::uniform(1, counted, 1, 10.0, seed)};
    const sensors::SimulatedFrame f = simulator.frame(0, 0);
    ASSERT_EQ(f.counts.size(), p.size());
    double mean = 0.0, var = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double lambda = 3000.0 * std::exp(-static_cast<double>(p[i]));
        const double z = (f.counts[i] - lambda) / std::sqrt(lambda);
        mean += z;
        var += z * z;
        EXPECT_NEAR(f.frame.data[i], -std::log(std::max(f.counts[i] / 3000.0, 1e-6)), 1e-5);
    }
    mean /= static_cast<double>(p.size());
    var /= static_cast<double>(p.size());
    EXPECT_LT(std::fabs(mean), 0.1);
    EXPECT_NEAR(var, 1.0, 0.12);

    const auto setups = simulator.setups();
    ASSERT_EQ(setups.size(), 1u);
    EXPECT_EQ(setups[0].dtype, "uint32");
    EXPECT_EQ(setups[0].flat, std::vector<float>(p.size(), 3000.0f));
    EXPECT_EQ(setups[0].dark, std::vector<float>(p.size(), 0.0f));
    EXPECT_EQ(setups[0].system.angles_deg, sensors::make_angles(60));
    EXPECT_EQ(setups[0].measurements, static_cast<std::int64_t>(p.size()));

    // As line integrals: the same counts, stored after the log.
    counted.dtype = "float32";
    const auto g = Simulator{SimulationConfig::uniform(1, counted, 1, 10.0, seed)}.frame(0, 0);
    EXPECT_TRUE(g.counts.empty());
    EXPECT_EQ(g.frame.data, f.frame.data);
}

TEST(Simulator, SyntheticGeometryGetsAThinPhantom)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    SimulatedSensor s;
    s.system.geometry = "synthetic";
    s.system.rows = 300;
    s.system.cols = 64;
    s.system.nnz = 2000;
    s.system.seed = seed;
    const Simulator simulator{SimulationConfig::uniform(1, s, 2, 5.0, seed)};
    const auto f = simulator.frame(0, 1);
    EXPECT_EQ(f.ground_truth.size(), 64u);
    EXPECT_GT(norm(f.ground_truth), 0.0);
    EXPECT_EQ(f.frame.data.size(), 300u);
    EXPECT_LT(rel_error(f.frame.data, project(simulator.model(0), f.ground_truth)), 1e-6);
    EXPECT_EQ(simulator.timestamp_ns(1), 200000000);
}

TEST(Simulator, ConfigurationErrorsNameTheSensor)
{
    const auto bad = [](auto&& change) {
        SimulationConfig c =
            SimulationConfig::uniform(1, small_sensor(8, 4), 1, 10.0, fresh_seed());
        change(c);
        return [c] { Simulator{c}; };
    };
    expect_error(bad([](SimulationConfig& c) { c.sensors[0].dtype = "int16"; }),
                 {"sensor 'sensor0'", "dtype must be float32, uint16 or uint32"});
    expect_error(bad([](SimulationConfig& c) {
                     c.sensors[0].dtype = "uint16";
                     c.sensors[0].noise.photons = 70000;
                 }),
                 {"sensor 'sensor0'", "noise.photons", "65535"});
    expect_error(bad([](SimulationConfig& c) {
                     c.sensors[0].noise.kind = NoiseKind::poisson;
                     c.sensors[0].noise.photons = 0;
                 }),
                 {"noise.photons"});
    expect_error(bad([](SimulationConfig& c) { c.sensors[0].system.nx = 0; }),
                 {"sensor 'sensor0'", "nx"});
    expect_error(bad([](SimulationConfig& c) { c.sensors[0].system.geometry = "cone"; }),
                 {"sensor 'sensor0'", "cone"});
    expect_error(bad([](SimulationConfig& c) { c.sensors.push_back(c.sensors[0]); }),
                 {"duplicate name"});
    expect_error(bad([](SimulationConfig& c) { c.sensors[0].phantom.supersample = 0; }),
                 {"phantom.supersample"});
    expect_error(bad([](SimulationConfig& c) { c.sensors[0].noise.sigma = -0.1; }),
                 {"noise.sigma"});
    expect_error(bad([](SimulationConfig& c) { c.frame_rate_hz = 0.0; }), {"frame rate"});
    expect_error(bad([](SimulationConfig& c) { c.sensors.clear(); }), {"no sensors"});
    expect_error([] { (void)sensors::parse_phantom_kind("cat"); }, {"unknown phantom 'cat'"});
    expect_error([] { (void)sensors::parse_noise_kind("pink"); }, {"unknown noise 'pink'"});
    EXPECT_EQ(sensors::parse_noise_kind("poisson"), NoiseKind::poisson);
    EXPECT_EQ(sensors::parse_phantom_kind("random"), PhantomKind::random_ellipses);
}

}  // namespace
}  // namespace recon::test
