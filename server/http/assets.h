// The dashboard's files, built into parityd (generated from server/http/dashboard/ and Debian's
// Chart.js by embed_assets.cmake): nothing is fetched from the internet at run time.
#ifndef PARITY_SERVER_HTTP_ASSETS_H_
#define PARITY_SERVER_HTTP_ASSETS_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace parity {

struct EmbeddedAsset {
  const char* path;  // URL path, "/index.html"
  const char* content_type;
  const char* data;
  size_t size;
};

// The file served at `path`, or null.
const EmbeddedAsset* FindAsset(absl::string_view path);

}  // namespace parity

#endif  // PARITY_SERVER_HTTP_ASSETS_H_
