#ifndef PARITY_COMMON_FORMATS_ARGUMENT_H_
#define PARITY_COMMON_FORMATS_ARGUMENT_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/base/json.h"
#include "common/checks/msprobe_policy.h"
#include "common/formats/dump.h"

namespace parity {

// A non-tensor argument's value as dump.json held it, rebuilt from its Python str() and its
// type ("int", "float", "bool", "None"), as the daemon stores it: the integer, number, bool or
// null. Any other type, or a text that does not parse as its type, stays text; no text is null.
Json ArgumentValue(absl::string_view type, const std::optional<std::string>& text);

// msprobe's view of a non-tensor argument (its compare's gen_op_item): the four statistics its
// table shows and compares — the value itself; its str() for a src/dst rank and a
// torch.ProcessGroup (the group's ranks); null for a torch.Size, a slice and a null argument —
// with the item's requires_grad.
MsprobeStats ArgumentStats(const DumpItem& it);

// The argument's MD5 column: str(value) for a src/dst rank and a torch.ProcessGroup, "None" for
// a null argument (dtype_text "None"), else the CRC-32 of str(value) (NonTensorCrc32). `it`
// needs name, type, dtype_text and value.
std::string ArgumentMd5(const DumpItem& it);

// The statistics msprobe shows and compares for any item: a tensor's as dumped, a non-tensor
// argument's ArgumentStats.
MsprobeStats MsprobeStatsOf(const DumpItem& it);

}  // namespace parity

#endif  // PARITY_COMMON_FORMATS_ARGUMENT_H_
