#include "recon/hdf5.hpp"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace recon::hdf5 {

static_assert(std::is_same_v<hid_t, Id>, "hdf5::Id must be hid_t (HDF5 >= 1.10)");

namespace {

/// HDF5 prints its error stack to stderr by default; errors are reported by
/// exceptions here instead. The setting is per thread in the thread-safe
/// library, so every entry point calls this.
void silence_error_printing()
{
    thread_local bool silenced = false;
    if (!silenced) {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        silenced = true;
    }
}

herr_t keep_innermost(unsigned /*n*/, const H5E_error2_t* error, void* data)
{
    if (error->desc != nullptr && error->desc[0] != '\0') {
        *static_cast<std::string*>(data) = error->desc;
    }
    return 0;
}

/// The innermost message of the current thread's HDF5 error stack (the most
/// specific one, e.g. "object 'x' doesn't exist"); clears the stack.
std::string hdf5_reason()
{
    std::string reason;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &reason);
    H5Eclear2(H5E_DEFAULT);
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    return reason;
}

std::string describe(const std::string& file, const std::string& path, const std::string& what)
{
    std::string message = file;
    if (!path.empty() && path != "/") message += ": " + path;
    return message + ": " + what;
}

/// Throws after a failed HDF5 call, adding HDF5's own reason.
[[noreturn]] void raise(const std::string& file, const std::string& path, const std::string& what)
{
    std::string message = describe(file, path, what);
    const std::string reason = hdf5_reason();
    if (!reason.empty()) message += " (HDF5: " + reason + ")";
    throw std::runtime_error(message);
}

hid_t memory_type(Dtype dtype)
{
    switch (dtype) {
    case Dtype::int8: return H5T_NATIVE_INT8;
    case Dtype::uint8: return H5T_NATIVE_UINT8;
    case Dtype::int16: return H5T_NATIVE_INT16;
    case Dtype::uint16: return H5T_NATIVE_UINT16;
    case Dtype::int32: return H5T_NATIVE_INT32;
    case Dtype::uint32: return H5T_NATIVE_UINT32;
    case Dtype::int64: return H5T_NATIVE_INT64;
    case Dtype::uint64: return H5T_NATIVE_UINT64;
    case Dtype::float32: return H5T_NATIVE_FLOAT;
    case Dtype::float64: return H5T_NATIVE_DOUBLE;
    default:
        throw std::invalid_argument(std::string{"hdf5: no numeric type for "} + to_string(dtype));
    }
}

/// Little-endian standard types, the layout numpy/h5py write on common hosts.
hid_t file_type(Dtype dtype)
{
    switch (dtype) {
    case Dtype::int8: return H5T_STD_I8LE;
    case Dtype::uint8: return H5T_STD_U8LE;
    case Dtype::int16: return H5T_STD_I16LE;
    case Dtype::uint16: return H5T_STD_U16LE;
    case Dtype::int32: return H5T_STD_I32LE;
    case Dtype::uint32: return H5T_STD_U32LE;
    case Dtype::int64: return H5T_STD_I64LE;
    case Dtype::uint64: return H5T_STD_U64LE;
    case Dtype::float32: return H5T_IEEE_F32LE;
    case Dtype::float64: return H5T_IEEE_F64LE;
    default:
        throw std::invalid_argument(std::string{"hdf5: cannot store dtype "} + to_string(dtype));
    }
}

Dtype classify(hid_t type)
{
    const std::size_t size = H5Tget_size(type);
    switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
        const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
        switch (size) {
        case 1: return is_signed ? Dtype::int8 : Dtype::uint8;
        case 2: return is_signed ? Dtype::int16 : Dtype::uint16;
        case 4: return is_signed ? Dtype::int32 : Dtype::uint32;
        case 8: return is_signed ? Dtype::int64 : Dtype::uint64;
        default: return Dtype::other;
        }
    }
    case H5T_FLOAT: return size == 4 ? Dtype::float32 : size == 8 ? Dtype::float64 : Dtype::other;
    case H5T_STRING: return Dtype::string;
    default: return Dtype::other;
    }
}

bool is_numeric(Dtype dtype) { return is_integer(dtype) || is_floating(dtype); }

std::vector<hsize_t> to_hsize(const Shape& shape)
{
    std::vector<hsize_t> out(shape.size());
    std::transform(shape.begin(), shape.end(), out.begin(), [](std::int64_t v) {
        return v == unlimited ? H5S_UNLIMITED : static_cast<hsize_t>(v);
    });
    return out;
}

Shape from_hsize(const std::vector<hsize_t>& dims)
{
    Shape out(dims.size());
    std::transform(dims.begin(), dims.end(), out.begin(), [](hsize_t v) {
        return v == H5S_UNLIMITED ? unlimited : static_cast<std::int64_t>(v);
    });
    return out;
}

/// Current (or maximal) extent of a dataspace.
Shape space_shape(hid_t space, bool maximal = false)
{
    const int rank = H5Sget_simple_extent_ndims(space);
    if (rank <= 0) return {};
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), max_dims(dims.size());
    H5Sget_simple_extent_dims(space, dims.data(), max_dims.data());
    return from_hsize(maximal ? max_dims : dims);
}

Handle make_simple_space(const Shape& shape, const Shape& max_shape = {})
{
    if (shape.empty()) return Handle{H5Screate(H5S_SCALAR)};
    const auto dims = to_hsize(shape);
    const auto max_dims = to_hsize(max_shape.empty() ? shape : max_shape);
    return Handle{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data())};
}

/// A variable-length UTF-8 string type.
Handle make_string_type()
{
    Handle type{H5Tcopy(H5T_C_S1)};
    H5Tset_size(type.id(), H5T_VARIABLE);
    H5Tset_cset(type.id(), H5T_CSET_UTF8);
    return type;
}

/// Reads one string from an attribute (is_attribute) or dataset `object`
/// whose stored type is `stored_type`.
std::string read_text(hid_t object, hid_t stored_type, bool is_attribute, const std::string& file,
                      const std::string& path, const std::string& what)
{
    if (H5Tis_variable_str(stored_type) > 0) {
        Handle memory{H5Tcopy(H5T_C_S1)};
        H5Tset_size(memory.id(), H5T_VARIABLE);
        H5Tset_cset(memory.id(), H5Tget_cset(stored_type));
        char* text = nullptr;
        const herr_t status =
            is_attribute ? H5Aread(object, memory.id(), &text)
                         : H5Dread(object, memory.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text);
        if (status < 0) raise(file, path, "cannot read " + what);
        std::string out = text != nullptr ? text : "";
        H5free_memory(text);
        return out;
    }
    const std::size_t size = H5Tget_size(stored_type);
    Handle memory{H5Tcopy(H5T_C_S1)};
    H5Tset_size(memory.id(), size);
    H5Tset_strpad(memory.id(), H5T_STR_NULLPAD);
    std::string buffer(size, '\0');
    const herr_t status =
        is_attribute ? H5Aread(object, memory.id(), buffer.data())
                     : H5Dread(object, memory.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
    if (status < 0) raise(file, path, "cannot read " + what);
    buffer.resize(std::min(buffer.find('\0'), buffer.size()));
    if (H5Tget_strpad(stored_type) == H5T_STR_SPACEPAD) {
        buffer.erase(buffer.find_last_not_of(' ') + 1);
    }
    return buffer;
}

std::string join(const std::string& base, const std::string& name)
{
    if (!name.empty() && name.front() == '/') return name;
    if (name.empty() || name == ".") return base;
    return base == "/" ? "/" + name : base + "/" + name;
}

}  // namespace

// --- Dtype and shapes -------------------------------------------------------

const char* to_string(Dtype dtype)
{
    switch (dtype) {
    case Dtype::int8: return "int8";
    case Dtype::uint8: return "uint8";
    case Dtype::int16: return "int16";
    case Dtype::uint16: return "uint16";
    case Dtype::int32: return "int32";
    case Dtype::uint32: return "uint32";
    case Dtype::int64: return "int64";
    case Dtype::uint64: return "uint64";
    case Dtype::float32: return "float32";
    case Dtype::float64: return "float64";
    case Dtype::string: return "string";
    case Dtype::other: return "other";
    }
    return "other";
}

Dtype parse_dtype(const std::string& text)
{
    for (Dtype d :
         {Dtype::int8, Dtype::uint8, Dtype::int16, Dtype::uint16, Dtype::int32, Dtype::uint32,
          Dtype::int64, Dtype::uint64, Dtype::float32, Dtype::float64, Dtype::string}) {
        if (text == to_string(d)) return d;
    }
    throw std::invalid_argument("unknown dtype '" + text + "'");
}

bool is_integer(Dtype dtype)
{
    switch (dtype) {
    case Dtype::int8:
    case Dtype::uint8:
    case Dtype::int16:
    case Dtype::uint16:
    case Dtype::int32:
    case Dtype::uint32:
    case Dtype::int64:
    case Dtype::uint64: return true;
    default: return false;
    }
}

bool is_floating(Dtype dtype) { return dtype == Dtype::float32 || dtype == Dtype::float64; }

std::size_t size_of(Dtype dtype)
{
    switch (dtype) {
    case Dtype::int8:
    case Dtype::uint8: return 1;
    case Dtype::int16:
    case Dtype::uint16: return 2;
    case Dtype::int32:
    case Dtype::uint32:
    case Dtype::float32: return 4;
    case Dtype::int64:
    case Dtype::uint64:
    case Dtype::float64: return 8;
    default: return 0;
    }
}

std::int64_t element_count(const Shape& shape)
{
    std::int64_t count = 1;
    for (std::int64_t d : shape) count *= d;
    return count;
}

std::string to_string(const Shape& shape)
{
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) out += ", ";
        out += shape[i] == unlimited ? std::string{"unlimited"} : std::to_string(shape[i]);
    }
    return out + "]";
}

// --- Handle -----------------------------------------------------------------

Handle::Handle(Handle&& other) noexcept : id_{other.release()} {}

Handle& Handle::operator=(Handle&& other) noexcept
{
    if (this != &other) {
        reset();
        id_ = other.release();
    }
    return *this;
}

Handle::~Handle() { reset(); }

Id Handle::release() noexcept { return std::exchange(id_, -1); }

void Handle::reset() noexcept
{
    if (id_ >= 0) {
        silence_error_printing();
        H5Idec_ref(id_);
    }
    id_ = -1;
}

// --- Object: attributes -------------------------------------------------------

std::string Object::child_path(const std::string& name) const { return join(path_, name); }

void Object::fail(const std::string& what) const
{
    throw std::runtime_error(describe(file_, path_, what));
}

bool Object::has_attribute(const std::string& name) const
{
    silence_error_printing();
    return H5Aexists(id(), name.c_str()) > 0;
}

namespace {
herr_t collect_attribute(hid_t /*loc*/, const char* name, const H5A_info_t* /*info*/, void* data)
{
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
}
}  // namespace

std::vector<std::string> Object::attribute_names() const
{
    silence_error_printing();
    std::vector<std::string> names;
    hsize_t index = 0;
    if (H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute, &names) < 0) {
        raise(file_, path_, "cannot list attributes");
    }
    return names;
}

namespace {
/// Opens attribute `name` of `object`, failing with a clear message.
Handle open_attribute(const Object& object, const std::string& name)
{
    if (!object.has_attribute(name)) object.fail("attribute '" + name + "' not found");
    Handle attribute{H5Aopen(object.id(), name.c_str(), H5P_DEFAULT)};
    if (!attribute.valid()) {
        raise(object.file_name(), object.path(), "cannot open attribute '" + name + "'");
    }
    return attribute;
}
}  // namespace

TypeInfo Object::attribute_info(const std::string& name) const
{
    const Handle attribute = open_attribute(*this, name);
    const Handle type{H5Aget_type(attribute.id())};
    const Handle space{H5Aget_space(attribute.id())};
    return {classify(type.id()), space_shape(space.id())};
}

std::int64_t Object::attribute_elements(const std::string& name) const
{
    const Handle attribute = open_attribute(*this, name);
    const Handle space{H5Aget_space(attribute.id())};
    return static_cast<std::int64_t>(H5Sget_simple_extent_npoints(space.id()));
}

void Object::read_attribute_raw(const std::string& name, Dtype memory, void* out,
                                std::size_t count) const
{
    const Handle attribute = open_attribute(*this, name);
    const Handle type{H5Aget_type(attribute.id())};
    const Handle space{H5Aget_space(attribute.id())};
    const Dtype stored = classify(type.id());
    if (!is_numeric(stored)) {
        fail("attribute '" + name + "' has dtype " + to_string(stored) + ", expected a number");
    }
    const auto elements = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id()));
    if (elements != count) {
        fail("attribute '" + name + "' has " + std::to_string(elements) + " elements, expected " +
             std::to_string(count));
    }
    if (count > 0 && H5Aread(attribute.id(), memory_type(memory), out) < 0) {
        raise(file_, path_, "cannot read attribute '" + name + "' as " + to_string(memory));
    }
}

std::string Object::read_string_attribute(const std::string& name) const
{
    const Handle attribute = open_attribute(*this, name);
    const Handle type{H5Aget_type(attribute.id())};
    const Handle space{H5Aget_space(attribute.id())};
    const Dtype stored = classify(type.id());
    if (stored != Dtype::string) {
        fail("attribute '" + name + "' has dtype " + to_string(stored) + ", expected a string");
    }
    if (H5Sget_simple_extent_npoints(space.id()) != 1) {
        fail("attribute '" + name + "' is an array of strings, expected one string");
    }
    return read_text(attribute.id(), type.id(), true, file_, path_, "attribute '" + name + "'");
}

void Object::delete_attribute(const std::string& name) const
{
    silence_error_printing();
    if (H5Adelete(id(), name.c_str()) < 0) {
        raise(file_, path_, "cannot delete attribute '" + name + "'");
    }
}

void Object::write_attribute_raw(const std::string& name, Dtype memory, const void* data,
                                 std::size_t count, bool scalar) const
{
    if (has_attribute(name)) delete_attribute(name);
    const Handle space =
        scalar ? make_simple_space({}) : make_simple_space({static_cast<std::int64_t>(count)});
    const Handle attribute{
        H5Acreate2(id(), name.c_str(), file_type(memory), space.id(), H5P_DEFAULT, H5P_DEFAULT)};
    if (!attribute.valid()) raise(file_, path_, "cannot create attribute '" + name + "'");
    if (count > 0 && H5Awrite(attribute.id(), memory_type(memory), data) < 0) {
        raise(file_, path_, "cannot write attribute '" + name + "'");
    }
}

void Object::write_attribute(const std::string& name, const std::string& text) const
{
    if (has_attribute(name)) delete_attribute(name);
    const Handle type = make_string_type();
    const Handle space = make_simple_space({});
    const Handle attribute{
        H5Acreate2(id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT)};
    if (!attribute.valid()) raise(file_, path_, "cannot create attribute '" + name + "'");
    const char* pointer = text.c_str();
    if (H5Awrite(attribute.id(), type.id(), &pointer) < 0) {
        raise(file_, path_, "cannot write attribute '" + name + "'");
    }
}

// --- Dataset --------------------------------------------------------------------

namespace {
Handle dataset_space(const Dataset& d)
{
    silence_error_printing();
    return Handle{H5Dget_space(d.id())};
}
}  // namespace

int Dataset::rank() const
{
    const Handle space = dataset_space(*this);
    return std::max(0, H5Sget_simple_extent_ndims(space.id()));
}

Shape Dataset::shape() const
{
    const Handle space = dataset_space(*this);
    return space_shape(space.id());
}

Shape Dataset::max_shape() const
{
    const Handle space = dataset_space(*this);
    return space_shape(space.id(), true);
}

Shape Dataset::chunk_shape() const
{
    silence_error_printing();
    const Handle plist{H5Dget_create_plist(id())};
    if (H5Pget_layout(plist.id()) != H5D_CHUNKED) return {};
    const int r = rank();
    std::vector<hsize_t> dims(static_cast<std::size_t>(r));
    H5Pget_chunk(plist.id(), r, dims.data());
    return from_hsize(dims);
}

Dtype Dataset::dtype() const
{
    silence_error_printing();
    const Handle type{H5Dget_type(id())};
    return classify(type.id());
}

std::int64_t Dataset::element_count() const { return hdf5::element_count(shape()); }

namespace {
/// Selects [offset, offset + count) of `space` after checking it lies inside
/// `shape`; empty offset and count select everything.
void select_block(const Dataset& d, hid_t space, const Shape& shape, const Shape& offset,
                  const Shape& count)
{
    if (offset.size() != shape.size() || count.size() != shape.size()) {
        d.fail("block of rank " + std::to_string(count.size()) + " for a dataset of rank " +
               std::to_string(shape.size()));
    }
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (offset[i] < 0 || count[i] < 0 || offset[i] + count[i] > shape[i]) {
            d.fail("block at " + to_string(offset) + " of size " + to_string(count) +
                   " is outside the shape " + to_string(shape));
        }
    }
    if (shape.empty()) return;
    const auto start = to_hsize(offset);
    const auto block = to_hsize(count);
    if (H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, block.data(), nullptr) <
        0) {
        raise(d.file_name(), d.path(), "cannot select block " + to_string(offset));
    }
}
}  // namespace

void Dataset::read_raw(const Shape& offset, const Shape& count, Dtype memory, void* out,
                       std::size_t size) const
{
    const Dtype stored = dtype();
    if (!is_numeric(stored)) {
        fail("dtype " + std::string{to_string(stored)} + ", expected a numeric type");
    }
    const Handle file_space = dataset_space(*this);
    const Shape extent = space_shape(file_space.id());
    const bool whole = offset.empty() && count.empty();
    const Shape block = whole ? extent : count;
    if (!whole) select_block(*this, file_space.id(), extent, offset, count);
    if (static_cast<std::int64_t>(size) != hdf5::element_count(block)) {
        fail("read of " + to_string(block) + " into a buffer of " + std::to_string(size) +
             " elements");
    }
    if (size == 0) return;
    // The memory space has the block's shape: against a flat one HDF5 maps
    // element by element (a 256 x 256 frame took ~2 ms to write, not ~0.1).
    const Handle memory_space = make_simple_space(block);
    if (H5Dread(id(), memory_type(memory), memory_space.id(), file_space.id(), H5P_DEFAULT, out) <
        0) {
        raise(file_, path_, std::string{"cannot read as "} + to_string(memory));
    }
}

void Dataset::write_raw(const Shape& offset, const Shape& count, Dtype memory, const void* data,
                        std::size_t size) const
{
    const Handle file_space = dataset_space(*this);
    const Shape extent = space_shape(file_space.id());
    const bool whole = offset.empty() && count.empty();
    const Shape block = whole ? extent : count;
    if (!whole) select_block(*this, file_space.id(), extent, offset, count);
    if (static_cast<std::int64_t>(size) != hdf5::element_count(block)) {
        fail("write of " + std::to_string(size) + " elements into a block of " + to_string(block));
    }
    if (size == 0) return;
    // The memory space has the block's shape: against a flat one HDF5 maps
    // element by element (a 256 x 256 frame took ~2 ms to write, not ~0.1).
    const Handle memory_space = make_simple_space(block);
    if (H5Dwrite(id(), memory_type(memory), memory_space.id(), file_space.id(), H5P_DEFAULT, data) <
        0) {
        raise(file_, path_, std::string{"cannot write from "} + to_string(memory));
    }
}

void Dataset::resize(const Shape& new_shape) const
{
    if (static_cast<int>(new_shape.size()) != rank()) {
        fail("resize to " + to_string(new_shape) + " changes the rank");
    }
    const auto dims = to_hsize(new_shape);
    const std::string limit = to_string(max_shape());  // before the call: raise() reads its error
    if (H5Dset_extent(id(), dims.data()) < 0) {
        raise(file_, path_, "cannot resize to " + to_string(new_shape) + " (max " + limit + ")");
    }
}

void Dataset::append_raw(Dtype memory, const void* data, std::size_t size) const
{
    const Shape extent = shape();
    if (extent.empty()) fail("cannot append to a scalar dataset");
    const std::int64_t row = hdf5::element_count(Shape(extent.begin() + 1, extent.end()));
    const auto n = static_cast<std::int64_t>(size);
    if (row <= 0 || n == 0 || n % row != 0) {
        fail("append of " + std::to_string(size) + " elements; expected a positive multiple of " +
             std::to_string(row) + " (one row of " + to_string(extent) + ")");
    }
    Shape grown = extent;
    grown[0] += n / row;
    resize(grown);
    Shape offset(extent.size(), 0);
    offset[0] = extent[0];
    Shape count = grown;
    count[0] = n / row;
    write_raw(offset, count, memory, data, size);
}

std::string Dataset::read_string() const
{
    silence_error_printing();
    const Handle type{H5Dget_type(id())};
    const Dtype stored = classify(type.id());
    if (stored != Dtype::string)
        fail("dtype " + std::string{to_string(stored)} + ", expected a string");
    if (element_count() != 1)
        fail("holds " + std::to_string(element_count()) + " strings, expected one");
    return read_text(id(), type.id(), false, file_, path_, "text");
}

// --- Group ----------------------------------------------------------------------

ObjectType Group::type_of(const std::string& path) const
{
    silence_error_printing();
    if (path.empty() || path == "/" || path == ".") return ObjectType::group;
    // H5Lexists fails (rather than returning false) when an intermediate link
    // is missing, so walk the components one by one.
    const bool absolute = path.front() == '/';
    std::string prefix;
    std::size_t start = 0;
    while (start < path.size()) {
        std::size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        if (end > start) {
            const std::string component = path.substr(start, end - start);
            prefix += (absolute || !prefix.empty()) ? "/" + component : component;
            if (H5Lexists(id(), prefix.c_str(), H5P_DEFAULT) <= 0) return ObjectType::none;
        }
        start = end + 1;
    }
    const Handle object{H5Oopen(id(), path.c_str(), H5P_DEFAULT)};
    if (!object.valid()) {
        H5Eclear2(H5E_DEFAULT);
        return ObjectType::none;  // e.g. a dangling soft or external link
    }
    switch (H5Iget_type(object.id())) {
    case H5I_GROUP: return ObjectType::group;
    case H5I_DATASET: return ObjectType::dataset;
    default: return ObjectType::other;
    }
}

std::vector<std::string> Group::children() const
{
    silence_error_printing();
    H5G_info_t info;
    if (H5Gget_info(id(), &info) < 0) raise(file_, path_, "cannot list members");
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        const ssize_t length =
            H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
        if (length < 0) raise(file_, path_, "cannot list members");
        std::string name(static_cast<std::size_t>(length) + 1, '\0');
        H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                           H5P_DEFAULT);
        name.resize(static_cast<std::size_t>(length));
        names.push_back(std::move(name));
    }
    return names;
}

Group Group::open_group(const std::string& path) const
{
    const std::string full = child_path(path);
    switch (type_of(path)) {
    case ObjectType::none: throw std::runtime_error(describe(file_, full, "group not found"));
    case ObjectType::group: break;
    default: throw std::runtime_error(describe(file_, full, "is not a group"));
    }
    Handle group{H5Gopen2(id(), path.c_str(), H5P_DEFAULT)};
    if (!group.valid()) raise(file_, full, "cannot open group");
    return Group{std::move(group), file_, full};
}

namespace {
Handle intermediate_groups_plist()
{
    Handle plist{H5Pcreate(H5P_LINK_CREATE)};
    H5Pset_create_intermediate_group(plist.id(), 1);
    return plist;
}
}  // namespace

Group Group::create_group(const std::string& path) const
{
    const std::string full = child_path(path);
    if (exists(path)) throw std::runtime_error(describe(file_, full, "already exists"));
    const Handle link_plist = intermediate_groups_plist();
    Handle group{H5Gcreate2(id(), path.c_str(), link_plist.id(), H5P_DEFAULT, H5P_DEFAULT)};
    if (!group.valid()) raise(file_, full, "cannot create group");
    return Group{std::move(group), file_, full};
}

Group Group::require_group(const std::string& path) const
{
    return exists(path) ? open_group(path) : create_group(path);
}

Dataset Group::open_dataset(const std::string& path) const
{
    const std::string full = child_path(path);
    switch (type_of(path)) {
    case ObjectType::none: throw std::runtime_error(describe(file_, full, "dataset not found"));
    case ObjectType::dataset: break;
    default: throw std::runtime_error(describe(file_, full, "is not a dataset"));
    }
    Handle dataset{H5Dopen2(id(), path.c_str(), H5P_DEFAULT)};
    if (!dataset.valid()) raise(file_, full, "cannot open dataset");
    return Dataset{std::move(dataset), file_, full};
}

void Group::remove(const std::string& path) const
{
    silence_error_printing();
    if (H5Ldelete(id(), path.c_str(), H5P_DEFAULT) < 0) {
        raise(file_, child_path(path), "cannot remove");
    }
}

namespace {
/// Chunk shape for a dataset: the requested one, or when chunking is needed
/// (unlimited dimensions, compression), one chunk per outermost index.
Shape choose_chunk(const Shape& shape, const DatasetOptions& options, bool needs_chunks)
{
    if (!options.chunk.empty()) return options.chunk;
    if (!needs_chunks) return {};
    Shape chunk(shape.size(), 1);
    for (std::size_t i = 1; i < shape.size(); ++i) chunk[i] = std::max<std::int64_t>(1, shape[i]);
    return chunk;
}
}  // namespace

Dataset Group::create_dataset(const std::string& path, Dtype dtype, const Shape& shape,
                              const DatasetOptions& options) const
{
    silence_error_printing();
    const std::string full = child_path(path);
    const auto bad = [&](const std::string& what) {
        throw std::runtime_error(describe(file_, full, what));
    };
    if (!options.max_shape.empty() && options.max_shape.size() != shape.size()) {
        bad("max_shape " + to_string(options.max_shape) + " does not match shape " +
            to_string(shape));
    }
    if (!options.chunk.empty() && options.chunk.size() != shape.size()) {
        bad("chunk " + to_string(options.chunk) + " does not match shape " + to_string(shape));
    }
    for (std::int64_t c : options.chunk) {
        if (c <= 0) bad("chunk " + to_string(options.chunk) + " has a non-positive extent");
    }
    for (std::int64_t d : shape) {
        if (d < 0) bad("negative extent in shape " + to_string(shape));
    }
    if (options.deflate < 0 || options.deflate > 9) bad("deflate level must be 0-9");
    const bool needs_chunks =
        options.deflate > 0 || std::find(options.max_shape.begin(), options.max_shape.end(),
                                         unlimited) != options.max_shape.end();
    const Shape chunk = choose_chunk(shape, options, needs_chunks);
    if (!chunk.empty() && shape.empty()) bad("a scalar dataset cannot be chunked");
    if (exists(path)) bad("already exists");

    const Handle space = make_simple_space(shape, options.max_shape);
    const Handle create_plist{H5Pcreate(H5P_DATASET_CREATE)};
    if (!chunk.empty()) {
        const auto dims = to_hsize(chunk);
        H5Pset_chunk(create_plist.id(), static_cast<int>(dims.size()), dims.data());
        if (options.deflate > 0)
            H5Pset_deflate(create_plist.id(), static_cast<unsigned>(options.deflate));
    }
    const Handle link_plist = intermediate_groups_plist();
    Handle dataset{H5Dcreate2(id(), path.c_str(), file_type(dtype), space.id(), link_plist.id(),
                              create_plist.id(), H5P_DEFAULT)};
    if (!dataset.valid()) raise(file_, full, "cannot create dataset " + to_string(shape));
    return Dataset{std::move(dataset), file_, full};
}

Dataset Group::write_string_dataset(const std::string& path, const std::string& text) const
{
    silence_error_printing();
    const std::string full = child_path(path);
    if (exists(path)) throw std::runtime_error(describe(file_, full, "already exists"));
    const Handle type = make_string_type();
    const Handle space = make_simple_space({});
    const Handle link_plist = intermediate_groups_plist();
    Handle dataset{H5Dcreate2(id(), path.c_str(), type.id(), space.id(), link_plist.id(),
                              H5P_DEFAULT, H5P_DEFAULT)};
    if (!dataset.valid()) raise(file_, full, "cannot create text dataset");
    const char* pointer = text.c_str();
    if (H5Dwrite(dataset.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &pointer) < 0) {
        raise(file_, full, "cannot write text");
    }
    return Dataset{std::move(dataset), file_, full};
}

Dataset Group::create_frames(const std::string& path, Dtype dtype, const Shape& frame_shape,
                             std::int64_t frames_per_chunk, int deflate) const
{
    if (frames_per_chunk <= 0) {
        throw std::runtime_error(
            describe(file_, child_path(path), "frames_per_chunk must be positive"));
    }
    DatasetOptions options;
    options.deflate = deflate;
    Shape shape{0};
    shape.insert(shape.end(), frame_shape.begin(), frame_shape.end());
    options.max_shape = shape;
    options.max_shape[0] = unlimited;
    options.chunk = shape;
    options.chunk[0] = frames_per_chunk;
    for (std::int64_t& c : options.chunk) c = std::max<std::int64_t>(1, c);
    return create_dataset(path, dtype, shape, options);
}

// --- File -------------------------------------------------------------------------

bool File::is_hdf5(const std::string& name)
{
    silence_error_printing();
    std::error_code error;
    if (!std::filesystem::is_regular_file(name, error)) return false;
    const htri_t result = H5Fis_hdf5(name.c_str());
    H5Eclear2(H5E_DEFAULT);
    return result > 0;
}

File File::open(const std::string& name, Mode mode)
{
    silence_error_printing();
    std::error_code error;
    if (!std::filesystem::exists(name, error)) {
        throw std::runtime_error(name + ": file not found");
    }
    if (!std::filesystem::is_regular_file(name, error)) {
        throw std::runtime_error(name + ": not a regular file");
    }
    if (!is_hdf5(name)) throw std::runtime_error(name + ": not an HDF5 file");
    Handle file{
        H5Fopen(name.c_str(), mode == Mode::read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT)};
    if (!file.valid()) raise(name, "", "cannot open");
    return File{std::move(file), name};
}

File File::create(const std::string& name)
{
    silence_error_printing();
    Handle file{H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)};
    if (!file.valid()) raise(name, "", "cannot create");
    return File{std::move(file), name};
}

void File::flush() const
{
    silence_error_printing();
    if (H5Fflush(id(), H5F_SCOPE_LOCAL) < 0) raise(file_, "", "cannot flush");
}

}  // namespace recon::hdf5
