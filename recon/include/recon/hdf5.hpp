#pragma once
// A small RAII layer over the HDF5 C API: files, groups, datasets and
// attributes as move-only handles, whole and hyperslab reads and writes with
// type conversion, chunked extendible datasets that grow one frame at a time.
//
// Errors: HDF5's automatic printing of its error stack is switched off (per
// thread, on first use); every failure throws std::runtime_error with one
// line "<file>: <object>: <what> (HDF5: <innermost HDF5 message>)".
//
// The HDF5 headers are not included here: identifiers are plain 64-bit
// integers (hid_t since HDF5 1.10), so users of this header need no HDF5
// include path. The library is the thread-safe build; calls serialize inside
// HDF5, and handles may be used from any thread (not concurrently on the
// same object without the caller's own lock).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace recon::hdf5 {

/// An HDF5 identifier (hid_t).
using Id = std::int64_t;

/// Element types as stored in a file (or requested in memory).
enum class Dtype {
    int8,
    uint8,
    int16,
    uint16,
    int32,
    uint32,
    int64,
    uint64,
    float32,
    float64,
    string,  // fixed or variable length text
    other,  // compound, enum, opaque, half floats, ...
};

/// "float32", "uint16", "string", ...
const char* to_string(Dtype dtype);
/// Parses the names to_string produces; throws std::invalid_argument.
Dtype parse_dtype(const std::string& text);
bool is_integer(Dtype dtype);
bool is_floating(Dtype dtype);
/// Size of one element in bytes (0 for string / other).
std::size_t size_of(Dtype dtype);

/// Arithmetic element types this layer reads and writes (no bool or char).
template <class T>
concept Element = (std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8) &&
                   !std::is_same_v<T, long double>) ||
                  (std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
                   !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> &&
                   !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>);

/// The Dtype of a C++ element type.
template <Element T>
constexpr Dtype dtype_of()
{
    if constexpr (std::is_floating_point_v<T>) {
        return sizeof(T) == 4 ? Dtype::float32 : Dtype::float64;
    } else if constexpr (std::is_signed_v<T>) {
        return sizeof(T) == 1   ? Dtype::int8
               : sizeof(T) == 2 ? Dtype::int16
               : sizeof(T) == 4 ? Dtype::int32
                                : Dtype::int64;
    } else {
        return sizeof(T) == 1   ? Dtype::uint8
               : sizeof(T) == 2 ? Dtype::uint16
               : sizeof(T) == 4 ? Dtype::uint32
                                : Dtype::uint64;
    }
}

/// Shapes and offsets, outermost dimension first.
using Shape = std::vector<std::int64_t>;
/// Marks an unlimited dimension in DatasetOptions::max_shape.
inline constexpr std::int64_t unlimited = -1;

/// Number of elements of a shape (1 for a scalar, i.e. rank 0).
std::int64_t element_count(const Shape& shape);
/// "[3, 4, 5]".
std::string to_string(const Shape& shape);

/// Move-only owner of one HDF5 identifier; releases it (H5Idec_ref) on
/// destruction. An invalid handle holds a negative id.
class Handle {
public:
    Handle() = default;
    /// Takes ownership of `id` (a negative id makes an invalid handle).
    explicit Handle(Id id) noexcept : id_{id} {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& other) noexcept;
    Handle& operator=(Handle&& other) noexcept;
    ~Handle();

    Id id() const { return id_; }
    bool valid() const { return id_ >= 0; }
    /// Gives up ownership and returns the id.
    Id release() noexcept;

private:
    void reset() noexcept;
    Id id_ = -1;
};

/// Element type and shape of a dataset or attribute.
struct TypeInfo {
    Dtype dtype = Dtype::other;
    Shape shape;  // empty: scalar
};

/// An object that carries attributes (a file's root group, a group or a
/// dataset), with the file name and object path used in error messages.
class Object {
public:
    Id id() const { return handle_.id(); }
    bool valid() const { return handle_.valid(); }
    /// The name the file was opened with.
    const std::string& file_name() const { return file_; }
    /// Absolute path of the object inside the file ("/" for the root).
    const std::string& path() const { return path_; }
    /// Path of a child: path() + "/" + name (or name itself when absolute).
    std::string child_path(const std::string& name) const;

    /// Throws std::runtime_error "<file>: <path>: <what>".
    [[noreturn]] void fail(const std::string& what) const;

    bool has_attribute(const std::string& name) const;
    std::vector<std::string> attribute_names() const;
    /// Type and shape of an attribute; throws when it does not exist.
    TypeInfo attribute_info(const std::string& name) const;

    /// All elements of a numeric attribute of any shape (flattened),
    /// converted to T. Throws when missing or not numeric.
    template <Element T>
    std::vector<T> read_attribute(const std::string& name) const
    {
        std::vector<T> out(static_cast<std::size_t>(attribute_elements(name)));
        read_attribute_raw(name, dtype_of<T>(), out.data(), out.size());
        return out;
    }
    /// A numeric attribute that must hold exactly one element.
    template <Element T>
    T read_scalar_attribute(const std::string& name) const
    {
        T value{};
        read_attribute_raw(name, dtype_of<T>(), &value, 1);
        return value;
    }
    /// A text attribute (fixed or variable length, scalar or one element).
    std::string read_string_attribute(const std::string& name) const;

    /// Writes (replacing any existing attribute of that name) a scalar, a
    /// 1-D array or a variable-length UTF-8 string.
    template <Element T>
    void write_attribute(const std::string& name, T value) const
    {
        write_attribute_raw(name, dtype_of<T>(), &value, 1, /*scalar=*/true);
    }
    template <Element T>
    void write_attribute(const std::string& name, const std::vector<T>& values) const
    {
        write_attribute_raw(name, dtype_of<T>(), values.data(), values.size(), false);
    }
    void write_attribute(const std::string& name, const std::string& text) const;
    void write_attribute(const std::string& name, const char* text) const
    {
        write_attribute(name, std::string{text});
    }
    void delete_attribute(const std::string& name) const;

protected:
    Object() = default;
    Object(Handle handle, std::string file, std::string path)
        : handle_{std::move(handle)}, file_{std::move(file)}, path_{std::move(path)}
    {
    }

    std::int64_t attribute_elements(const std::string& name) const;
    void read_attribute_raw(const std::string& name, Dtype memory, void* out,
                            std::size_t count) const;
    void write_attribute_raw(const std::string& name, Dtype memory, const void* data,
                             std::size_t count, bool scalar) const;

    Handle handle_;
    std::string file_;
    std::string path_;
};

/// Layout choices when creating a dataset.
struct DatasetOptions {
    /// Per dimension: the largest extent, or `unlimited`. Empty: fixed at
    /// the initial shape. Any unlimited dimension requires chunking.
    Shape max_shape;
    /// Chunk shape; empty: contiguous (or, when needed, one chunk per
    /// outermost index, i.e. [1, shape[1:]...]).
    Shape chunk;
    /// gzip level 1-9; 0: none (needs chunking).
    int deflate = 0;
};

/// A dataset: its shape, element type, and reads/writes with conversion
/// from/to the C++ element type (HDF5 converts; integers out of range of the
/// target type are clamped by HDF5).
class Dataset : public Object {
public:
    Dataset() = default;

    int rank() const;
    /// Current extent, outermost first (empty for a scalar dataset).
    Shape shape() const;
    /// The largest extents (`unlimited` where unbounded).
    Shape max_shape() const;
    /// Chunk shape; empty when not chunked.
    Shape chunk_shape() const;
    Dtype dtype() const;
    std::int64_t element_count() const;

    /// The whole dataset, flattened row-major, converted to T.
    template <Element T>
    std::vector<T> read() const
    {
        std::vector<T> out(static_cast<std::size_t>(element_count()));
        read_raw({}, {}, dtype_of<T>(), out.data(), out.size());
        return out;
    }
    /// The block [offset, offset + count) (count elements per dimension).
    template <Element T>
    std::vector<T> read_slab(const Shape& offset, const Shape& count) const
    {
        std::vector<T> out(static_cast<std::size_t>(hdf5::element_count(count)));
        read_raw(offset, count, dtype_of<T>(), out.data(), out.size());
        return out;
    }
    /// Same, into caller storage of exactly the block's size.
    template <Element T>
    void read_slab(const Shape& offset, const Shape& count, std::span<T> out) const
    {
        read_raw(offset, count, dtype_of<T>(), out.data(), out.size());
    }
    /// A scalar (or one-element) text dataset.
    std::string read_string() const;

    /// Writes the whole dataset (data.size() must equal element_count()).
    template <Element T>
    void write(std::span<const T> data) const
    {
        write_raw({}, {}, dtype_of<T>(), data.data(), data.size());
    }
    template <Element T>
    void write(const std::vector<T>& data) const
    {
        write(std::span<const T>{data});
    }
    /// Writes the block [offset, offset + count).
    template <Element T>
    void write_slab(const Shape& offset, const Shape& count, std::span<const T> data) const
    {
        write_raw(offset, count, dtype_of<T>(), data.data(), data.size());
    }

    /// Changes the extent (within max_shape; chunked datasets only).
    void resize(const Shape& shape) const;
    /// Grows dimension 0 by data.size() / (elements per row) rows and writes
    /// them; the size must be a positive multiple of the row size
    /// (product of shape[1:]). For extendible datasets (create_frames).
    template <Element T>
    void append(std::span<const T> data) const
    {
        append_raw(dtype_of<T>(), data.data(), data.size());
    }
    template <Element T>
    void append(const std::vector<T>& data) const
    {
        append(std::span<const T>{data});
    }

private:
    friend class Group;
    Dataset(Handle handle, std::string file, std::string path)
        : Object{std::move(handle), std::move(file), std::move(path)}
    {
    }

    void read_raw(const Shape& offset, const Shape& count, Dtype memory, void* out,
                  std::size_t size) const;
    void write_raw(const Shape& offset, const Shape& count, Dtype memory, const void* data,
                   std::size_t size) const;
    void append_raw(Dtype memory, const void* data, std::size_t size) const;
};

/// What a path inside a file names.
enum class ObjectType { none, group, dataset, other };

/// A group (or, as File, the root group of a file). Paths given to its
/// methods are relative to it, or absolute ("/entry/...").
class Group : public Object {
public:
    Group() = default;

    /// What `path` names; every component is checked, never throws on a
    /// missing link.
    ObjectType type_of(const std::string& path) const;
    bool exists(const std::string& path) const { return type_of(path) != ObjectType::none; }
    bool has_group(const std::string& path) const { return type_of(path) == ObjectType::group; }
    bool has_dataset(const std::string& path) const { return type_of(path) == ObjectType::dataset; }
    /// Names of the direct members (links), sorted.
    std::vector<std::string> children() const;

    /// Throws "<file>: <path>: group not found" (or "is not a group").
    Group open_group(const std::string& path) const;
    /// Creates a group and any missing parents; throws when it exists.
    Group create_group(const std::string& path) const;
    /// Opens the group, creating it (and parents) when missing.
    Group require_group(const std::string& path) const;
    /// Throws "<file>: <path>: dataset not found" (or "is not a dataset").
    Dataset open_dataset(const std::string& path) const;
    /// Removes a link (group, dataset) by path.
    void remove(const std::string& path) const;

    /// Creates a dataset of `shape` (missing parent groups are created).
    Dataset create_dataset(const std::string& path, Dtype dtype, const Shape& shape,
                           const DatasetOptions& options = {}) const;
    /// Creates and fills a dataset stored as `stored`, from memory type T.
    template <Element T>
    Dataset write_dataset(const std::string& path, const Shape& shape, std::span<const T> data,
                          Dtype stored = dtype_of<T>()) const
    {
        Dataset d = create_dataset(path, stored, shape);
        d.write(data);
        return d;
    }
    template <Element T>
    Dataset write_dataset(const std::string& path, const Shape& shape, const std::vector<T>& data,
                          Dtype stored = dtype_of<T>()) const
    {
        return write_dataset(path, shape, std::span<const T>{data}, stored);
    }
    /// A scalar variable-length UTF-8 text dataset.
    Dataset write_string_dataset(const std::string& path, const std::string& text) const;
    /// An extendible dataset of shape [0, frame_shape...] growing along
    /// dimension 0 (unlimited), chunked [frames_per_chunk, frame_shape...]:
    /// one chunk per frame by default. Grow it with Dataset::append.
    Dataset create_frames(const std::string& path, Dtype dtype, const Shape& frame_shape,
                          std::int64_t frames_per_chunk = 1, int deflate = 0) const;

protected:
    friend class File;
    Group(Handle handle, std::string file, std::string path)
        : Object{std::move(handle), std::move(file), std::move(path)}
    {
    }
};

/// An open HDF5 file; as a Group it is the root group "/".
class File : public Group {
public:
    enum class Mode { read, read_write };

    File() = default;
    /// Opens an existing file; throws "<file>: file not found" or
    /// "<file>: not an HDF5 file" or the HDF5 reason.
    static File open(const std::string& name, Mode mode = Mode::read);
    /// Creates a file, replacing any existing one.
    static File create(const std::string& name);
    /// True when `name` exists and has an HDF5 signature; never throws.
    static bool is_hdf5(const std::string& name);

    /// Writes buffered data to disk.
    void flush() const;

private:
    File(Handle handle, std::string file) : Group{std::move(handle), std::move(file), "/"} {}
};

}  // namespace recon::hdf5
