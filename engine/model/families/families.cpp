// The families Tandem runs, in the order messages list them.
#include "model/family.h"

namespace tandem::model {

extern const Family kQwen3MoeFamily;
extern const Family kDeepseekV3Family;
extern const Family kDeepseekV2Family;
extern const Family kMixtralFamily;
extern const Family kGlm4MoeFamily;
extern const Family kGptOssFamily;

namespace {
const Family* const kFamilies[] = {&kQwen3MoeFamily, &kDeepseekV3Family, &kDeepseekV2Family, &kMixtralFamily, &kGlm4MoeFamily,
                                      &kGptOssFamily};
}

const Family* findFamily(std::string_view modelType) {
    for (const Family* f : kFamilies)
        for (const std::string_view t : f->modelTypes)
            if (t == modelType) return f;
    return nullptr;
}

std::string supportedModelTypes() {
    std::string list;
    for (const Family* f : kFamilies)
        for (const std::string_view t : f->modelTypes) list += (list.empty() ? "" : ", ") + std::string(t);
    return list;
}

}  // namespace tandem::model
