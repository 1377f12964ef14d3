#pragma once
// Simulated detectors: phantoms measured through a system model, with
// noise, frame after frame, for recordings and live streams.
//
// Every frame is a pure function of (seed, sensor index, frame index), so
// frames can be made in any order and on any thread, and a recording and a
// live stream from the same configuration carry identical data (with the
// same standard library: Poisson variates come from std::poisson_distribution).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "recon/system_model.hpp"
#include "sensors/frame.hpp"
#include "sensors/phantom.hpp"
#include "sensors/recording.hpp"

namespace recon::sensors {

/// Projection angles start + k * range / views, k = 0 .. views-1, in degrees
/// (the end of the range is excluded, as for SystemSpec::angle_range_deg).
/// Limited angle: range < 180; sparse view: few views. Throws on views < 1
/// or a non-finite / non-positive range.
std::vector<double> make_angles(index_t views, double range_deg = 180.0, double start_deg = 0.0);

enum class PhantomKind { shepp_logan, random_ellipses };
enum class NoiseKind { none, gaussian, poisson };

/// "shepp_logan" | "random_ellipses" (also "random"); throws
/// std::invalid_argument listing the choices.
PhantomKind parse_phantom_kind(const std::string& text);
const char* to_string(PhantomKind kind);
/// "none" | "gaussian" | "poisson".
NoiseKind parse_noise_kind(const std::string& text);
const char* to_string(NoiseKind kind);

struct PhantomOptions {
    PhantomKind kind = PhantomKind::shepp_logan;
    int ellipses = 8;  // random_ellipses: how many (the first is the body)
    int supersample = 3;  // samples per pixel and axis when rasterizing
    double value_scale = 1.0;  // multiplies the phantom's values
    /// > 0: instead of value_scale, scale the phantom so that the largest
    /// noiseless line integral of frame 0 equals this (Poisson data need a
    /// few units at most: the transmission is exp(-p)).
    double max_line_integral = 0.0;
    double shift = 0.02;  // per-frame motion amplitude (phantom radius units)
    double jitter = 0.02;  // per-frame relative variation of feature values
    double period = 64.0;  // frames per cycle of the motion
};

struct NoiseOptions {
    NoiseKind kind = NoiseKind::none;
    /// gaussian: standard deviation relative to the frame's largest |p|.
    double sigma = 0.01;
    /// Incident photons per detector cell I0: poisson draws counts ~
    /// Poisson(I0 exp(-p)); raw-count recordings use it as the flat field.
    double photons = 1e4;
};

/// One simulated sensor.
struct SimulatedSensor {
    std::string name = "sensor0";
    recon::SystemSpec system;
    PhantomOptions phantom;
    NoiseOptions noise;
    /// As recorded: "float32" line integrals, or "uint16" / "uint32" raw
    /// counts round(I0 exp(-p)) (Poisson-distributed with poisson noise;
    /// with gaussian noise, of the noisy p) with flat = I0, dark = 0.
    std::string dtype = "float32";
};

struct SimulationConfig {
    std::vector<SimulatedSensor> sensors;
    std::int64_t frames = 10;  // per sensor
    double frame_rate_hz = 10.0;  // timestamps start_ns + k / rate
    std::int64_t start_ns = 0;
    std::uint64_t seed = 1;
    bool ground_truth = true;  // store the phantom images in recordings

    /// `count` copies of `sensor` named sensor0, sensor1, ... (phantoms
    /// differ between sensors through their index).
    static SimulationConfig uniform(int count, const SimulatedSensor& sensor, std::int64_t frames,
                                    double frame_rate_hz, std::uint64_t seed = 1);
};

/// What one simulated frame holds.
struct SimulatedFrame {
    Frame frame;  // line integrals as a reader would deliver them
    std::vector<std::uint32_t> counts;  // raw counts, for uint16/uint32 sensors
    std::vector<float> ground_truth;  // the (scaled) phantom image, [ny][nx]
};

/// Builds each sensor's system model once (make_system_model on the CPU)
/// and makes frames on demand. Thread-safe after construction.
class Simulator {
public:
    /// Validates the configuration; throws std::invalid_argument naming the
    /// sensor and the option.
    explicit Simulator(SimulationConfig config);
    ~Simulator();
    Simulator(Simulator&&) noexcept;
    Simulator& operator=(Simulator&&) noexcept;

    const SimulationConfig& config() const;
    std::size_t sensor_count() const;
    const recon::SystemModel& model(std::size_t sensor) const;
    /// The recording setup of every sensor (geometry, dtype, dark/flat).
    std::vector<SensorSetup> setups() const;
    /// Timestamp of frame k (ns).
    std::int64_t timestamp_ns(std::int64_t k) const;

    /// Frame k of sensor s; a pure function of (seed, s, k).
    SimulatedFrame frame(std::size_t sensor, std::int64_t k) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Simulates config.frames frames of every sensor into a new recording
/// (replacing `path`), frames interleaved by time.
void simulate_recording(const std::string& path, const SimulationConfig& config);

}  // namespace recon::sensors
