// Typed arrays of Stream V2 and the names of errors and encodings.

#include <cstring>
#include <stdexcept>

#include "stream/errors.hpp"
#include "stream/messages.hpp"

namespace recon::stream {
namespace {

template <typename T>
MultiDimArray make_array(std::vector<std::uint64_t> shape, DType dtype, const std::vector<T>& values)
{
    MultiDimArray array{std::move(shape), dtype, {}};
    if (array.element_count() != values.size()) {
        throw std::invalid_argument{"MultiDimArray: shape holds " +
                                    std::to_string(array.element_count()) + " elements, given " +
                                    std::to_string(values.size())};
    }
    array.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(array.bytes.data(), values.data(), array.bytes.size());
    return array;
}

template <typename T>
void convert(const std::vector<std::uint8_t>& bytes, std::vector<float>& out)
{
    out.resize(bytes.size() / sizeof(T));
    for (std::size_t i = 0; i < out.size(); ++i) {
        T value;
        std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
        out[i] = static_cast<float>(value);
    }
}

}  // namespace

const char* to_string(ErrorKind kind)
{
    switch (kind) {
    case ErrorKind::malformed_cbor: return "malformed_cbor";
    case ErrorKind::truncated: return "truncated";
    case ErrorKind::missing_self_describe: return "missing_self_describe";
    case ErrorKind::unknown_message_type: return "unknown_message_type";
    case ErrorKind::bad_field: return "bad_field";
    case ErrorKind::unsupported_dtype: return "unsupported_dtype";
    case ErrorKind::unsupported_compression: return "unsupported_compression";
    case ErrorKind::corrupt_data: return "corrupt_data";
    case ErrorKind::size_limit: return "size_limit";
    case ErrorKind::shape_mismatch: return "shape_mismatch";
    }
    return "unknown";
}

const char* to_string(DType dtype)
{
    switch (dtype) {
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::u32: return "uint32";
    case DType::f32: return "float32";
    }
    return "unknown";
}

std::size_t element_size(DType dtype)
{
    switch (dtype) {
    case DType::u8: return 1;
    case DType::u16: return 2;
    case DType::u32: return 4;
    case DType::f32: return 4;
    }
    return 0;
}

std::uint64_t typed_array_tag(DType dtype)
{
    switch (dtype) {
    case DType::u8: return 64;
    case DType::u16: return 69;
    case DType::u32: return 70;
    case DType::f32: return 85;
    }
    return 0;
}

const char* to_string(Compression compression)
{
    switch (compression) {
    case Compression::none: return "none";
    case Compression::lz4: return "lz4";
    case Compression::bslz4: return "bslz4";
    }
    return "unknown";
}

std::uint64_t MultiDimArray::element_count() const
{
    std::uint64_t count = 1;
    for (auto d : shape) count *= d;
    return count;
}

std::vector<float> MultiDimArray::to_float() const
{
    std::vector<float> out;
    switch (dtype) {
    case DType::u8: convert<std::uint8_t>(bytes, out); break;
    case DType::u16: convert<std::uint16_t>(bytes, out); break;
    case DType::u32: convert<std::uint32_t>(bytes, out); break;
    case DType::f32: convert<float>(bytes, out); break;
    }
    return out;
}

MultiDimArray MultiDimArray::from_u8(std::vector<std::uint64_t> shape,
                                     const std::vector<std::uint8_t>& values)
{
    return make_array(std::move(shape), DType::u8, values);
}
MultiDimArray MultiDimArray::from_u16(std::vector<std::uint64_t> shape,
                                      const std::vector<std::uint16_t>& values)
{
    return make_array(std::move(shape), DType::u16, values);
}
MultiDimArray MultiDimArray::from_u32(std::vector<std::uint64_t> shape,
                                      const std::vector<std::uint32_t>& values)
{
    return make_array(std::move(shape), DType::u32, values);
}
MultiDimArray MultiDimArray::from_f32(std::vector<std::uint64_t> shape,
                                      const std::vector<float>& values)
{
    return make_array(std::move(shape), DType::f32, values);
}

}  // namespace recon::stream
