#include "pipeline/frame_queue.hpp"

namespace recon::pipeline {

DropPolicy parse_drop_policy(const std::string& text)
{
    if (text == "block") return DropPolicy::block;
    if (text == "drop_oldest") return DropPolicy::drop_oldest;
    if (text == "drop_newest") return DropPolicy::drop_newest;
    throw std::invalid_argument{"drop policy: expected block, drop_oldest or drop_newest, found '" +
                                text + "'"};
}

const char* to_string(DropPolicy policy)
{
    switch (policy) {
    case DropPolicy::block: return "block";
    case DropPolicy::drop_oldest: return "drop_oldest";
    case DropPolicy::drop_newest: return "drop_newest";
    }
    return "?";
}

}  // namespace recon::pipeline
