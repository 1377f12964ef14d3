// Stored system matrices: HDF5 CSR groups (ours and written by h5py/scipy)
// and Matrix Market files, and every way such a file can be wrong.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "recon/csr_matrix.hpp"
#include "recon/hdf5.hpp"
#include "sensors_test_support.hpp"
#include "test_utils.hpp"

namespace recon::test {
namespace {

using kernels::index_t;

/// A random CSR matrix with sorted, distinct columns per row (some rows empty).
CsrMatrix random_csr(std::mt19937_64& rng)
{
    std::uniform_int_distribution<int> size{5, 40};
    CsrMatrix m;
    m.rows = size(rng);
    m.cols = size(rng);
    std::bernoulli_distribution keep{0.25};
    std::uniform_real_distribution<float> value{-2.0f, 2.0f};
    m.row_ptr.push_back(0);
    for (index_t i = 0; i < m.rows; ++i) {
        for (index_t j = 0; j < m.cols; ++j) {
            if (keep(rng)) {
                m.col_idx.push_back(j);
                m.values.push_back(value(rng));
            }
        }
        m.row_ptr.push_back(static_cast<kernels::size_type>(m.values.size()));
    }
    if (m.values.empty()) {
        m.col_idx.push_back(0);
        m.values.push_back(1.0f);
        for (std::size_t i = 1; i < m.row_ptr.size(); ++i) m.row_ptr[i] = 1;
    }
    return m;
}

void expect_same(const CsrMatrix& a, const CsrMatrix& b)
{
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.cols, b.cols);
    EXPECT_EQ(a.row_ptr, b.row_ptr);
    EXPECT_EQ(a.col_idx, b.col_idx);
    EXPECT_EQ(a.values, b.values);
}

/// Dense row-major copy of a CSR matrix.
std::vector<double> dense(const CsrMatrix& m)
{
    std::vector<double> out(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols),
                            0.0);
    for (index_t i = 0; i < m.rows; ++i) {
        for (auto k = m.row_ptr[static_cast<std::size_t>(i)];
             k < m.row_ptr[static_cast<std::size_t>(i) + 1]; ++k) {
            out[static_cast<std::size_t>(i) * static_cast<std::size_t>(m.cols) +
                static_cast<std::size_t>(m.col_idx[static_cast<std::size_t>(k)])] =
                m.values[static_cast<std::size_t>(k)];
        }
    }
    return out;
}

TEST(MatrixFile, Hdf5RoundTripWithImageShape)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    CsrMatrix m = random_csr(rng);
    // Give the matrix an image grid: n = ny * nx with ny = 1 unless n factors.
    const long long nx = m.cols % 2 == 0 ? m.cols / 2 : m.cols;
    const std::vector<long long> grid{m.cols / nx, nx};
    const std::string path = dir.file("matrix.h5");
    write_matrix_hdf5(path, m, "/system/matrix", grid);
    std::vector<long long> shape_out{99};
    expect_same(read_matrix_file(path, "/system/matrix", &shape_out), m);
    EXPECT_EQ(shape_out, grid);

    // The layout matches scipy's CSR names and dtypes.
    const hdf5::File file = hdf5::File::open(path);
    const hdf5::Group g = file.open_group("/system/matrix");
    EXPECT_EQ(g.open_dataset("data").dtype(), hdf5::Dtype::float32);
    EXPECT_EQ(g.open_dataset("indices").dtype(), hdf5::Dtype::int32);
    EXPECT_EQ(g.open_dataset("indptr").dtype(), hdf5::Dtype::int64);
    EXPECT_EQ(g.read_attribute<long long>("shape"), (std::vector<long long>{m.rows, m.cols}));
}

TEST(MatrixFile, RootGroupAndNoImageShape)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    TempDir dir;
    const CsrMatrix m = random_csr(rng);
    const std::string path = dir.file("root.h5");
    write_matrix_hdf5(path, m, "/");
    std::vector<long long> shape_out{1, 2};
    expect_same(read_matrix_file(path, "/", &shape_out), m);
    EXPECT_TRUE(shape_out.empty());
}

TEST(MatrixFile, ReadsWhatScipyAndH5pyWrite)
{
    RECON_REQUIRE_PYTHON();
    const auto seed = fresh_seed() % 1000000;
    SCOPED_TRACE(seed_trace(seed));
    TempDir dir;
    const std::string h5 = dir.file("scipy.h5");
    const std::string mtx = dir.file("scipy.mtx");
    std::ostringstream script;
    script
        << "import numpy as np, scipy.sparse as sp, scipy.io, h5py\n"
        << "rng = np.random.default_rng(" << seed << ")\n"
        << "A = sp.random(37, 23, density=0.2, format='csr', dtype=np.float64, random_state=rng)\n"
        << "A.sort_indices()\n"
        << "with h5py.File('" << h5 << "', 'w') as f:\n"
        << "    g = f.create_group('matrix')\n"
        << "    g['data'] = A.data\n"  // float64
        << "    g['indices'] = A.indices\n"  // int32
        << "    g['indptr'] = A.indptr\n"
        << "    g.attrs['shape'] = A.shape\n"
        << "    g.attrs['image_shape'] = (1, 23)\n"
        << "    w = f.create_group('wide')\n"
        << "    w['data'] = A.data.astype(np.float32)\n"
        << "    w['indices'] = A.indices.astype(np.int64)\n"
        << "    w['indptr'] = A.indptr.astype(np.int64)\n"
        << "    w.attrs['shape'] = np.array(A.shape, dtype=np.int32)\n"
        << "    f['dense'] = A.toarray()\n"
        << "scipy.io.mmwrite('" << mtx << "', A)\n";
    ASSERT_NO_FATAL_FAILURE(run_python(dir, script.str()));

    const auto reference = hdf5::File::open(h5).open_dataset("dense").read<double>();
    std::vector<long long> grid;
    const std::vector<std::pair<std::string, std::string>> sources = {
        {h5, "/matrix"}, {h5, "/wide"}, {mtx, ""}};
    for (const auto& [path, group] : sources) {
        SCOPED_TRACE(path + ":" + group);
        const CsrMatrix m =
            group.empty() ? read_matrix_file(path) : read_matrix_file(path, group, &grid);
        ASSERT_EQ(m.rows, 37);
        ASSERT_EQ(m.cols, 23);
        const auto d = dense(m);
        for (std::size_t i = 0; i < d.size(); ++i) {
            EXPECT_NEAR(d[i], reference[i], 1e-6 * (1.0 + std::fabs(reference[i])));
        }
    }
    (void)read_matrix_file(h5, "/matrix", &grid);
    EXPECT_EQ(grid, (std::vector<long long>{1, 23}));
}

TEST(MatrixFile, MatrixMarketSortsEntriesAndSkipsComments)
{
    const auto seed = fresh_seed();
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937_64 rng{seed};
    const CsrMatrix m = random_csr(rng);
    // Entries in a shuffled order, with comments and blank lines between.
    std::vector<std::string> lines;
    for (index_t i = 0; i < m.rows; ++i) {
        for (auto k = m.row_ptr[static_cast<std::size_t>(i)];
             k < m.row_ptr[static_cast<std::size_t>(i) + 1]; ++k) {
            std::ostringstream line;
            line.precision(9);
            line << i + 1 << ' ' << m.col_idx[static_cast<std::size_t>(k)] + 1 << ' '
                 << m.values[static_cast<std::size_t>(k)];
            lines.push_back(line.str());
        }
    }
    std::shuffle(lines.begin(), lines.end(), rng);
    std::ostringstream text;
    text << "%%MatrixMarket matrix coordinate real general\n% a comment\n%\n"
         << m.rows << ' ' << m.cols << ' ' << lines.size() << "\n";
    for (std::size_t k = 0; k < lines.size(); ++k) {
        text << lines[k] << (k % 5 == 0 ? "\n\n% between\n" : "\n");
    }
    TempDir dir;
    const std::string path = dir.file("shuffled.mtx");
    write_text(path, text.str());
    std::vector<long long> grid{3};
    expect_same(read_matrix_file(path, "/ignored", &grid), m);
    EXPECT_TRUE(grid.empty());
}

// --- bad HDF5 matrices ------------------------------------------------------------

/// Writes a CSR group from raw arrays of any dtype, exactly as given.
template <class V, class I, class P>
void write_raw_csr(const std::string& path, const std::vector<V>& data,
                   const std::vector<I>& indices, const std::vector<P>& indptr,
                   const std::vector<std::int64_t>& shape)
{
    const hdf5::File file = hdf5::File::create(path);
    const hdf5::Group g = file.create_group("matrix");
    g.write_dataset("data", {static_cast<std::int64_t>(data.size())}, data);
    g.write_dataset("indices", {static_cast<std::int64_t>(indices.size())}, indices);
    g.write_dataset("indptr", {static_cast<std::int64_t>(indptr.size())}, indptr);
    if (!shape.empty()) g.write_attribute("shape", shape);
}

struct BadCsr {
    const char* name;
    std::vector<float> data;
    std::vector<std::int32_t> indices;
    std::vector<std::int64_t> indptr;
    std::vector<std::int64_t> shape;
    std::vector<std::string> message;
};

TEST(MatrixFile, BadStructureIsReportedWithTheSource)
{
    // A 3 x 4 matrix; each case breaks one rule.
    const float v = 1.0f + static_cast<float>(fresh_seed() % 1000) / 1000.0f;
    const std::vector<BadCsr> cases = {
        {"out_of_range",
         {v, v, v},
         {0, 4, 1},
         {0, 2, 2, 3},
         {3, 4},
         {"indices", "4", "out of range [0, 4)"}},
        {"negative", {v, v, v}, {0, -1, 1}, {0, 2, 2, 3}, {3, 4}, {"indices", "out of range"}},
        {"unsorted", {v, v, v}, {2, 1, 1}, {0, 2, 2, 3}, {3, 4}, {"unsorted", "row 0"}},
        {"duplicated", {v, v, v}, {1, 1, 1}, {0, 2, 2, 3}, {3, 4}, {"duplicated", "row 0"}},
        {"not_monotone", {v, v, v}, {0, 1, 1}, {0, 2, 1, 3}, {3, 4}, {"not monotone", "row 1"}},
        {"indptr_end", {v, v, v}, {0, 1, 1}, {0, 2, 2, 2}, {3, 4}, {"nnz"}},
        {"indptr_start", {v, v, v}, {0, 1, 1}, {1, 2, 2, 3}, {3, 4}, {"indptr[0]"}},
        {"empty", {}, {}, {0, 0, 0, 0}, {3, 4}, {"empty"}},
        {"nan",
         {v, std::numeric_limits<float>::quiet_NaN(), v},
         {0, 1, 1},
         {0, 2, 2, 3},
         {3, 4},
         {"non-finite"}},
        {"indptr_length", {v, v, v}, {0, 1, 1}, {0, 2, 3}, {3, 4}, {"indptr", "m + 1 = 4"}},
        {"lengths",
         {v, v, v},
         {0, 1},
         {0, 2, 2, 3},
         {3, 4},
         {"indices", "2 entries but data has 3"}},
        {"shape_missing",
         {v, v, v},
         {0, 1, 1},
         {0, 2, 2, 3},
         {},
         {"/matrix", "attribute 'shape'", "not found"}},
        {"shape_three",
         {v, v, v},
         {0, 1, 1},
         {0, 2, 2, 3},
         {3, 4, 1},
         {"attribute 'shape'", "two integers", "[3]"}},
        {"shape_negative",
         {v, v, v},
         {0, 1, 1},
         {0, 2, 2, 3},
         {-3, 4},
         {"attribute 'shape'", "positive"}},
    };
    TempDir dir;
    for (const BadCsr& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string path = dir.file(std::string{c.name} + ".h5");
        write_raw_csr(path, c.data, c.indices, c.indptr, c.shape);
        std::vector<std::string> parts{path};
        parts.insert(parts.end(), c.message.begin(), c.message.end());
        const std::string message = error_of([&] { (void)read_matrix_file(path); });
        ASSERT_FALSE(message.empty());
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        for (const std::string& part : parts) {
            EXPECT_NE(message.find(part), std::string::npos)
                << "lacks '" << part << "': " << message;
        }
    }
}

TEST(MatrixFile, BadDtypesRankAndMissingParts)
{
    TempDir dir;
    const float v = 0.5f + static_cast<float>(fresh_seed() % 100) / 100.0f;
    const std::string float_indices = dir.file("float_indices.h5");
    write_raw_csr(float_indices, std::vector<float>{v, v}, std::vector<double>{0, 1},
                  std::vector<std::int64_t>{0, 1, 2}, {2, 2});
    expect_error([&] { (void)read_matrix_file(float_indices); },
                 {float_indices, "/matrix/indices", "expected integer values, found float64"});

    const std::string int_data = dir.file("int_data.h5");
    write_raw_csr(int_data, std::vector<std::int32_t>{1, 2}, std::vector<std::int32_t>{0, 1},
                  std::vector<std::int64_t>{0, 1, 2}, {2, 2});
    expect_error([&] { (void)read_matrix_file(int_data); },
                 {int_data, "/matrix/data", "expected float32 or float64 values, found int32"});

    const std::string string_shape = dir.file("string_shape.h5");
    write_raw_csr(string_shape, std::vector<float>{v, v}, std::vector<std::int32_t>{0, 1},
                  std::vector<std::int64_t>{0, 1, 2}, {});
    hdf5::File::open(string_shape, hdf5::File::Mode::read_write)
        .open_group("matrix")
        .write_attribute("shape", "2x2");
    expect_error([&] { (void)read_matrix_file(string_shape); },
                 {"attribute 'shape'", "two integers", "found string"});

    const std::string rank2 = dir.file("rank2.h5");
    write_raw_csr(rank2, std::vector<float>{v, v}, std::vector<std::int32_t>{0, 1},
                  std::vector<std::int64_t>{0, 1, 2}, {2, 2});
    {
        const hdf5::File f = hdf5::File::open(rank2, hdf5::File::Mode::read_write);
        f.remove("/matrix/data");
        f.write_dataset("/matrix/data", {1, 2}, std::vector<float>{v, v});
    }
    expect_error([&] { (void)read_matrix_file(rank2); },
                 {"/matrix/data", "expected a 1-D array, found shape [1, 2]"});

    const std::string no_indptr = dir.file("no_indptr.h5");
    write_raw_csr(no_indptr, std::vector<float>{v, v}, std::vector<std::int32_t>{0, 1},
                  std::vector<std::int64_t>{0, 1, 2}, {2, 2});
    hdf5::File::open(no_indptr, hdf5::File::Mode::read_write).remove("/matrix/indptr");
    expect_error([&] { (void)read_matrix_file(no_indptr); },
                 {no_indptr, "/matrix", "dataset 'indptr' not found"});

    const std::string grid = dir.file("grid.h5");
    write_raw_csr(grid, std::vector<float>{v, v}, std::vector<std::int32_t>{0, 1},
                  std::vector<std::int64_t>{0, 1, 2}, {2, 2});
    hdf5::File::open(grid, hdf5::File::Mode::read_write)
        .open_group("matrix")
        .write_attribute("image_shape", std::vector<std::int64_t>{3, 1});
    expect_error([&] { (void)read_matrix_file(grid); },
                 {"attribute 'image_shape' = [3, 1]", "n = 2 pixels"});

    expect_error([&] { (void)read_matrix_file(grid, "/other"); },
                 {grid, "/other", "group not found"});
    const std::string missing = dir.file("missing.h5");
    expect_error([&] { (void)read_matrix_file(missing); }, {missing, "not found"});
    const std::string junk = dir.file("junk.bin");
    write_text(junk, "12 34 garbage\n");
    expect_error([&] { (void)read_matrix_file(junk); },
                 {junk, "neither an HDF5 file nor Matrix Market"});
}

TEST(MatrixFile, WriterRefusesInvalidMatrices)
{
    TempDir dir;
    CsrMatrix m;
    m.rows = 2;
    m.cols = 2;
    m.row_ptr = {0, 1, 2};
    m.col_idx = {0, 2};
    m.values = {1.0f, 2.0f};
    expect_error([&] { write_matrix_hdf5(dir.file("bad.h5"), m); }, {"bad.h5", "out of range"});
    m.col_idx = {0, 1};
    expect_error(
        [&] {
            write_matrix_hdf5(dir.file("grid.h5"), m, "/matrix", {3, 3});
        },
        {"image_shape"});
}

// --- bad Matrix Market files --------------------------------------------------------

TEST(MatrixFile, BadMatrixMarketFiles)
{
    const std::string banner = "%%MatrixMarket matrix coordinate real general\n";
    const std::string x = std::to_string(1.0 + static_cast<double>(fresh_seed() % 1000) / 7.0);
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
         {"line 1", "expected '%%MatrixMarket matrix coordinate real general'"}},
        {"%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 1 " + x + "\n",
         {"line 1", "symmetric"}},
        {"%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n",
         {"line 1", "complex"}},
        {banner + "% only comments\n", {"size line"}},
        {banner + "2 two 1\n1 1 " + x + "\n", {"line 2", "size line"}},
        {banner + "2 3 1\n3 1 " + x + "\n", {"line 3", "entry (3, 1) outside the matrix 2 x 3"}},
        {banner + "2 3 1\n1 0 " + x + "\n", {"line 3", "outside", "1-based"}},
        {banner + "2 3 3\n1 1 " + x + "\n% c\n2 2 1\n1 1 2\n",
         {"duplicate entry (1, 1) at lines 3 and 6"}},
        {banner + "2 3 3\n1 1 " + x + "\n2 2 1\n", {"declares 3 entries, found 2"}},
        {banner + "2 3 1\n1 1 " + x + "\n2 2 1\n", {"line 4", "more entries than the 1 declared"}},
        {banner + "2 3 1\n1 1\n", {"line 3", "'row col value'"}},
        {banner + "2 3 1\n1 1 abc\n", {"line 3", "'row col value'"}},
        {banner + "2 3 0\n", {"empty"}},
        {banner + "2 3 1\n1 1 nan\n", {"non-finite"}},
    };
    TempDir dir;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].first);
        const std::string path = dir.file("bad" + std::to_string(i) + ".mtx");
        write_text(path, cases[i].first);
        std::vector<std::string> parts{path};
        parts.insert(parts.end(), cases[i].second.begin(), cases[i].second.end());
        const std::string message = error_of([&] { (void)read_matrix_file(path); });
        ASSERT_FALSE(message.empty());
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        for (const std::string& part : parts) {
            EXPECT_NE(message.find(part), std::string::npos)
                << "lacks '" << part << "': " << message;
        }
    }
}

}  // namespace
}  // namespace recon::test
