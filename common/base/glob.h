// fnmatch-style glob matching: '*' any run, '?' one character, '[abc]' / '[a-z]' / '[!a]'
// classes. Case-sensitive; '/' and '.' are ordinary characters.
#ifndef PARITY_COMMON_GLOB_H_
#define PARITY_COMMON_GLOB_H_

#include "absl/strings/string_view.h"

namespace parity {

bool GlobMatch(absl::string_view pattern, absl::string_view text);

}  // namespace parity

#endif  // PARITY_COMMON_GLOB_H_
