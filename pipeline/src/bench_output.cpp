// `recon bench` rows of the pipeline's output stage: what writing one
// reconstructed frame to the HDF5 output costs (the "write" stage of the
// latency report, without the lock the workers share), per image size.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "pipeline/bench.hpp"
#include "pipeline/hdf5_output.hpp"

namespace recon::pipeline {

namespace {

/// The images of a 4-sensor stream written one after the other, sensor by
/// sensor, as a daemon or replay does: the image (`write_image`), then its
/// record (the timing row and a flush, `write_record`), each timed apart.
void add_output_rows_for(BenchTable& table, index_t side, int repetitions,
                         const std::filesystem::path& path)
{
    constexpr int sensors = 4;
    Hdf5OutputWriter writer{path.string(), OutputParameters{"bench", "bench", "cpu", 50.0}};
    std::int64_t next = 0;
    Reconstruction frame;
    frame.shape = {side, side};
    frame.image.assign(static_cast<std::size_t>(frame.shape.size()), 0.5f);
    Timing image, record;
    auto write_one = [&](bool timed) {
        frame.sensor = "sensor" + std::to_string(next % sensors);
        frame.frame_id = next / sensors;
        ++next;
        frame.image[0] = static_cast<float>(next);
        const auto start = std::chrono::steady_clock::now();
        writer.write_image(frame);
        const auto imaged = std::chrono::steady_clock::now();
        writer.write_record(frame);
        const auto recorded = std::chrono::steady_clock::now();
        if (!timed) return;
        image.runs_ms.push_back(std::chrono::duration<double, std::milli>(imaged - start).count());
        record.runs_ms.push_back(
            std::chrono::duration<double, std::milli>(recorded - imaged).count());
    };
    for (int i = 0; i < 2 * sensors; ++i) write_one(false);  // datasets created, caches warm
    for (int i = 0; i < repetitions; ++i) write_one(true);
    writer.close();
    const std::string size = std::to_string(side) + " x " + std::to_string(side);
    const std::string note = std::to_string(sensors) + " sensors, one frame each in turn";
    table.add({"output", "hdf5 " + size, "write_image (append the image)", "cpu", image, note});
    table.add({"output", "hdf5 " + size, "write_record (timing row and flush)", "cpu", record,
               note});
}

}  // namespace

void add_output_rows(BenchTable& table, const BenchConfig& config)
{
    const int repetitions = std::max(200, config.repetitions);
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("recon-bench-output-" + std::to_string(getpid()) + ".h5");
    try {
        for (const index_t side : {128, 256, 512}) {
            add_output_rows_for(table, side, repetitions, path);
        }
    } catch (...) {
        std::filesystem::remove(path);
        throw;
    }
    std::filesystem::remove(path);
}

}  // namespace recon::pipeline
