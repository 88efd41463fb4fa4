// The domain's kinds (dtype, phase, role, verdict, dump mode) to and from their API enums: one mapping for
// parityd and the clients.
#ifndef PARITY_PROTO_ENUMS_H_
#define PARITY_PROTO_ENUMS_H_

#include <optional>

#include "common/base/dtype.h"
#include "common/checks/verdict.h"
#include "common/formats/dump.h"
#include "parity/v1/parity.pb.h"

namespace parity {

v1::DType ToProto(std::optional<DType> t);
std::optional<DType> FromProto(v1::DType t);  // nullopt for UNSPECIFIED or an unknown value
v1::Phase ToProto(Phase p);
Phase FromProto(v1::Phase p);
v1::Role ToProto(Role r);
Role FromProto(v1::Role r);
v1::Verdict ToProto(Verdict v);
v1::DumpMode ToProto(DumpMode m);
std::optional<DumpMode> FromProto(v1::DumpMode m);  // nullopt for UNSPECIFIED or an unknown value

}  // namespace parity

#endif  // PARITY_PROTO_ENUMS_H_
