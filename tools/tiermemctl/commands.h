#pragma once

namespace tiermem::tools {
// Each returns the process exit status.
int TopologyCommand(bool json);
int OptionsCommand(bool json, bool markdown);  // markdown: a Markdown table
int TiersCommand(bool json);
}  // namespace tiermem::tools
