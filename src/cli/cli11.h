// CLI11 for the `drover` binary, without the validator objects that its
// header defines in every translation unit. Include this instead of
// <CLI/CLI.hpp> in anything linked into `drover` (src/cli).
//
// Why: CLI11 2.1 (Debian 12) defines eight validators at namespace scope
// in Validators.hpp (`const detail::ExistingFileValidator ExistingFile;`,
// `const Range PositiveNumber(...)`, ...). Being const they have internal
// linkage, so every translation unit that includes the header constructs
// its own copies before main: with ~15 such units in `drover`, ~120
// objects holding std::functions and strings, and 30 `Range`s that each
// format two doubles through a std::stringstream. Every `drover` command
// is a fresh process that paid for them (~10 page faults and ~0.1 million
// instructions, see bench/README.md "B4 through the CLI"); drover uses none
// of them.
//
// How: while CLI11 is read, each of those names is a macro that turns its
// definition into the declaration of a function that is never defined, so
// no object is made. Afterwards `CLI::ExistingFile` and the others name
// those functions: using one fails to compile or link. Where a check is
// needed, build the validator in place (e.g. `CLI::detail::
// ExistingFileValidator()`, `CLI::Range(0.0, 1.0)`).
//
// The macros only work when this header is the first to bring in CLI11 in
// the translation unit (the header has an include guard); a unit that
// includes <CLI/CLI.hpp> directly gets the objects back, and nothing else
// changes.
//
// Thread safety: a header of declarations.
#ifndef DROVER_CLI_CLI11_H_
#define DROVER_CLI_CLI11_H_

#if defined(CLI11_VERSION)
#error "cli/cli11.h must come before any other CLI11 header in this file"
#endif

#define ExistingFile ExistingFile()
#define ExistingDirectory ExistingDirectory()
#define ExistingPath ExistingPath()
#define NonexistentPath NonexistentPath()
#define ValidIPV4 ValidIPV4()
#define Number(...) Number()
#define NonNegativeNumber(...) NonNegativeNumber()
#define PositiveNumber(...) PositiveNumber()

#include <CLI/CLI.hpp>

#undef ExistingFile
#undef ExistingDirectory
#undef ExistingPath
#undef NonexistentPath
#undef ValidIPV4
#undef Number
#undef NonNegativeNumber
#undef PositiveNumber

#endif  // DROVER_CLI_CLI11_H_
