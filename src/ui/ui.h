#pragma once
// The operator's console: a single page (index.html, console.js, console.css and uPlot, all
// compiled into the binary) served at /ui by `pagoda serve` and `pagoda router`. The page
// reads /metrics and the GET /admin/* routes and acts through the admin routes with the key
// the operator types; the server adds nothing for it but these files.

#include <optional>
#include <string_view>

#include "http/server.h"

namespace pagoda::ui {

enum class Kind { kReplica, kRouter };

// The answer to a GET on `path` when it is the console's: "/" and "/ui" redirect to "/ui/",
// "/ui/" is the page (told which kind of process serves it), "/ui/<file>" an asset (404 for
// an unknown one). nullopt: not the console's path.
std::optional<http::Response> serve(std::string_view path, Kind kind);

}  // namespace pagoda::ui
