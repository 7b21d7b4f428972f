// Architecture: the implementation (the contract is in model/architecture.h).
#include "model/architecture.h"

namespace pagoda::model {
namespace {
const std::vector<const Architecture*>& all() {
    static const std::vector<const Architecture*> v = {
        &llama_architecture(),     &mistral_architecture(),  &qwen2_architecture(),
        &qwen3_architecture(),     &qwen3moe_architecture(), &olmoe_architecture(),
        &granitemoe_architecture()};
    return v;
}
}  // namespace

const Architecture* find_architecture(const std::string& name) {
    for (const Architecture* a : all()) {
        if (a->name == name) return a;
    }
    return nullptr;
}

std::vector<std::string> architecture_names() {
    std::vector<std::string> names;
    for (const Architecture* a : all()) names.push_back(a->name);
    return names;
}

}  // namespace pagoda::model
