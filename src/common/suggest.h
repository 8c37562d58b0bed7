// The closest known name to a mistyped one, for "did you mean" hints (an
// unknown job-file key, an unknown command).
//
// Thread safety: pure functions.
#ifndef DROVER_COMMON_SUGGEST_H_
#define DROVER_COMMON_SUGGEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace drover {

// Edits (insert, delete or replace one character) from `a` to `b`
// (Levenshtein distance).
size_t EditDistance(std::string_view a, std::string_view b);

// The first of `known` closest to `word`, when it is one or two edits
// away and fewer edits than `word` has characters (a likely typo); empty
// otherwise, and for a `word` over 64 characters.
std::string ClosestName(std::string_view word, const std::vector<std::string_view>& known);

}  // namespace drover

#endif  // DROVER_COMMON_SUGGEST_H_
