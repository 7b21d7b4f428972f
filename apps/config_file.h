#pragma once
// `--config FILE`: a TOML file whose keys are the subcommand's long flag names (vLLM's, with
// dashes or underscores: max-num-seqs = 64, block_size = 32). Parsed with toml++ (errors
// carry line and column); a flag given on the command line wins over the file. Used only
// by apps/.

#include <string>

#include "base/result.h"

namespace CLI {
class App;
}

namespace pagoda::app {

// Adds --config FILE to `app` (a subcommand), stored in `path`.
void add_config_file_option(CLI::App* app, std::string& path);
// After parsing: sets every option of `app` named in the file that the command line left
// unset. Errors name the file, the line and the key.
Status apply_config_file(CLI::App* app, const std::string& path);

}  // namespace pagoda::app
