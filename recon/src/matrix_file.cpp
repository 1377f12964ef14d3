// Reading and writing stored system matrices: an HDF5 group with scipy's CSR
// field names (data, indices, indptr, attribute shape), or Matrix Market.
// File-level problems are reported here (std::runtime_error); the matrix's
// structure is checked by CsrMatrix::validate (std::invalid_argument).

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "recon/csr_matrix.hpp"
#include "recon/hdf5.hpp"

namespace recon {

namespace {

using kernels::index_t;
using kernels::size_type;

constexpr std::int64_t max_index = std::numeric_limits<index_t>::max();

std::string lower(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

bool is_root(const std::string& group) { return group.empty() || group == "/"; }

// --- HDF5 ---------------------------------------------------------------------

/// A rank-1 dataset of the group whose dtype passes `dtype_ok`.
hdf5::Dataset open_vector(const hdf5::Group& group, const std::string& name,
                          bool (*dtype_ok)(hdf5::Dtype), const char* expected)
{
    if (!group.has_dataset(name)) {
        group.fail("dataset '" + name + "' not found (a CSR group needs data, indices, indptr)");
    }
    hdf5::Dataset d = group.open_dataset(name);
    if (d.rank() != 1) {
        d.fail("expected a 1-D array, found shape " + hdf5::to_string(d.shape()));
    }
    if (!dtype_ok(d.dtype())) {
        d.fail(std::string{"expected "} + expected + " values, found " + to_string(d.dtype()));
    }
    return d;
}

/// A pair of positive integers stored as attribute `name` (shape, image_shape).
std::vector<std::int64_t> read_pair_attribute(const hdf5::Group& group, const std::string& name,
                                              const char* meaning)
{
    const hdf5::TypeInfo info = group.attribute_info(name);
    if (!hdf5::is_integer(info.dtype) || hdf5::element_count(info.shape) != 2) {
        group.fail("attribute '" + name + "' must be two integers " + meaning + ", found " +
                   to_string(info.dtype) + " of shape " + hdf5::to_string(info.shape));
    }
    const auto pair = group.read_attribute<std::int64_t>(name);
    if (pair[0] <= 0 || pair[1] <= 0 || pair[0] > max_index || pair[1] > max_index) {
        group.fail("attribute '" + name + "' = [" + std::to_string(pair[0]) + ", " +
                   std::to_string(pair[1]) + "] must be positive and below 2^31");
    }
    return pair;
}

CsrMatrix read_hdf5_matrix(const std::string& path, const std::string& group_name,
                           std::vector<long long>* image_shape)
{
    const hdf5::File file = hdf5::File::open(path);
    const hdf5::Group group = file.open_group(is_root(group_name) ? "/" : group_name);
    if (!group.has_attribute("shape")) {
        group.fail("attribute 'shape' = [m, n] not found");
    }
    const auto shape = read_pair_attribute(group, "shape", "[m, n]");

    const hdf5::Dataset data = open_vector(group, "data", hdf5::is_floating, "float32 or float64");
    const hdf5::Dataset indices = open_vector(group, "indices", hdf5::is_integer, "integer");
    const hdf5::Dataset indptr = open_vector(group, "indptr", hdf5::is_integer, "integer");
    const std::int64_t nnz = data.shape()[0];
    if (indices.shape()[0] != nnz) {
        indices.fail("has " + std::to_string(indices.shape()[0]) + " entries but data has " +
                     std::to_string(nnz));
    }
    if (indptr.shape()[0] != shape[0] + 1) {
        indptr.fail("has " + std::to_string(indptr.shape()[0]) +
                    " entries, expected m + 1 = " + std::to_string(shape[0] + 1) + " for shape [" +
                    std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]");
    }

    CsrMatrix m;
    m.rows = static_cast<index_t>(shape[0]);
    m.cols = static_cast<index_t>(shape[1]);
    m.row_ptr = indptr.read<size_type>();
    m.values = data.read<float>();
    const auto wide_indices = indices.read<std::int64_t>();
    m.col_idx.resize(wide_indices.size());
    for (std::size_t k = 0; k < wide_indices.size(); ++k) {
        // Range-check before narrowing; validate() reports the row.
        const std::int64_t c = wide_indices[k];
        if (c < 0 || c >= shape[1]) {
            indices.fail("entry " + std::to_string(k) + " = " + std::to_string(c) +
                         " is out of range [0, " + std::to_string(shape[1]) + ")");
        }
        m.col_idx[k] = static_cast<index_t>(c);
    }

    if (image_shape != nullptr) image_shape->clear();
    if (group.has_attribute("image_shape")) {
        const auto grid = read_pair_attribute(group, "image_shape", "[ny, nx]");
        if (grid[0] * grid[1] != shape[1]) {
            group.fail("attribute 'image_shape' = [" + std::to_string(grid[0]) + ", " +
                       std::to_string(grid[1]) + "] does not have n = " + std::to_string(shape[1]) +
                       " pixels");
        }
        if (image_shape != nullptr) *image_shape = {grid[0], grid[1]};
    }
    m.validate(path + ":" + group.path());
    return m;
}

// --- Matrix Market ------------------------------------------------------------

bool starts_like_matrix_market(const std::string& path)
{
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    return lower(first).rfind("%%matrixmarket", 0) == 0;
}

/// Splits on blanks into views of `line` (reusing `tokens`' storage).
void split(const std::string& line, std::vector<std::string_view>& tokens)
{
    tokens.clear();
    std::size_t start = line.find_first_not_of(" \t\r");
    while (start != std::string::npos) {
        const std::size_t end = line.find_first_of(" \t\r", start);
        tokens.emplace_back(line.data() + start,
                            (end == std::string::npos ? line.size() : end) - start);
        start = end == std::string::npos ? end : line.find_first_not_of(" \t\r", end);
    }
}

bool parse_integer(std::string_view token, std::int64_t& value)
{
    const char* end = token.data() + token.size();
    const auto [ptr, error] = std::from_chars(token.data(), end, value);
    return error == std::errc{} && ptr == end;
}

/// Locale-independent (unlike strtod); accepts a leading '+'.
bool parse_real(std::string_view token, double& value)
{
    if (!token.empty() && token.front() == '+') token.remove_prefix(1);
    const char* end = token.data() + token.size();
    const auto [ptr, error] = std::from_chars(token.data(), end, value);
    return !token.empty() && error == std::errc{} && ptr == end;
}

struct Entry {
    std::int64_t row, col;  // zero-based
    float value;
    std::int64_t line;
};

class MatrixMarketReader {
public:
    explicit MatrixMarketReader(const std::string& path) : path_{path}, in_{path} {}

    CsrMatrix read()
    {
        if (!in_) throw std::runtime_error(path_ + ": cannot open");
        read_banner();
        read_size();
        std::vector<Entry> entries = read_entries();
        std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
            return a.row != b.row ? a.row < b.row : a.col < b.col;
        });
        return to_csr(entries);
    }

private:
    [[noreturn]] void fail(const std::string& what) const
    {
        throw std::runtime_error(path_ + ": line " + std::to_string(line_number_) + ": " + what);
    }

    /// The next line that is not a comment or blank; false at the end.
    bool next_data_line(std::vector<std::string_view>& tokens)
    {
        while (std::getline(in_, line_)) {
            ++line_number_;
            split(line_, tokens);
            if (!tokens.empty() && tokens.front().front() != '%') return true;
        }
        return false;
    }

    void read_banner()
    {
        std::string line;
        std::getline(in_, line);
        line_number_ = 1;
        const std::string lowered = lower(line);
        std::vector<std::string_view> tokens;
        split(lowered, tokens);
        const bool ok = tokens.size() == 5 && tokens[0] == "%%matrixmarket" &&
                        tokens[1] == "matrix" && tokens[2] == "coordinate" &&
                        (tokens[3] == "real" || tokens[3] == "integer" || tokens[3] == "double") &&
                        tokens[4] == "general";
        if (!ok) {
            fail("expected '%%MatrixMarket matrix coordinate real general', found '" + line + "'");
        }
    }

    void read_size()
    {
        std::vector<std::string_view> tokens;
        if (!next_data_line(tokens)) fail("missing the size line 'rows cols entries'");
        if (tokens.size() != 3 || !parse_integer(tokens[0], rows_) ||
            !parse_integer(tokens[1], cols_) || !parse_integer(tokens[2], declared_)) {
            fail("expected the size line 'rows cols entries'");
        }
        if (rows_ <= 0 || cols_ <= 0 || rows_ > max_index || cols_ > max_index || declared_ < 0) {
            fail("invalid size " + std::to_string(rows_) + " x " + std::to_string(cols_) +
                 " with " + std::to_string(declared_) + " entries");
        }
    }

    std::vector<Entry> read_entries()
    {
        std::vector<Entry> entries;
        entries.reserve(static_cast<std::size_t>(std::min<std::int64_t>(declared_, 1 << 26)));
        std::vector<std::string_view> tokens;
        while (next_data_line(tokens)) {
            std::int64_t i = 0, j = 0;
            double v = 0.0;
            if (tokens.size() != 3 || !parse_integer(tokens[0], i) ||
                !parse_integer(tokens[1], j) || !parse_real(tokens[2], v)) {
                fail("expected an entry 'row col value'");
            }
            if (i < 1 || i > rows_ || j < 1 || j > cols_) {
                fail("entry (" + std::to_string(i) + ", " + std::to_string(j) +
                     ") outside the matrix " + std::to_string(rows_) + " x " +
                     std::to_string(cols_) + " (indices are 1-based)");
            }
            if (static_cast<std::int64_t>(entries.size()) == declared_) {
                fail("more entries than the " + std::to_string(declared_) + " declared");
            }
            entries.push_back({i - 1, j - 1, static_cast<float>(v), line_number_});
        }
        if (static_cast<std::int64_t>(entries.size()) != declared_) {
            throw std::runtime_error(path_ + ": declares " + std::to_string(declared_) +
                                     " entries, found " + std::to_string(entries.size()));
        }
        return entries;
    }

    /// Entries sorted by (row, col) to CSR; a repeated position is an error
    /// (Matrix Market readers disagree whether to sum or overwrite).
    CsrMatrix to_csr(const std::vector<Entry>& entries) const
    {
        CsrMatrix m;
        m.rows = static_cast<index_t>(rows_);
        m.cols = static_cast<index_t>(cols_);
        m.row_ptr.assign(static_cast<std::size_t>(rows_) + 1, 0);
        m.col_idx.reserve(entries.size());
        m.values.reserve(entries.size());
        for (std::size_t k = 0; k < entries.size(); ++k) {
            const Entry& e = entries[k];
            if (k > 0 && entries[k - 1].row == e.row && entries[k - 1].col == e.col) {
                const auto [first, second] = std::minmax(entries[k - 1].line, e.line);
                throw std::runtime_error(path_ + ": duplicate entry (" + std::to_string(e.row + 1) +
                                         ", " + std::to_string(e.col + 1) + ") at lines " +
                                         std::to_string(first) + " and " + std::to_string(second));
            }
            ++m.row_ptr[static_cast<std::size_t>(e.row) + 1];
            m.col_idx.push_back(static_cast<index_t>(e.col));
            m.values.push_back(e.value);
        }
        for (std::size_t i = 0; i < static_cast<std::size_t>(rows_); ++i) {
            m.row_ptr[i + 1] += m.row_ptr[i];
        }
        return m;
    }

    std::string path_;
    std::ifstream in_;
    std::string line_;  // the current line; tokens view into it
    std::int64_t line_number_ = 0;
    std::int64_t rows_ = 0, cols_ = 0, declared_ = 0;
};

}  // namespace

CsrMatrix read_matrix_file(const std::string& path, const std::string& group,
                           std::vector<long long>* image_shape)
{
    if (hdf5::File::is_hdf5(path)) return read_hdf5_matrix(path, group, image_shape);
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
        throw std::runtime_error(path + ": matrix file not found");
    }
    if (!starts_like_matrix_market(path)) {
        throw std::runtime_error(path + ": neither an HDF5 file nor Matrix Market (.mtx)");
    }
    if (image_shape != nullptr) image_shape->clear();
    CsrMatrix m = MatrixMarketReader{path}.read();
    m.validate(path);
    return m;
}

void write_matrix_hdf5(const std::string& path, const CsrMatrix& matrix, const std::string& group,
                       const std::vector<long long>& image_shape)
{
    matrix.validate(path);
    if (!image_shape.empty() &&
        (image_shape.size() != 2 || image_shape[0] <= 0 || image_shape[1] <= 0 ||
         image_shape[0] * image_shape[1] != matrix.cols)) {
        throw std::invalid_argument(
            path + ": image_shape must be [ny, nx] with ny * nx = " + std::to_string(matrix.cols));
    }
    const hdf5::File file = hdf5::File::create(path);
    const hdf5::Group g = is_root(group) ? file.open_group("/") : file.create_group(group);
    const hdf5::Shape nnz{static_cast<std::int64_t>(matrix.nnz())};
    g.write_dataset("data", nnz, matrix.values);
    g.write_dataset("indices", nnz, matrix.col_idx);
    g.write_dataset("indptr", {static_cast<std::int64_t>(matrix.row_ptr.size())}, matrix.row_ptr);
    g.write_attribute("shape", std::vector<std::int64_t>{matrix.rows, matrix.cols});
    if (!image_shape.empty()) {
        g.write_attribute("image_shape", std::vector<std::int64_t>{image_shape[0], image_shape[1]});
    }
    file.flush();
}

}  // namespace recon
